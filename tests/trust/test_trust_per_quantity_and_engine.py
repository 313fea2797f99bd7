"""Every command's numbers carry the band of the validation that covers them; under --engine vllm the real engine's.

Expected values are read from the committed reports' own text here, with this file's own parsing (the report's
summary lines where it prints one: `decode_now  median APE 4.8 %  worst 82.4 % (27 cases)`, the published runs'
`other GPUs, A100-80GB: TPOT mean 45% [-45%] (11/60); ...`), and from the catalogue's measured and datasheet
figures; never from roofline.trust's output. MoE models in the engine report: Qwen3-30B-A3B (128 experts, 8 active:
its config.json, huggingface.co/Qwen/Qwen3-30B-A3B) and DeepSeek-V2-Lite (64 routed + 2 shared experts:
huggingface.co/deepseek-ai/DeepSeek-V2-Lite config.json); tiny-llama is the lab's in-sample micro model, which the
report's summary leaves out.
"""

from __future__ import annotations

import json
import re
import statistics
from pathlib import Path

import pytest
from cli_run import run

from roofline.catalogue import hardware_names, load_hardware

ROOT = Path(__file__).resolve().parents[2]
ENGINES = ROOT / "validate" / "results" / "engines"
# every real vLLM run's report on the H200 (pooled by the planner: each run is evidence)
# in run order: a run's number as a number (run10 after run9)
VLLM_REPORTS = sorted(ENGINES.glob("nvidia-h200-vllm-*-compare.txt"),
                      key=lambda p: [int(x) if x.isdigit() else x for x in re.split(r"(\d+)", p.name)])
PUBLIC = ENGINES / "public-compare.txt"
MOE = {"Qwen3-30B-A3B", "DeepSeek-V2-Lite"}
# the lab's micro and narrow models (validate/engines/models.py TINY, NARROW): in-sample, the catalogue holds none
MICRO = {"tiny-llama", "tiny-llama-32", "tiny-qwen3moe-48", "tiny-dsv2-27"}


def _vllm_summary(name: str, report: Path) -> tuple[float, float, int] | None:
    """(median, worst, cases) of an engine report's summary line `<name>  median APE x %  worst y %  (n cases)`; None
    for a report with no such line (a run of served cases only, e.g. run 6's speculative pair, has no step rows)."""
    m = re.search(rf"^{name}\s+median APE\s+([\d.]+) %\s+worst\s+([\d.]+) %\s+\((\d+) cases\)", report.read_text(),
                  re.M)
    return None if m is None else (float(m[1]), float(m[2]), int(m[3]))


def _lines() -> list[str]:
    return [line for report in VLLM_REPORTS for line in report.read_text().splitlines()]


def _now_errors(phase: str, models=None, reports=None) -> list[float]:
    """The 'now (err %)' column (the last parenthesis) of the reports' judged step rows of `phase` (a row ending in
    '*' is one the report says it does not judge; tiny-llama is the in-sample micro model)."""
    out = []
    lines = _lines() if reports is None else [x for r in reports for x in r.read_text().splitlines()]
    for line in lines:
        parts = line.split()
        if (parts and parts[0] == phase and parts[1] not in MICRO and not line.rstrip().endswith("*")
                and (models is None or parts[1] in models)):
            out.append(float(line.rsplit("(", 1)[1].rstrip(") ")))
    return out


def _public(group: str, quantity: str) -> tuple[int, int, int, int]:
    """(median APE, median signed, within 15 %, records) of one published-runs group figure."""
    line = next(x for x in PUBLIC.read_text().splitlines() if x.strip().startswith(f"{group}:"))
    m = re.search(rf"{re.escape(quantity)} (\d+)% \[([+-]?\d+)%\] \((\d+)/(\d+)\)", line)
    return int(m[1]), int(m[2]), int(m[3]), int(m[4])


def _json(capsys, *argv) -> dict:
    code, out, err = run(capsys, *argv, "--json")
    assert code == 0, err
    return json.loads(out)


