"""Issue 13's steady-state ceilings: the probe's figures -> Measured (validate.clients.calibrate.probe_ceilings) and
their use (Roofline.steady_state): sustained tensor-core rates for GEMMs and prefill attention, the aten per-kernel
time for fusion 'none'. Absent fields change nothing (the committed comparisons stay as they are)."""

import pytest

from roofline.catalogue import load_hardware, load_model
from roofline.costmodel import RooflineOptions, build_graph, roofline_for
from roofline.methods import parse_method
from roofline.units import B, L, P
from validate.clients.calibrate import EAGER_LAYER_CALLS, probe_ceilings, settling_time

_PROBE_FIELDS = {"sustained_gemm_flops_per_s": {}, "sustained_attention_flops_per_s": {}, "burst_sm_clock_hz": None,
                 "fused_kernel_s": None,
                 "sustained_sm_clock_hz": None, "aten_kernel_s": None}


def _bare():
    """H100-SXM's calibrated spec without the probe's steady-state figures (the catalogue now carries them)."""
    hw = load_hardware("H100-SXM")
    return hw.model_copy(update={"measured": hw.measured.model_copy(update=_PROBE_FIELDS)})


def _with(**fields):
    hw = _bare()
    return hw.model_copy(update={"measured": hw.measured.model_copy(update=fields)})


def _rows(hw, phase: str, fusion: str, n: int, batch: int = 1) -> dict:
    graph = build_graph(load_model("Llama-3.1-8B"), parse_method("bf16"), phase, fusion=fusion)
    roof = roofline_for(hw, options=RooflineOptions())
    return {r["name"]: r for r in roof.evaluate(graph, {B: batch, L: n, P: n})}


def _gemm(m, steady, series=(), burst_mhz=1980.0, steady_mhz=1700.0):
    return {"part": "h1", "kind": "gemm", "m": m, "steady_tflops": steady, "burst_clocks": {"sm_mhz": burst_mhz},
            "sustained": {"steady": steady, "series": [list(x) for x in series],
                          "clocks": {"steady": {"sm_mhz": steady_mhz}}}}


def test_settling_time_by_hand():
    # steady 610: 800, 700 are out of 2 %, 612 and 608 within -> settled in the bin starting at 0.10 s, ends 0.15 s
    assert settling_time([[0.0, 800], [0.05, 700], [0.1, 612], [0.15, 608]], 610, 0.05) == pytest.approx(0.15)
    assert settling_time([[0.0, 610], [0.05, 611]], 610, 0.05) == pytest.approx(0.05)  # settled from the start
    assert settling_time([[0.0, 610], [0.05, 700]], 610, 0.05) == pytest.approx(0.1)  # never: the whole window


def test_probe_ceilings_by_hand():
    series = [[0.0, 800], [0.05, 700], [0.1, 612], [0.15, 608]]
    chains = [{"part": "h2", "kind": k, "per_call_s": 2e-6} for k in EAGER_LAYER_CALLS]
    chains[list(EAGER_LAYER_CALLS).index("index_put_kv")]["per_call_s"] = 6e-6
    probe = {"cases": [_gemm(512, 500.0, series), _gemm(2048, 600.0, series, 1980, 1700),
                       _gemm(8192, 620.0, series, 1960, 1720),
                       {"part": "h1", "kind": "flash", "prompt": 8192, "steady_tflops": 550.0},
                       {"part": "h1", "kind": "flash", "prompt": 16384, "steady_tflops": 580.0}, *chains]}
    out = probe_ceilings(probe, "p.json")
    assert out["sustained_gemm_flops_per_s"] == {"bf16": 610e12}  # median of 600 and 620 (M = 512 left out)
    assert out["sustained_attention_flops_per_s"] == {128: 580e12}  # the longest prompt
    assert out["burst_sm_clock_hz"] == 1970e6 and out["sustained_sm_clock_hz"] == 1710e6
    # 32 calls per layer, 2 of them index_put at 6 us, 30 at 2 us: (2 x 6 + 30 x 2) / 32 = 2.25 us
    assert sum(EAGER_LAYER_CALLS.values()) == 32 and out["aten_kernel_s"] == pytest.approx(2.25e-6)
    assert out["probe_source"] == "p.json"
    assert probe_ceilings({"cases": []}, "p.json") == {}  # nothing measured, nothing written


