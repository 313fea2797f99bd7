"""A measured kernel's structure for the hierarchical roofline: the on-chip work of its main loop, from the
static counts of its sm_90 compile (structure/<family>.json, written by validate/ops/<family>/structure.py
with validate.common.sass; no GPU, no timing in it).

Structural inputs (per program and loop step of `step_tokens` tokens, per warp): warp instructions, integer
instructions, shared-memory wavefronts (128 B, conflict-free), and per program: warps, registers, shared
memory. Rates: the device's ceilings (roofline.costmodel.device_ceilings): shared-memory bandwidth (measured
`shared_memory_bytes_per_s` of the ceilings microbenchmark 'smem_read' when the spec has it, else the CUDA
guide's 128 B per clock per SM x SMs x clock) and the integer rate (measured `int32_ops_per_s`, else 64 lanes
per clock per SM). The loop's op then carries, over every step of every program of the launch,
    shared_bytes = steps x warps x wavefronts x 128 B          -> t_shared = shared_bytes / smem_bw
    vector_flops, int_ops = the issue time of its classes (`issue_fields`, below)  -> t_issue
and Roofline times it as every op (t = max(compute, memory, shared, ...)): nothing is fitted to a timing.
Executed work (`executed_work`, XQuant's structure/xquant.json): what a warp executes per program-step with
nested loops x trips (validate.common.sass.executed_counts), timed as matmul (wgmma FLOPs at the measured GEMM rate,
HMMA FLOPs at `mma_sync_rate`), FP32 and integer instructions (issue), wavefronts; `wave_factor` for a launch whose
programs leave the last wave partly empty.
Issue classes (the structure's "classes", validate.common.sass.issue_classes): besides integer and FP32 instructions
a loop issues conversions (F2FP packs to bf16, I2F/I2FP, F2I/FRND), MUFU and instructions of no arithmetic pipe
(moves, uniform ops, loads, barriers, wgmma, branches). Measured on an H100 (nvidia-h100-onchip-s6.json):
F2FP and I2FP issue to the ALU pipe with INT32 (61.4, 62.3 per SM per clock), F2I and MUFU to the XU (16.1), and
1 LOP3 : 2 FFMA run at 116.5 per SM per clock, 91 % of the dispatch's 128, not the summed pipes' 96: the pipes overlap
and the instruction count binds. So (`issue_cycles`)
    t_issue = max(instructions x 32 / dispatch, max over pipes p of sum_{c in p} n_c x 32 / rate_c)
    pipes: ALU (int, f2fp, i2f), FMA (fp), XU (f2i, mufu); rates: the spec's measured fields (int32_ops_per_s,
    fp32_flops_per_s / 2, f2fp_ops_per_s, ..., dispatch_ops_per_s) or the per-clock table x SMs x clock
    (64, 128, 64, 64, 16, 16; dispatch 128),
carried by the op as vector FLOPs (the FMA pipe's part) and integer lane-ops for the rest (`issue_fields`): the
Roofline adds F_v / fp32 + I / int, which is t_issue. Callers pass `hardware` for the measured rates.
wgmma (`executed_work`): each shape's FLOPs (sass.hgmma_shapes) at the spec's measured rate of that shape at the
kernel's programs per SM (wgmma_flops_per_s, ceilings microbenchmark validate.ops.ceilings.wgmma), else at the GEMM
rate; the wgmma time W and the issue time I composed as max(W, I) + serial x min(W, I) with the measured
wgmma_issue_serial at the kernel's programs per SM (else 1: W + I, what the committed model assumed).
Latency (`latency_seconds`): when a program's warps are latency-bound, an SM completes `active` program-steps per
chain time, the lone warp's dependency chain through one step of the loop (structure/chains.json "step", the pass
for a kernel of one step per program: validate.common.chain with the ceilings family's measured latencies and the
wgmma completion of validate.ops.ceilings.wgmma_latency; spill reloads, LDL, at the local-memory latency of the L1
the kernel's shared memory leaves, and the step's instructions no faster than the instruction fetch allows a loop
body of its size: validate.common.chain local_cycles, fetch_intervals, PREDICTED values until
validate.ops.ceilings.stalls runs, recorded in chains.json), so over the launch
    t_latency = program-steps x wave_factor x chain_cycles / (active x SMs x SM clock),
    active = min(resident_programs, ceil(programs / SMs)),
one more ceiling in the max beside issue, tensor and shared memory (`with_latency`: the bound is then "latency").
It is a lower bound: the chain leaves out other warps sharing the scheduler and the tensor core. Where a kernel has
its chain, the families now take its on-chip time from validate.model.contention instead (exact MVA of the
SM's warps over the issue, tensor-core and shared-memory stations with the chain as the delay), which replaces
max(issue, tensor, shared, latency) and the serial share; `latency_seconds` and `with_latency` remain the fallback.
"""

