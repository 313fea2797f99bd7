"""The warm full plan of one configuration in CPU time (not a test): MethodPlanner.point for each method on the
default scenario, best of 7 runs of 400 points each, thread CPU time (less sensitive than wall time to other
processes on a shared machine). Used for the A/B of issue 11: run it with PYTHONPATH pointing at two checkouts.

    python benchmarks/bench_warm_point.py
"""

from __future__ import annotations

import time

METHODS = ("bf16", "kivi-2", "innerq-base", "xquant-2", "aquakv-2", "zack-50")


def main() -> None:
    from roofline.catalogue import load_hardware, load_model
    from roofline.methods import parse_method
    from roofline.planner.plan import method_planner
    from roofline.specs import Workload

    model, hw = load_model("Llama-3.1-8B"), load_hardware("H100-SXM")
    w = Workload(batch=16, context_tokens=32768, generated_tokens=1024)
    for spec in METHODS:
        planner = method_planner(model, hw, w, parse_method(spec))
        planner.point(w)
        best = float("inf")
        for _ in range(7):
            start = time.thread_time()
            for _ in range(400):
                planner.point(w)
            best = min(best, (time.thread_time() - start) / 400)
        print(f"{spec:12s} {best * 1e3:.3f} ms cpu", end="; ")
    print()


if __name__ == "__main__":
    main()
