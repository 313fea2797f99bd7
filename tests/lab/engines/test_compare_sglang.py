"""validate/engines/compare_sglang.py: an SGLang run's summary, then its step and serving rows in
validate.engines.compare's format (what roofline.trust.engines reads). The figures the rows must carry are read off
the summary's own lines (`decode   Llama-3.1-8B   1   1024   4.796   4.761   -0.7`, `rate4  TTFT p50  34.56 ms:
33.73 (  -2.4 %)`), which the summary printed before the rows were added."""

import json
import re
from pathlib import Path

import pytest

from validate.engines import compare_sglang as mod

ENGINES = Path(__file__).resolve().parents[3] / "validate" / "results" / "engines"
RUN = ENGINES / "nvidia-h200-sglang-2026-11-30-run1"
BEFORE, NOW = ENGINES / "h200-sglang-run1-predicted.json", ENGINES / "h200-sglang-run1-now.json"
REPORTS = {BEFORE: ENGINES / "nvidia-h200-sglang-2026-11-30-run1-summary.txt",
           NOW: ENGINES / "nvidia-h200-sglang-2026-11-30-run1-now-summary.txt"}
ROWS_HEAD = "rows in validate.engines.compare's format"


def _halves(report: Path) -> tuple[list[str], list[str]]:
    lines = report.read_text().splitlines()
    cut = next(i for i, x in enumerate(lines) if x.startswith(ROWS_HEAD))
    return lines[:cut], lines[cut:]


def _summary_steps(lines: list[str]) -> list[tuple[str, str, int, int, float, float, float]]:
    """(phase, model, B, P, measured ms, predicted ms, err %) of the summary's step lines."""
    rx = re.compile(r"^(decode|prefill)\s+(\S+)\s+(\d+)\s+(\d+)\s+([\d.]+)\s+([\d.]+)\s+([+-][\d.]+)( \*\d*)?$")
    return [(m[1], m[2], int(m[3]), int(m[4]), float(m[5]), float(m[6]), float(m[7]))
            for x in lines if (m := rx.match(x))]


def _row_steps(lines: list[str]) -> list[tuple[str, str, int, int, float, float, float, float, float]]:
    """(phase, model, B, P, measured, before, before err, now, now err) of the compare-format step rows."""
    rx = re.compile(r"^(decode|prefill)\s+(\S+)\s+(\d+)\s+(\d+)\s+([\d.]+)\s+([\d.]+) \(\s*([+-][\d.]+)\)\s+([\d.]+)"
                    r" \(\s*([+-][\d.]+)\)( \*)?$")
    return [(m[1], m[2], int(m[3]), int(m[4]), *(float(m[i]) for i in range(5, 10))) for x in lines
            if (m := rx.match(x))]


@pytest.mark.parametrize("predicted", [BEFORE, NOW], ids=["before", "now"])
def test_the_committed_reports_are_what_compare_sglang_writes(predicted):
    lines = mod.report(RUN, json.loads(predicted.read_text()), json.loads(mod.before_of(predicted).read_text()))
    assert "\n".join(lines) + "\n" == REPORTS[predicted].read_text()


def test_the_step_rows_carry_the_summarys_figures_with_the_prediction_before_the_run_beside():
    before_summary = _summary_steps(_halves(REPORTS[BEFORE])[0])
    summary, rows = _summary_steps(_halves(REPORTS[NOW])[0]), _row_steps(_halves(REPORTS[NOW])[1])
    assert len(rows) == len(summary) == len(before_summary) == 14  # tiny-llama 4 + 3, Llama-3.1-8B 4 + 3
    for s, b, r in zip(summary, before_summary, rows, strict=True):
        assert r[:5] == s[:5] and (r[7], r[8]) == (s[5], s[6])  # the report's own prediction is 'now'
        assert (r[5], r[6]) == (b[5], b[6])  # the prediction before the run, from its own report
    # the report of the prediction before the run has it in both columns
    for r in _row_steps(_halves(REPORTS[BEFORE])[1]):
        assert (r[5], r[6]) == (r[7], r[8])


