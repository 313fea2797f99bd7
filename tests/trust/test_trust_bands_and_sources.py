"""roofline.trust: where a plan's ceilings come from and the error band the committed validation supports.

Expected values are read from the compare reports' own summary lines (written by the lab's compare code, not by the
parser under test) and from the datasheets the catalogue cites; none replays roofline.trust's output.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from cli_run import run

from roofline.catalogue import load_hardware
from roofline.catalogue.ceiling_sources import with_ceilings
from roofline.trust import ceilings_trust, datasheet_line, method_trust, source_kind
from roofline.trust.bands import decoder_bands, kernel_bands

ROOT = Path(__file__).resolve().parents[2]
RESULTS = ROOT / "validate" / "results"


def _summary(device: str, mode_phase: str) -> tuple[int, float, float]:
    """(n, median, worst) of a real-decoder report's summary line, e.g. 'compiled/decode n= 50 median APE 4.0 %'."""
    text = (RESULTS / "clients" / f"{device}-compare.txt").read_text()
    m = re.search(rf"^{mode_phase}\s+n=\s*(\d+) median APE\s+([\d.]+) %.*worst\s+([\d.]+) %", text, re.M)
    return int(m[1]), float(m[2]), float(m[3])


@pytest.mark.parametrize("device", ["nvidia-h100", "nvidia-h200"])
@pytest.mark.parametrize(("fusion", "mode"), [("full", "compiled"), ("none", "eager")])
def test_decoder_bands_agree_with_the_reports_own_summaries(device, fusion, mode) -> None:
    bands = decoder_bands(f"validate/results/clients/{device}.json", fusion)
    for phase in ("decode", "prefill"):
        n, median, worst = _summary(device, f"{mode}/{phase}")
        assert bands[phase]["cases"] == n
        assert abs(bands[phase]["median_ape_pct"] - median) <= 0.05 + 1e-9  # the summary prints one decimal
        assert bands[phase]["p90_ape_pct"] <= worst


def test_typical_fusion_pools_compiled_and_eager_and_leaves_hf_static_out() -> None:
    bands = decoder_bands("validate/results/clients/nvidia-h200.json", "typical")
    assert bands["decode"]["cases"] == _summary("nvidia-h200", "compiled/decode")[0] + \
        _summary("nvidia-h200", "eager/decode")[0]
    assert "hf-static" not in bands["modes"]


@pytest.mark.parametrize(("device", "family", "key"), [
    ("nvidia-h100", "aquakv", "aquakv"), ("nvidia-h100", "xquant", "xquant"), ("nvidia-h200", "zack", "zack"),
    ("nvidia-h100", "fp16_attention", "baseline:bf16"), ("nvidia-h200", "fp16_attention", "baseline:fp16"),
])
def test_kernel_bands_agree_with_the_family_summaries(device, family, key) -> None:
    text = (RESULTS / f"{device}-compare.txt").read_text()
    m = re.search(rf"^{family}: (\d+) compared, median APE ([\d.]+) %", text, re.M)
    b = kernel_bands(f"validate/results/{device}.json")[key]
    assert b["cases"] == int(m[1]) and abs(b["median_ape_pct"] - float(m[2])) <= 0.05 + 1e-9


@pytest.mark.parametrize("spec", ["turboquant", "kvquant-2", "h2o-2048", "keyformer-50", "fp8"])
def test_methods_no_kernel_case_covers_say_not_validated(spec) -> None:
    """No case of the committed kernel reports names these methods: they must not borrow a family's error."""
    trust = method_trust(spec, load_hardware("H100-SXM"))
    assert trust["kernels"] is None and "not validated" in trust["text"]


def test_a_method_whose_kernels_were_timed_carries_their_own_cases() -> None:
    """skvq-k2v2's quant_attention cases (12 per device) are SKVQ's own, not KIVI's."""
    text = (RESULTS / "nvidia-h100-compare.txt").read_text()
    skvq = [float(line.split()[3]) for line in text.splitlines() if line.startswith("skvq-k2v2_")]
    trust = method_trust("skvq-k2v1.5", load_hardware("H100-SXM"))
    assert trust["kernels"]["cases"] == len(skvq) == 12
    assert trust["kernels"]["presets"] == ["skvq-k2v2"]


def test_sources_of_the_catalogue() -> None:
    assert source_kind(with_ceilings(load_hardware("H100-SXM"))) == "measured"
    # A100-80GB's section is derived from aiconfigurator's database (hardware/A100-80GB.yaml, kind: derived); A40 has
    # no measured section at all
    assert source_kind(with_ceilings(load_hardware("A100-80GB"))) == "derived"
    assert source_kind(with_ceilings(load_hardware("A40"))) == "datasheet"
    assert source_kind(with_ceilings(load_hardware("H100-SXM"), "datasheet")) == "datasheet"
    assert source_kind(with_ceilings(load_hardware("H20"))) == "estimated"


@pytest.mark.parametrize(("kind", "needle"), [("calibrated", "not validated on your device"),
                                              ("derived", "not validated against real decoders")])
def test_calibrated_and_derived_sections_say_how_far_they_are_validated(kind, needle) -> None:
    h100 = load_hardware("H100-SXM")
    hw = h100.model_copy(update={"measured": h100.measured.model_copy(update={"kind": kind})})
    trust = ceilings_trust(hw)
    assert trust["source"] == kind and needle in trust["text"]
    if kind == "derived":
        assert trust["decode"] is None


def test_datasheet_line_states_the_measured_gap() -> None:
    """H100-SXM: measured streaming read 3.130 TB/s (the compare report's header) against the datasheet's 3.35 TB/s
    (NVIDIA H100 datasheet, SXM) = 93 %."""
    header = (RESULTS / "nvidia-h100-compare.txt").read_text().splitlines()[1]
    read_tb_s = float(re.search(r"bandwidth reference ([\d.]+) TB/s", header)[1])
    line = datasheet_line()
    assert f"{read_tb_s / 3.35:.0%}" in line and "real engines run slower" in line and "\n" not in line


def test_plan_on_an_unmeasured_gpu_prints_its_trust_line(capsys) -> None:
    code, out, err = run(capsys, "plan", "--hardware", "A40", "--method", "kivi-2")
    assert code == 0, err
    trust = next(line for line in out.splitlines() if line.startswith("trust: "))
    assert "datasheet only" in trust and "slower" in trust


def test_plan_json_rows_carry_their_trust(capsys) -> None:
    code, out, err = run(capsys, "plan", "--method", "kivi-2", "--method", "turboquant", "--json")
    data = json.loads(out)
    assert data["trust"]["source"] == "measured" and data["trust"]["decode"]["cases"] > 0
    kivi, turbo = data["results"]
    assert kivi["trust"]["kernels"]["cases"] > 0 and turbo["trust"]["kernels"] is None
    assert kivi["trust"]["decode_band_pct"] == data["trust"]["decode"]["median_ape_pct"]


def test_kv_json_carries_the_ceilings_and_kernel_trust(capsys) -> None:
    code, out, err = run(capsys, "kv", "--context", "4096", "--method", "h2o-2048", "--hardware", "A40", "--json")
    trust = json.loads(out)["trust"]
    assert trust["source"] == "datasheet" and trust["kernels"]["kernels"] is None
    assert "not validated" in trust["kernels"]["text"]
