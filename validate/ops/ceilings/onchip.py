"""On-chip ceilings of the hierarchical roofline (issue 14 item 4): shared-memory read bandwidth ('smem_read'),
vector integer issue rate ('int_issue'), FP32 FMA rate ('fma_issue') and the mma.sync tensor-core rate
('mma_sync'), the `measured` fields shared_memory_bytes_per_s, int32_ops_per_s, fp32_flops_per_s and
mma_sync_flops_per_s (the last not in roofline/specs/hardware.py yet: kernel_structure reads it when it is).

    python -m validate.ops.ceilings.onchip OUT.json [--quick]

Needs torch + triton only (no pydantic, no roofline import): it runs on the GPU box as is.
Each kernel is one Triton program per block whose work is one inline-PTX loop per thread (one element per thread,
so each asm block is instantiated once per kernel):
  smem_read  each block stores a 16 KB tile into shared memory once (st.shared), then every thread re-reads it,
             ld.volatile.shared.v4.u32 (a warp reads 512 contiguous bytes: 4 conflict-free 128 B wavefronts) x
             UNROLL per iteration, xor-folded so nothing is dead: bytes = threads x iterations x UNROLL x 16.
  int_issue  8 independent chains per thread of lop3 / prmt / shf (the ops of kv.quant's dequantization), each
             op reading a neighbouring chain so ptxas cannot fold them: ops = threads x iterations x 96 (lane-ops).
  fma_issue  8 independent fma.rn.f32 chains per thread, 16 deep per iteration: FLOP = threads x iterations x 256.
  mma_sync   a Triton loop of MMA_ACC independent tl.dot(a, b, acc_i), a [16, 64] x [64, 64] bf16 with fp32
             accumulators: 16 rows compile to HMMA.16816 (mma.sync; wgmma needs 64 rows per warpgroup), a and b stay
             in registers but for one re-read per iteration (sm_90 SASS, Triton 3.6, per warp and iteration: 64
             HMMA.16816, 8 LDSM.x4 = 32 wavefronts, 1 barrier; at the predicted 2048 FLOP/clock/SM the HMMA take
             128 clocks of the SM's tensor cores per warp-iteration, the wavefronts 32 of its shared memory):
             FLOP = programs x iterations x MMA_ACC x 2 x 16 x 64 x 64.
  cvt_f2fp / cvt_i2f / cvt_f2i / mufu_issue  8 independent chains per thread of one conversion (cvt.rn.bf16x2.f32:
             F2FP pack; cvt.rn.f32.s32: I2FP; cvt.rzi.s32.f32: F2I) or of ex2.approx.ftz.f32 (MUFU.EX2), each
             result's bits fed to the next step of its chain: ops = threads x iterations x 32 (thread instructions):
             the rates of kernel_structure's issue classes f2fp, i2f, f2i, mufu (fields f2fp_ops_per_s, ...).
  mixed_issue / mixed_issue_w2  1 lop3 + 2 fma.rn.f32 of 8 independent chains each, x 4 per iteration, at 4 blocks
             of 8 warps per SM (8 warps per scheduler) and at 1 (2 per scheduler, the fused XQuant kernel's 2 programs
             of 4 warps): instructions/s, against the model's sum of the INT32 and FP32 pipe times (96 per SM per
             clock) and full overlap of the two pipes under the dispatch (128): the composition test, no field.
Latencies (validate/ops/ceilings/latency.py): dependent chains of one warp timed with %clock64 (lds, shfl, mufu, fma,
hmma, ldg), cycles per step, written as "latency_cycles" (roofline.validation.latency's classes) beside the rates.
The loop counter (add, setp, bra: 3 per iteration) is not counted: at 16 loads (ptxas unrolls 8 iterations), 96
integer and 128 FMA payload ops per iteration it is ~3 % of the instructions, so those rates read up to that low.
Timing: a CUDA graph of REPEATS launches, replayed after a warm-up, torch.cuda.Event, median of TRIALS replays.
SM count from torch.cuda.get_device_properties; the SM clock is measured in the FMA kernel (%clock64 cycles over
%globaltimer nanoseconds, per block, median), beside the properties' clock_rate when torch reports one.
Predicted (datasheet, per SM per clock: 128 B shared memory, 64 INT32 lanes, 128 FP32 lanes x 2 FLOP) at the
measured clock are written beside each result; validate/results/experiments/onchip-predicted.json has them at the
spec clocks, committed before any run.
"""

