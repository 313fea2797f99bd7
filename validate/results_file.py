"""Read and check a results file: {"env": {...}, "cases": [{family, name, params, ms, bytes, flops, ...}]}.

Every problem is one line naming the case and the field (ResultsError), for the CLI's exit status 2.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

from validate.registry import Case


class ResultsError(ValueError):
    """A results file that is missing, not JSON, or not shaped like one."""


def _number(value) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)


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
        at = f"{where}: cases[{i}]"
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
            continue
        if not _number(row["ms"]) or row["ms"] <= 0:
            raise ResultsError(f"{at}.ms: {row['ms']!r} is not a positive number")
        for key in ("bytes", "flops"):
            if row.get(key) is not None and (not _number(row[key]) or row[key] < 0):
                raise ResultsError(f"{at}.{key}: {row[key]!r} is not a non-negative number")
    return results


def load(path: Path) -> dict:
    try:
        text = Path(path).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as err:
        raise ResultsError(f"{path}: cannot read: {getattr(err, 'strerror', None) or err}") from None
    try:
        data = json.loads(text)
    except json.JSONDecodeError as err:
        raise ResultsError(f"{path}: not valid JSON at line {err.lineno}, column {err.colno}: {err.msg}") from None
    return check(data, str(path))


def case_of(row: dict) -> Case:
    return Case(row["family"], row["name"], row["params"])


def measured(results: dict, family: str) -> list[dict]:
    """Rows of `family` that carry a time."""
    return [row for row in results["cases"] if row["family"] == family and row.get("ms") is not None]
