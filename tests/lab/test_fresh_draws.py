"""validate.fresh: a seeded draw of cases outside the committed grids, and the bench/compare plumbing it uses."""

from __future__ import annotations

import json

from validate import fresh
from validate.ops import FAMILIES


def test_a_draw_is_outside_every_grid_and_repeatable() -> None:
    cases = fresh.draw(FAMILIES, seed=7, count=15)
    assert [c.as_dict() for c in cases] == [c.as_dict() for c in fresh.draw(FAMILIES, seed=7, count=15)]
    assert {c.family for c in cases} == {f.name for f in FAMILIES} - set(fresh.SKIP)
    for case in cases:
        grid = next(f for f in FAMILIES if f.name == case.family).cases(False)
        b, n = case.params["batch"], case.params["context"]
        assert b not in {c.params["batch"] for c in grid} and n not in {c.params["context"] for c in grid}
        assert b * n <= max(c.params["batch"] * c.params["context"] for c in grid)
        assert 2048 <= n <= 196_608 and n % 16 == 0


def test_the_committed_draw_is_this_seed_and_predicts_on_both_gpus(tmp_path) -> None:
    committed = json.loads(open("validate/results/fresh/cases.json").read())
    assert committed["cases"] == [c.as_dict() for c in fresh.draw(FAMILIES, committed["seed"], len(committed["cases"]))]
    out = tmp_path / "p.json"
    assert fresh.main(["predict", "--cases", "validate/results/fresh/cases.json", "--hardware", "H100-SXM",
                       "--out", str(out)]) == 0
    rows = json.loads(out.read_text())["cases"]
    assert len(rows) == len(committed["cases"]) and all(r["predicted_ms"] > 0 for r in rows)


def test_a_bad_draw_file_is_one_line_and_status_2(tmp_path, capsys) -> None:
    bad = tmp_path / "bad.json"
    bad.write_text("[1, 2]")
    assert fresh.main(["predict", "--cases", str(bad), "--hardware", "H100-SXM", "--out", str(tmp_path / "o")]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("validate.fresh: cases:") and "\n" not in err