from __future__ import annotations

import json
import statistics
import sys
from pathlib import Path

import torch
import triton
import triton.language as tl

from validate.common import clocks as smclock
from validate.common.events import replay_times_ms
from validate.common.harness import environment, script_args
from validate.ops.ceilings import latency

WARPS = 8
THREADS = 32 * WARPS
UNROLL = 16  # shared loads per thread and iteration (16 KB tile per block: THREADS x 16 B x 4 regions)
REGIONS = 4
TILE_BYTES = THREADS * 16 * REGIONS
BLOCKS_PER_SM = 4
REPEATS = 20
TRIALS = 15
PER_CLOCK = {"smem_read": 128, "int_issue": 64, "fma_issue": 256, "mma_sync": 2048,  # per SM: B, lane-ops, FLOP
             "cvt_f2fp": 16, "cvt_i2f": 16, "cvt_f2i": 16, "mufu_issue": 16,  # thread instructions
             "mixed_issue": 96, "mixed_issue_w2": 96}  # the model's sum composition (issue-classes-predicted.json)
MMA_M, MMA_N, MMA_K, MMA_ACC, MMA_WARPS = 16, 64, 64, 8, 4

def _counted_loop(label: str, body: str) -> str:
    """PTX of `body` repeated n = $2 times (the register n, counter i and predicate p declared by the caller)."""
    return f"mov.u32 n, $2;\nmov.u32 i, 0;\n{label}:\n{body}\nadd.u32 i, i, 1;\nsetp.lt.u32 p, i, n;\n@p bra {label};"


def _fold(op: str, reg: str) -> str:
    """PTX folding the 8 chains {reg}0..7 into $0 with `op` (so none of them is dead code)."""
    r = [f"{reg}{c}" for c in range(8)]
    return (f"{op} {r[0]}, {r[0]}, {r[1]}; {op} {r[2]}, {r[2]}, {r[3]}; {op} {r[4]}, {r[4]}, {r[5]}; "
            f"{op} {r[6]}, {r[6]}, {r[7]};\n{op} {r[0]}, {r[0]}, {r[2]}; {op} {r[4]}, {r[4]}, {r[6]}; "
            f"{op} $0, {r[0]}, {r[4]};")


_LOADS = "\n".join(
    f"ld.volatile.shared.v4.u32 {{a0, a1, a2, a3}}, [addr+{(k % REGIONS) * THREADS * 16}];\n"
    "lop3.b32 x, x, a0, a1, 0x96;\nlop3.b32 x, x, a2, a3, 0x96;" for k in range(UNROLL))
SMEM_ASM = f"""{{
.shared .align 16 .b8 tile[{TILE_BYTES}];
.reg .u32 addr, i, x, a0, a1, a2, a3, n;
.reg .pred p;
mov.u32 addr, tile;
and.b32 a0, $1, {THREADS - 1};
shl.b32 a0, a0, 4;
add.u32 addr, addr, a0;
""" + "".join(f"st.shared.v4.u32 [addr+{r * THREADS * 16}], {{$1, $1, $1, $1}};\n" for r in range(REGIONS)) + f"""
bar.sync 0;
mov.u32 x, $1;
{_counted_loop("SMEM_LOOP", _LOADS)}
mov.u32 $0, x;
}}"""

INT_UNROLL = 4
_INT_BODY = "\n".join(
    f"lop3.b32 r{c}, r{c}, r{(c + 1) % 8}, k, 0x96;\n"
    f"prmt.b32 r{c}, r{c}, r{(c + 3) % 8}, 0x5140;\n"
    f"shf.l.wrap.b32 r{c}, r{c}, r{(c + 5) % 8}, k;" for _ in range(INT_UNROLL) for c in range(8))
