"""python -m validate.clients.calibrate --results FILE --hardware-file FILE.yaml

The decoder clients' microbenchmarks (validate/clients/micro.py) -> the hardware spec's measured section
(its other fields kept; validate.calibrate writes those from the kernel families):

  kernel_overhead_s             per-kernel time of the 1 x 4096 add chain in a CUDA graph
  gemm_latency_s,               alpha, 1/beta of time = alpha + weight bytes / bw, relative least squares over
  gemm_stream_bytes_per_s       every GEMM case at M <= 64 (the decode shapes, memory-bound)
  gemm_shape_flops_per_s        median 2MNK / time over the GEMM cases at M >= 2048 (bf16)
  attention_flops_per_s         per head dim: FLOPs / time of the causal flash case at the longest prompt
  decode_attention_latency_s,   alpha, 1/beta of time = alpha + KV bytes / bw over the one-query SDPA cases
  decode_attention_bytes_per_s
  cuda_context_bytes            total - free right after CUDA init, nothing allocated: the `cuda_context` row, or
                                (runs before it existed) env memory_bytes - env free_at_start_bytes, the same
                                figure taken by `python -m validate.clients` before its first part
Pure Python (no torch): runs where the results are committed.
"""

from __future__ import annotations

import argparse
import statistics
import sys
from pathlib import Path

SKINNY_TOKENS = 64
LARGE_TOKENS = 2048


def _rows(results: dict, kind: str) -> list[dict]:
    return [r for r in results["cases"] if r.get("family") == "client_ceilings" and r["params"].get("kind") == kind
            and r.get("ms")]


def latency_bandwidth(sizes: list[float], times: list[float]) -> tuple[float, float]:
    """(alpha_s, bytes_per_s) minimizing sum(((alpha + S/bw) - t) / t)^2 (linear in alpha and 1/bw)."""
    import numpy as np

    t = np.asarray(times, dtype=float)
    design = np.stack([1 / t, np.asarray(sizes, dtype=float) / t], axis=1)
    (alpha, inverse), *_ = np.linalg.lstsq(design, np.ones_like(t), rcond=None)
    if alpha <= 0 or inverse <= 0:
        raise ValueError(f"calibrate: latency-bandwidth fit is not physical (alpha {alpha}, 1/bw {inverse})")
    return float(alpha), float(1 / inverse)


def cuda_context_bytes(results: dict) -> int | None:
    """The CUDA context's device bytes: the `cuda_context` microbenchmark row, else total - free at start as the
    run's env recorded them (taken right after CUDA init, before any allocation); None when neither is there."""
    row = next((r for r in results["cases"] if r.get("family") == "client_ceilings"
                and r["params"].get("kind") == "cuda_context"), None)
    if row is not None:
        return int(row["bytes"])
    env = results.get("env", {})
    if env.get("free_at_start_bytes") and env.get("memory_bytes"):
        return int(env["memory_bytes"]) - int(env["free_at_start_bytes"])
    return None


def client_ceilings(results: dict, source: str) -> dict:
    """The measured fields above, from a clients results file."""
    chain = [r for r in _rows(results, "kernel") if r["params"]["tokens"] == 1]
    gemm = _rows(results, "gemm")
    skinny = [r for r in gemm if r["params"]["m"] <= SKINNY_TOKENS]
    weights = [2 * r["params"]["n"] * r["params"]["k"] for r in skinny]
    g_alpha, g_bw = latency_bandwidth(weights, [r["ms"] * 1e-3 for r in skinny])
    large = [r["flops"] / (r["ms"] * 1e-3) for r in gemm if r["params"]["m"] >= LARGE_TOKENS]
    flash: dict[int, dict] = {}
    for r in _rows(results, "flash"):
        d = r["params"]["head_dim"]
        if d not in flash or r["params"]["prompt"] > flash[d]["params"]["prompt"]:
            flash[d] = r
    dec = _rows(results, "decode_attention")
    d_alpha, d_bw = latency_bandwidth([r["bytes"] for r in dec], [r["ms"] * 1e-3 for r in dec])
    sig = lambda x: float(f"{x:.4g}")  # noqa: E731
    return {"kernel_overhead_s": sig(chain[0]["ms"] * 1e-3), "gemm_latency_s": sig(g_alpha),
            "gemm_stream_bytes_per_s": sig(g_bw), "gemm_shape_flops_per_s": {"bf16": sig(statistics.median(large))},
            "attention_flops_per_s": {d: sig(r["flops"] / (r["ms"] * 1e-3)) for d, r in sorted(flash.items())},
            "decode_attention_latency_s": sig(d_alpha), "decode_attention_bytes_per_s": sig(d_bw),
            **({"cuda_context_bytes": context} if (context := cuda_context_bytes(results)) else {}),
            "client_source": source}


def calibrate(results_path: Path, hardware_file: Path) -> dict:
    """Merge the client ceilings into `hardware_file`'s measured section (validated before it is written)."""
    import json

    import yaml

    from roofline.catalogue.loading import parse_text, validate
    from roofline.specs import Hardware
    from roofline.validation.calibrate import replace_measured_block

    results = json.loads(Path(results_path).read_text())
    text = Path(hardware_file).read_text()
    current = yaml.safe_load(text).get("measured")
    if not current:
        raise SystemExit(f"{hardware_file}: measured: calibrate the kernel families first (python -m validate "
                         "calibrate)")
    section = {**current, **client_ceilings(results, str(results_path))}
    note = (f"Measured by `python -m validate calibrate` from {current['source']} and `python -m validate.clients"
            f".calibrate` from {results_path}; datasheet figures above stand.")
    new_text = replace_measured_block(text, section, note)
    validate(Hardware, parse_text(new_text, str(hardware_file)), str(hardware_file))
    Path(hardware_file).write_text(new_text)
    return section


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="validate.clients.calibrate")
    p.add_argument("--results", type=Path, required=True)
    p.add_argument("--hardware-file", type=Path, required=True)
    args = p.parse_args(argv)
    section = calibrate(args.results, args.hardware_file)
    keys = ("kernel_overhead_s", "gemm_latency_s", "gemm_stream_bytes_per_s", "gemm_shape_flops_per_s",
            "attention_flops_per_s", "decode_attention_latency_s", "decode_attention_bytes_per_s", "cuda_context_bytes")
    print("\n".join(f"{k}: {section[k]}" for k in keys if k in section))
    return 0


if __name__ == "__main__":
    sys.exit(main())