def test_sustained_rate_prices_compute_bound_gemms_only():
    hw = _bare()
    burst = hw.measured.gemm_shape_flops_per_s["bf16"]
    slow = _with(sustained_gemm_flops_per_s={"bf16": burst / 2})
    alpha = hw.measured.gemm_latency_s  # a GEMM kernel's per-kernel time, outside the roofline max()
    base, half = _rows(hw, "prefill", "full", 8192), _rows(slow, "prefill", "full", 8192)
    # qkv at 8192 tokens: 412 GFLOP against 50 MB of weights, compute-bound: its roofline time doubles
    assert half["qkv_proj"]["time_s"] - alpha == pytest.approx(2 * (base["qkv_proj"]["time_s"] - alpha), rel=1e-9)
    assert half["attn_norm"]["time_s"] == base["attn_norm"]["time_s"]  # not a tensor-core op
    # decode at batch 1: weights streamed, memory-bound, unchanged
    assert _rows(slow, "decode", "full", 1024)["qkv_proj"]["time_s"] == _rows(hw, "decode", "full", 1024)[
        "qkv_proj"]["time_s"]


def test_clock_ratio_scales_rates_without_their_own_measurement():
    hw = _bare()
    clocked = _with(burst_sm_clock_hz=2.0e9, sustained_sm_clock_hz=1.5e9)
    alpha = hw.measured.gemm_latency_s
    base, slow = _rows(hw, "prefill", "full", 8192), _rows(clocked, "prefill", "full", 8192)
    assert slow["mlp_up"]["time_s"] - alpha == pytest.approx((base["mlp_up"]["time_s"] - alpha) * 2.0 / 1.5, rel=1e-9)


def _step(h, fusion: str) -> float:
    """A decode step of Llama-3.1-8B at context 1024, batch 1: the sum of count x time over its rows."""
    return sum(r["count"] * r["time_s"] for r in _rows(h, "decode", fusion, 1024).values())


def test_aten_kernel_time_for_eager_kernels_only():
    hw = _bare()
    aten = _with(aten_kernel_s=2.0e-6)
    chain = hw.measured.kernel_overhead_s

    # eager kernels outside GEMMs and attention, Llama-3.1-8B (fusion.py's table): per layer two norms of 8,
    # RoPE 10, KV write 2, attention reduce 1, two residual adds, SiLU x up 2 = 33; x 32 layers + embedding
    # + final norm 8 = 1065
    assert _step(aten, "none") - _step(hw, "none") == pytest.approx(1065 * (2.0e-6 - chain), rel=1e-9)
    assert _step(aten, "full") == _step(hw, "full")  # compiled kernels keep the chain's per-kernel time


def test_fused_kernel_time_for_compiled_kernels_only():
    hw = _bare()
    fused = _with(fused_kernel_s=2.0e-6)
    chain = hw.measured.kernel_overhead_s

    # Inductor's fused kernels of Llama-3.1-8B's compiled layer (fusion.py's 'full' table, the client's census): two
    # RMSNorms, RoPE + K write, V write, SiLU x up = 5 per layer x 32 layers + the final norm = 161
    assert _step(fused, "full") - _step(hw, "full") == pytest.approx(161 * (2.0e-6 - chain), rel=1e-9)
    assert _step(fused, "none") == _step(hw, "none")  # eager kernels keep theirs (aten_kernel_s or the chain)


def test_fused_kernel_time_weights_the_layers_kernels_by_hand():
    from validate.clients.calibrate import FUSED_LAYER_CALLS, fused_kernel_time

    rows = [{"name": "fused_rms_norm", "per_kernel_s": 2e-6}, {"name": "fused_add_rms_norm", "per_kernel_s": 2.2e-6},
            {"name": "fused_rope", "per_kernel_s": 1.3e-6}, {"name": "fused_silu_mul", "per_kernel_s": 1.5e-6}]
    # one layer: 1 norm, 1 add + norm, 3 pointwise (RoPE + K write, V write, attention inputs), 1 SiLU x up
    assert sum(FUSED_LAYER_CALLS.values()) == 6
    assert fused_kernel_time({"rows": rows}) == pytest.approx((2e-6 + 2.2e-6 + 3 * 1.3e-6 + 1.5e-6) / 6)
    assert fused_kernel_time({"rows": rows[:2]}) is None  # a kind missing: nothing calibrated