INT_OPS_PER_ITER = 24 * INT_UNROLL
INT_ASM = """{
.reg .u32 r0, r1, r2, r3, r4, r5, r6, r7, k, i, n;
.reg .pred p;
mov.u32 k, $1;
""" + "".join(f"add.u32 r{c}, $1, {c};\n" for c in range(8)) + f"""{_counted_loop("INT_LOOP", _INT_BODY)}
{_fold("xor.b32", "r")}
}}"""

FMA_CHAINS, FMA_UNROLL = 8, 16
_FMA_BODY = "\n".join(f"fma.rn.f32 f{c}, f{c}, m, c;" for _ in range(FMA_UNROLL) for c in range(FMA_CHAINS))
FMA_FLOP_PER_ITER = 2 * FMA_CHAINS * FMA_UNROLL
FMA_ASM = """{
.reg .f32 f0, f1, f2, f3, f4, f5, f6, f7, m, c;
.reg .u32 i, n;
.reg .pred p;
mov.f32 m, 0f3F7FFFFF;
mov.f32 c, $1;
""" + "".join(f"add.f32 f{c}, $1, 0f3F800000;\n" for c in range(8)) + f"""{_counted_loop("FMA_LOOP", _FMA_BODY)}
{_fold("add.f32", "f")}
}}"""

CVT_UNROLL = 4
CVT_OPS_PER_ITER = 8 * CVT_UNROLL
CONVERSIONS = {"cvt_f2fp": "cvt.rn.bf16x2.f32 r{c}, r{c}, r{n};", "cvt_i2f": "cvt.rn.f32.s32 r{c}, r{c};",
               "cvt_f2i": "cvt.rzi.s32.f32 r{c}, r{c};", "mufu_issue": "ex2.approx.ftz.f32 r{c}, r{c};"}


def conversion_asm(name: str) -> str:
    """PTX of 8 chains of CONVERSIONS[name] on .b32 registers (each result's bits the next step's operand; the
    pack reads its neighbour chain too), CVT_UNROLL deep per iteration, xor-folded into $0."""
    body = "\n".join(CONVERSIONS[name].format(c=c, n=(c + 1) % 8) for _ in range(CVT_UNROLL) for c in range(8))
    return ("{\n.reg .b32 r0, r1, r2, r3, r4, r5, r6, r7, i, n;\n.reg .pred p;\n"
            + "".join(f"add.u32 r{c}, $1, {c + 1};\n" for c in range(8))
            + f"{_counted_loop(name.upper() + '_LOOP', body)}\n{_fold('xor.b32', 'r')}\n}}")


MIX_UNROLL = 4
MIX_OPS_PER_ITER = 24 * MIX_UNROLL  # 8 lop3 + 16 fma per unroll step
_MIX_BODY = "\n".join(f"lop3.b32 r{c}, r{c}, r{(c + 1) % 8}, k, 0x96;\nfma.rn.f32 f{c}, f{c}, m, g;\n"
                      f"fma.rn.f32 h{c}, h{c}, m, g;" for _ in range(MIX_UNROLL) for c in range(8))
MIX_ASM = ("{\n.reg .u32 r0, r1, r2, r3, r4, r5, r6, r7, k, i, n;\n.reg .f32 f0, f1, f2, f3, f4, f5, f6, f7, "
           "h0, h1, h2, h3, h4, h5, h6, h7, m, g;\n.reg .pred p;\nmov.u32 k, $1;\nmov.f32 m, 0f3F7FFFFF;\n"
           "cvt.rn.f32.u32 g, $1;\n"
           + "".join(f"add.u32 r{c}, $1, {c};\ncvt.rn.f32.u32 f{c}, r{c};\nadd.f32 h{c}, f{c}, 0f3F800000;\n"
                     for c in range(8))
           + f"{_counted_loop('MIX_LOOP', _MIX_BODY)}\n"
           + "".join(f"add.f32 f{c}, f{c}, h{c};\nmov.b32 k, f{c};\nxor.b32 r{c}, r{c}, k;\n" for c in range(8))
           + f"{_fold('xor.b32', 'r')}\n}}")


