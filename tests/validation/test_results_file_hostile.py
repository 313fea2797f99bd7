"""Malformed results files: `python -m validate compare` and `calibrate` answer each with one line naming the
field and exit status 2 — never a traceback, never a hang (the issue's KeyError, TypeError, ZeroDivisionError,
RecursionError and LAPACK cases, a FIFO and an endless device)."""

from __future__ import annotations

import contextlib
import copy
import io
import json
import os
from pathlib import Path

import pytest

from roofline.validation import results_file

ROOT = Path(__file__).resolve().parents[2]
GOOD = json.loads((ROOT / "validate" / "results" / "nvidia-h200.json").read_text())


def _mutations() -> dict[str, object]:
    first = GOOD["cases"][0]
    ceil = next(i for i, c in enumerate(GOOD["cases"]) if c["family"] == "ceilings")
    out: dict[str, object] = {
        "not json": "{", "a list": [], "no cases": {"env": {}}, "cases not a list": {"env": {}, "cases": {}},
        "deep": "[" * 100_000 + "]" * 100_000, "nan": '{"env": {}, "cases": [], "x": NaN}',
        "huge int": '{"env": {}, "cases": [' + "9" * 5000 + "]}",
    }
    for key, value in (("ms", 0), ("ms", -1), ("ms", "fast"), ("bytes", -5), ("params", None), ("family", 3),
                       ("name", None), ("ms", None)):
        data = copy.deepcopy(GOOD)
        data["cases"][0] = {**first, key: value}
        out[f"{key}={value!r}"] = data
    data = copy.deepcopy(GOOD)
    data["cases"][0]["params"] = {"batch": "eight"}
    out["params of the wrong type"] = data
    data = copy.deepcopy(GOOD)
    data["cases"][0]["params"] = {}
    out["params missing"] = data
    data = copy.deepcopy(GOOD)
    data["cases"][ceil]["params"] = {**data["cases"][ceil]["params"], "bytes": 0}
    out["a ceiling of zero bytes"] = data
    data = copy.deepcopy(GOOD)
    data["cases"] = [c for c in data["cases"] if c["family"] != "ceilings"]
    out["no ceilings"] = data
    data = copy.deepcopy(GOOD)
    for c in data["cases"]:
        if c["family"] == "ceilings":
            c["ms"] = 1.0
    out["flat ceilings (singular fit)"] = data
    data = copy.deepcopy(GOOD)
    data["env"] = {"device": 7}
    out["env of the wrong type"] = data
    data = copy.deepcopy(GOOD)
    data["cases"][0]["family"] = "no-such-family"
    out["unknown family"] = data
    return out


def _run(argv: list[str]) -> tuple[int, str]:
    from validate.__main__ import main

    err = io.StringIO()
    with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
        code = main(argv)
    return code, err.getvalue()


@pytest.mark.parametrize("name", list(_mutations()))
def test_compare_answers_a_malformed_file_in_one_line(name: str, tmp_path: Path) -> None:
    data = _mutations()[name]
    path = tmp_path / "results.json"
    path.write_text(data if isinstance(data, str) else json.dumps(data))
    code, err = _run(["compare", "--results", str(path)])
    assert code in (0, 2)
    if code == 2:
        assert err.count("\n") == 1 and err.startswith("validate: "), err
    code, err = _run(["calibrate", "--results", str(path), "--hardware-file", str(tmp_path / "hw.yaml")])
    assert code == 2 and err.count("\n") == 1, err


def test_results_reader_refuses_what_is_not_a_regular_file(tmp_path: Path) -> None:
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    for path in (fifo, Path("/dev/zero"), tmp_path):
        with pytest.raises(results_file.ResultsError):
            results_file.load(path)
