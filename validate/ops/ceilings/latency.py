"""Dependent-chain latencies (SM clock cycles) for roofline.validation.latency: one warp on one SM runs a chain of
CHAIN dependent instructions of one kind inside an inline-PTX loop and reads %clock64 before and after it;
cycles per step = (c1 - c0) / steps (the loop counter, 3 instructions per UNROLL steps, issues while the chain
waits). Run by validate.ops.ceilings.onchip (its "latency_cycles"); predictions committed before any run:
validate/results/experiments/onchip-predicted.json "latency_cycles".
  lds_latency    pointer chase through shared memory: ld.shared.u32 p, [p] (every lane the same chain: one
                 broadcast wavefront per step), 256 entries written by the warp first
  shfl_latency   shfl.sync.idx.b32 v, v, v (lane index = the value itself: lane l starts at l, an identity
                 ptxas cannot fold, each step waiting on the previous)
  mufu_latency   ex2.approx.ftz.f32 f, f (MUFU.EX2)
  fma_latency    fma.rn.f32 f, f, m, c (FFMA)
  hmma_latency   mma.sync.aligned.m16n8k16 bf16 -> fp32, D fed back as C (HMMA.16816)
  ldg_latency    pointer chase through device memory, ld.global.cg.u64 p, [p], LDG_HOPS hops 64 KB apart over a
                 buffer larger than L2, after a larger scratch write evicted it: HBM latency (L2 miss, TLB hits
                 within each 2 MB page but one new page per 32 hops)
The classes of roofline.validation.latency: shared <- lds, shuffle <- shfl, mufu <- mufu, global <- ldg.
"""

from __future__ import annotations

import statistics

import torch
import triton
import triton.language as tl

UNROLL = 16
ITERS = 256  # CHAIN = ITERS x UNROLL dependent steps (ldg: LDG_HOPS)
LDG_HOPS, LDG_STRIDE_WORDS = 2048, 8192  # 2048 hops x 64 KB = 128 MB (> 50 MB L2)
TRIALS = 5
SHARED_ENTRIES = 256


def _loop(body: str, label: str) -> str:
    return (f"mov.u64 c0, %clock64;\nmov.u32 i, 0;\n{label}:\n" + "\n".join([body] * UNROLL) +
            f"\nadd.u32 i, i, 1;\nsetp.lt.u32 q, i, $3;\n@q bra {label};\n")


CHAINS = {
    "lds_latency": ("=l,=r,r,r", f"""{{
.shared .align 4 .b32 chase[{SHARED_ENTRIES}];
.reg .u32 p, base, i, k, v; .reg .u64 c0, c1; .reg .pred q;
mov.u32 base, chase;
mov.u32 k, $2;
FILL:
add.u32 v, k, 1; and.b32 v, v, {SHARED_ENTRIES - 1}; shl.b32 v, v, 2; add.u32 v, v, base;
shl.b32 p, k, 2; add.u32 p, p, base; st.shared.u32 [p], v;
add.u32 k, k, 32; setp.lt.u32 q, k, {SHARED_ENTRIES}; @q bra FILL;
bar.sync 0;
mov.u32 p, base;
""" + _loop("ld.shared.u32 p, [p];", "LDS_LOOP") +
        "add.u32 $1, p, 0;\nmov.u64 c1, %clock64;\nsub.s64 $0, c1, c0;\n}"),
    "shfl_latency": ("=l,=r,r,r", "{\n.reg .u32 v, i; .reg .u64 c0, c1; .reg .pred q;\nmov.u32 v, $2;\n" +
                     _loop("shfl.sync.idx.b32 v, v, v, 0x1f, 0xffffffff;", "SHFL_LOOP") +
                     "add.u32 $1, v, 0;\nmov.u64 c1, %clock64;\nsub.s64 $0, c1, c0;\n}"),
    "mufu_latency": ("=l,=r,r,r", "{\n.reg .f32 f; .reg .u32 i; .reg .u64 c0, c1; .reg .pred q;\n"
                     "cvt.rn.f32.u32 f, $2;\nmul.f32 f, f, 0f3A800000;\n" +
                     _loop("ex2.approx.ftz.f32 f, f;", "MUFU_LOOP") +
                     "mov.b32 $1, f;\nmov.u64 c1, %clock64;\nsub.s64 $0, c1, c0;\n}"),
    "fma_latency": ("=l,=r,r,r", "{\n.reg .f32 f, m, c; .reg .u32 i; .reg .u64 c0, c1; .reg .pred q;\n"
                    "cvt.rn.f32.u32 f, $2;\nmov.f32 m, 0f3F7FFFFF;\nmov.f32 c, 0f3F800000;\n" +
                    _loop("fma.rn.f32 f, f, m, c;", "FMA_LOOP") +
                    "mov.b32 $1, f;\nmov.u64 c1, %clock64;\nsub.s64 $0, c1, c0;\n}"),
    "hmma_latency": ("=l,=r,r,r", "{\n.reg .f32 d0, d1, d2, d3; .reg .b32 a0, a1, a2, a3, b0, b1; .reg .u32 i;\n"
                     ".reg .u64 c0, c1; .reg .pred q;\nmov.b32 a0, 0x3F803F80; mov.b32 a1, a0; mov.b32 a2, a0; "
                     "mov.b32 a3, a0; mov.b32 b0, 0x24002400; mov.b32 b1, b0;\n"
                     "cvt.rn.f32.u32 d0, $2; mov.f32 d1, d0; mov.f32 d2, d0; mov.f32 d3, d0;\n" +
                     _loop("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {d0, d1, d2, d3}, "
                           "{a0, a1, a2, a3}, {b0, b1}, {d0, d1, d2, d3};", "HMMA_LOOP") +
                     "add.f32 d0, d0, d1; add.f32 d2, d2, d3; add.f32 d0, d0, d2;\n"
                     "mov.b32 $1, d0;\nmov.u64 c1, %clock64;\nsub.s64 $0, c1, c0;\n}"),
}
LDG_ASM = ("{\n.reg .u64 p, c0, c1; .reg .u32 i; .reg .pred q;\nmov.u64 p, $2;\n" +
           _loop("ld.global.cg.u64 p, [p];", "LDG_LOOP") +
           "mov.u64 $1, p;\nmov.u64 c1, %clock64;\nsub.s64 $0, c1, c0;\n}")


