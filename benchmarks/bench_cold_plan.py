"""Cold plans (not a test): the thread CPU time of planning a model, or a tensor-parallel degree, that neither the disk
cache nor this process has met — the symbolic build, printing and compile of every method's kernels.

    python benchmarks/bench_cold_plan.py [--model Llama-3.1-70B] [--tp 2] [--new-tp 4] [--repeats 3]
                                         [--methods dashboard|SPEC,SPEC...] [--json OUT]
    python benchmarks/bench_cold_plan.py --suite [--repeats 3] [--json OUT]

Each repetition is a fresh process with an empty compile cache (ROOFLINE_CACHE_DIR): it first plans two methods of
Llama-3.2-1B (imports, sympy's own caches: a server that has already planned something), times methods.applies over
the presets (what `roofline plan` does to pick them), then planner.plan_method per preset on `--model` at `--tp`
("new model"), then on the same model at `--new-tp` ("new tp"), in time.thread_time() (CPU of this thread: steadier
than wall time on a shared machine). Prints per method the median over repetitions and the total; the dashboard's
Plan page calls plan_method per method, the same path.

--suite: the three figures issue 16 names, each in its own fresh process and empty cache folder, thread CPU and
wall seconds: "cold plan" (`roofline plan --json`, the default scenario: Llama-3.1-8B, every preset, H100-SXM, after
the imports), "unseen model" (then `roofline plan --model Qwen3-8B --json` in the same process: a model of the same
architecture with other dimensions), and "dashboard" (the Plan page's computation on a model change: after a warm
plan of Llama-3.2-1B, dashboard.appdata.method_result per DEFAULT_METHODS and plan_dict, for Llama-3.1-70B at tp 2;
then the same at tp 4 ("dashboard new tp") and on H200 ("dashboard new GPU")).
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


def _timed(fn) -> dict[str, float]:
    start, wall = time.thread_time(), time.perf_counter()
    fn()
    return {"cpu": time.thread_time() - start, "wall": time.perf_counter() - wall}


def suite_run(part: str) -> dict[str, dict[str, float]]:
    """One part of --suite in this process (the cache dir set by the caller): {label: {"cpu", "wall"}}."""
    import contextlib
    import io

    from roofline.cli import main as cli

    def plan(*argv: str) -> None:
        with contextlib.redirect_stdout(io.StringIO()):
            assert cli(["plan", *argv, "--json"]) == 0

    if part == "cli":
        return {"cold plan": _timed(plan), "unseen model (Qwen3-8B)": _timed(lambda: plan("--model", "Qwen3-8B"))}
    from roofline.catalogue import load_hardware, load_model
    from roofline.dashboard.appdata import DEFAULT_METHODS, method_result, plan_dict

    warm, model, h100, h200 = (load_model(WARM[0]), load_model("Llama-3.1-70B"), load_hardware("H100-SXM"),
                               load_hardware("H200"))
    for spec in WARM[1]:
        method_result(warm, h100, workload(1), spec)

    def page(hardware, tp: int) -> None:
        plan_dict(model, hardware, workload(tp), [method_result(model, hardware, workload(tp), s)
                                                  for s in DEFAULT_METHODS])

    return {"dashboard new model (Llama-3.1-70B tp 2)": _timed(lambda: page(h100, 2)),
            "dashboard new tp (tp 4)": _timed(lambda: page(h100, 4)),
            "dashboard new GPU (H200 tp 4)": _timed(lambda: page(h200, 4))}


def workload(tp: int):
    from roofline.specs import Workload

    return Workload(batch=16, context_tokens=32768, generated_tokens=1024, tp=tp)


def suite(repeats: int, json_out: str | None) -> int:
    """--suite: each part in `repeats` fresh processes with empty cache folders; medians printed."""
    runs: list[dict] = []
    for _ in range(repeats):
        run: dict = {}
        for part in ("cli", "dashboard"):
            with tempfile.TemporaryDirectory(prefix="roofline-cold-") as cache:
                done = subprocess.run([sys.executable, __file__, "--suite-part", part],
                                      env={**os.environ, "ROOFLINE_CACHE_DIR": cache}, capture_output=True,
                                      text=True, check=True)
                run.update(json.loads(done.stdout.strip().splitlines()[-1]))
        runs.append(run)
    print(f"seconds, median of {repeats} (thread CPU / wall; runs' CPU)")
    for label in runs[0]:
        cpu = [r[label]["cpu"] for r in runs]
        print(f"  {label:42s} {statistics.median(cpu):7.3f} / {statistics.median(r[label]['wall'] for r in runs):7.3f}"
              f"   ({', '.join(f'{c:.3f}' for c in cpu)})")
    if json_out:
        with open(json_out, "w") as out:
            json.dump(runs, out, indent=1)
    return 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="Llama-3.1-70B")
    parser.add_argument("--tp", type=int, default=2)
    parser.add_argument("--new-tp", type=int, default=4)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--methods", help="comma-separated SPECs (default: every preset); 'dashboard': the Plan "
                        "page's default methods (roofline.dashboard.appdata.DEFAULT_METHODS)")
    parser.add_argument("--json", help="write the per-run figures here")
    parser.add_argument("--suite", action="store_true", help="issue 16's three figures (see the docstring)")
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--suite-part", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.suite_part:
        print(json.dumps(suite_run(args.suite_part)))
        return 0
    if args.suite:
        return suite(args.repeats, args.json)
    specs = None
    if args.methods == "dashboard":
        from roofline.dashboard.appdata import DEFAULT_METHODS

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
