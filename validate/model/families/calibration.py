"""Family "ceilings" (the microbenchmarks that calibrate a hardware spec): work and datasheet prediction.

  read    stream a buffer of `bytes` fp32 and reduce it: bytes = size, flops = size / 4 (one add a value)
  copy    copy a buffer: bytes = read + written = 2 x size, no FLOPs
  gemm    M = N = K = size: A and B at the input width, C in bf16; flops = 2 M N K
  launch  an empty kernel: no bytes, no FLOPs
`predict` gives the datasheet figure (bytes / peak bandwidth, flops / dense peak), so compare reports the
achieved fraction of peak; calibrate turns the measurements into Hardware.measured.
"""

from __future__ import annotations

from roofline.validation.results_file import Case

NAME = "ceilings"


def stream_work(kind: str, size: int) -> tuple[int, int]:
    """(bytes, flops) of streaming `size` bytes of fp32: read moves size and adds size/4 elements;
    copy moves 2 x size (read + written) and computes nothing."""
    return (size, size // 4) if kind == "read" else (2 * size, 0)


def gemm_work(size: int, dtype: str) -> tuple[int, int]:
    """(bytes, flops) of an M = N = K = size GEMM: A and B at the input width, C in bf16; 2 M N K."""
    width = 2 if dtype == "bf16" else 1
    return 2 * size * size * width + 2 * size * size, 2 * size ** 3


def work(params: dict) -> dict:
    """Bytes and FLOPs of a ceilings case (stream_work, gemm_work; a launch moves and computes nothing)."""
    if params["kind"] in ("read", "copy"):
        moved, flops = stream_work(params["kind"], params["bytes"])
    elif params["kind"] == "gemm":
        moved, flops = gemm_work(params["size"], params["dtype"])
    else:
        moved, flops = 0, 0
    return {"bytes": moved, "flops": flops}


def predict(case: Case, hardware) -> dict:
    """Datasheet figures only (never the measured section): bytes / memory_bytes_per_s for read and
    copy, 2 M N K / dense peak of the dtype for gemm, none for a launch."""
    p = case.params
    if p["kind"] in ("read", "copy"):
        moved, flops = stream_work(p["kind"], p["bytes"])
        return {"time_s": moved / hardware.memory_bytes_per_s, "bytes": moved, "flops": flops, "bound": "memory"}
    if p["kind"] == "gemm":
        moved, flops = gemm_work(p["size"], p["dtype"])
        time = flops / hardware.peak_flops_per_s(p["dtype"]) if hardware.has_dtype(p["dtype"]) else None
        return {"time_s": time, "bytes": moved, "flops": flops, "bound": "compute"}
    return {"time_s": None, "bytes": 0, "flops": 0, "bound": "latency"}
