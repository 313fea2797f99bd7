"""Under --engine sglang on the H200, plan, simulate and capacity state the bands of SGLang's own runs: each run's
report of the model as it stands (`engines/nvidia-h200-sglang-<date>-runN-now-summary.txt`), one run saying so.

Expected values come from the report's summary lines, the lines compare_sglang printed before it also wrote rows in
validate.engines.compare's format (`decode   Llama-3.1-8B   1   1024   4.796   4.761   -0.7`, `rate4  TTFT p50  34.56
ms:  33.73 (  -2.4 %)`, `Llama-3.1-8B launch_server  906,051  906,751 (+0.077 %)`), read with this file's own parsing;
never from roofline.trust's output. tiny-llama's rows are marked '*' (the profile's own input) and are not judged.
Run 1 by hand, from its report's measured and predicted columns: 8B decode 4.934 / 4.796, 5.485 / 5.328, 7.245 / 7.630,
16.332 / 18.197 -> +2.9, +2.9, -5.0, -10.2 % -> median |err| (2.9 + 5.0) / 2 = 3.95 %; prefill 16.014 / 18.667,
58.417 / 55.072, 225.738 / 222.141 -> -14.2, +6.1, +1.6 % -> 6.1 %. MoE models (Qwen3-30B-A3B in run 2) have their
own band: 4.424 / 4.060, 13.194 / 12.739, 19.421 / 18.909, 25.313 / 26.393 -> +9.0, +3.6, +2.7, -4.1 % -> (3.6 + 4.1)
/ 2 = 3.85 %."""

from __future__ import annotations

import json
import re
import shutil
import statistics
from pathlib import Path

import pytest
from cli_run import run

ENGINES = Path(__file__).resolve().parents[2] / "validate" / "results" / "engines"
NOW = sorted(ENGINES.glob("nvidia-h200-sglang-*-now-summary.txt"),
             key=lambda p: [int(x) if x.isdigit() else x for x in re.split(r"(\d+)", p.name)])
RUN1 = ENGINES / "nvidia-h200-sglang-2026-11-30-run1-now-summary.txt"
STEP = re.compile(r"^(decode|prefill)\s+(\S+)\s+\d+\s+\d+\s+[\d.]+\s+[\d.]+\s+([+-][\d.]+)( \*\d*)?$")
MOE = {"Qwen3-30B-A3B", "DeepSeek-V2-Lite"}  # the MoE models of the runs (their config.json): their own band
SERVED = re.compile(r"^\s+(\w+)?\s*(TTFT p50|TTFT p99|TPOT p50|TPOT p99|out tok/s)\s+[\d.]+(?: ms)?:\s+[\d.]+ "
                    r"\(\s*([+-][\d.]+) %\)$")
ARGS = ("--model", "Llama-3.1-8B", "--hardware", "H200", "--engine", "sglang")


def _summary(reports=NOW, moe: bool = False) -> dict[str, list[float]]:
    """{"decode", "prefill", "ttft", "tpot", "throughput", "capacity": signed errors %} of the reports' summary lines
    (the first block of each; judged step rows and served runs only, of the dense models or, `moe`, of the MoE
    models)."""
    out: dict[str, list[float]] = {k: [] for k in ("decode", "prefill", "ttft", "tpot", "throughput", "capacity")}
    for report in reports:
        lines = report.read_text().splitlines()
        lines = lines[:next(i for i, x in enumerate(lines) if x.startswith("rows in "))]
        in_capacity, served = False, None
        for line in lines:
            if line.startswith("served "):  # `served MODEL (sglang.bench_serving ...)`: its runs follow
                served = line.split()[1]
            if (m := STEP.match(line)) and not m[4] and (m[2] in MOE) == moe:
                out[m[1]].append(float(m[3]))
            elif (m := SERVED.match(line)) and (served in MOE) == moe:
                out[{"TTFT": "ttft", "TPOT": "tpot"}.get(m[2][:4], "throughput")].append(float(m[3]))
            in_capacity = line.startswith("capacity") or (in_capacity and bool(line.strip()))
            if in_capacity and (m := re.search(r"\(([+-][\d.]+) %\)$", line)):
                out["capacity"].append(float(m[1]))
    return out


