"""The lab's kernel validation, as the data the planner ships: one summary per GPU run (kernel_summaries/*.json).

The lab (the repository's validate/ folder) times its Triton kernels on a GPU, predicts every case from the
hardware spec alone and writes, per committed results file, the comparison a reader needs (validate.model.summary:
per case measured and predicted time and APE; per kernel family median / p90 APE and kernel efficiency; the suite
summary and the validation targets). The planner reads these files only: it carries no kernel model and no raw
kernel results (DESIGN.md, "Two houses"). The dashboard's Validation page shows them and roofline.trust
turns them into an error band per kind of op.

Every problem is one line naming the file and the field (SummaryError, a ValueError).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from roofline.catalogue.loading import parse_json_object, read_text
from roofline.errors import SpecError

SUMMARY_DIR = Path(__file__).resolve().parent / "kernel_summaries"
SUMMARY_VERSION = 1
MAX_SUMMARY_BYTES = 4 << 20  # a GPU run of ~250 cases is ~150 KB
MAX_SUMMARY_VALUES = 500_000
_TOP = ("version", "file", "env", "report", "targets")
_REPORT = ("hardware", "families", "summary", "reference_bytes_per_s", "reference_source")
_ROW = ("name", "params", "measured_ms", "predicted_ms", "ape_pct", "bound")


class SummaryError(ValueError):
    """A kernel summary that is missing, not JSON, or not shaped like one."""


def committed(folder: Path | None = None) -> list[Path]:
    """The shipped summaries (*.json of `folder`, default SUMMARY_DIR), by name."""
    folder = SUMMARY_DIR if folder is None else Path(folder)
    return sorted(folder.glob("*.json")) if folder.is_dir() else []


def _need(mapping: Any, keys: tuple[str, ...], at: str) -> None:
    if not isinstance(mapping, dict):
        raise SummaryError(f"{at}: must be a JSON object")
    for key in keys:
        if key not in mapping:
            raise SummaryError(f"{at}.{key}: missing")


def check(doc: Any, where: str) -> dict[str, Any]:
    """`doc` when it is a summary of this version with every field the Validation page reads, else SummaryError."""
    _need(doc, _TOP, where)
    if doc["version"] != SUMMARY_VERSION:
        raise SummaryError(f"{where}.version: {doc['version']!r}; this roofline reads version {SUMMARY_VERSION}")
    _need(doc["report"], _REPORT, f"{where}.report")
    if not isinstance(doc["report"]["families"], dict):
        raise SummaryError(f"{where}.report.families: must be a JSON object")
    for name, fam in doc["report"]["families"].items():
        _need(fam, ("rows", "cases", "median_ape_pct", "kernel_efficiency"), f"{where}.report.families.{name}")
        if not isinstance(fam["rows"], list):
            raise SummaryError(f"{where}.report.families.{name}.rows: must be a list")
        for i, row in enumerate(fam["rows"]):
            _need(row, _ROW, f"{where}.report.families.{name}.rows[{i}]")
    return doc


def load(path: Path) -> dict[str, Any]:
    """The checked summary at `path` ({"version", "file", "env", "report", "targets"}): a regular file read up to
    MAX_SUMMARY_BYTES, strict JSON."""
    try:
        doc = parse_json_object(read_text(Path(path), MAX_SUMMARY_BYTES), str(path), MAX_SUMMARY_VALUES)
    except SpecError as err:
        raise SummaryError(str(err)) from None
    return check(doc, Path(path).name)
