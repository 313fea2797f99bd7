"""Every dashboard page that shows a number shows how far to trust it beside it (roofline.dashboard.trust), driven
headless by streamlit.testing's AppTest like tests/app/test_app_pages.py.

The bands expected on screen are computed here from the committed compare reports' rows (this file's own parsing:
the H100's real decoders, compiled and eager pooled as the planner's typical fusion; the memory boundary's default
row; the vLLM run's summary line, the SGLang runs' summary lines), never from roofline.trust.
"""

from __future__ import annotations

import re
import statistics
from pathlib import Path

import pytest

AppTest = pytest.importorskip("streamlit.testing.v1").AppTest
ROOT = Path(__file__).resolve().parents[2]
ENTRY = ROOT / "app" / "main.py"
CLIENTS_H100 = ROOT / "validate" / "results" / "clients" / "nvidia-h100-compare.txt"
VLLM_H200 = sorted((ROOT / "validate" / "results" / "engines").glob("nvidia-h200-vllm-*-compare.txt"))
SGLANG_H200 = sorted((ROOT / "validate" / "results" / "engines").glob("nvidia-h200-sglang-*-now-summary.txt"))


def _decode_band_h100() -> float:
    """Median |err %| of the H100 report's compiled and eager decode rows (`Model/compiled/decode/b1-c1024 ...`)."""
    errs = [abs(float(line.split()[3])) for line in CLIENTS_H100.read_text().splitlines()
            if re.match(r"^\S+/(compiled|eager)/decode/\S+\s", line)]
    return statistics.median(errs)


def _capacity_band_h100() -> float:
    m = re.search(r"/memory/\S+\s+default\s+[\d.]+\s+\d+\s+\d+\s+\d+\s+([+-][\d.]+)", CLIENTS_H100.read_text())
    return abs(float(m[1]))


def _plain(text: str) -> str:
    """Markdown as the user reads it (report.md_escape undone)."""
    return re.sub(r"\\(.)", r"\1", text)


def _screen(at) -> str:
    """Captions and Markdown as the user reads them."""
    return _plain("\n".join([c.value for c in at.caption] + [m.value for m in at.markdown]))


def _page(path: str | None, hardware: str | None = None):
    at = AppTest.from_file(str(ENTRY), default_timeout=120).run()
    if hardware:
        at.selectbox(key="hardware").set_value(hardware)
        at.run()
    if path:
        at.switch_page(path).run()
    assert not at.exception, [e.value for e in at.exception]
    return at


HEAD_H100 = "Trust (H100-SXM, measured ceilings): TPOT and tok/s (decode step) ±{:.1f} %"


@pytest.mark.parametrize("path", [None, "views/sweeps.py", "views/pareto.py", "views/roofline_page.py"])
def test_pages_with_plan_numbers_show_the_measured_bands(path) -> None:
    screen = _screen(_page(path))
    assert HEAD_H100.format(_decode_band_h100()) in screen
    if path != "views/roofline_page.py":  # the Roofline page shows op times only, no capacity
        assert f"max context / batch (capacity) ±{_capacity_band_h100():.1f} %" in screen


@pytest.mark.parametrize("path", [None, "views/sweeps.py", "views/roofline_page.py"])
def test_a_datasheet_only_gpu_says_so_beside_the_numbers(path) -> None:
    screen = _screen(_page(path, hardware="A40"))
    assert "Trust (A40, datasheet ceilings): TPOT and tok/s (decode step) not validated" in screen
    assert "real engines run slower" in screen


def test_plan_page_under_an_engine_says_its_trust_line_once() -> None:
    # under SGLang on the H200 the trust line names the engine's runs ("under sglang: SGLang runs on H200 ..."); the
    # Plan page's caption gives it beside the bands, once (it was also appended to the bands' caption)
    at = _page(None, hardware="H200")
    at.session_state["engine"] = "sglang"  # its widget sits in the closed "More settings" expander
    at.run()
    assert not at.exception, [e.value for e in at.exception]
    screen = _screen(at)
    assert screen.count("under sglang: SGLang runs on H200") == 1
    assert "Trust (H200, measured ceilings): TPOT and tok/s (decode step) ±" in screen


def test_side_by_side_shows_each_sides_trust() -> None:
    at = _page("views/compare.py")
    at.button(key="pin").click()
    at.run()
    at.selectbox(key="hardware").set_value("A40")
    at.run()
    screen = _screen(at)
    assert HEAD_H100.format(_decode_band_h100()) in screen and "Trust (A40, datasheet ceilings)" in screen


def test_serving_page_says_its_figures_are_not_validated_under_the_ideal_scheduler() -> None:
    at = _page("views/serving.py")
    at.number_input(key="srv_prompt").set_value(512)
    at.number_input(key="srv_output").set_value(32)
    at.number_input(key="srv_requests").set_value(20)
    next(b for b in at.button if b.label == "Simulate").click()
    at.run()
    screen = _screen(at)
    assert "Trust (H100-SXM, measured ceilings): TTFT not validated" in screen
    assert f"its steps: decode ±{_decode_band_h100():.1f} %" in screen


def test_validation_page_lists_the_bands_the_reports_support() -> None:
    at = _page("views/validation.py")
    table = _plain(next(t.value for t in at.markdown if "| validation |" in t.value))
    # the runs' judged decode rows pooled ('*': not judged by the report; tiny-llama: the in-sample micro model)
    errors = [abs(float(line.rsplit("(", 1)[1].rstrip(") "))) for report in VLLM_H200
              for line in report.read_text().splitlines() if line.startswith("decode ")
              and line.split()[1] != "tiny-llama" and not line.rstrip().endswith("*")]
    median = statistics.median(errors)
    row = next(line for line in table.splitlines() if "vLLM" in line and "H200" in line)
    assert f"±{median:.1f} %" in row or f"{median:.0f} % " in row
    # SGLang's runs: each run's report of the model as it stands, its summary's judged prefill lines
    # (`prefill  Llama-3.1-8B  1  256  18.667  15.976  -14.4`; '*' rows are the tiny model, not judged)
    prefill = [abs(float(line.split()[-1])) for report in SGLANG_H200 for line in report.read_text().splitlines()
               if re.match(r"^prefill\s+\S+(\s+[\d.]+){4}\s+[+-][\d.]+$", line)]
    row = next(line for line in table.splitlines() if "SGLang" in line and "H200" in line)
    median = statistics.median(prefill)  # a one-signed median reads 'N % over' (trust.quantities.fmt)
    assert f"±{median:.1f} %" in row or f"{median:.0f} % " in row
    assert ("one run" in row) is (len(SGLANG_H200) == 1)


def test_claims_page_marks_times_computed_at_datasheet_figures() -> None:
    at = _page("views/claims.py")
    table = next(_plain(t.value) for t in at.markdown if "computed (unit)" in _plain(t.value))
    latency = next(line for line in table.splitlines() if "| skvq-table5-latency |" in line)
    count = next(line for line in table.splitlines() if "| aquakv-15gb |" in line)
    assert "datasheet figures" in latency and "exact count" in count
    assert "real engines run slower" in _screen(at)