@triton.jit
def chain_kernel(cycles_ptr, iters, ASM: tl.constexpr, CONSTRAINTS: tl.constexpr):
    """One warp: the chain of ASM over `iters` x UNROLL steps; lane 0 stores the cycles."""
    lane = tl.arange(0, 32)
    n = tl.full([32], 0, tl.int32) + iters
    cycles, x = tl.inline_asm_elementwise(ASM, CONSTRAINTS, [lane, n], dtype=(tl.int64, tl.int32), is_pure=False,
                                          pack=1)
    tl.store(cycles_ptr + lane, cycles, mask=lane == 0)
    tl.store(cycles_ptr + 32 + lane, x.to(tl.int64))  # the chain's value: kept live, so ptxas keeps the chain


@triton.jit
def ldg_kernel(cycles_ptr, start, iters, ASM: tl.constexpr):
    """One warp chasing the device-memory chain from address `start` (every lane the same chain)."""
    lane = tl.arange(0, 32)
    n = tl.full([32], 0, tl.int32) + iters
    p = tl.full([32], 0, tl.int64) + start
    cycles, x = tl.inline_asm_elementwise(ASM, "=l,=l,l,r", [p, n], dtype=(tl.int64, tl.int64), is_pure=False,
                                          pack=1)
    tl.store(cycles_ptr + lane, cycles, mask=lane == 0)
    tl.store(cycles_ptr + 32 + lane, x)


def _chain_cycles(name: str) -> float:
    constraints, asm = CHAINS[name]
    cycles = torch.zeros(64, dtype=torch.int64, device="cuda")
    runs = []
    for _ in range(TRIALS):
        chain_kernel[(1,)](cycles, ITERS, ASM=asm, CONSTRAINTS=constraints, num_warps=1, num_stages=1)
        torch.cuda.synchronize()
        runs.append(int(cycles[0]) / (ITERS * UNROLL))
    return statistics.median(runs)


def _ldg_cycles() -> float:
    words = LDG_HOPS * LDG_STRIDE_WORDS
    buf = torch.zeros(words, dtype=torch.int64, device="cuda")
    hops = torch.arange(LDG_HOPS, device="cuda") * LDG_STRIDE_WORDS
    buf[hops] = buf.data_ptr() + torch.roll(hops, -1) * 8
    scratch = torch.empty(2 * words, dtype=torch.int64, device="cuda")
    cycles = torch.zeros(64, dtype=torch.int64, device="cuda")
    runs = []
    for _ in range(TRIALS):
        scratch.fill_(1)  # evicts the chain from L2
        torch.cuda.synchronize()
        ldg_kernel[(1,)](cycles, buf.data_ptr(), LDG_HOPS // UNROLL, ASM=LDG_ASM, num_warps=1, num_stages=1)
        torch.cuda.synchronize()
        runs.append(int(cycles[0]) / LDG_HOPS)
    return statistics.median(runs)


def measure_all() -> dict:
    """Cycles per dependent step of every chain (module docstring), on GPU 0."""
    out = {name: _chain_cycles(name) for name in CHAINS}
    out["ldg_latency"] = _ldg_cycles()
    return out


def classes(rows: dict) -> dict:
    """The measured rows as roofline.validation.latency's classes (the spec's `latency_cycles`)."""
    return {"shared": rows["lds_latency"], "shuffle": rows["shfl_latency"], "mufu": rows["mufu_latency"],
            "global": rows["ldg_latency"], "fma": rows["fma_latency"], "hmma": rows["hmma_latency"]}
