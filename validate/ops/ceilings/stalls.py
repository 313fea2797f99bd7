"""The two stall mechanisms the lone-warp chain (validate.common.chain) left out of the fused XQuant loop (issue 14):

    python -m validate.ops.ceilings.stalls OUT.json        (about 1 minute on an H100; torch + triton only)

  local_latency  one warp chases a pointer chain through a per-thread local array (inline PTX `.local`, ld.local:
                 LDL, the instruction that reloads a spilled register), WORDS words a thread, so a warp touches
                 WORDS x 128 B (each step one 128 B line: local memory interleaves the 32 lanes' words), the chain
                 stepping HOP words so consecutive loads hit other lines. One warm pass over the whole chain, then
                 ITERS x UNROLL timed steps (%clock64): cycles per LDL. At each footprint twice: the program with no
                 shared memory, and launched with SHARED_BYTES of dynamic shared memory (the launch's metadata is
                 patched: `with_shared`), which forces the SM's carve-out to >= 164 KB and leaves L1 the rest of
                 the 256 KB (the fused kernel runs 2 programs of 80 KB a SM).
  fetch          a loop of independent fma.rn.f32 (8 chains; FFMA issues one warp instruction per clock per
                 scheduler) whose body is KB kilobytes of SASS (16 B an instruction), WARPS warps in one program on
                 one SM (4: one per scheduler, 8: two), %clock64 around FETCH_INSTRUCTIONS instructions a warp:
                 cycles per instruction per warp, and issue per scheduler per clock; where the body outgrows an
                 instruction cache the issue rate steps down ("no instruction" stalls).
Predictions, committed before any run: validate/results/experiments/stalls-predicted.json. The SASS of both (checked
on the CPU, `check_sass`): the chase is LDL, the fetch body FFMA with stall 1 (or 2) and the loop's size as given.
"""

from __future__ import annotations

import json
import statistics
import sys
from pathlib import Path

import triton
import triton.language as tl

UNROLL = 16
ITERS = 512
HOP = 17  # words: odd, so the chain visits every word of a power-of-two array
WORDS = (128, 512, 1024, 2048, 4096)  # per thread: 16, 64, 128, 256, 512 KB a warp
SHARED_BYTES = 160 * 1024
FETCH_KB = (4, 16, 32, 64, 128, 256)
FETCH_WARPS = (4, 8)
FETCH_INSTRUCTIONS = 1 << 20  # per warp and run
LOOP_OVERHEAD = 3  # add, setp, bra of the counted loop (SASS: IADD3, ISETP, BRA)
TRIALS = 3


def local_asm(words: int) -> str:
    """PTX of the local-memory chase over `words` words a thread ($0 cycles, $1 the end of the chain, $2 ITERS)."""
    return f"""{{
.local .align 4 .b32 chase[{words}];
.reg .u32 p, base, k, v, i; .reg .u64 c0, c1; .reg .pred q;
mov.u32 base, chase;
mov.u32 k, 0;
LFILL:
add.u32 v, k, {HOP}; rem.u32 v, v, {words}; shl.b32 v, v, 2; add.u32 v, v, base;
shl.b32 p, k, 2; add.u32 p, p, base; st.local.u32 [p], v;
add.u32 k, k, 1; setp.lt.u32 q, k, {words}; @q bra LFILL;
mov.u32 p, base;
mov.u32 k, 0;
LWARM:
ld.local.u32 p, [p]; add.u32 k, k, 1; setp.lt.u32 q, k, {words}; @q bra LWARM;
mov.u64 c0, %clock64;
mov.u32 i, 0;
LCHASE:
""" + "\n".join(["ld.local.u32 p, [p];"] * UNROLL) + """
add.u32 i, i, 1; setp.lt.u32 q, i, $2; @q bra LCHASE;
add.u32 $1, p, 0;
mov.u64 c1, %clock64;
sub.s64 $0, c1, c0;
}"""


