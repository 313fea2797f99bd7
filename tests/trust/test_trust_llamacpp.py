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


def test_quantized_weights_cite_the_last_block_of_the_quant_report(tmp_path):
    # a report as llamacpp_quant compare prints it twice (the prediction committed before the run, then the model now):
    # the last block stands, its summary lines read as printed
    from roofline.trust.engines import llamacpp_quant_bands

    engines = tmp_path / "engines"
    engines.mkdir()
    (engines / "nvidia-h200-llamacpp-2026-12-01-run9-quant-report.txt").write_text(
        "== before\ndecode           n  21  median |err| 30.5 %  worst 60.2 %\n"
        "== now\ndecode           n  21  median |err| 9.366 %  worst 38.43 %\n"
        "prefill-batched  n  21  median |err| 20.58 %  worst 43.93 %\n")
    got = llamacpp_quant_bands(tmp_path)
    assert got["decode"] == {"median_ape_pct": 9.366, "worst_ape_pct": 38.43, "cases": 21}
    assert got["prefill-batched"]["median_ape_pct"] == 20.58 and got["device"] == "nvidia-h200"
    assert llamacpp_quant_bands(tmp_path / "none") is None


def test_llamacpp_trust_line_cites_the_gguf_runs():
    text = serving_trust(load_hardware("H200"), "llamacpp")["text"]
    assert "GGUF-quantized weights (engines/" in text and "-quant-report.txt" in text


def test_capacity_under_llamacpp_cites_the_logged_buffers():
    from roofline.trust.quantities import capacity_trust

    text = capacity_trust(load_hardware("H100-SXM"), "llamacpp")["text"]
    assert "not validated" not in text and REPORTS[-1].name in text and "measured on the H200" in text
    assert "GGUF-quantized weights' buffers" in text


def test_one_stream_servers_have_their_own_band_from_the_model_now_rows():
    """llama-server's one KV stream (timing 22.-23.): the trust line pools the one-stream rows ('kvu ...') of the
    model-now blocks of runs 9, 12 and 13 (TTFT and TPOT each), not the rows predicted before those runs, nor the
    bracketed figures of the model without 22."""
    import re

    from roofline.trust.bands import results_folder
    from roofline.trust.engines import SPAN_REPORTS, llamacpp_span_bands

    b = llamacpp_span_bands()
    assert b is not None and len(b["files"]) == 3
    # by hand: run 12's now block has one kvu row (TTFT, TPOT), run 13's two (k4, k12), run 9's four pinned sets
    assert b["ttft_tpot"]["cases"] == 2 * (1 + 2 + 4)
    now13 = (results_folder() / "engines" / SPAN_REPORTS[2]).read_text().split("== the model now")[1]
    k12 = next(line for line in now13.splitlines() if line.startswith("kvu   k12"))
    ttft = float(re.search(r"lone TTFT\s+[\d.]+ /\s+[\d.]+ \(\s*([+-][\d.]+)\)", k12)[1])
    assert abs(ttft) <= b["ttft_tpot"]["p90_ape_pct"]
    assert b["ttft_tpot"]["median_ape_pct"] < 10