def test_plan_under_vllm_quotes_the_engine_run_not_the_decoders(capsys) -> None:
    data = _json(capsys, "plan", "--hardware", "H200", "--engine", "vllm", "--method", "bf16")
    trust = data["trust"]
    for report in VLLM_REPORTS:  # this file's parse covers the rows each report's summary judged
        summary = _vllm_summary("decode_now", report)
        assert (summary[2] if summary else 0) == len(_now_errors("decode", reports=[report]))
    # Llama-3.1-8B is dense: the dense rows' band (every model of the reports but the MoE ones)
    dense_models = {x.split()[1] for x in _lines() if x.startswith("decode ")} - MOE - MICRO
    dense = statistics.median(abs(e) for e in _now_errors("decode", dense_models))
    assert trust["bands"]["decode_step"]["median_ape_pct"] == pytest.approx(dense, abs=0.01)
    assert trust["engine_validation"]["own_run"] == ", ".join(f"engines/{r.name}" for r in VLLM_REPORTS)
    # the text names the reports by their shared pattern and count (every name is in the JSON above)
    assert f"engines/nvidia-h200-vllm-*-compare.txt, {len(VLLM_REPORTS)} reports" in trust["text"]
    assert VLLM_REPORTS[0].name not in trust["text"] and "real decoders (6 models)" not in trust["text"]
    # the text's one decimal of the same median (a median of two rows can sit on the rounding boundary)
    said = float(re.search(r"decode step ±([\d.]+) % dense", trust["text"])[1])
    assert said == pytest.approx(dense, abs=0.05 + 1e-9)
    # the MoE band is said, and it is worse than the dense one
    moe = statistics.median(abs(e) for e in _now_errors("decode", MOE))
    assert f"±{moe:.1f} % MoE" in trust["text"]
    assert data["results"][0]["trust"]["decode_band_pct"] == trust["bands"]["decode_step"]["median_ape_pct"]


def test_an_moe_model_under_vllm_carries_the_moe_band(capsys) -> None:
    data = _json(capsys, "plan", "--model", "Qwen3-30B-A3B", "--hardware", "H200", "--engine", "vllm",
                 "--method", "bf16")
    moe = statistics.median(abs(e) for e in _now_errors("decode", MOE))
    assert data["trust"]["bands"]["decode_step"]["median_ape_pct"] == pytest.approx(moe, abs=0.01)
    assert data["results"][0]["trust"]["text"].startswith(f"measured; vllm ±{moe:.0f}%")
    prefill_worst = max(_now_errors("prefill"), key=abs)
    assert f"worst {prefill_worst:+.0f} %" in data["trust"]["text"]


def test_engine_bands_pooled_agree_with_the_reports_own_summaries() -> None:
    from roofline.trust.engines import engine_bands

    for report in VLLM_REPORTS:
        bands = engine_bands(report)
        for phase, key in (("decode_now", "decode_step"), ("prefill_now", "prefill")):
            summary = _vllm_summary(phase, report)
            if summary is None:
                assert bands[key] is None
                continue
            median, worst, cases = summary
            assert bands[key]["cases"] == cases
            assert abs(bands[key]["median_ape_pct"] - median) <= 0.05 + 1e-9
            assert bands[key]["p90_ape_pct"] <= worst
    pooled = engine_bands(VLLM_REPORTS)
    assert pooled["decode_step"]["cases"] == sum((_vllm_summary("decode_now", r) or (0, 0, 0))[2]
                                                 for r in VLLM_REPORTS)


def test_published_runs_on_the_gpu_under_vllm(capsys) -> None:
    """A100-80GB: no run here; the published runs on it (public-compare.txt's A100-80GB group) are its band."""
    ape, signed, within, records = _public("other GPUs, A100-80GB", "TPOT median")
    data = _json(capsys, "plan", "--hardware", "A100-80GB", "--engine", "vllm", "--method", "bf16")
    tpot = data["trust"]["bands"]["tpot"]
    assert (tpot["median_ape_pct"], tpot["median_signed_pct"], tpot["cases"]) == (ape, signed, records)
    # a median error of one sign is a bias ("31 % under"); a mixed one a spread ("±31.0 %": the median signed error
    # is less than 0.8 of the median absolute one)
    said = f"{ape:.0f} % under" if signed < 0 and abs(signed) >= 0.8 * ape else f"±{ape:.1f} %"
    assert f"TPOT {said}" in data["trust"]["text"] and f"({within} of {records} TPOT within 15 %)" in \
        data["trust"]["text"]
    assert data["trust"]["bands"]["prefill"] is None and data["trust"]["bands"]["capacity"] is None


def test_the_measured_device_under_vllm_also_says_the_other_gpus_figure(capsys) -> None:
    ape, signed, _within, records = _public("other GPUs, all", "TPOT median")
    code, out, err = run(capsys, "plan", "--hardware", "H200", "--engine", "vllm", "--method", "bf16")
    line = next(x for x in out.splitlines() if x.startswith("trust: "))
    # a one-sided error reads 'N % under', a mixed one '±N %' (roofline.trust.quantities.fmt)
    said = f"{ape:.0f} % under" if signed < 0 and abs(signed) >= 0.8 * ape else f"±{ape:.1f} %"
    assert f"published runs on other GPUs: TPOT {said} at the median ({records} runs" in line