def fetch_body(kb: int) -> int:
    """FMAs in the fetch loop whose body (with the 3 loop instructions) is `kb` KB of SASS."""
    return kb * 1024 // 16 - LOOP_OVERHEAD


def fetch_asm(kb: int) -> str:
    """PTX of the fetch loop ($0 cycles, $1 the folded chains, $2 a seed, $3 the trip count)."""
    fmas = "\n".join(f"fma.rn.f32 f{j % 8}, f{j % 8}, m, c;" for j in range(fetch_body(kb)))
    return ("{\n.reg .f32 f<8>, m, c; .reg .u32 i; .reg .u64 c0, c1; .reg .pred q;\n"
            "cvt.rn.f32.u32 f0, $2;\n" + "".join(f"add.f32 f{j}, f0, 0f3F8{j}0000;\n" for j in range(1, 8)) +
            "mov.f32 m, 0f3F7FFFFF;\nmov.f32 c, 0f3F800000;\n"
            "mov.u64 c0, %clock64;\nmov.u32 i, 0;\nFETCH:\n" + fmas +
            "\nadd.u32 i, i, 1;\nsetp.lt.u32 q, i, $3;\n@q bra FETCH;\nmov.u64 c1, %clock64;\n"
            "add.f32 f0, f0, f1; add.f32 f2, f2, f3; add.f32 f4, f4, f5; add.f32 f6, f6, f7;\n"
            "add.f32 f0, f0, f2; add.f32 f4, f4, f6; add.f32 f0, f0, f4;\nmov.b32 $1, f0;\nsub.s64 $0, c1, c0;\n}")


@triton.jit
def local_kernel(out_ptr, iters, ASM: tl.constexpr, SHARED: tl.constexpr):
    """One warp: the local chase (local_asm); lane 0 stores the cycles. SHARED only keys the compile
    (with_shared sets the launch's dynamic shared memory)."""
    lane = tl.arange(0, 32)
    n = tl.full([32], 0, tl.int32) + iters
    cycles, x = tl.inline_asm_elementwise(ASM, "=l,=r,r", [n], dtype=(tl.int64, tl.int32), is_pure=False, pack=1)
    tl.store(out_ptr + lane, cycles, mask=lane == 0)
    tl.store(out_ptr + 32 + lane, x.to(tl.int64))


