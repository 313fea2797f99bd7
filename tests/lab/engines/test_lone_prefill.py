"""validate.engines.lone_prefill: the offline prefill case priced at the clock its three calls run at."""

import pytest

from roofline.catalogue.loading import validate
from roofline.catalogue.store import load_hardware, load_model
from roofline.methods.registry import parse_method
from roofline.planner.phases import PhaseModel
from roofline.specs import Workload
from validate.engines.lone_prefill import lone_prefill_s

WL = {"batch": 1, "context_tokens": 2049, "engine": "sglang", "page_tokens": 1}


def _steady(hw, model) -> float:
    wl = validate(Workload, WL, "workload")
    return float(PhaseModel.build(model, hw, wl, parse_method("bf16")).prefill_time(1, 2048))


def test_a_short_case_runs_its_gemms_and_attention_at_the_burst_rates():
    """Llama-3.1-8B, one 2,048-token prompt under SGLang (3 x ~59 ms, under the H200's 1.6 s): every compute-bound op
    moves from the sustained to the burst rate. Dense GEMMs: 2 x 2,048 x 32 x (4,096 x 6,144 + 4,096 x 4,096 +
    4,096 x 28,672 + 14,336 x 4,096) = 2.8587e13 FLOPs x (1 / 660.3 - 1 / 729.8) TFLOP/s = 4.123 ms; causal attention:
    4 x 128 x 32 x 2,048 x 2,049 / 2 x 32 = 1.1004e12 FLOPs at SGLang's FA3 extend rate 606.4 TFLOP/s, steady at the
    clock ratio 1,452 / 1,500 MHz (0.968, the profile sets no sustained attention rate): x (1 / 587.0 - 1 / 606.4)
    = 0.060 ms; 4.183 ms in all."""
    hw, model = load_hardware("H200"), load_model("Llama-3.1-8B")
    wl = validate(Workload, WL, "workload")
    gemm = 2 * 2048 * 32 * (4096 * 6144 + 4096 * 4096 + 4096 * 28672 + 14336 * 4096) * (1 / 660.3e12 - 1 / 729.8e12)
    attn = 4 * 128 * 32 * 2048 * 2049 / 2 * 32 * (1 / (606.37e12 * 1452 / 1500) - 1 / 606.37e12)
    assert gemm + attn == pytest.approx(4.183e-3, rel=1e-3)
    assert _steady(hw, model) - lone_prefill_s(model, hw, wl, 2048) == pytest.approx(gemm + attn, rel=0.01)


def test_a_case_past_the_settling_time_keeps_the_steady_state():
    hw, model = load_hardware("H200"), load_model("Llama-3.1-8B")
    quick = hw.model_copy(update={"measured": hw.measured.model_copy(update={"sustained_after_s": 0.05})})
    wl = validate(Workload, WL, "workload")
    assert lone_prefill_s(model, quick, wl, 2048) == _steady(quick, model)