def _datasheet_fractions() -> tuple[float, float]:
    """min/max of measured streaming read over datasheet bandwidth over the catalogue's measured devices."""
    fractions = []
    for name in hardware_names():
        hw = load_hardware(name)
        m = hw.measured
        if m is not None and not m.estimate and getattr(m, "kind", "measured") == "measured":
            fractions.append(m.read_bytes_per_s / hw.memory_bytes_per_s)
    return min(fractions), max(fractions)


def test_default_plan_on_a_datasheet_only_gpu_prints_the_gap_from_the_catalogue(capsys) -> None:
    lo, hi = _datasheet_fractions()
    code, out, err = run(capsys, "plan", "--hardware", "A40")
    assert code == 0, err
    line = next(x for x in out.splitlines() if x.startswith("trust: "))
    assert "real engines run slower" in line and f"{lo:.0%}"[:-1] in line and f"{hi:.0%}" in line
    assert f"decode at least {1 / hi - 1:.0%}"[:-1] in line


def test_capacity_carries_the_engine_runs_band_of_the_models_class(capsys) -> None:
    from roofline.catalogue.store import load_model

    errors = {"dense": [], "moe": []}
    for line in _lines():
        if "|" in line and line.split()[0] not in MICRO and line.split()[0] != "capacity:":
            cls = "dense" if load_model(line.split()[0]).moe is None else "moe"
            errors[cls].append(float(line.split("|")[2].split("(")[2].split(")")[0]))  # the 'now (err %)' column
    for model, cls in (("Llama-3.1-8B", "dense"), ("Qwen3-30B-A3B", "moe")):
        data = _json(capsys, "capacity", "--model", model, "--hardware", "H200", "--engine", "vllm")
        band = data["trust"]["capacity"]
        assert band["cases"] == len(errors[cls]) and band["median_ape_pct"] == pytest.approx(
            statistics.median(abs(e) for e in errors[cls]), abs=0.01)
        assert f"{cls} models" in data["trust"]["text"]
    other = _json(capsys, "capacity", "--model", "Llama-3.1-8B", "--hardware", "A100-80GB", "--engine", "vllm")
    assert other["trust"]["capacity"] is None and "not validated" in other["trust"]["text"]
    # an engine never run here (SGLang's run 1 on the H200: tests/engines/test_sglang_profile.py)
    code, out, err = run(capsys, "capacity", "--model", "Llama-3.1-8B", "--hardware", "H200", "--engine", "trtllm")
    assert "trust: capacity not validated: no real trtllm run" in out


def test_plan_rows_carry_the_capacity_band_of_the_memory_boundary(capsys) -> None:
    """H100-SXM's report: `Llama-3.1-8B/memory/b16  default ... +1.64  ABOVE the real limit`."""
    text = (ROOT / "validate" / "results" / "clients" / "nvidia-h100-compare.txt").read_text()
    err = float(re.search(r"/memory/\S+\s+default\s+[\d.]+\s+\d+\s+\d+\s+\d+\s+([+-][\d.]+)", text)[1])
    data = _json(capsys, "plan", "--method", "kivi-2")
    assert data["results"][0]["trust"]["capacity_band_pct"] == pytest.approx(abs(err))
    assert data["trust"]["bands"]["capacity"]["median_signed_pct"] == pytest.approx(err)


def _served_rows() -> list[tuple[str, list[float]]]:
    """(model, the five 'err %' of a served run) of the vLLM reports' serving blocks: a block's model is its
    `serving (MODEL, ...)` line, its rows the lines with five 'm / p (err)' cells after it."""
    rows = []
    for report in VLLM_REPORTS:
        model = None
        for line in report.read_text().splitlines():
            if line.startswith("serving ("):
                model = re.split(r"[,)]", line[len("serving ("):])[0].strip()
            pairs = re.findall(r"\(\s*([+-]?[\d.]+)\)", line)
            if model and len(pairs) == 5:
                rows.append((model, [float(p) for p in pairs]))
    return rows


def test_simulate_under_vllm_and_under_the_ideal_scheduler(capsys) -> None:
    # a dense model quotes the dense models' served runs
    tpot = [abs(e) for model, errs in _served_rows() if model != "Qwen3-30B-A3B" for e in errs[2:4]]
    argv = ("simulate", "--model", "Llama-3.1-8B", "--hardware", "H200", "--method", "bf16", "--rate", "4",
            "--prompt-tokens", "512", "--output-tokens", "64", "--requests", "30")
    data = _json(capsys, *argv, "--engine", "vllm")
    assert data["trust"]["bands"]["tpot"]["median_ape_pct"] == pytest.approx(statistics.median(tpot), abs=0.01)
    ideal = _json(capsys, *argv)
    assert ideal["trust"]["bands"]["ttft"] is None and "not validated under the ideal scheduler" in \
        ideal["trust"]["text"]