@triton.jit
def smem_kernel(out_ptr, iters, THREADS: tl.constexpr, ASM: tl.constexpr):
    lane = tl.arange(0, THREADS)
    n = tl.full([THREADS], 0, tl.int32) + iters
    x = tl.inline_asm_elementwise(ASM, "=r,r,r", [lane, n], dtype=tl.int32, is_pure=False, pack=1)
    tl.store(out_ptr + tl.program_id(0) * THREADS + lane, x)


@triton.jit
def int_kernel(out_ptr, iters, THREADS: tl.constexpr, ASM: tl.constexpr):
    lane = tl.arange(0, THREADS)
    n = tl.full([THREADS], 0, tl.int32) + iters
    x = tl.inline_asm_elementwise(ASM, "=r,r,r", [lane + tl.program_id(0), n], dtype=tl.int32, is_pure=False,
                                  pack=1)
    tl.store(out_ptr + tl.program_id(0) * THREADS + lane, x)


@triton.jit
def fma_kernel(out_ptr, clock_ptr, iters, THREADS: tl.constexpr, ASM: tl.constexpr):
    lane = tl.arange(0, THREADS)
    pid = tl.program_id(0)
    n = tl.full([THREADS], 0, tl.int32) + iters
    t0 = tl.inline_asm_elementwise("mov.u64 $0, %globaltimer;", "=l,r", [n], dtype=tl.int64, is_pure=False, pack=1)
    c0 = tl.inline_asm_elementwise("mov.u64 $0, %clock64;", "=l,r", [n], dtype=tl.int64, is_pure=False, pack=1)
    x = tl.inline_asm_elementwise(ASM, "=f,f,r", [lane.to(tl.float32) * 1e-3, n], dtype=tl.float32,
                                  is_pure=False, pack=1)
    c1 = tl.inline_asm_elementwise("mov.u64 $0, %clock64;", "=l,f", [x], dtype=tl.int64, is_pure=False, pack=1)
    t1 = tl.inline_asm_elementwise("mov.u64 $0, %globaltimer;", "=l,f", [x], dtype=tl.int64, is_pure=False, pack=1)
    tl.store(out_ptr + pid * THREADS + lane, x)
    first = lane == 0
    tl.store(clock_ptr + pid * 2 + lane * 0, c1 - c0, mask=first)
    tl.store(clock_ptr + pid * 2 + 1 + lane * 0, t1 - t0, mask=first)


@triton.jit
def mma_kernel(a_ptr, b_ptr, out_ptr, iters, M: tl.constexpr, N: tl.constexpr, K: tl.constexpr):
    rm, rn, rk = tl.arange(0, M), tl.arange(0, N), tl.arange(0, K)
    a = tl.load(a_ptr + rm[:, None] * K + rk[None, :])
    b = tl.load(b_ptr + rk[:, None] * N + rn[None, :])
    z = tl.zeros([M, N], dtype=tl.float32)
    c0, c1, c2, c3, c4, c5, c6, c7 = z, z + 1.0, z + 2.0, z + 3.0, z + 4.0, z + 5.0, z + 6.0, z + 7.0
    for _ in range(iters):  # MMA_ACC = 8 independent accumulators
        c0, c1, c2, c3 = tl.dot(a, b, c0), tl.dot(a, b, c1), tl.dot(a, b, c2), tl.dot(a, b, c3)
        c4, c5, c6, c7 = tl.dot(a, b, c4), tl.dot(a, b, c5), tl.dot(a, b, c6), tl.dot(a, b, c7)
    out = out_ptr + tl.program_id(0) * M * N + rm[:, None] * N + rn[None, :]
    tl.store(out, ((c0 + c1) + (c2 + c3)) + ((c4 + c5) + (c6 + c7)))


