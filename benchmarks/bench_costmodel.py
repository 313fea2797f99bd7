"""Speed of the simulator itself: building a model's expressions, and full-model decode-step evaluations
per second over a vectorized (batch, context, bits) grid. Not a test; run `python benchmarks/bench_costmodel.py`.

Target (issue 3): >= 1,000,000 evaluations/s on a 2-core machine; building all expressions < 1 s.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import time

import numpy as np


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="Llama-3.1-8B")
    parser.add_argument("--hardware", default="H100-SXM")
    parser.add_argument("--method", default="kivi-2")
    parser.add_argument("--points", type=int, default=2_000_000, help="grid points per evaluation")
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()

    t0 = time.perf_counter()
    from roofline.catalogue import load_hardware, load_model
    from roofline.costmodel import Roofline, build_graph
    from roofline.methods import parse_method
    from roofline.units import BITS, B, L, P
    import_s = time.perf_counter() - t0

    model, hardware = load_model(args.model), load_hardware(args.hardware)
    method = parse_method(args.method)
    t0 = time.perf_counter()
    decode = build_graph(model, method, "decode", bits=BITS)
    prefill = build_graph(model, method, "prefill", bits=BITS)
    roof = Roofline(hardware)
    decode_t, prefill_t = roof.time(decode), roof.time(prefill)
    kv = decode.cache.resident_bytes
    build_s = time.perf_counter() - t0

    t0 = time.perf_counter()
    f = roof.compile(decode, [B, L, BITS])
    compile_s = time.perf_counter() - t0

    rng = np.random.default_rng(0)
    n = args.points
    batch = rng.integers(1, 257, n).astype(np.float64)
    context = rng.integers(1, 131_073, n).astype(np.float64)
    bits = rng.choice([2.0, 3.0, 4.0, 8.0], n)
    f(batch[:10], context[:10], bits[:10])  # warm
    times = []
    for _ in range(args.repeat):
        t0 = time.perf_counter()
        out = f(batch, context, bits)
        times.append(time.perf_counter() - t0)
    assert out.shape == (n,) and np.all(np.isfinite(out)) and np.all(out > 0)
    best = min(times)
    report = {
        "model": args.model, "hardware": args.hardware, "method": args.method,
        "build_expressions_s": round(build_s, 3), "lambdify_s": round(compile_s, 3), "import_s": round(import_s, 3),
        "points": n, "eval_best_s": round(best, 4), "eval_median_s": round(sorted(times)[len(times) // 2], 4),
        "evaluations_per_s": round(n / best), "ops_in_decode_graph": len(decode.ops),
        "free_symbols": sorted(map(str, decode_t.free_symbols | prefill_t.free_symbols | kv.free_symbols - {P})),
        "cpu": platform.processor() or platform.machine(), "cores": os.cpu_count(),
    }
    print(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()