@triton.jit
def fetch_kernel(out_ptr, iters, ASM: tl.constexpr, THREADS: tl.constexpr):
    """THREADS / 32 warps: the fetch loop (fetch_asm), one element a thread; each warp's lane 0 stores its cycles."""
    t = tl.arange(0, THREADS)
    n = tl.full([THREADS], 0, tl.int32) + iters
    cycles, x = tl.inline_asm_elementwise(ASM, "=l,=r,r,r", [t, n], dtype=(tl.int64, tl.float32), is_pure=False,
                                          pack=1)
    tl.store(out_ptr + t // 32, cycles, mask=t % 32 == 0)
    tl.store(out_ptr + THREADS + t, x.to(tl.int64))


def with_shared(kernel, shared: int, *args, **kwargs):
    """Compile `kernel` for `args`, then make its launches reserve `shared` bytes of dynamic shared memory
    (Triton 3.6: load_binary sets the function's maximum from metadata.shared; the launcher passes
    packed_metadata's third field as the launch's sharedMemBytes)."""
    compiled = kernel.warmup(*args, grid=(1,), **kwargs)
    if shared and compiled.metadata.shared != shared:
        compiled.metadata = compiled.metadata._replace(shared=shared)
        compiled.packed_metadata = (compiled.metadata.num_warps, compiled.metadata.num_ctas, shared)
        compiled.module = None
        compiled._run = None
    return compiled


def local_cycles(words: int, shared: int) -> float:
    """Median cycles per dependent LDL at `words` words a thread, `shared` bytes of shared memory reserved."""
    import torch

    out = torch.zeros(64, dtype=torch.int64, device="cuda")
    asm = local_asm(words)
    with_shared(local_kernel, shared, out, ITERS, ASM=asm, SHARED=shared, num_warps=1, num_stages=1)
    runs = []
    for _ in range(TRIALS):
        local_kernel[(1,)](out, ITERS, ASM=asm, SHARED=shared, num_warps=1, num_stages=1)
        torch.cuda.synchronize()
        runs.append(int(out[0]) / (ITERS * UNROLL))
    return statistics.median(runs)


def fetch_cycles(kb: int, warps: int) -> dict:
    """Cycles per instruction per warp (median over warps and trials) of the `kb` KB loop with `warps` warps."""
    import torch

    threads = 32 * warps
    out = torch.zeros(threads + warps, dtype=torch.int64, device="cuda")
    body = fetch_body(kb) + LOOP_OVERHEAD
    iters = max(4, FETCH_INSTRUCTIONS // body)
    runs = []
    for _ in range(TRIALS):
        fetch_kernel[(1,)](out, iters, ASM=fetch_asm(kb), THREADS=threads, num_warps=warps, num_stages=1)
        torch.cuda.synchronize()
        runs += [int(c) / (iters * body) for c in out[:warps].tolist()]
    per_warp = statistics.median(runs)
    return {"kb": kb, "warps": warps, "cycles_per_instruction": per_warp,
            "issue_per_scheduler_per_clock": warps / 4 / per_warp}


def check_sass(kb: int = 4, words: int = 128) -> dict:
    """CPU only: compile both kernels for sm_90 and count their loops (validate.common.sass.loop_counts)."""
    import subprocess
    import tempfile

    from validate.common.sass import instructions, loop_counts, opcode
    from validate.common.sm90 import compile_sm90

    tool = Path(triton.__file__).parent / "backends" / "nvidia" / "bin" / "cuobjdump"
    found = {}
    for name, kernel, ce, warps in (("local", local_kernel, {"ASM": local_asm(words), "SHARED": 0}, 1),
                                    ("fetch", fetch_kernel, {"ASM": fetch_asm(kb), "THREADS": 128}, 4)):
        compiled = compile_sm90(kernel, {"out_ptr": "*i64", "iters": "i32"}, ce, warps, 1)
        with tempfile.TemporaryDirectory() as tmp:
            path = Path(tmp) / "k.cubin"
            path.write_bytes(compiled.asm["cubin"])
            sass = subprocess.run([str(tool), "-sass", str(path)], capture_output=True, text=True, check=True).stdout
        loop = loop_counts(sass)
        stalls = sorted({(w >> 41) & 0xF for _, t, w in instructions(sass) if opcode(t).startswith("FFMA")})
        found[name] = {"instructions": loop["instructions"], "body_bytes": loop["body_bytes"], "ldl": loop["ldl"],
                       "ffma_stalls": stalls}
    return found


def main(out: Path) -> dict:
    """Run both microbenchmarks on GPU 0 and write {"env", "local", "fetch"} to `out`."""
    from validate.common.harness import environment

    local = [{"words": w, "warp_footprint_bytes": w * 128, "shared_bytes": s, "cycles": local_cycles(w, s)}
             for s in (0, SHARED_BYTES) for w in WORDS]
    for row in local:
        print(row, flush=True)
    fetch = []
    for warps in FETCH_WARPS:
        for kb in FETCH_KB:
            fetch.append(fetch_cycles(kb, warps))
            print(fetch[-1], flush=True)
    doc = {"env": environment(), "local": local, "fetch": fetch}
    Path(out).write_text(json.dumps(doc, indent=1) + "\n")
    return doc


if __name__ == "__main__":
    if sys.argv[1:2] == ["--check-sass"]:
        print(check_sass())
    else:
        main(Path(sys.argv[1]))
