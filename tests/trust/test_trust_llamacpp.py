"""Under --engine llamacpp the trust line cites llama.cpp's committed runs (the now-report of
validate.engines.llamacpp_compare), not 'no real run of it committed'."""

from __future__ import annotations

import re
from pathlib import Path

from roofline.catalogue import load_hardware
from roofline.trust import ceilings_trust, serving_trust

REPORTS = sorted((Path(__file__).resolve().parents[2] / "validate" / "results" / "engines").glob(
    "*-llamacpp-*-now-report.txt"))


def _medians() -> dict[str, str]:
    """The report's own summary lines, read here by their printed form ('served: 16 measured cases, median APE
    44.6%, p90 78.3%')."""
    text = REPORTS[-1].read_text()
    return {m[1]: m[2] for m in re.finditer(r"^(decode|prefill|served): \d+ measured cases, median APE ([\d.]+)%",
                                            text, re.M)}


def test_simulate_under_llamacpp_cites_its_runs_figures():
    assert REPORTS, "a llama.cpp now-report is committed"
    text = serving_trust(load_hardware("H200"), "llamacpp")["text"]
    assert "no real run" not in text and REPORTS[-1].name in text
    for family, median in _medians().items():
        assert f"{family} ±{float(median):.1f} %" in text


def test_another_gpu_says_where_llamacpp_was_measured():
    text = ceilings_trust(load_hardware("H100-SXM"), "typical", "llamacpp")["text"]
    assert "measured on the H200, not on H100-SXM" in text
    assert "no real llamacpp run validated here" not in text
