"""Speed of the planner itself (not a test): warm plans, the vectorized grid, and CLI wall times.

    python benchmarks/bench_planner.py [--cli]

Prints: a warm full plan of one configuration (MethodPlanner.point, compiled kernels held) per method, the
vectorized grid in plans per second, and with --cli the wall time of `roofline plan` (all presets) and of one
method in fresh processes, with an empty and with a warm compile cache (ROOFLINE_CACHE_DIR).
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time

import numpy as np


def warm_points(specs: list[str], repeats: int = 300) -> dict[str, float]:
    from roofline.catalogue import load_hardware, load_model
    from roofline.methods import parse_method
    from roofline.planner.plan import method_planner
    from roofline.specs import Workload

    model, hw = load_model("Llama-3.1-8B"), load_hardware("H100-SXM")
    w = Workload(batch=16, context_tokens=32768, generated_tokens=1024)
    out = {}
    for spec in specs:
        planner = method_planner(model, hw, w, parse_method(spec))
        planner.point(w)
        start = time.perf_counter()
        for _ in range(repeats):
            planner.point(w)
        out[spec] = (time.perf_counter() - start) / repeats
    return out


def grid_rate(spec: str = "kivi-2", points: int = 1_000_000) -> float:
    from roofline.catalogue import load_hardware, load_model
    from roofline.methods import parse_method
    from roofline.planner.plan import method_planner
    from roofline.specs import Workload

    model, hw = load_model("Llama-3.1-8B"), load_hardware("H100-SXM")
    w = Workload(batch=16, context_tokens=32768)
    planner = method_planner(model, hw, w, parse_method(spec), flavour="vector")
    rng = np.random.default_rng(0)
    batch = rng.integers(1, 257, points)
    context = rng.integers(1, 131_073, points)
    planner.grid(batch[:10], context[:10])
    start = time.perf_counter()
    planner.grid(batch, context)
    return points / (time.perf_counter() - start)


def cli_seconds(argv: list[str], cache: str) -> float:
    env = {**os.environ, "ROOFLINE_CACHE_DIR": cache}
    start = time.perf_counter()
    subprocess.run([sys.executable, "-m", "roofline.cli", *argv], env=env, check=True, capture_output=True)
    return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--cli", action="store_true", help="also time `roofline plan` in fresh processes")
    args = parser.parse_args()
    for spec, s in warm_points(["bf16", "kivi-2", "innerq-base", "xquant-2", "aquakv-2", "zack-50"]).items():
        print(f"warm full plan   {spec:12s} {s * 1e3:8.3f} ms")
    print(f"vectorized grid  kivi-2       {grid_rate():,.0f} plans/s")
    if args.cli:
        with tempfile.TemporaryDirectory() as cache:
            print(f"roofline plan (all presets), empty cache   {cli_seconds(['plan'], cache):6.2f} s")
            print(f"roofline plan (all presets), warm cache    {cli_seconds(['plan'], cache):6.2f} s")
            one = ["plan", "--method", "kivi-2", "--batch", "7"]
            print(f"roofline plan --method kivi-2, warm cache  {cli_seconds(one, cache):6.2f} s")


if __name__ == "__main__":
    main()