def _median_ape(errors: list[float]) -> float:
    return statistics.median(abs(e) for e in errors)


def _json(capsys, *argv) -> dict:
    code, out, err = run(capsys, *argv, "--json")
    assert code == 0, err
    data = json.loads(out)
    return data[0] if isinstance(data, list) else data


def test_run_1s_summary_lines_are_the_figures_worked_by_hand() -> None:
    s = _summary([RUN1])
    # the report's Llama-3.1-8B rows (lines 11-17 of run 1's now-summary since session 29's hidden GEMM latency, q copy
    # and lone-prefill clock)
    assert s["decode"] == [2.9, 4.3, -3.9, -10.6] and s["prefill"] == [-15.4, 4.2, 3.4]
    assert _median_ape(s["decode"]) == pytest.approx(4.1) and _median_ape(s["prefill"]) == pytest.approx(4.2)
    assert len(s["ttft"]) == len(s["tpot"]) == 8 and len(s["throughput"]) == 4  # rate4, 12, 24 and conc32
    assert s["capacity"] == [0.034, 0.075, 0.077]


def test_plan_under_sglang_states_its_runs_step_bands(capsys) -> None:
    s = _summary()
    data = _json(capsys, "plan", *ARGS, "--method", "bf16")
    bands, text = data["trust"]["bands"], data["trust"]["text"]
    for key, phase in (("decode_step", "decode"), ("prefill", "prefill")):
        assert bands[key]["cases"] == len(s[phase])
        assert bands[key]["median_ape_pct"] == pytest.approx(_median_ape(s[phase]), abs=0.01)
        assert bands[key]["median_signed_pct"] == pytest.approx(statistics.median(s[phase]), abs=0.01)
    assert bands["capacity"]["median_ape_pct"] == pytest.approx(_median_ape(s["capacity"]), abs=0.01)
    assert data["trust"]["engine_validation"]["own_run"] == ", ".join(f"engines/{p.name}" for p in NOW)
    assert "real decoders (6 models)" not in text and "no real sglang run validated" not in text
    ape, signed = _median_ape(s["prefill"]), statistics.median(s["prefill"])
    # a median error of one sign is a bias, written as such (roofline.trust.quantities.fmt: APE >= 5 and the signed
    # median >= 0.8 of it): since session 28's SGLang prefill laws the dense prefills are over in every run but one
    biased = ape >= 5 and abs(signed) >= 0.8 * ape
    phrase = f"{ape:.0f} % {'under' if signed < 0 else 'over'}" if biased else f"±{ape:.1f} %"
    assert f"prefill {phrase} dense" in text
    if len(NOW) == 1:
        assert f"SGLang run on H200 (engines/{RUN1.name}; one run, not yet a band" in text
        assert all("one" in bands[k]["basis"] for k in ("decode_step", "prefill", "capacity"))
    assert data["results"][0]["trust"]["decode_band_pct"] == bands["decode_step"]["median_ape_pct"]


def test_simulate_under_sglang_states_its_runs_serving_bands(capsys) -> None:
    s = _summary()
    data = _json(capsys, "simulate", *ARGS, "--method", "bf16", "--rate", "4", "--prompt-tokens", "512",
                 "--output-tokens", "64", "--requests", "20", "--no-search")
    bands, text = data["trust"]["bands"], data["trust"]["text"]
    for key in ("ttft", "tpot", "throughput"):
        assert bands[key]["cases"] == len(s[key])
        assert bands[key]["median_ape_pct"] == pytest.approx(_median_ape(s[key]), abs=0.01)
    assert "not validated under the sglang scheduler" not in text
    assert f"serving ({len(s['throughput'])} runs of dense models)" in text
    if len(NOW) == 1:  # run 1 by hand: TTFT |err| 2.4 4.7 8.2 12.9 | 15.2 33.1 62.3 72.9, all but conc32's p50 under
        assert bands["ttft"]["median_ape_pct"] == pytest.approx((12.9 + 15.2) / 2, abs=0.01)
        assert "TTFT 14 % under" in text and "one engine run, not yet a band" in bands["ttft"]["basis"]


