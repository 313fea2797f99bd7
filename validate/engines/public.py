"""python -m validate.engines.public [--runs DIR] [--out FILE] [--json]

Replays every published engine run in `validate/results/engines/public/` on roofline's current model
(validate.engines.public_predict) and writes the compare report, predicted vs published per record with the
absolute percentage error (APE) on TPOT, ITL, TTFT and output throughput, and the median APE over the
records on other GPUs (the held-out judge of issues 29 / 30) and over the H100 / H200 controls apart.
Nothing is fitted to these numbers. A record whose device is not in the catalogue, or that the planner
cannot place (the model does not fit), is listed with the reason and left out of the medians.
Bad input (a missing folder, a malformed record) is one line on stderr and exit status 2.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
from datetime import UTC, datetime
from pathlib import Path

from roofline.errors import RooflineError, SpecError
from roofline.validation.engine_results import PublishedRun, load_runs
from validate.engines.public_predict import ape, simulate

HERE = Path(__file__).resolve().parent.parent
RUNS_DIR = HERE / "results" / "engines" / "public"
REPORT = HERE / "results" / "engines" / "public-compare.txt"
# (label, published figure, predicted figure): the metrics compared, in the report's column order
METRICS = (("TPOT mean", ("tpot", "mean_ms")), ("TPOT median", ("tpot", "median_ms")),
           ("ITL mean", ("itl", "mean_ms")), ("TTFT mean", ("ttft", "mean_ms")),
           ("TTFT median", ("ttft", "median_ms")), ("out tok/s", ("output_throughput_tokens_per_s", None)))
JUDGED = ("TPOT mean", "TPOT median", "ITL mean", "out tok/s")


def _published(run: PublishedRun, key: tuple[str, str | None]) -> float | None:
    outer, inner = key
    value = getattr(run.outputs, outer)
    return value if inner is None else getattr(value, inner)


def _predicted(pred: dict, key: tuple[str, str | None]) -> float | None:
    outer, inner = key
    value = pred.get(outer)
    return value if inner is None else (value or {}).get(inner)


def compare(runs: list[PublishedRun]) -> list[dict]:
    """One row per record: the prediction (or why there is none) and, per metric, (published, predicted, APE)."""
    rows = []
    for run in runs:
        row = {"name": run.name, "control": run.control, "regime": _regime(run),
               "hardware": run.deployment.hardware_as_published,
               "catalogue_hardware": run.deployment.catalogue_hardware, "model": run.deployment.catalogue_model,
               "tp": run.deployment.tp, "engine": f"{run.engine.name} {run.engine.version}", "source": run.source.url}
        if run.deployment.catalogue_hardware is None:
            row["skipped"] = "device not in the catalogue"
        else:
            try:
                pred = simulate(run)
            except (SpecError, ValueError) as err:
                row["skipped"] = f"not predicted: {err}"
            else:
                row["metrics"] = {label: {"published": _published(run, key), "predicted": _predicted(pred, key),
                                          "ape": ape(_predicted(pred, key), _published(run, key))}
                                  for label, key in METRICS}
                row["preemptions"] = pred["preemptions"]
        rows.append(row)
    return rows


def _regime(run: PublishedRun) -> str:
    """How the client drove the engine: a concurrency cap (closed loop), a Poisson rate, or all at once."""
    if run.benchmark.max_concurrency is not None:
        return "closed loop"
    return "poisson rate" if run.benchmark.request_rate_per_s is not None else "all at once"


def _groups(rows: list[dict]) -> list[tuple[str, list[dict]]]:
    """The record groups the report summarizes: other GPUs (all, by client regime, by device), then controls."""
    done = [r for r in rows if "metrics" in r]
    other, ctrl = [r for r in done if not r["control"]], [r for r in done if r["control"]]
    groups = [("other GPUs, all", other)]
    groups += [(f"other GPUs, {g}", [r for r in other if r["regime"] == g])
               for g in ("closed loop", "poisson rate", "all at once")]
    groups += [(f"other GPUs, {hw}", [r for r in other if r["catalogue_hardware"] == hw])
               for hw in sorted({r["catalogue_hardware"] for r in other})]
    groups += [("controls (H100/H200), all", ctrl),
               ("controls, closed loop", [r for r in ctrl if r["regime"] == "closed loop"])]
    return [(name, members) for name, members in groups if members]


def summary(rows: list[dict]) -> dict:
    """Per group and judged metric: records with the figure, median APE, median signed error (predicted /
    published - 1: negative = roofline too fast or too low) and how many fall within 15 %."""
    out = {}
    for name, members in _groups(rows):
        group_out = {}
        for label in JUDGED:
            pairs = [(m["ape"], m["predicted"] / m["published"] - 1) for r in members
                     for m in (r["metrics"][label],) if m["ape"] is not None]
            group_out[label] = {"records": len(pairs),
                                "median_ape": statistics.median(a for a, _ in pairs) if pairs else None,
                                "median_signed": statistics.median(e for _, e in pairs) if pairs else None,
                                "within_15pct": sum(a <= 0.15 for a, _ in pairs)}
        out[name] = group_out
    return out


def _fmt(value: float | None, digits: int = 2) -> str:
    return "-" if value is None else f"{value:,.{digits}f}"


def _pct(value: float | None) -> str:
    return "-" if value is None else f"{100 * value:.0f}%"


def render(rows: list[dict], summ: dict, header: str) -> str:
    """The compare report as text: a header, one block per record, the medians and the skipped records."""
    lines = [header, ""]
    for r in rows:
        if "metrics" not in r:
            continue
        tag = " [control]" if r["control"] else ""
        lines.append(f"{r['name']}{tag}: {r['model']} on {r['hardware']} (catalogue {r['catalogue_hardware']}, "
                     f"tp {r['tp']}), {r['engine']}; {r['source']}")
        for label, m in r["metrics"].items():
            if m["published"] is None:
                continue
            lines.append(f"    {label:<12} published {_fmt(m['published']):>10}  predicted {_fmt(m['predicted']):>10}"
                         f"  APE {_pct(m['ape']):>5}")
    lines += ["", "Median APE per group [median signed error] (records within 15 % / records with the figure):"]
    for group, metrics in summ.items():
        parts = [f"{label} {_pct(m['median_ape'])} [{100 * m['median_signed']:+.0f}%] "
                 f"({m['within_15pct']}/{m['records']})" for label, m in metrics.items() if m["records"]]
        lines.append(f"  {group}: " + "; ".join(parts))
    skipped = [r for r in rows if "skipped" in r]
    if skipped:
        lines += ["", "Not predicted:"] + [f"  {r['name']}: {r['skipped']}" for r in skipped]
    return "\n".join(lines) + "\n"


def _header(runs_dir: Path) -> str:
    try:
        sha = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True,
                             cwd=HERE, check=False).stdout.strip() or "unknown"
    except OSError:
        sha = "unknown"
    return (f"Published engine runs ({runs_dir.name}/) replayed on roofline's current model: `roofline simulate`'s "
            f"serving simulation, engine scheduling defaults of the simulator where a record gives none.\n"
            f"checkout {sha}, {datetime.now(UTC):%Y-%m-%d}; command: python -m validate.engines.public")


def main(argv: list[str] | None = None) -> int:
    """Run the comparison; write the report (and print it, or the JSON rows with --json)."""
    p = argparse.ArgumentParser(prog="validate.engines.public", description=__doc__.splitlines()[0])
    p.add_argument("--runs", type=Path, default=RUNS_DIR, help="folder of published-run records")
    p.add_argument("--out", type=Path, default=REPORT, help="where to write the text report")
    p.add_argument("--json", action="store_true", help="print the rows and medians as JSON")
    args = p.parse_args(argv)
    try:
        runs = load_runs(args.runs)
    except RooflineError as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    rows = compare(runs)
    summ = summary(rows)
    text = render(rows, summ, _header(args.runs))
    tmp = args.out.with_suffix(args.out.suffix + ".tmp")
    try:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        tmp.write_text(text)
        tmp.replace(args.out)
    except OSError as err:
        if tmp.parent.is_dir():
            tmp.unlink(missing_ok=True)
        print(f"error: --out: {args.out}: cannot write the report ({err.strerror or err})", file=sys.stderr)
        return 2
    print(json.dumps({"rows": rows, "summary": summ}, indent=2) if args.json else text, end="")
    return 0


if __name__ == "__main__":
    sys.exit(main())
