"""A dense GEMM's fixed latency hidden under compute (hardware gemm_latency_hidden_ratio, costmodel.device.gemm_time):
the law by hand, the H200's GEMM rows against run 4's GEMMs alone, and the ratio as validate/engines/gemm_hidden.py
fits it from the committed rows."""

import pytest

from roofline.catalogue import load_hardware, load_model
from roofline.costmodel import build_graph, roofline_for
from roofline.costmodel.device import burst_options, gemm_time
from roofline.methods import parse_method
from roofline.units import B, L, P


def test_gemm_time_by_hand():
    # m = 0.1 + 0.9 = 1.0; k = 1.7
    assert gemm_time(0.8, 0.9, 0.1, 1.7, max, min) == pytest.approx(1.0)  # stream-bound: latency + stream
    assert gemm_time(0.95, 0.9, 0.1, 1.7, max, min) == pytest.approx(1.05)  # compute <= m: latency + compute
    assert gemm_time(1.35, 0.9, 0.1, 1.7, max, min) == pytest.approx(1.4)  # w = (1.7 - 1.35) / 0.7 = 0.5
    assert gemm_time(1.7, 0.9, 0.1, 1.7, max, min) == pytest.approx(1.7)  # w = 0 from k m on: compute alone
    assert gemm_time(3.0, 0.9, 0.1, 1.7, max, min) == pytest.approx(3.0)


def _rows(hw, phase: str, tokens: int) -> dict:
    graph = build_graph(load_model("Qwen3-30B-A3B"), parse_method("bf16"), phase)
    roof = roofline_for(hw, options=burst_options(hw))
    return {r["name"]: r for r in roof.evaluate(graph, {B: 1 if phase == "prefill" else tokens, L: 1024,
                                                         P: tokens})}


def test_compute_bound_prefill_gemm_pays_no_latency():
    """Qwen3-30B-A3B's o_proj at 1,024 tokens: 2 x 1,024 x 4,096 x 2,048 FLOPs / 729.8 TFLOP/s = 23.54 us; its stream
    law 6.117 us + 29,360,128 B / 4.295 TB/s = 12.95 us, so compute is 1.82 times it, past k = 1.71: the row is its
    compute alone (run 4 timed it at 27.456 us, 23.51 us less the 3.95 us replay). Without the ratio it read 29.66."""
    hw = load_hardware("H200")
    row = _rows(hw, "prefill", 1024)["o_proj"]
    assert row["time_s"] == pytest.approx(17179869184 / 729.8e12, rel=1e-6)
    assert row["time_s"] == pytest.approx(23.51e-6, rel=0.01)
    old = hw.model_copy(update={"measured": hw.measured.model_copy(update={"gemm_latency_hidden_ratio": None})})
    assert _rows(old, "prefill", 1024)["o_proj"]["time_s"] == pytest.approx(6.117e-6 + 17179869184 / 729.8e12,
                                                                          rel=1e-6)


def test_decode_gemms_keep_the_stream_law():
    """At B 16 every dense GEMM is far under its stream law: the ratio changes no row."""
    hw = load_hardware("H200")
    old = hw.model_copy(update={"measured": hw.measured.model_copy(update={"gemm_latency_hidden_ratio": None})})
    new_rows, old_rows = _rows(hw, "decode", 16), _rows(old, "decode", 16)
    for name in ("qkv_proj", "o_proj", "router", "lm_head"):
        assert new_rows[name]["time_s"] == pytest.approx(old_rows[name]["time_s"], rel=1e-12)


def test_the_h200_ratio_is_the_fit_of_the_committed_rows():
    """hardware/H200.yaml's ratio is what gemm_hidden.py fits from micro4's and run 4's committed GEMMs, and the fitted
    law misses those rows by less than the law without it."""
    from validate.engines import gemm_hidden

    k, used = gemm_hidden.fit("H200")
    assert load_hardware("H200").measured.gemm_latency_hidden_ratio == k
    alpha, bw, rate = gemm_hidden.laws("H200")
    sq = {x: sum((gemm_hidden.predicted(r, alpha, bw, rate, x) / r["s"] - 1) ** 2 for r in used) for x in (None, k)}
    assert sq[k] < sq[None]
