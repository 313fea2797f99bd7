"""--ceilings (measured / datasheet / estimate for devices never measured) and --fusion on plan and kv.

Figures derived by hand from the committed specs: hardware/H100-SXM.yaml and hardware/H200.yaml (datasheet
bandwidths 3.35 and 4.8 TB/s; measured read 3.130 and 4.486 TB/s, bf16 GEMM 772.6 and 707.2 TFLOP/s, per-kernel
time 1.024 and 0.9299 us, from validate/results/{,clients/}nvidia-h1*.json).
"""

import json

import pytest

from roofline.catalogue import load_hardware, load_model
from roofline.catalogue.ceiling_sources import ceilings_label, comparable, memory_generation, with_ceilings
from roofline.cli import main
from roofline.methods import parse_method
from roofline.planner import plan
from roofline.specs import Workload

STEP = ["--method", "bf16", "--batch", "1", "--context", "4096", "--generated", "1", "--json"]


def _plan(capsys, *args: str) -> dict:
    assert main(["plan", *STEP, *args]) == 0
    return json.loads(capsys.readouterr().out)


def test_datasheet_tpot_follows_the_bandwidth_ratio(capsys):
    # memory-bound batch-1 step, datasheet ceilings (no per-kernel time): same bytes over 3.35 vs 4.8 TB/s
    h100 = _plan(capsys, "--hardware", "H100-SXM", "--ceilings", "datasheet")
    h200 = _plan(capsys, "--hardware", "H200", "--ceilings", "datasheet")
    assert h100["ceilings"].startswith("datasheet") and h100["fusion"] == "typical"
    ratio = h100["results"][0]["tpot_s"] / h200["results"][0]["tpot_s"]
    assert ratio == pytest.approx(4.8 / 3.35, rel=1e-3)
    # bytes by hand: Llama-3.1-8B weights less the embedding table (8.030e9 - 128256 x 4096 params, bf16) plus
    # the KV of 4096 tokens (32 layers x 8 kv heads x 128 x 2 (K, V) x 2 bytes = 131072 B/token)
    weights = (8_030_261_248 - 128_256 * 4096) * 2
    assert h100["results"][0]["tpot_s"] * 3.35e12 == pytest.approx(weights + 4096 * 131_072, rel=0.01)


def test_measured_step_is_slower_than_datasheet_by_at_least_the_gemm_stream_ratio(capsys):
    measured = _plan(capsys, "--hardware", "H100-SXM")
    datasheet = _plan(capsys, "--hardware", "H100-SXM", "--ceilings", "datasheet")
    assert measured["ceilings"].startswith("measured on NVIDIA H100")
    # skinny GEMMs stream weights at 2.748 TB/s measured vs 3.35 datasheet; kernels add time on top
    assert measured["results"][0]["tpot_s"] / datasheet["results"][0]["tpot_s"] > 3.35 / 2.748


def test_fusion_levels_set_the_kernel_census(capsys):
    kernels = {}
    for level in ("none", "typical", "full"):
        assert main(["kv", "--context", "4096", "--hardware", "H100-SXM", "--fusion", level, "--json"]) == 0
        r = json.loads(capsys.readouterr().out)
        assert r["fusion"] == level
        kernels[level] = r["decode_kernels"]
    # torch.compile fuses the K write into RoPE but writes V in a kernel of its own (the compiled client's census,
    # triton_poi_..._index_put_2 once per layer): as many kernels as the typical engine's separate cache write
    assert kernels["typical"] == kernels["full"]
    # eager per layer: 2 norms x (8 - 1), RoPE 10 - 1, SiLU x up 2 - 1, cache write 2 - 1, 2 residual adds
    # unfused = 27; plus the final norm's 7
    assert kernels["none"] - kernels["typical"] == 32 * 27 + 7


def test_fusion_reaches_the_planner_and_its_cache():
    model, hw, method = load_model("Llama-3.1-8B"), load_hardware("H100-SXM"), [parse_method("bf16")]
    steps = {}
    for level in ("full", "none", "full"):
        w = Workload(batch=1, context_tokens=4096, generated_tokens=1, fusion=level)
        steps.setdefault(level, []).append(plan(model, hw, w, method)["results"][0]["tpot_s"])
    assert steps["full"][0] == steps["full"][1]
    # 1226 - 355 = 871 more kernels, each at least the measured per-kernel 1.024 us
    assert steps["none"][0] - steps["full"][0] >= 871 * 1.024e-6


def test_estimate_for_gh200_from_h100_and_h200():
    hw = with_ceilings(load_hardware("GH200"))
    m = hw.measured
    assert [h.name for h in comparable(load_hardware("GH200"), _catalogue())] == ["H100-SXM", "H200"]
    read = (3.130 / 3.35 + 4.486 / 4.8) / 2
    assert m.read_bytes_per_s == pytest.approx(read * 4.9e12, rel=1e-9)
    gemm = (772.6 + 707.2) / 2 / 989.4
    assert m.gemm_flops_per_s["bf16"] == pytest.approx(gemm * hw.bf16_dense_flops_per_s, rel=1e-9)
    assert m.kernel_overhead_s == pytest.approx((1.024e-6 + 0.9299e-6) / 2)
    label = ceilings_label(hw)
    spread = (772.6 - 707.2) / 989.4 / gemm  # 8.8 %
    assert label.startswith("estimate from H100-SXM, H200") and f"{spread:.1%} in gemm_flops_per_s.bf16" in label


def test_no_comparable_device_falls_back_to_datasheet():
    pcie = with_ceilings(load_hardware("H100-PCIe"))  # Hopper with HBM2e: no measured HBM2 Hopper
    assert pcie.measured is None and "no measured hopper device with HBM2-generation" in ceilings_label(pcie)
    # no architecture in its spec: nothing is comparable (H20 itself, Hopper with HBM3, has an estimate)
    h20 = load_hardware("H20")
    assert with_ceilings(h20).measured.estimate
    assert with_ceilings(h20.model_copy(update={"architecture": None}), catalogue=_catalogue()).measured is None
    assert memory_generation("HBM3e") == "HBM3" and memory_generation("GDDR6X") == "GDDR6"


def test_measured_devices_keep_their_own_section_and_datasheet_drops_it():
    h200 = load_hardware("H200")
    assert with_ceilings(h200) is h200
    assert with_ceilings(h200, "datasheet").measured is None
    with pytest.raises(ValueError, match="ceilings"):
        with_ceilings(h200, "guessed")


def test_bad_flag_is_one_line_exit_2(capsys):
    with pytest.raises(SystemExit) as err:
        main(["plan", "--ceilings", "guessed"])
    assert err.value.code == 2 and "--ceilings" in capsys.readouterr().err


def _catalogue():
    from roofline.catalogue import hardware_names

    return [load_hardware(n) for n in hardware_names()]