def test_an_moe_plan_under_sglang_states_the_moe_runs_band(capsys) -> None:
    data = _json(capsys, "plan", "--model", "Qwen3-30B-A3B", "--hardware", "H200", "--engine", "sglang",
                 "--method", "bf16")
    band, moe = data["trust"]["bands"]["decode_step"], _summary(moe=True)
    assert "no MoE model run" not in band["basis"]
    assert band["cases"] == len(moe["decode"]) == 4
    # run 2's Qwen3-30B-A3B decode rows +11.5, +4.4, +3.4, -3.3 %: the median of 3.3, 3.4, 4.4, 11.5 is 3.9
    assert band["median_ape_pct"] == pytest.approx(3.9, abs=0.01)


def test_an_sglang_run_on_another_device_is_not_borrowed(capsys) -> None:
    data = _json(capsys, "plan", "--model", "Llama-3.1-8B", "--hardware", "H100-SXM", "--engine", "sglang",
                 "--method", "bf16")
    assert data["trust"].get("engine_validation") is None
    assert "sglang's own step times: no real sglang run validated here" in data["trust"]["text"]


def _folder(tmp_path: Path, names: dict[str, Path]) -> Path:
    (tmp_path / "engines").mkdir()
    for name, source in names.items():
        shutil.copy(source, tmp_path / "engines" / name)
    return tmp_path


def test_each_runs_now_report_is_read_in_run_order(tmp_path) -> None:
    from roofline.trust.engines import engine_reports

    before = ENGINES / "nvidia-h200-sglang-2026-11-30-run1-summary.txt"
    folder = _folder(tmp_path, {"nvidia-h200-sglang-2026-11-30-run1-summary.txt": before,
                                "nvidia-h200-sglang-2026-11-30-run1-now-summary.txt": RUN1,
                                "nvidia-h200-sglang-2026-12-01-run2-summary.txt": before,
                                "nvidia-h200-sglang-2026-12-02-run10-now-summary.txt": RUN1,
                                "nvidia-h200-sglang-2026-12-02-run10-summary.txt": before})
    assert [p.name for p in engine_reports("nvidia-h200", "sglang", folder)] == [
        "nvidia-h200-sglang-2026-11-30-run1-now-summary.txt",  # the model as it stands, not the prediction before
        "nvidia-h200-sglang-2026-12-01-run2-summary.txt",  # a run with no "now" report: its only one
        "nvidia-h200-sglang-2026-12-02-run10-now-summary.txt"]  # run 10 after run 2
    assert engine_reports("nvidia-h200", "vllm", folder) == ()


def test_two_runs_pool_their_rows_and_no_longer_say_one_run(tmp_path, monkeypatch) -> None:
    import roofline.trust.engines as engines
    from roofline.catalogue import load_hardware
    from roofline.trust.quantities import capacity_trust, engine_quantities, engine_text

    folder = _folder(tmp_path, {"nvidia-h200-sglang-2026-11-30-run1-now-summary.txt": RUN1,
                                "nvidia-h200-sglang-2026-12-01-run2-now-summary.txt": RUN1})
    monkeypatch.setattr(engines, "results_folder", lambda: folder)
    s = _summary([RUN1, RUN1])
    hardware = load_hardware("H200")
    bands, info = engine_quantities(hardware, "sglang")
    assert bands["decode_step"]["cases"] == len(s["decode"]) == 8
    assert bands["tpot"]["cases"] == len(s["tpot"]) == 16
    assert not any("one" in b["basis"] for b in bands.values())
    text = engine_text("H200", info)
    assert text.startswith("SGLang runs on H200 (engines/nvidia-h200-sglang-*-now-summary.txt, 2 reports; 1 model)")
    cap = capacity_trust(hardware, "sglang")
    worst = max(s["capacity"], key=abs)
    assert f"capacity {worst:+.2f} % at worst on 6 logged pools of 2 real sglang runs" in cap["text"]
    assert cap["capacity"]["cases"] == 6 and "one run" not in cap["text"]