def test_claims_that_are_times_carry_the_datasheet_trust_and_counts_do_not(capsys) -> None:
    code, out, err = run(capsys, "claims", "--json")
    rows = {c["id"]: c for c in json.loads(out)}
    assert "real engines run slower" in rows["skvq-table5-latency"]["trust"]["text"]  # ms of a decode step
    assert "trust" in rows["zack-ttft-cocktail"]  # a fraction of TTFT
    assert "trust" not in rows["aquakv-15gb"] and "trust" not in rows["skvq-table4-bits"]  # bytes, bits


def test_kv_and_best_carry_the_bands(capsys) -> None:
    kv = _json(capsys, "kv", "--context", "4096", "--hardware", "H200")
    assert kv["trust"]["bands"]["decode_step"]["cases"] > 0
    best = _json(capsys, "best", "--hardware", "A40", "--context", "8192", "--batch", "1")
    assert best["trust"]["source"] == "datasheet" and best["trust"]["bands"]["decode_step"] is None


def test_disaggregated_rows_are_read_as_the_two_gpu_report_writes_them() -> None:
    """A report block written by hand in compare_x2's format: one rate's lines give its 'now' errors, by column."""
    from roofline.trust.engines import disaggregated_rows
    text = ("run99: disaggregated M, 512 in / 256 out, 1 prefill + 1 decode server (NixlConnector), link 1e9\n"
            "  pd-rate8  TTFT p50    66.83 ms: before -2.8 %, now -6.2 %\n"
            "              TPOT p50     5.29 ms: before +1.4 %, now +3.5 %\n"
            "              out tok/s   1925.7: before -0.5 %, now +0.3 %\n"
            "  pd-rate24 TTFT p50    80.95 ms: before -16.0 %, now -17.0 %\n")
    assert disaggregated_rows(text) == [{"ttft_p50": -6.2, "tpot_p50": 3.5, "throughput": 0.3}, {"ttft_p50": -17.0}]


def test_simulate_disaggregated_under_vllm_quotes_the_pairs(capsys) -> None:
    """Runs 12-14's nine disaggregated rates on two H200s (compare_x2's reports): the median of the nine TPOT p50
    'now' errors, recomputed here from the reports' lines, is the band the trust text quotes."""
    from roofline.trust.engines import disaggregated_rows
    folder = Path(__file__).resolve().parents[2] / "validate/results/engines"
    rows = [r for f in sorted(folder.glob("nvidia-h200-vllm-*-x2-compare.txt"))
            for r in disaggregated_rows(f.read_text())]
    assert len(rows) == 9
    expected = statistics.median(abs(r["tpot_p50"]) for r in rows)
    args = ["simulate", "--model", "Llama-3.1-8B", "--hardware", "H200", "--method", "bf16", "--engine", "vllm",
            "--disaggregate", "1:1", "--rate", "4", "--requests", "20", "--prompt-tokens", "256",
            "--output-tokens", "16", "--json"]
    code, out, _ = run(capsys, *args)
    trust = json.loads(out)["trust"]
    assert code == 0 and trust["disaggregated"]["rates"] == 9
    assert trust["disaggregated"]["tpot_p50"]["median_ape_pct"] == pytest.approx(expected, abs=0.05)
    assert "disaggregated pairs: 9 rates" in trust["text"]
    code, out, _ = run(capsys, *[a for a in args if a not in ("--disaggregate", "1:1")])
    assert "disaggregated" not in json.loads(out)["trust"]


def test_an_moe_model_quotes_the_moe_models_served_runs(capsys) -> None:
    """Run 19's warm run (Qwen3-30B-A3B served by vLLM: TPOT p50 +53 %, its eager prefill) is an MoE model's
    served evidence; a dense model's band leaves it out (the test above), an MoE model's is made of such runs."""
    moe = [errs for model, errs in _served_rows() if model == "Qwen3-30B-A3B"]
    assert moe, "run 19's report has a served MoE run"
    data = _json(capsys, "simulate", "--model", "Qwen3-30B-A3B", "--hardware", "H200", "--method", "bf16", "--rate",
                 "2", "--prompt-tokens", "512", "--output-tokens", "32", "--requests", "20", "--engine", "vllm")
    tpot = data["trust"]["bands"]["tpot"]
    assert tpot["median_ape_pct"] == pytest.approx(statistics.median(abs(e) for r in moe for e in r[2:4]), abs=0.01)
    runs = f"{len(moe)} run" + ("s" if len(moe) > 1 else "")
    assert f"serving ({runs} of MoE models" in data["trust"]["text"]
