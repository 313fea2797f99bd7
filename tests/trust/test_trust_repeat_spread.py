"""The measurement's own spread (roofline.trust.engines.repeat_spreads) and its Validation-page row, on hand-built
reports."""

import pytest

from roofline.dashboard.trust import _spread_row
from roofline.trust.engines import repeat_spreads


def test_spread_lines_are_read_from_engine_reports(tmp_path):
    eng = tmp_path / "engines"
    eng.mkdir()
    (eng / "nvidia-h200-vllm-2026-12-02-run26-27-30-repeat-report.txt").write_text(
        "Runs 26 / 27\nsomething else: 3 %\n"
        "lease-to-lease spread (largest over rate 12, rate 24): ttft_p50 11.5 %, tpot_p50 8.3 %, throughput 0.7 %\n")
    (eng / "nvidia-h200-llamacpp-2026-12-01-run9-report.txt").write_text(
        "lease-to-lease spread (y): ttft_p50 50.0 %\n")  # only a repeat report is read for it
    (eng / "nvidia-h200-vllm-2026-11-28-compare.txt").write_text(
        "lease-to-lease spread (x): ttft_p50 99.0 %\n")  # a compare report is not read for it
    got = repeat_spreads(tmp_path)
    assert got == [{"file": "engines/nvidia-h200-vllm-2026-12-02-run26-27-30-repeat-report.txt",
                    "what": "largest over rate 12, rate 24",
                    "spread_pct": {"ttft_p50": 11.5, "tpot_p50": 8.3, "throughput": 0.7}}]
    assert repeat_spreads(tmp_path / "absent") == []


def test_the_row_names_the_spread_not_a_model_error():
    row = _spread_row("H200", {"file": "engines/r.txt", "what": "two runs",
                               "spread_pct": {"ttft_p50": 11.5, "throughput": 0.7}})
    assert row["TTFT"] == "11.5 % apart" and row["output tok/s"] == "0.7 % apart"
    assert row["TPOT"] == "-" and row["decode step"] == "-"
    assert "the same runs on several leases (two runs)" in row["validation"] and row["report"] == "engines/r.txt"


def test_the_committed_runs_26_27_30_report_carries_its_spread():
    spreads = [s for s in repeat_spreads() if "run26" in s["file"]]
    assert len(spreads) == 1
    # derived by hand from the three leases' client results (validate/notes/2026-12-02-run26-27.md, and
    # validate/notes/2026-12-02-run30.md for run 30): rate 12 TTFT p50 52.7 (run 27) over 44.8 ms (run 30) is the
    # largest TTFT p50 ratio, rate 24 TPOT p50 21.28 (run 26) over 19.51 ms (run 27) the largest TPOT one
    assert spreads[0]["spread_pct"]["ttft_p50"] == pytest.approx((52.7 / 44.8 - 1) * 100, abs=0.3)
    assert spreads[0]["spread_pct"]["tpot_p50"] == pytest.approx((21.28 / 19.51 - 1) * 100, abs=0.1)
