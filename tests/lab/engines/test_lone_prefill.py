"""validate.engines.lone_prefill: the offline prefill case priced where its median call sits on the board's settling
curve (micro6 / micro7's back-to-back GEMMs from idle, 50 ms windows)."""

import pytest

from roofline.catalogue.loading import validate
from roofline.catalogue.store import load_hardware, load_model
from roofline.costmodel.device import burst_options, roofline_for
from roofline.engines.timing import engine_options
from roofline.methods.registry import parse_method
from roofline.planner.phases import PhaseModel
from roofline.specs import Workload
from validate.engines.lone_prefill import lone_prefill_s, settling, share_between

WL = {"batch": 1, "context_tokens": 2049, "engine": "sglang", "page_tokens": 1}


def test_share_between_by_hand():
    curve = ((0.05, 0.0), (0.10, 0.5), (0.15, 1.0))
    assert share_between(curve, 0.04, 0.08) == pytest.approx((0.01 * 0.0 + 0.03 * 0.5) / 0.04)  # 0.375
    assert share_between(curve, 0.2, 0.4) == pytest.approx(1.0)  # past the last window: settled
    assert share_between(curve, 0.0, 0.05) == 0.0


def test_the_h200_curve_starts_at_the_burst_rate_and_settles():
    """micro6's first window ends at 0.0510 s, micro7's at 0.0521: pooled 0.0516 s, share 0 (it is the burst); the
    second windows (707.9 and 693.4 TFLOP/s against 757.6 and 743.0 first) are about half way down."""
    curve = settling("H200")
    assert curve[0] == (pytest.approx(0.05155, abs=1e-4), 0.0)
    assert 0.4 < curve[1][1] < 0.7
    assert all(0.0 <= s <= 1.0 for _, s in curve) and settling("H100-SXM") == ()


def _prefill(hw, options=None) -> float:
    wl = validate(Workload, WL, "workload")
    roof = roofline_for(hw, options=options) if options else None
    return float(PhaseModel.build(load_model("Llama-3.1-8B"), hw, wl, parse_method("bf16"), roofline=roof)
                 .prefill_time(1, 2048))


def test_a_2048_token_case_sits_between_the_burst_and_the_settled_rate():
    """Llama-3.1-8B's 2,048-token prefill under SGLang takes ~59 ms: its second call runs 59-118 ms into the busy
    time, across the second window, so it is priced strictly between the two clocks."""
    hw = load_hardware("H200")
    wl = validate(Workload, WL, "workload")
    lone = lone_prefill_s(load_model("Llama-3.1-8B"), hw, wl, 2048)
    burst = _prefill(hw, burst_options(hw, engine_options("sglang", hw)))
    assert burst < lone < _prefill(hw)


def test_a_device_without_a_curve_keeps_the_steady_state():
    hw = load_hardware("H200")
    other = hw.model_copy(update={"name": "H200-no-curve"})
    wl = validate(Workload, WL, "workload")
    assert lone_prefill_s(load_model("Llama-3.1-8B"), other, wl, 2048) == _prefill(other)
