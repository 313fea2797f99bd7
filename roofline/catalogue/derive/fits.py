"""The planner's ceilings from rows of measured kernel times, by the definitions of the project's calibration.

Each function takes plain (shape, seconds) data, so the definitions are testable without the database:

    relative_fit          (alpha_s, bytes_per_s) of time = alpha + bytes / bw minimizing sum(((alpha + S/bw) - t)/t)^2,
                          linear least squares in (alpha, 1/bw) after dividing each equation by its time: the fit of
                          roofline/validation/calibrate.py latency_bandwidth_fit and validate/clients/calibrate.py
                          latency_bandwidth (memory_latency_s / stream_bytes_per_s, gemm_latency_s /
                          gemm_stream_bytes_per_s, decode_attention_*, grouped_gemm_*)
    largest_rate          median bytes/s of the LARGEST_SIZES largest sizes (calibrate.stream_bandwidth:
                          read_bytes_per_s)
    causal_flash_flops    4 H D P(P+1)/2: QK and PV over the causal pairs (validate/clients/micro.py flash_prefill)
    decode_kv_bytes       2 B Hkv L D x 2: K and V in bf16 (micro.py decode_attention)
    bus_bytes_per_s       2 (n-1)/n S / t: NCCL's all-reduce bus bandwidth (nccl-tests doc/PERFORMANCE.md, the
                          definition validate.clients.tpfit uses for scale_up.bytes_per_s)
"""

from __future__ import annotations

import statistics
from collections.abc import Sequence

LARGEST_SIZES = 3  # roofline.validation.calibrate.LARGEST_SIZES


def relative_fit(sizes: Sequence[float], times_s: Sequence[float]) -> tuple[float, float]:
    """(alpha_s, bytes_per_s) of time = alpha + size / bw by relative least squares (see the module docstring);
    ValueError with fewer than two sizes or a fit that is not physical (alpha or 1/bw <= 0)."""
    import numpy as np

    if len(sizes) != len(times_s) or len(set(sizes)) < 2:
        raise ValueError(f"relative_fit: needs at least two distinct sizes, got {len(set(sizes))}")
    t = np.asarray(times_s, dtype=float)
    design = np.stack([1 / t, np.asarray(sizes, dtype=float) / t], axis=1)
    (alpha, inverse), *_ = np.linalg.lstsq(design, np.ones_like(t), rcond=None)
    if alpha <= 0 or inverse <= 0:
        raise ValueError(f"relative_fit: not physical (alpha {alpha:g} s, 1/bw {inverse:g} s/byte)")
    return float(alpha), float(1 / inverse)


def largest_rate(curve: Sequence[tuple[int, float]]) -> float:
    """Median rate of the LARGEST_SIZES largest sizes of a (bytes, bytes_per_s) curve."""
    ordered = sorted(curve)
    return statistics.median(rate for _, rate in ordered[-LARGEST_SIZES:])


def causal_flash_flops(heads: int, head_dim: int, prompt: int, batch: int = 1) -> int:
    """FLOPs of causal flash attention over one prompt: 4 H D P(P+1)/2 per sequence."""
    return batch * 4 * heads * head_dim * (prompt * (prompt + 1) // 2)


def decode_kv_bytes(batch: int, kv_heads: int, context: int, head_dim: int, bytes_per_element: int = 2) -> int:
    """KV-cache bytes one decode step of attention reads: K and V of every cached token."""
    return 2 * batch * kv_heads * context * head_dim * bytes_per_element


def bus_bytes_per_s(message_bytes: int, gpus: int, seconds: float) -> float:
    """NCCL all-reduce bus bandwidth of one call: 2 (n-1)/n S / t."""
    return 2 * (gpus - 1) / gpus * message_bytes / seconds


def sig(x: float) -> float:
    """Four significant digits, as the calibration writes its figures."""
    return float(f"{x:.4g}")
