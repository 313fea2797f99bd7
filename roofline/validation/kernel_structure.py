"""A measured kernel's structure for the hierarchical roofline: the on-chip work of its main loop, from the
static counts of its sm_90 compile (structure/<family>.json, written by validate/ops/<family>/structure.py
with validate.common.sass; no GPU, no timing in it).

Structural inputs (per program and loop step of `step_tokens` tokens, per warp): warp instructions, integer
instructions, shared-memory wavefronts (128 B, conflict-free), and per program: warps, registers, shared
memory. Rates: the device's ceilings (roofline.costmodel.ceilings): shared-memory bandwidth (measured
`shared_memory_bytes_per_s` of the ceilings microbenchmark 'smem_read' when the spec has it, else the CUDA
guide's 128 B per clock per SM x SMs x clock) and the integer rate (measured `int32_ops_per_s`, else 64 lanes
per clock per SM). The loop's op then carries, over every step of every program of the launch,
    shared_bytes = steps x warps x wavefronts x 128 B          -> t_shared = shared_bytes / smem_bw
    int_ops      = steps x warps x integer instructions x 32   -> part of t_issue (int_ops / int_rate)
and Roofline times it as every op (t = max(compute, memory, shared, ...)): nothing is fitted to a timing.
Executed work (`executed_work`, XQuant's structure/xquant.json): what a warp executes per program-step with
nested loops x trips (validate.common.sass.executed_counts), timed as matmul (wgmma FLOPs at the measured GEMM rate,
HMMA FLOPs at `mma_sync_rate`), FP32 and integer instructions (issue), wavefronts; `wave_factor` for a launch whose
programs leave the last wave partly empty.
Issue classes (the structure's "classes", validate.common.sass.issue_classes): besides integer and FP32 instructions
a loop issues conversions (F2FP packs to bf16, I2F/I2FP, F2I/FRND), MUFU and instructions of no arithmetic pipe
(moves, uniform ops, loads, barriers, wgmma fences, branches). One scheduler issues one warp instruction per clock
(4 per SM), and an instruction whose pipe has k lanes per SM holds it 32 x 4 / k clocks; `issue_cycles` charges each
class at its pipe's rate, summed like the integer and FP32 parts always were (a scheduler's classes do not overlap):
    t_issue = sum_c n_c x 32 / rate_c,   rate_c: int32 and fp32 as before; f2fp, i2f, f2i, mufu: measured
    (`f2fp_ops_per_s`, ...: the ceilings family's 'cvt_*' and 'mufu_issue') or the CUDA guide's 16 per SM per clock;
    dispatch: 4 warp instructions per SM per clock (128 lane-slots), also the floor of every other class.
The op has one integer rate, so the classes beyond int and fp enter its `int_ops` as the integer lane-ops of the
same time (`extra_int_ops`). The measured rates need the spec: callers pass `hardware` (without it the table's
ratios to the integer rate stand). The sum is an upper bound of the issue time; full overlap of the pipes under the
dispatch (max of the classes' times and the instruction count) is the lower one; the ceilings family's 'mixed_issue'
(8 warps per scheduler) and 'mixed_issue_w2' (2, the fused XQuant kernel's) measure which holds for INT32 + FP32.
Not modelled yet: the latency of a warp's dependency chains when few warps share a scheduler (InnerQ/SKVQ's loops
run 2-3 warps per scheduler at ~45 % of their issue ceiling; the loop's encoded stall cycles and scoreboard waits
are recorded here for that, but the variable latencies they wait on are not measured by the ceilings family).
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
    """On-chip work of `steps` program-steps of the loop: shared bytes (wavefronts x 128 B) and integer lane-ops,
    the loop's other issue classes included as integer lane-ops of the same time (`extra_int_ops`)."""
    warp_steps = steps * s["warps"]
    return {"shared_bytes": warp_steps * s["loop"]["wavefronts"] * WAVEFRONT_BYTES,
            "int_ops": warp_steps * (s["loop"]["int"] * LANES + extra_int_ops(s["loop"], hardware))}


def with_loop(op, s: dict, steps: float, hardware=None):
    """`op` with the on-chip work of its kernel's loop (`loop_work`) in place of the layout's estimates."""
    work = loop_work(s, steps, hardware)
    return replace(op, shared_bytes=work["shared_bytes"], int_ops=work["int_ops"])