KERNELS = {"smem_read": (smem_kernel, SMEM_ASM), "int_issue": (int_kernel, INT_ASM), "fma_issue": (fma_kernel, FMA_ASM),
           "mma_sync": (mma_kernel, None), **dict.fromkeys(("mixed_issue", "mixed_issue_w2"), (int_kernel, MIX_ASM)),
           **{name: (int_kernel, conversion_asm(name)) for name in CONVERSIONS}}
CLASS_FIELDS = {"cvt_f2fp": "f2fp_ops_per_s", "cvt_i2f": "i2f_ops_per_s", "cvt_f2i": "f2i_ops_per_s",
                "mufu_issue": "mufu_ops_per_s"}


def work_per_iter(name: str) -> int:
    """Bytes (smem_read), integer lane-ops (int_issue) or FLOP (fma_issue) one thread does per loop iteration;
    mma_sync: the FLOP of one program's iteration (MMA_ACC dots of MMA_M x MMA_N x MMA_K); conversions, MUFU and
    mixed: thread instructions."""
    return {"smem_read": UNROLL * 16, "int_issue": INT_OPS_PER_ITER, "fma_issue": FMA_FLOP_PER_ITER,
            "mma_sync": MMA_ACC * 2 * MMA_M * MMA_N * MMA_K, "mixed_issue": MIX_OPS_PER_ITER,
            "mixed_issue_w2": MIX_OPS_PER_ITER, **dict.fromkeys(CONVERSIONS, CVT_OPS_PER_ITER)}[name]


def launch(name: str, blocks: int, iters: int, out, clocks):
    """One launch of kernel `name` over `blocks` programs of THREADS threads."""
    kernel, asm = KERNELS[name]
    if name == "mma_sync":
        a, b = clocks
        return kernel[(blocks,)](a, b, out, iters, M=MMA_M, N=MMA_N, K=MMA_K, num_warps=MMA_WARPS, num_stages=1)
    if name == "fma_issue":
        return kernel[(blocks,)](out, clocks, iters, THREADS=THREADS, ASM=asm, num_warps=WARPS, num_stages=1)
    return kernel[(blocks,)](out, iters, THREADS=THREADS, ASM=asm, num_warps=WARPS, num_stages=1)


def graph_seconds(fn, repeats: int = REPEATS, trials: int = TRIALS) -> float:
    """Median seconds of one fn() call: a CUDA graph of `repeats` calls, timed with CUDA events."""
    fn()
    torch.cuda.synchronize()
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        for _ in range(repeats):
            fn()
    graph.replay()
    torch.cuda.synchronize()
    seconds = statistics.median(t / 1e3 / repeats for t in replay_times_ms(graph, trials))
    PROBES.append(smclock.probe_mhz(graph.replay, seconds * 1e3 * repeats))
    return seconds


PROBES: list[float] = []  # graph_seconds' probe clocks (MHz), one per call: the SM clock each rate was measured at


def probe_row(row: dict) -> dict:
    """`row` with "probe_mhz": the SMs' clock read inside the GPU (validate.common.clocks.probe_mhz) while the
    graph that timed it replayed, so that its per-second rate converts to a per-clock one at that clock."""
    if PROBES:
        row["probe_mhz"] = round(PROBES.pop(), 1)
    PROBES.clear()
    return row


