"""The kernel validation as data the planner ships: one small JSON summary per committed results file.

The planner never runs the kernel model (roofline never imports validate, an import-linter contract), yet the
dashboard's Validation page and the trust bands (roofline.trust) show how well each kernel family is
predicted. So the lab compares each committed results file (compare.compare + targets.targets, the same report
as `python -m validate compare --json`) and writes what a reader of that page needs, per case: name, params,
measured and predicted time, APE, bound, achieved bandwidth and FLOP/s, bandwidth fraction and note; per family:
cases, median / p90 APE, kernel efficiency; the suite summary and the four targets. Raw results (timings of
every repeat, clocks, structure) stay in validate/results/ and never ship.

    python -m validate summarize            rewrite roofline/validation/kernel_summaries/<results>.json
    python -m validate summarize --check    exit 1 when a committed summary differs from the results (CI)
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from roofline.validation.kernel_summary import SUMMARY_DIR, SUMMARY_VERSION

ROW_FIELDS = ("name", "params", "measured_ms", "predicted_ms", "ape_pct", "roofline_fraction", "bound",
              "achieved_bytes_per_s", "bandwidth_fraction", "achieved_flops_per_s", "note")
FAMILY_FIELDS = ("cases", "median_ape_pct", "p90_ape_pct", "kernel_efficiency", "at_ceiling")
REPORT_FIELDS = ("hardware", "device", "reference_bytes_per_s", "reference_source", "measured_source", "summary")


def summary(path: Path, hardware_name: str | None = None) -> dict[str, Any]:
    """The summary of the results file at `path`, compared with the catalogue entry of its device (or
    `hardware_name`): {"version", "file", "env", "report": {..., "families": {name: {..., "rows"}}}, "targets"}."""
    from roofline.validation import results_file
    from validate.model import compare, targets
    from validate.model.hardware import load_hardware

    results = results_file.load(Path(path))
    hardware = load_hardware(hardware_name or compare.hardware_for_device(str(results["env"].get("device", ""))))
    report = compare.compare(results, hardware)
    families = {name: {**{k: fam[k] for k in FAMILY_FIELDS},
                       "rows": [{k: row[k] for k in ROW_FIELDS} for row in fam["rows"]]}
                for name, fam in report["families"].items()}
    return {"version": SUMMARY_VERSION, "file": Path(path).name, "env": results["env"],
            "report": {**{k: report[k] for k in REPORT_FIELDS}, "families": families},
            "targets": targets.targets(results, report, hardware)}


SIGNIFICANT = 5  # digits kept of every float: the page prints APE to 0.1 % and times to 0.1 us
LINE = 120


def _rounded(value: Any) -> Any:
    """`value` with every float rounded to SIGNIFICANT significant digits and every key a string (recursively)."""
    if isinstance(value, float):
        return float(f"{value:.{SIGNIFICANT}g}")
    if isinstance(value, dict):
        return {str(k): _rounded(v) for k, v in value.items()}  # JSON keys are strings
    if isinstance(value, list):
        return [_rounded(v) for v in value]
    return value


def _dump(value: Any, indent: int) -> str:
    """Strict JSON, sorted keys: a container on one line when it fits in LINE characters, else one item a line."""
    flat = json.dumps(value, sort_keys=True, allow_nan=False, separators=(", ", ": "))
    if not isinstance(value, (dict, list)) or not value or len(flat) + indent <= LINE:
        return flat
    pad = " " * (indent + 1)
    if isinstance(value, dict):
        items = [f"{pad}{json.dumps(k)}: {_dump(value[k], indent + 1)}" for k in sorted(value)]
        return "{\n" + ",\n".join(items) + "\n" + " " * indent + "}"
    return "[\n" + ",\n".join(pad + _dump(v, indent + 1) for v in value) + "\n" + " " * indent + "]"


def text(doc: dict[str, Any]) -> str:
    """The summary as the committed file's text: floats to SIGNIFICANT digits, sorted keys, one case a line."""
    return _dump(_rounded(doc), 0) + "\n"


def write(paths: list[Path], folder: Path = SUMMARY_DIR, check: bool = False) -> list[Path]:
    """Write (or, with `check`, only compare) the summary of each results file under `folder` by the results
    file's name; return the paths whose committed text differed (all written ones when not checking)."""
    stale = []
    for path in paths:
        out = Path(folder) / Path(path).name
        body = text(summary(path))
        if out.is_file() and out.read_text() == body:
            continue
        stale.append(out)
        if not check:
            tmp = out.with_suffix(".tmp")
            tmp.write_text(body)
            tmp.replace(out)
    return stale
