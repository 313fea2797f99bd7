"""Cold plans (not a test): the thread CPU time of planning a model, or a tensor-parallel degree, that neither the disk
cache nor this process has met — the symbolic build, printing and compile of every method's kernels.

    python benchmarks/bench_cold_plan.py [--model Llama-3.1-70B] [--tp 2] [--new-tp 4] [--repeats 3]
                                         [--methods dashboard|SPEC,SPEC...] [--json OUT]

Each repetition is a fresh process with an empty compile cache (ROOFLINE_CACHE_DIR): it first plans two methods of
Llama-3.2-1B (imports, sympy's own caches: a server that has already planned something), times methods.applies over
the presets (what `roofline plan` does to pick them), then planner.plan_method per preset on `--model` at `--tp`
("new model"), then on the same model at `--new-tp` ("new tp"), in time.thread_time() (CPU of this thread: steadier
than wall time on a shared machine). Prints per method the median over repetitions and the total; the dashboard's
Plan page calls plan_method per method, the same path.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

WARM = ("Llama-3.2-1B", ("kivi-2", "bf16"))


def one_run(model_name: str, tp: int, new_tp: int, specs: list[str] | None = None) -> dict[str, dict[str, float]]:
    """{"new model": {method: s}, "new tp": {method: s}} in this process (the cache dir set by the caller)."""
    from roofline.catalogue import load_hardware, load_model
    from roofline.methods import applies, parse_method, presets
    from roofline.planner import plan_method
    from roofline.planner.plan import DEFAULT_SCENARIO
    from roofline.specs import Workload

    hw = load_hardware(DEFAULT_SCENARIO["hardware"])

    def workload(tp: int) -> Workload:
        return Workload(batch=16, context_tokens=32768, generated_tokens=1024, tp=tp)

    warm = load_model(WARM[0])
    for spec in WARM[1]:
        plan_method(warm, hw, workload(1), parse_method(spec))
    model = load_model(model_name)
    start = time.thread_time()
    methods = [m for m in map(parse_method, specs or presets()) if applies(m, model) is None]  # as `roofline plan`
    out: dict[str, dict[str, float]] = {"applies": {"all presets": time.thread_time() - start}}
    for label, degree in (("new model", tp), ("new tp", new_tp)):
        times = out[label] = {}
        for method in methods:
            start = time.thread_time()
            plan_method(model, hw, workload(degree), method)
            times[method.label()] = time.thread_time() - start
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="Llama-3.1-70B")
    parser.add_argument("--tp", type=int, default=2)
    parser.add_argument("--new-tp", type=int, default=4)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--methods", help="comma-separated SPECs (default: every preset); 'dashboard': the Plan "
                        "page's default methods (roofline.report.dashboard.DEFAULT_METHODS)")
    parser.add_argument("--json", help="write the per-run figures here")
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    specs = None
    if args.methods == "dashboard":
        from roofline.report.dashboard import DEFAULT_METHODS

        specs = list(DEFAULT_METHODS)
    elif args.methods:
        specs = args.methods.split(",")
    if args.child:
        print(json.dumps(one_run(args.model, args.tp, args.new_tp, specs)))
        return 0
    runs = []
    for _ in range(args.repeats):
        with tempfile.TemporaryDirectory(prefix="roofline-cold-") as cache:
            argv = [sys.executable, __file__, "--child", "--model", args.model, "--tp", str(args.tp),
                    "--new-tp", str(args.new_tp), *(["--methods", ",".join(specs)] if specs else [])]
            done = subprocess.run(argv, env={**os.environ, "ROOFLINE_CACHE_DIR": cache}, capture_output=True,
                                  text=True, check=True)
            runs.append(json.loads(done.stdout.strip().splitlines()[-1]))
    for label in runs[0]:
        where = {"new model": f"tp {args.tp}", "new tp": f"tp {args.new_tp}", "applies": "methods.applies"}[label]
        print(f"{label} ({args.model}, {where}), thread CPU ms, median of {len(runs)}:")
        for method in runs[0][label]:
            print(f"  {method:16s} {1e3 * statistics.median(r[label][method] for r in runs):8.1f}")
        totals = [sum(r[label].values()) for r in runs]
        print(f"  {'total':16s} {1e3 * statistics.median(totals):8.1f}   (runs: "
              + ", ".join(f"{1e3 * t:.0f}" for t in totals) + ")")
    if args.json:
        with open(args.json, "w") as out:
            json.dump(runs, out, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
