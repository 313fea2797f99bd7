"""The planner's reader of the lab's kernel summaries: every shipped file loads, and a damaged one is refused in
one line naming the file and the field (never a traceback), which the dashboard shows in place of the page."""

import json
from pathlib import Path

import pytest

from roofline.validation import kernel_summary


def test_every_shipped_summary_loads_with_its_cases() -> None:
    paths = kernel_summary.committed()
    assert {p.name for p in paths} >= {"nvidia-h100.json", "nvidia-h200.json"}
    for path in paths:
        doc = kernel_summary.load(path)
        rows = [r for fam in doc["report"]["families"].values() for r in fam["rows"]]
        # the suite's count excludes the calibration family ('ceilings'), which is listed too
        suite = sum(fam["cases"] for name, fam in doc["report"]["families"].items() if name != "ceilings")
        assert doc["report"]["summary"]["cases"] == suite
        assert len(rows) >= suite > 0
        # APE is |predicted - measured| / measured, to the 5 digits the lab keeps of each time (0.01 % abs)
        for r in rows:
            if r["ape_pct"] is not None:
                want = abs(r["predicted_ms"] - r["measured_ms"]) / r["measured_ms"] * 100
                assert r["ape_pct"] == pytest.approx(want, rel=1e-3, abs=0.01)


def _damaged(tmp_path: Path, edit) -> Path:
    doc = json.loads(kernel_summary.committed()[0].read_text())
    edit(doc)
    path = tmp_path / "damaged.json"
    path.write_text(json.dumps(doc))
    return path


@pytest.mark.parametrize(("edit", "field"), [
    (lambda d: d.pop("targets"), "damaged.json.targets: missing"),
    (lambda d: d.update(version=99), "damaged.json.version: 99"),
    (lambda d: d["report"].update(families=[]), "damaged.json.report.families: must be a JSON object"),
    (lambda d: next(iter(d["report"]["families"].values()))["rows"][0].pop("ape_pct"), ".rows[0].ape_pct: missing"),
])
def test_a_damaged_summary_is_refused_in_one_line(tmp_path: Path, edit, field: str) -> None:
    with pytest.raises(kernel_summary.SummaryError) as err:
        kernel_summary.load(_damaged(tmp_path, edit))
    assert field in str(err.value) and "\n" not in str(err.value)


def test_not_json_is_refused_in_one_line(tmp_path: Path) -> None:
    path = tmp_path / "bad.json"
    path.write_text("{not json")
    with pytest.raises(kernel_summary.SummaryError, match="not valid JSON"):
        kernel_summary.load(path)