def test_the_serving_rows_carry_the_summarys_served_figures():
    head, rows = _halves(REPORTS[NOW])
    served, run = {}, None  # run -> [(measured, predicted, err)]: TTFT p50, p99, TPOT p50, p99, out tok/s
    for line in head:
        if m := re.match(r"^\s+(\w+\d+)?\s*(?:TTFT|TPOT) p\d\d\s+([\d.]+) ms:\s+([\d.]+) \(\s*([+-][\d.]+) %\)$", line):
            run = m[1] or run
            served.setdefault(run, []).append(tuple(float(m[i]) for i in (2, 3, 4)))
        elif m := re.match(r"^\s+out tok/s\s+([\d.]+):\s+([\d.]+) \(\s*([+-][\d.]+) %\)$", line):
            served[run].append(tuple(float(m[i]) for i in (1, 2, 3)))
    assert list(served) == ["rate4", "rate12", "rate24", "conc32"]
    table = rows[rows.index(next(x for x in rows if x.startswith("serving ("))) + 2:]
    assert len(table) == 4
    for line in table:
        cells = re.findall(r"([\d.]+) /\s+([\d.]+) \(\s*([+-][\d.]+)\)", line)
        assert [tuple(float(c) for c in cell) for cell in cells] == served[line.split()[0]]


def test_a_now_prediction_is_compared_with_the_one_committed_before_the_run_beside_it(tmp_path):
    assert mod.before_of(NOW) == BEFORE and mod.before_of(BEFORE) == BEFORE
    lone = tmp_path / "h200-sglang-run9-now.json"
    assert mod.before_of(lone) == lone  # nothing beside it: the report's own prediction in both columns


def test_a_run_without_served_runs_has_step_rows_under_the_catalogue_name(tmp_path):
    """Run 2's cases file names the 8B at mem_fraction_static 0.80 `Llama-3.1-8B-mf80` ("dir": Llama-3.1-8B); its
    prediction was written --steps-only. Measured 6.000 ms decode, 30.000 ms prefill against 5.700 and 33.000 by hand:
    -5.0 % and +10.0 %, read back by the bands' parser under the catalogue's name."""
    from roofline.trust.engines import engine_rows

    (tmp_path / "Llama-3.1-8B-mf80-lat.json").write_text(json.dumps(
        {"decode": [{"B": 16, "P": 1024, "decode_step_s": 0.006}], "prefill": [{"P": 512, "median_s": 0.03}]}))
    predicted = {"cases": "cases-sglang-run2.json", "serve": {}, "models": {"Llama-3.1-8B-mf80": {
        "decode": [{"decode_step_s": 0.0057}], "prefill": [{"prefill_s": 0.033}]}}}
    lines = mod.compare_rows(tmp_path, predicted, predicted)
    assert not [x for x in lines if x.startswith("serving (")]
    rows = engine_rows("\n".join(lines))
    assert rows["steps"] == [("decode", "Llama-3.1-8B", 16, 1024, -5.0), ("prefill", "Llama-3.1-8B", 1, 512, 10.0)]
    assert rows["serving"] == []


RUN2 = ENGINES / "nvidia-h200-sglang-2026-11-30-run2"


def test_run_2s_rows_leave_out_what_did_not_run_as_predicted():
    """Run 2 by hand: Llama-2-7B's B 256 decode holds 256 x (1,024 + 64) = 278,528 tokens against the 231,818 its
    start-up logged (Llama-2-7B-lat.json server_info), so SGLang ran it in waves; DeepSeek-V2-Lite ran on the
    triton backend (its -triton-lat.json, attention_backend_flag 'triton'). Both are marked, the rest judged."""
    lines = mod.report(RUN2, json.loads((ENGINES / "h200-sglang-run2-now.json").read_text()),
                       json.loads((ENGINES / "h200-sglang-run2-predicted.json").read_text()))
    marked = [x.split()[1:4] for x in lines if re.match(r"^(decode|prefill) .* \*\d$", x)]
    assert ["Llama-2-7B", "256", "1024"] in marked
    assert [m for m in marked if m[0] == "DeepSeek-V2-Lite"] and len(marked) == 1 + 7  # DeepSeek: 4 + 3 steps
    assert any("278,528 tokens exceed the pool (231,818)" in x for x in lines)