from __future__ import annotations

import json
from dataclasses import replace
from functools import cache
from pathlib import Path

HERE = Path(__file__).resolve().parent / "structure"
WAVEFRONT_BYTES = 128  # one shared-memory wavefront: 32 banks x 4 B (CUDA C++ Programming Guide, shared memory)
LANES = 32  # threads per warp
# Per-SM limits of compute capability 7.0-9.0 (CUDA C++ Programming Guide, technical specifications per compute
# capability): 64K 32-bit registers, 64 resident warps, 32 resident blocks; registers are allocated per warp in
# units of 256, and each block reserves 1 KB of shared memory (cc 8.0+).
REGISTERS_PER_SM = 65536
REGISTER_UNIT = 256
WARPS_PER_SM = 64
BLOCKS_PER_SM = 32
RESERVED_SHARED = 1024


@cache
def kernels(family: str) -> dict:
    """The structure file of `family` ({} when there is none)."""
    path = HERE / f"{family}.json"
    return json.loads(path.read_text()) if path.exists() else {}


def structure(family: str, name: str, params: dict, hardware) -> dict | None:
    """The kernel `name` of `family`, when it was compiled at the case's heads for `hardware`'s architecture
    (None otherwise: another head count or another GPU generation compiles another loop)."""
    doc = kernels(family)
    if not doc or doc.get("architecture") != hardware.architecture or name not in doc["kernels"]:
        return None
    kernel = doc["kernels"][name]
    kv_heads = kernel.get("kv_heads", doc["kv_heads"])  # a kernel compiled at its own KV heads says so
    if (doc["heads"], kv_heads, doc["head_dim"]) != (params.get("num_heads"), params.get("num_kv_heads"),
                                                     params.get("head_dim")):
        return None
    return kernel