# Issue rates per SM per clock of the classes beyond int and fp, in lanes (thread instructions), from the CUDA C++
# Programming Guide's throughput table of native arithmetic instructions (section "Arithmetic Instructions",
# compute capability 9.0 column): "all other type conversions" 16 (F2FP, I2F/I2FP, F2I/F2F/FRND), "32-bit
# floating-point reciprocal, reciprocal square root, base-2 logarithm, base 2 exponential, sine, cosine" 16 (MUFU);
# and the dispatch: one warp instruction per clock per scheduler, 4 schedulers per SM (CUDA guide, "Hardware
# Multithreading" / the Hopper tuning guide's SM description) = 128 lane-slots. INT32: 64 lanes (the same table).
CLASS_LANES_PER_CLOCK_SM = {"f2fp": 16, "i2f": 16, "f2i": 16, "mufu": 16, "dispatch": 128}
INT_LANES_PER_CLOCK_SM = 64
CLASS_FIELDS = {"f2fp": "f2fp_ops_per_s", "i2f": "i2f_ops_per_s", "f2i": "f2i_ops_per_s", "mufu": "mufu_ops_per_s"}


def class_rates(hardware=None) -> dict:
    """Lane-instructions per second of each class of CLASS_LANES_PER_CLOCK_SM and of "int": the spec's measured
    field (CLASS_FIELDS; int: int32_ops_per_s) when it has one, else the table's lanes x SMs x SM clock; without a
    `hardware`, the table's lanes per SM per clock (only their ratios matter to `extra_int_ops`)."""
    if hardware is None:
        return {**CLASS_LANES_PER_CLOCK_SM, "int": INT_LANES_PER_CLOCK_SM}
    m = getattr(hardware, "measured", None)
    scale = hardware.sm_count * hardware.sm_clock_hz
    out = {c: (getattr(m, CLASS_FIELDS[c], None) if c in CLASS_FIELDS else None) or lanes * scale
           for c, lanes in CLASS_LANES_PER_CLOCK_SM.items()}
    out["int"] = getattr(m, "int32_ops_per_s", None) or hardware.int_ops_per_s()
    return out


def issue_cycles(classes: dict, rates: dict) -> float:
    """Issue time of one warp's instructions `classes` (class -> count) in the units of 32 / rates: the sum over
    classes of n_c x 32 / rate_c, int at rates["int"], fp at rates["fp"], the other classes at theirs (module
    docstring). With rates in lanes per SM per clock x 1/4 (per scheduler) it is scheduler clocks."""
    return sum(n * LANES / rates[c] for c, n in classes.items() if n)


def extra_int_ops(counts: dict, hardware=None) -> float:
    """Integer lane-ops taking the time of the classes beyond int and fp of `counts` (its "classes"; 0 without):
    sum_c n_c x 32 x int_rate / rate_c (`class_rates`)."""
    classes = counts.get("classes")
    if not classes:
        return 0.0
    rates = class_rates(hardware)
    return issue_cycles({c: n for c, n in classes.items() if c not in ("int", "fp")}, rates) * rates["int"]


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


def executed_work(s: dict, steps: float, hmma_scale: float, hardware=None) -> dict:
    """Op fields of `steps` program-steps of a kernel with executed counts s["executed"] per warp and step:
        matmul_flops = warp-steps x (wgmma FLOPs + HMMA FLOPs x hmma_scale)   (hmma_scale = matmul peak / mma.sync
                       rate: the op has one matmul rate, so the HMMA FLOPs time F / mma_sync_rate enters as F x scale)
        vector_flops = warp-steps x FP32 instructions x 32 lanes x 2    (each one a lane slot of the FMA pipe,
                       whose measured rate counts an FMA as 2 FLOP)
        int_ops      = warp-steps x (integer instructions x 32 + `extra_int_ops`: the other issue classes)
        shared_bytes = warp-steps x wavefronts x 128 B."""
    e, warp_steps = s["executed"], steps * s["warps"]
    return {"matmul_flops": warp_steps * (e["hgmma_flops"] + e["hmma_flops"] * hmma_scale),
            "vector_flops": warp_steps * e["fp"] * LANES * 2,
            "int_ops": warp_steps * (e["int"] * LANES + extra_int_ops(e, hardware)),
            "shared_bytes": warp_steps * e["wavefronts"] * WAVEFRONT_BYTES}
