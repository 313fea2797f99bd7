"""Physically plausible ranges of spec figures: outside the hard range is an error naming the field (a unit
typo such as a bandwidth of 3.35 instead of 3.35e12 bytes/s), inside it but outside the soft range a warning.

The ranges are wide on purpose: they bracket every accelerator and decoder of the catalogue by one to three
orders of magnitude (an L4's 300 GB/s to a GB200's 8 TB/s; 16 to 126 layers), so that they catch a wrong
unit, not an unusual part. Each is (hard_lo, soft_lo, soft_hi, hard_hi, unit) in the field's SI unit.
They also keep every expression the planner evaluates on a bounded domain (no 1e-300 bytes/s, no 1e9 layers).
"""

from __future__ import annotations

from typing import NamedTuple


class Bound(NamedTuple):
    """A field's range: outside [hard_lo, hard_hi] an error, outside [soft_lo, soft_hi] a warning."""
    hard_lo: float
    soft_lo: float
    soft_hi: float
    hard_hi: float
    unit: str
    what: str


# soft_lo of 30 GB/s and 0.3 TFLOP/s: the Jetson modules (LPDDR4x/LPDDR5, 59.7 GB/s on a Xavier NX; 0.84 TFLOP/s
# of FP32 and 0.42 Tops of INT32 on its 6 Volta SMs) are real parts, not unit typos
BANDWIDTH = Bound(1e9, 3e10, 3e13, 1e14, "bytes/s", "a device-memory bandwidth (1 GB/s .. 100 TB/s)")
PEAK = Bound(1e11, 3e11, 3e16, 1e17, "FLOP/s", "a dense peak (0.1 TFLOP/s .. 100 PFLOP/s)")
LATENCY = Bound(1e-9, 1e-7, 1e-3, 1.0, "s", "a latency (1 ns .. 1 s)")
LINK = Bound(1e8, 1e9, 1e13, 1e14, "bytes/s", "a link bandwidth (0.1 GB/s .. 100 TB/s)")
# on-chip: an H100's shared memory reads 33.4 TB/s (validate/results/experiments/nvidia-h100-onchip.json), a Jetson
# Xavier NX's 0.84 TB/s (6 SMs x 128 B x 1.1 GHz); L2 sits between DRAM and shared memory
ON_CHIP = Bound(1e10, 1e11, 3e14, 1e16, "bytes/s", "an on-chip (shared-memory or L2) bandwidth (10 GB/s .. 10 PB/s)")