def resident_programs(s: dict, hardware) -> int:
    """Programs of the kernel one SM holds at once: the least of what its registers (per warp, rounded up to
    REGISTER_UNIT), its shared memory (+ RESERVED_SHARED per block, out of hardware.shared_memory_bytes_per_sm),
    the warp and the block limits allow."""
    per_warp = -(-s["registers"] * LANES // REGISTER_UNIT) * REGISTER_UNIT
    by_regs = REGISTERS_PER_SM // (per_warp * s["warps"])
    limits = [by_regs, WARPS_PER_SM // s["warps"], BLOCKS_PER_SM]
    if hardware.shared_memory_bytes_per_sm:
        limits.append(hardware.shared_memory_bytes_per_sm // (s["shared_bytes"] + RESERVED_SHARED))
    return max(1, min(limits))


def loop_work(s: dict, steps: float, hardware=None) -> dict:
    """On-chip work of `steps` program-steps of the loop: shared bytes (wavefronts x 128 B) and the loop's issue
    time as vector FLOPs and integer lane-ops (`issue_fields`; a loop without "classes": integer lane-ops only)."""
    warp_steps = steps * s["warps"]
    out = {"shared_bytes": warp_steps * s["loop"]["wavefronts"] * WAVEFRONT_BYTES}
    if s["loop"].get("classes"):
        return out | issue_fields(s["loop"], warp_steps, hardware)
    return out | {"int_ops": warp_steps * s["loop"]["int"] * LANES}


def with_loop(op, s: dict, steps: float, hardware=None):
    """`op` with the on-chip work of its kernel's loop (`loop_work`) in place of the layout's estimates."""
    return replace(op, **loop_work(s, steps, hardware))


# Issue rates per SM per clock, in lanes (thread instructions), used where a spec has no measured field:
#   int 64, fp 128: the CUDA C++ Programming Guide's throughput table (section "Arithmetic Instructions", cc 9.0);
#   f2fp, i2f 64: the ALU pipe that also runs INT32 (the guide's "all other type conversions" row says 16, but the
#     ceilings family's cvt_f2fp / cvt_i2f measured 61.4 / 62.3 on an H100, validate/results/experiments/
#     nvidia-h100-onchip-s6.json: these conversions issue to the ALU pipe, like the compile's fixed-latency
#     control bits said, issue-classes-predicted.json);
#   f2i, mufu 16: the XU pipe (the table's 16; measured 16.1 and 16.1);
#   dispatch 128: one warp instruction per clock per scheduler, 4 schedulers per SM (CUDA guide, "Hardware
#     Multithreading"; the Hopper tuning guide's SM description).
CLASS_LANES_PER_CLOCK_SM = {"f2fp": 64, "i2f": 64, "f2i": 16, "mufu": 16, "dispatch": 128}
INT_LANES_PER_CLOCK_SM = 64
FP_LANES_PER_CLOCK_SM = 128
CLASS_FIELDS = {"f2fp": "f2fp_ops_per_s", "i2f": "i2f_ops_per_s", "f2i": "f2i_ops_per_s", "mufu": "mufu_ops_per_s",
                "dispatch": "dispatch_ops_per_s"}
# The pipes of an SM's schedulers (Hopper): each class of a pipe holds it n x 32 / rate; the "dispatch" class (moves,
# uniform ops, loads, barriers, wgmma, branches) has no arithmetic pipe and counts only in the instruction total.
PIPES = {"alu": ("int", "f2fp", "i2f"), "fma": ("fp",), "xu": ("f2i", "mufu")}


def class_rates(hardware=None) -> dict:
    """Lane-instructions per second of each issue class (and "dispatch": instructions of any class): the spec's
    measured field (CLASS_FIELDS; int: int32_ops_per_s; fp: fp32_flops_per_s / 2) when it has one, else the
    per-clock table x SMs x SM clock (int: Hardware.int_ops_per_s, fp: the FP32 peak / 2); without a `hardware`,
    the table's lanes per SM per clock (only the ratios matter then)."""
    if hardware is None:
        return {**CLASS_LANES_PER_CLOCK_SM, "int": INT_LANES_PER_CLOCK_SM, "fp": FP_LANES_PER_CLOCK_SM}
    m = getattr(hardware, "measured", None)
    scale = hardware.sm_count * hardware.sm_clock_hz
    out = {c: getattr(m, CLASS_FIELDS[c], None) or lanes * scale for c, lanes in CLASS_LANES_PER_CLOCK_SM.items()}
    out["int"] = getattr(m, "int32_ops_per_s", None) or hardware.int_ops_per_s()
    out["fp"] = (getattr(m, "fp32_flops_per_s", None) or hardware.fp32_dense_flops_per_s) / 2
    return out


def pipe_cycles(classes: dict, rates: dict) -> dict:
    """Time of one warp's instructions `classes` (class -> count) on each pipe (PIPES: the sum of n_c x 32 / rate_c
    of its classes) and on the dispatch (every instruction x 32 / rates["dispatch"]), in the units of 32 / rates."""
    out = {pipe: sum(classes.get(c, 0) * LANES / rates[c] for c in members) for pipe, members in PIPES.items()}
    out["dispatch"] = sum(classes.values()) * LANES / rates["dispatch"]
    return out


def issue_cycles(classes: dict, rates: dict) -> float:
    """Issue time of one warp's instructions `classes`: the pipes overlap under the dispatch, so the longest of
    `pipe_cycles` binds (measured: 1 LOP3 : 2 FFMA ran at 91 % of the dispatch, not at the summed pipes' 75 %;
    nvidia-h100-onchip-s6.json mixed_issue): max(instructions x 32 / dispatch, max over pipes of sum n_c x 32 / rate_c).
    With rates in lanes per SM per clock / 4 (per scheduler) it is scheduler clocks."""
    return max(pipe_cycles(classes, rates).values())


def issue_fields(counts: dict, warp_steps: float, hardware=None) -> dict:
    """Op fields carrying the issue time of `warp_steps` warp-steps of `counts` (with "classes"), T = warp-steps x
    `issue_cycles` (s): vector_flops = warp-steps x fp x 32 x 2 (the FMA pipe's part, timed at the FP32 rate) and
    int_ops = (T - that part) x int rate, so the op's vector + integer time (Roofline: F_v / fp32 + I / int) is T."""
    rates, classes = class_rates(hardware), counts["classes"]
    fp_time = classes.get("fp", 0) * LANES / rates["fp"]
    extra = issue_cycles(classes, rates) - fp_time
    return {"vector_flops": warp_steps * classes.get("fp", 0) * LANES * 2, "int_ops": warp_steps * extra * rates["int"]}


# Datasheet-derived prediction of the mma.sync (HMMA) rate on Hopper until the ceilings family's 'mma_sync'
# microbenchmark is measured: 2048 dense FLOP per clock per SM, A100's tensor-core rate per SM (312 TFLOP/s /
# (108 SMs x 1.41 GHz)), which the Ampere-era instruction keeps on sm_90; the 4096 of the H100 datasheet's
# 989 TFLOP/s are wgmma's (validate/results/experiments/onchip-predicted.json).
MMA_SYNC_FLOPS_PER_CLOCK_SM = 2048


def mma_sync_rate(hardware) -> float:
    """HMMA FLOP/s: the spec's measured `mma_sync_flops_per_s` when it has one, else the datasheet-derived
    MMA_SYNC_FLOPS_PER_CLOCK_SM x SMs x SM clock."""
    measured = getattr(getattr(hardware, "measured", None), "mma_sync_flops_per_s", None)
    return measured or MMA_SYNC_FLOPS_PER_CLOCK_SM * hardware.sm_count * hardware.sm_clock_hz


def wave_factor(programs: int, sm_count: int) -> float:
    """Work multiplier of a launch of `programs` equal programs: every SM's share is ceil(programs / SMs) of them
    (the busiest SM sets the time, and a lone program runs at one SM's rate), against the device-wide rate's
    programs / SMs: ceil(P / S) x S / P (1 for whole waves, S / P for fewer programs than SMs)."""
    return -(-programs // sm_count) * sm_count / programs


# The wgmma of a structure without per-shape counts (validate.common.sass.hgmma_shapes): m64n64k16, A from registers.
WGMMA_SHAPE = "n64.rs"


def _at_programs(table: dict, prefix: str, resident: int):
    """table[f"{prefix}p<p>"] at the largest measured p <= `resident` (None when none is)."""
    keys = {int(k[len(prefix) + 1:]): v for k, v in table.items() if k.startswith(prefix + "p")}
    fits = [p for p in keys if p <= resident]
    return keys[max(fits)] if fits else None


def wgmma_rate(s: dict, hardware, shape: str = WGMMA_SHAPE) -> float | None:
    """wgmma FLOP/s of `shape` ("n<N>.<rs|ss>") at kernel `s`'s occupancy: the spec's measured
    wgmma_flops_per_s["<shape>.p<programs>"] (ceilings microbenchmark 'wgmma_*', validate.ops.ceilings.wgmma: one
    warpgroup per program waiting on each dot, p programs per SM) at `resident_programs` (the largest measured p at
    or below it); None without a measurement."""
    table = getattr(getattr(hardware, "measured", None), "wgmma_flops_per_s", None) or {}
    return _at_programs(table, shape + ".", resident_programs(s, hardware))


def wgmma_scale(s: dict, hardware, matmul_peak: float) -> float:
    """Multiplier of the kernel's wgmma FLOPs so the op's one matmul rate `matmul_peak` times them as measured:
    sum over shapes of F_shape x peak / rate_shape, over F (shapes: e["hgmma_shapes"], else all WGMMA_SHAPE; a shape
    without a measured `wgmma_rate` at the GEMM rate, 1)."""
    e = s["executed"]
    shapes = e.get("hgmma_shapes") or {WGMMA_SHAPE: e["hgmma_flops"]}
    total = sum(shapes.values())
    if not total:
        return 1.0
    return sum(f * matmul_peak / (wgmma_rate(s, hardware, k) or matmul_peak) for k, f in shapes.items()) / total


def wgmma_serial(s: dict, hardware) -> float:
    """Share of the shorter of a warpgroup's wgmma time and issue time that adds to the longer: the spec's measured
    wgmma_issue_serial[programs] (ceilings microbenchmark 'overlap_*': (t_both - max(t_W, t_I)) / min(t_W, t_I)) at
    `resident_programs` (the nearest measured programs at or below it); 1 without a measurement (time = W + I)."""
    table = getattr(getattr(hardware, "measured", None), "wgmma_issue_serial", None) or {}
    got = _at_programs({f"p{p}": v for p, v in table.items()}, "", resident_programs(s, hardware))
    return 1.0 if got is None else got


def compose(fields: dict, matmul_time: float, issue_time: float, serial: float) -> dict:
    """`fields` with the shorter of its matmul (wgmma) and issue parts scaled by `serial`, so that the op's summed
    compute time (Roofline: matmul / peak + vector / fp32 + int / int rate) is
        t = max(W, I) + serial x min(W, I)        (serial 1: W + I; 0: the two overlap fully).
    The op's times are sums of its fields, so the overlap enters as the shorter part's share."""
    if serial >= 1:
        return fields
    if matmul_time >= issue_time:
        return fields | {"vector_flops": fields["vector_flops"] * serial, "int_ops": fields["int_ops"] * serial}
    return fields | {"matmul_flops": fields["matmul_flops"] * serial}


def executed_work(s: dict, steps: float, hmma_scale: float, hardware=None, matmul_peak: float | None = None) -> dict:
    """Op fields of `steps` program-steps of a kernel with executed counts s["executed"] per warp and step:
        matmul_flops = warp-steps x (wgmma FLOPs x `wgmma_scale` + HMMA FLOPs x hmma_scale)   (the op has one
                       matmul rate, `matmul_peak`: hmma_scale = peak / mma.sync rate; wgmma_scale: peak / the measured
                       rate of each wgmma shape at the kernel's occupancy, else 1: the GEMM rate)
        vector_flops, int_ops = `issue_fields` of the executed classes (without "classes": FP32 instructions x 64
                       and integer instructions x 32)
        shared_bytes = warp-steps x wavefronts x 128 B,
    and the wgmma and issue parts composed by `compose` at the measured `wgmma_serial` (1, their sum, without)."""
    e, warp_steps = s["executed"], steps * s["warps"]
    scale = wgmma_scale(s, hardware, matmul_peak) if hardware is not None and matmul_peak else 1.0
    out = {"matmul_flops": warp_steps * (e["hgmma_flops"] * scale + e["hmma_flops"] * hmma_scale),
           "shared_bytes": warp_steps * e["wavefronts"] * WAVEFRONT_BYTES}
    if e.get("classes"):
        out |= issue_fields(e, warp_steps, hardware)
    else:
        out |= {"vector_flops": warp_steps * e["fp"] * LANES * 2, "int_ops": warp_steps * e["int"] * LANES}
    if hardware is None or not matmul_peak:
        return out
    rates = class_rates(hardware)
    issue = out["vector_flops"] / (2 * rates["fp"]) + out["int_ops"] / rates["int"]
    return compose(out, out["matmul_flops"] / matmul_peak, issue, wgmma_serial(s, hardware))


def chain_cycles(key: str) -> float | None:
    """Cycles of one warp through one program-step of kernel `key` ("<family>/<kernel>") in structure/chains.json:
    its "step", or its "pass" where the kernel runs one step per program; None when the kernel is not there."""
    row = kernels("chains").get("kernels", {}).get(key)
    return None if row is None else (row["step"] or row["pass"])


def latency_seconds(s: dict, key: str, steps: float, programs: int, hardware) -> float:
    """t_latency of `steps` program-steps of kernel `s` launched as `programs` programs (module docstring), chain
    `key` of structure/chains.json; 0 where the chain, the spec's SM clock or its architecture's chains are missing."""
    cycles, doc = chain_cycles(key), kernels("chains")
    if cycles is None or not hardware.sm_clock_hz or doc.get("architecture") != hardware.architecture:
        return 0.0
    sms = hardware.sm_count
    active = max(1, min(resident_programs(s, hardware), -(-programs // sms)))
    return steps * wave_factor(programs, sms) * cycles / (active * sms * hardware.sm_clock_hz)


def with_latency(row: dict, t_latency: float) -> dict:
    """`row` (predict.predict_op's numbers, "op_s" the structured op's own time) with the latency ceiling in the
    op's max: time_s grows by max(0, t_latency - op_s), and the bound is "latency" where it binds."""
    out = row | {"latency_s": t_latency}
    if t_latency > row["op_s"]:
        out.update(time_s=row["time_s"] + t_latency - row["op_s"], op_s=t_latency, bound="latency")
    return out
