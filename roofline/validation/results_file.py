"""Read and check a results file: {"env": {...}, "cases": [{family, name, params, ms, bytes, flops, ...}]}: the
schema of a GPU run, written by the lab (validate/) or a user's microbenchmarks and read by `calibrate`.

Every problem is one line naming the case and the field (ResultsError), for the CLI's exit status 2.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from roofline.catalogue.loading import parse_json_object, read_text
from roofline.errors import SpecError


class ResultsError(ValueError):
    """A results file that is missing, not JSON, or not shaped like one."""


@dataclass(frozen=True)
class Case:
    """One measured point: `params` is JSON-serializable and fully describes the work."""

    family: str
    name: str
    params: dict[str, Any] = field(default_factory=dict)

    def as_dict(self) -> dict[str, Any]:
        """The case as a results-file row's first three fields."""
        return {"family": self.family, "name": self.name, "params": dict(self.params)}


def _number(value) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)


def _check_row(row, at: str) -> None:
    if not isinstance(row, dict):
        raise ResultsError(f"{at}: not an object")
    for key in ("family", "name"):
        if not isinstance(row.get(key), str) or not row[key]:
            raise ResultsError(f"{at}.{key}: missing or not a string")
    if not isinstance(row.get("params"), dict):
        raise ResultsError(f"{at}.params: missing or not an object")
    if row.get("ms") is None:
        if not (row.get("skipped") or row.get("error")):
            raise ResultsError(f"{at}.ms: missing (and the case is neither skipped nor an error)")
        return
    if not _number(row["ms"]) or row["ms"] <= 0:
        raise ResultsError(f"{at}.ms: {row['ms']!r} is not a positive number")
    for key in ("bytes", "flops"):
        if row.get(key) is not None and (not _number(row[key]) or row[key] < 0):
            raise ResultsError(f"{at}.{key}: {row[key]!r} is not a non-negative number")


def check(results, where: str = "results") -> dict:
    """Validate the shape; returns the same dict. Cases without "ms" must say "skipped" or "error"."""
    if not isinstance(results, dict):
        raise ResultsError(f"{where}: (root): expected an object with 'env' and 'cases'")
    if not isinstance(results.get("env"), dict):
        raise ResultsError(f"{where}: env: missing or not an object")
    cases = results.get("cases")
    if not isinstance(cases, list):
        raise ResultsError(f"{where}: cases: missing or not a list")
    for i, row in enumerate(cases):
        _check_row(row, f"{where}: cases[{i}]")
    return results


MAX_RESULTS_BYTES = 64 << 20  # a committed run is ~120 KB; a results file is never this large
MAX_RESULTS_VALUES = 2_000_000


def load(path: Path) -> dict:
    """The checked results file at `path` (ResultsError when unreadable, not JSON or misshapen): a regular file
    only (never a FIFO or device), read up to MAX_RESULTS_BYTES, strict JSON (no NaN, bounded depth and size)."""
    try:
        data = parse_json_object(read_text(Path(path), MAX_RESULTS_BYTES), str(path), MAX_RESULTS_VALUES)
    except SpecError as err:
        raise ResultsError(str(err)) from None
    return check(data, str(path))


def case_of(row: dict) -> Case:
    """The Case of a results-file row."""
    return Case(row["family"], row["name"], row["params"])


def measured(results: dict, family: str) -> list[dict]:
    """Rows of `family` that carry a time."""
    return [row for row in results["cases"] if row["family"] == family and row.get("ms") is not None]