HARDWARE: dict[str, Bound] = {
    "memory_bytes": Bound(1e9, 4e9, 2e12, 1e13, "bytes", "a device-memory capacity (1 GB .. 10 TB)"),
    "memory_bytes_per_s": BANDWIDTH,
    "l2_cache_bytes": Bound(1e4, 1e6, 2e9, 1e10, "bytes", "a last-level cache (10 KB .. 10 GB)"),
    "sm_count": Bound(1, 4, 2000, 100_000, "", "a count of SMs / compute units (1 .. 100,000)"),
    "fp32_dense_flops_per_s": PEAK,
    "tf32_dense_flops_per_s": PEAK,
    "bf16_dense_flops_per_s": PEAK,
    "fp16_dense_flops_per_s": PEAK,
    "fp8_dense_flops_per_s": PEAK,
    "int8_dense_ops_per_s": PEAK,
    "fp4_dense_flops_per_s": PEAK,
    "int4_dense_ops_per_s": PEAK,
    "int32_vector_ops_per_s": PEAK,
    "tdp_watts": Bound(1, 10, 5000, 100_000, "W", "a board power (1 W .. 100 kW)"),
    "sm_clock_hz": Bound(1e7, 3e8, 4e9, 1e10, "Hz", "an SM clock (10 MHz .. 10 GHz)"),
    "shared_memory_bytes_per_clock_per_sm": Bound(4, 32, 1024, 8192, "bytes", "shared-memory bytes per clock per SM"),
    "shared_memory_bytes_per_sm": Bound(1024, 16_384, 1 << 20, 1 << 24, "bytes", "shared memory per SM (1 KB+)"),
    "l2_bytes_per_s": ON_CHIP,
    "dram_latency_s": LATENCY,
}
LINK_FIELDS: dict[str, Bound] = {
    "bytes_per_s": LINK,
    "latency_s": LATENCY,
    "max_gpus": Bound(1, 1, 100_000, 1_000_000, "", "a GPU count (1 .. 1,000,000)"),
}
MEASURED: dict[str, Bound] = {
    "read_bytes_per_s": BANDWIDTH,
    "copy_bytes_per_s": BANDWIDTH,
    "stream_bytes_per_s": BANDWIDTH,
    "launch_latency_s": LATENCY,
    "memory_latency_s": LATENCY,
    "shared_memory_bytes_per_s": ON_CHIP,
    "l2_bytes_per_s": ON_CHIP,
    "int32_ops_per_s": PEAK,
    "fp32_flops_per_s": PEAK,
    "bytes_in_flight_per_sm": Bound(64, 1024, 1 << 20, 1 << 24, "bytes", "bytes in flight per SM"),
    "dram_latency_s": LATENCY,
    "cuda_context_bytes": Bound(1 << 20, 64 << 20, 4 << 30, 64 << 30, "bytes",
                                "a CUDA context's device memory (1 MiB .. 64 GiB)"),
    "burst_sm_clock_hz": Bound(1e8, 3e8, 4e9, 1e10, "Hz", "an SM clock (0.1 .. 10 GHz)"),
    "sustained_sm_clock_hz": Bound(1e8, 3e8, 4e9, 1e10, "Hz", "an SM clock (0.1 .. 10 GHz)"),
    "sustained_after_s": Bound(1e-4, 1e-3, 10.0, 100.0, "s", "a settling time (0.1 ms .. 100 s)"),
    "aten_kernel_s": LATENCY,
    "fused_kernel_s": LATENCY,
    "grouped_gemm_latency_s": LATENCY,
    "grouped_gemm_stream_bytes_per_s": BANDWIDTH,
    "routing_kernel_s": LATENCY,
    "gemm_latency_hidden_ratio": Bound(1.0, 1.05, 10.0, 1000.0, "", "a compute / stream time ratio (1 .. 1,000)"),
}
_WIDTH = Bound(1, 64, 1 << 16, 1 << 20, "", "a hidden width (1 .. 1,048,576)")
MODEL: dict[str, Bound] = {
    "num_layers": Bound(1, 1, 512, 10_000, "", "a decoder depth (1 .. 10,000 layers)"),
    "hidden_size": _WIDTH,
    "num_heads": Bound(1, 1, 1024, 1 << 14, "", "a head count (1 .. 16,384)"),
    "num_kv_heads": Bound(1, 1, 1024, 1 << 14, "", "a head count (1 .. 16,384)"),
    "head_dim": Bound(1, 16, 1024, 1 << 14, "", "a head dimension (1 .. 16,384)"),
    "intermediate_size": Bound(1, 64, 1 << 18, 1 << 22, "", "an MLP width (1 .. 4,194,304)"),
    "vocab_size": Bound(1, 256, 1 << 20, 1 << 24, "", "a vocabulary (1 .. 16,777,216 tokens)"),
    "max_position_embeddings": Bound(1, 512, 1 << 25, 1 << 30, "tokens", "a context length (1 .. 2^30 tokens)"),
    "norms_per_layer": Bound(1, 1, 8, 64, "", "norms per layer (1 .. 64)"),
}
ATTENTION = {"window": Bound(1, 16, 1 << 25, 1 << 30, "tokens", "a window (1 .. 2^30 tokens)")}
MLA_FIELDS = {k: _WIDTH for k in ("q_lora_rank", "kv_lora_rank", "qk_nope_head_dim", "qk_rope_head_dim",
                                   "v_head_dim")}
MOE = {
    "num_experts": Bound(1, 1, 4096, 1 << 16, "", "an expert count (1 .. 65,536)"),
    "num_shared_experts": Bound(0, 0, 64, 4096, "", "a shared-expert count (0 .. 4,096)"),
    "expert_intermediate_size": Bound(1, 16, 1 << 18, 1 << 22, "", "an expert width (1 .. 4,194,304)"),
}


def _fmt(value: float, unit: str) -> str:
    """`value` for an error message; an integer past a float's range (>= 2**1024) as its power of two, since
    formatting it as a float would raise OverflowError while the message is built."""
    if isinstance(value, int) and abs(value) >= 1 << 1024:
        text = f"{'-' if value < 0 else ''}about 2**{abs(value).bit_length() - 1}"
    else:
        text = f"{value:,}" if isinstance(value, int) and abs(value) < 10**15 else f"{value:.4g}"
    return f"{text} {unit}".strip()


def check(values: dict[str, object], table: dict[str, Bound]) -> list[str]:
    """Raise ValueError naming the first field outside its hard range; return warnings for soft ones."""
    warnings = []
    for name, bound in table.items():
        value = values.get(name)
        if value is None or isinstance(value, bool):
            continue
        if not bound.hard_lo <= value <= bound.hard_hi:
            raise ValueError(f"{name}: {_fmt(value, bound.unit)} is outside {bound.what}; a unit typo?")
        if not bound.soft_lo <= value <= bound.soft_hi:
            warnings.append(f"{name}: {_fmt(value, bound.unit)} is unusual for {bound.what.split(' (')[0]} "
                            f"(expected {_fmt(bound.soft_lo, bound.unit)} .. {_fmt(bound.soft_hi, bound.unit)})")
    return warnings