def measure(name: str, sms: int, iters: int) -> dict:
    """Rate of kernel `name` with BLOCKS_PER_SM programs per SM (mixed_issue_w2: 1): work / median seconds."""
    blocks = sms * (1 if name == "mixed_issue_w2" else BLOCKS_PER_SM)
    dtype = torch.float32 if name in ("fma_issue", "mma_sync") else torch.int32
    out = torch.empty(blocks * THREADS * (MMA_M * MMA_N // THREADS + 1), dtype=dtype, device="cuda")
    clocks = torch.zeros(blocks * 2, dtype=torch.int64, device="cuda")
    threads = THREADS
    if name == "mma_sync":  # operands ~0.01 so the fp32 accumulators stay finite; work per program, not thread
        clocks = tuple((torch.randn(*shape, device="cuda") * 0.01).to(torch.bfloat16)
                       for shape in ((MMA_M, MMA_K), (MMA_K, MMA_N)))
        threads = 1
    seconds = graph_seconds(lambda: launch(name, blocks, iters, out, clocks))
    probe = probe_row({})
    work = blocks * threads * iters * work_per_iter(name)
    row = {"blocks": blocks, "threads_per_block": THREADS if name != "mma_sync" else 32 * MMA_WARPS,
           "iterations": iters, "work": work, "seconds": seconds, "rate_per_s": work / seconds, **probe}
    if name == "fma_issue":
        pairs = clocks.view(blocks, 2).double().cpu()
        row["clock_hz_measured"] = statistics.median((pairs[:, 0] / pairs[:, 1] * 1e9).tolist())
    return row


def properties_clock_hz(props) -> float | None:
    """The SM clock torch reports (clock_rate, kHz), None where this torch has no such field."""
    khz = getattr(props, "clock_rate", None)
    return float(khz) * 1e3 if khz else None


def run(out_path: Path, quick: bool = False) -> dict:
    """Measure the four ceilings and the latency chains on GPU 0 and write them, with the datasheet predictions
    at the measured clock."""
    props = torch.cuda.get_device_properties(0)
    sms = props.multi_processor_count
    iters = 64 if quick else 4096
    rows = {"fma_issue": measure("fma_issue", sms, iters)}
    clock = rows["fma_issue"]["clock_hz_measured"]
    for name in ("smem_read", "int_issue", "mma_sync", *CONVERSIONS, "mixed_issue", "mixed_issue_w2"):
        rows[name] = measure(name, sms, iters)
    for name, row in rows.items():
        row["predicted_at_measured_clock"] = PER_CLOCK[name] * sms * clock
        row["per_sm_per_clock"] = row["rate_per_s"] / (sms * clock)
        row["share_of_predicted"] = row["rate_per_s"] / row["predicted_at_measured_clock"]
    result = {"device": props.name, "sm_count": sms, "clock_hz_measured": clock,
              "clock_hz_properties": properties_clock_hz(props), "torch": torch.__version__,
              "triton": triton.__version__, "quick": quick,
              "env": environment(),  # driver, CUDA, python, date and git SHA, as every results file records them
              "fields": {"shared_memory_bytes_per_s": rows["smem_read"]["rate_per_s"],
                         "int32_ops_per_s": rows["int_issue"]["rate_per_s"],
                         "fp32_flops_per_s": rows["fma_issue"]["rate_per_s"],
                         "mma_sync_flops_per_s": rows["mma_sync"]["rate_per_s"],
                         **{field: rows[name]["rate_per_s"] for name, field in CLASS_FIELDS.items()}},
              "benchmarks": rows}
    cycles = latency.measure_all()
    result["latency_cycles"] = latency.classes(cycles)
    result["latency_benchmarks"] = cycles
    out_path.parent.mkdir(parents=True, exist_ok=True)
    out_path.write_text(json.dumps(result, indent=1) + "\n")
    return result


def main(argv: list[str]) -> int:
    """`python -m validate.ops.ceilings.onchip OUT.json [--quick]`; exit 2 with one line on bad arguments."""
    parsed = script_args(argv, "onchip", "a CUDA GPU (inline PTX does not run under TRITON_INTERPRET)")
    if parsed is None:
        return 2
    result = run(*parsed)
    for name, row in result["benchmarks"].items():
        print(f"{name}: {row['rate_per_s']:.4g}/s = {row['per_sm_per_clock']:.1f} per SM per clock "
              f"({row['share_of_predicted']:.0%} of the datasheet at {result['clock_hz_measured'] / 1e9:.3f} GHz)")
    for name, cycles in result["latency_benchmarks"].items():
        print(f"{name}: {cycles:.1f} cycles per dependent step")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
