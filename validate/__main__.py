"""python -m validate bench | compare | calibrate  (bad input: one line on stderr, exit status 2).

  bench     [--family F ...] [--quick] [--out FILE]     measure on this GPU -> validate/results/<device>.json
            [--cases DRAW.json]                        (<device>-quick.json with --quick; --cases: exactly the
                                                       cases of a validate.fresh draw)
  compare   [--results FILE] [--hardware NAME|PATH] [--json]
                                                       predicted vs measured; without --results, every
                                                       committed file in validate/results/
  calibrate --results FILE --hardware-file FILE.yaml   write the measured ceilings into the spec's
                                                       `measured:` section
  summarize [--results FILE] [--check]                 write the comparison the planner ships
                                                       (roofline/validation/kernel_summaries/; --check: exit 1
                                                       when a committed summary is stale)
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from roofline.errors import RooflineError
from roofline.validation.results_file import ResultsError

RESULTS_DIR = Path(__file__).resolve().parent / "results"  # the committed measurements of this checkout


class _Parser(argparse.ArgumentParser):
    def error(self, message: str):
        command = self.prog.removeprefix("validate").strip()
        raise ResultsError(f"{command}: {message}" if command else message)


def _parser() -> argparse.ArgumentParser:
    p = _Parser(prog="validate", description="Measure kernels, compare with the roofline, calibrate specs.")
    sub = p.add_subparsers(dest="command", required=True, parser_class=_Parser)
    b = sub.add_parser("bench", help="measure every case on this GPU")
    b.add_argument("--family", action="append", help="family to run (repeatable; default: all)")
    b.add_argument("--quick", action="store_true", help="a few cases per family")
    b.add_argument("--out", type=Path, help="results file (default validate/results/<device>[-quick].json)")
    b.add_argument("--cases", type=Path, help="run exactly these cases (a draw file of validate.fresh)")
    b.add_argument("--probe-clock", action="store_true",
                   help="also read each case's effective SM clock inside the GPU (validate.common.clocks)")
    c = sub.add_parser("compare", help="predicted vs measured for a results file")
    c.add_argument("--results", type=Path, help="results file (default: every file in validate/results)")
    c.add_argument("--hardware", help="catalogue name or spec path (default: from the device name)")
    c.add_argument("--json", action="store_true", help="machine-readable output")
    k = sub.add_parser("calibrate", help="write measured ceilings into a hardware YAML")
    k.add_argument("--results", type=Path, required=True, help="results file with ceilings cases")
    k.add_argument("--hardware-file", type=Path, required=True, help="hardware YAML to update")
    s = sub.add_parser("summarize", help="write the kernel summaries the planner ships (validate.model.summary)")
    s.add_argument("--results", type=Path, help="results file (default: every file in validate/results)")
    s.add_argument("--check", action="store_true", help="only compare; exit 1 when a committed summary is stale")
    return p


def _bench(args) -> int:
    from validate.model.families import FAMILIES as PREDICTED

    names = args.family or sorted(PREDICTED)
    cases = None
    if args.cases is not None:
        from validate.fresh import load_cases

        cases = load_cases(args.cases)
        names = sorted({c.family for c in cases})
    for name in names:
        if name not in PREDICTED:
            raise ResultsError(f"family: unknown {name!r}; valid: {', '.join(sorted(PREDICTED))}")
    try:
        import torch
    except ImportError:
        raise ResultsError("bench: torch is not installed") from None
    if not torch.cuda.is_available():
        raise ResultsError("bench: no CUDA device visible to torch")
    from validate import ops
    from validate.common import harness

    harness.bench([ops.get(name) for name in names], args.quick, args.out, cases=cases, probe=args.probe_clock)
    return 0


def _result_paths(args) -> list[Path]:
    if args.results is not None:
        return [args.results]
    paths = sorted(RESULTS_DIR.glob("*.json"))
    if not paths:
        raise ResultsError(f"compare: no results files in {RESULTS_DIR}; run bench or pass --results")
    return paths


def _compare(args) -> int:
    from roofline.validation import results_file
    from validate.model import compare, targets
    from validate.model.hardware import load_hardware

    reports = []
    for path in _result_paths(args):
        results = results_file.load(path)
        device = str(results["env"].get("device", ""))
        hardware = load_hardware(args.hardware or compare.hardware_for_device(device))
        report = compare.compare(results, hardware)
        reports.append({"results": str(path), **report, "targets": targets.targets(results, report, hardware)})
    if args.json:
        print(json.dumps(reports[0] if args.results is not None else reports, indent=1))
    else:
        print("\n\n".join(f"== {r['results']}\n{compare.render(r)}\n\n{targets.render(r['targets'])}" for r in reports))
    return 0


def _calibrate(args) -> int:
    from roofline.validation import calibrate, results_file

    section = calibrate.calibrate(results_file.load(args.results), args.results, args.hardware_file)
    print(f"calibrate: wrote measured ceilings of {section['device']} into {args.hardware_file}: "
          f"read {section['read_bytes_per_s'] / 1e12:.3f} TB/s, copy {section['copy_bytes_per_s'] / 1e12:.3f} TB/s, "
          f"launch {section['launch_latency_s'] * 1e6:.2f} us, gemm "
          + ", ".join(f"{d} {v / 1e12:.0f} TFLOP/s" for d, v in section["gemm_flops_per_s"].items()))
    return 0


def _summarize(args) -> int:
    from validate.model import summary

    stale = summary.write(_result_paths(args), check=args.check)
    for path in stale:
        print(f"summarize: {'stale' if args.check else 'wrote'} {path}")
    return 1 if args.check and stale else 0


def main(argv: list[str] | None = None) -> int:
    commands = {"bench": _bench, "compare": _compare, "calibrate": _calibrate, "summarize": _summarize}
    try:
        args = _parser().parse_args(argv)
        return commands[args.command](args)
    except (ResultsError, RooflineError) as err:
        print(f"validate: {str(err).splitlines()[0] if str(err) else type(err).__name__}", file=sys.stderr)
        return 2
    except BrokenPipeError:  # output piped into `head`
        return 0


if __name__ == "__main__":
    sys.exit(main())
