"""The dense GEMM's fixed latency where compute covers it: hardware `gemm_latency_hidden_ratio` from the GEMMs alone.

python -m validate.engines.gemm_hidden [--hardware H200]      the fit, and every row under the old and the new law

The device's GEMM law has a fixed term, gemm_latency_s (alpha of t = alpha + weight bytes / bw over the skinny decode
GEMMs, M <= 64, where cuBLAS splits K and runs a reduce kernel after the GEMM). Priced on top of max(compute, stream)
it is paid by every GEMM. Timed alone, a compute-bound GEMM pays none of it: SGLang run 4's qkv / o_proj at T 1,024 ..
8,192 (micro-extend.json) run at 2 M N K / gemm_shape_flops_per_s with an intercept of about 0, and vLLM's micro4
(micro4.json, the same cuBLAS through F.linear) at M 512 .. 2,048 the same, 12-26 % under the old law. Near the ridge
(compute about the stream law alpha + bytes / bw) the rows pay it whole. The law (costmodel.device.gemm_time):

    m = alpha + bytes / bw,   c = 2 M N K / rate
    t = max(m, c + alpha w),  w = min(1, max(0, (k m - c) / ((k - 1) m)))

w = 1 up to c = m (the old law: alpha + max(c, bytes / bw)), 0 from c = k m on (compute alone). k is fitted here by
relative least squares (a grid of 0.01) over every row alone whose compute exceeds its bytes / bw (where the two laws
differ), each less a one-call replay's fixed cost (derive.graph_replay of micro4, as every alone row since micro4), at
the device's burst rate gemm_shape_flops_per_s (the rows are bursts). No served run and no engine step is used.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import numpy as np

from roofline.catalogue.store import load_hardware
from roofline.costmodel.device import gemm_time
from validate.engines.derive import graph_replay

ROOT = Path(__file__).resolve().parents[1] / "results" / "engines"
MICRO4 = ROOT / "nvidia-h200-vllm-2026-11-29-micro4" / "micro4.json"
RUN4 = ROOT / "nvidia-h200-sglang-2026-11-30-run4" / "micro-extend.json"
GRID = np.arange(1.01, 4.0 + 1e-9, 0.01)


def rows() -> list[dict]:
    """Every GEMM alone (micro4's and run 4's, bf16): source, op, M, N, K, FLOPs, bytes (weights, input, output) and
    the time less the replay's fixed cost."""
    micro4, run4 = json.loads(MICRO4.read_text()), json.loads(RUN4.read_text())
    replay, _ = graph_replay(micro4)
    out = [{"source": f"micro4 {r['model']}", "op": r["op"], "M": r["M"], "N": r["N"], "K": r["K"],
            "flops": r["flops"], "s": r["s"] - replay} for r in micro4["gemm"]]
    out += [{"source": "run4 Qwen3-30B-A3B", "op": r["op"], "M": r["T"], "N": r["N"], "K": r["K"],
             "flops": r["flops"], "s": r["s"] - replay} for r in run4["gemm"]]
    for r in out:
        r["bytes"] = 2 * (r["M"] * r["K"] + r["K"] * r["N"] + r["M"] * r["N"])
    return out


def laws(hardware: str) -> tuple[float, float, float]:
    """(alpha_s, stream bytes/s, burst FLOP/s) of the device's dense GEMM law."""
    m = load_hardware(hardware).measured
    return m.gemm_latency_s, m.gemm_stream_bytes_per_s, m.gemm_shape_flops_per_s["bf16"]


def predicted(r: dict, alpha: float, bw: float, rate: float, ratio: float | None) -> float:
    """A row's time under the law with `ratio` (None: the old law, alpha + max(compute, stream))."""
    c, b = r["flops"] / rate, r["bytes"] / bw
    return alpha + max(c, b) if ratio is None else gemm_time(c, b, alpha, ratio, max, min)


def fit(hardware: str = "H200") -> tuple[float, list[dict]]:
    """(k, the rows it is fitted over): the grid's k of least sum of squared relative errors."""
    alpha, bw, rate = laws(hardware)
    used = [r for r in rows() if r["flops"] / rate > r["bytes"] / bw]
    cost = [sum((predicted(r, alpha, bw, rate, k) / r["s"] - 1) ** 2 for r in used) for k in GRID]
    return round(float(GRID[int(np.argmin(cost))]), 2), used


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--hardware", default="H200")
    a = p.parse_args()
    k, used = fit(a.hardware)
    alpha, bw, rate = laws(a.hardware)
    print(f"gemm_latency_hidden_ratio: {k}   ({len(used)} rows with compute > bytes / bw; alpha {alpha * 1e6:.3f} us, "
          f"{bw / 1e12:.3f} TB/s, {rate / 1e12:.1f} TFLOP/s)")
    print("source              op         M      N      K  compute/stream  alone us  old law err  new law err")
    for r in rows():
        old, new = (predicted(r, alpha, bw, rate, x) for x in (None, k))
        ratio = r["flops"] / rate / (alpha + r["bytes"] / bw)
        print(f"{r['source'][:19]:19s} {r['op']:9s} {r['M']:5d} {r['N']:6d} {r['K']:6d} {ratio:15.2f} "
              f"{r['s'] * 1e6:9.2f} {(old / r['s'] - 1) * 100:+10.1f} % {(new / r['s'] - 1) * 100:+10.1f} %")
    for name, x in (("old", None), ("new", k)):
        err = np.array([predicted(r, alpha, bw, rate, x) / r["s"] - 1 for r in used])
        print(f"{name} law over the fitted rows: median APE {np.median(np.abs(err)) * 100:.1f} %, "
              f"rms {np.sqrt(np.mean(err ** 2)) * 100:.1f} %")


if __name__ == "__main__":
    main()
