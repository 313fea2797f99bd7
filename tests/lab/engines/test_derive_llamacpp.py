"""validate/engines/derive_llamacpp.py: its fits on exact data and its figures from run 3's files, computed by hand."""

from pathlib import Path

import pytest

from validate.engines.derive_llamacpp import affine_fit, derive, eager_layer_s, rate_fit, sampler_element_s

RUN3 = Path(__file__).resolve().parents[3] / "validate/results/engines/nvidia-h200-llamacpp-2026-11-30-run3"


def test_the_fits_recover_an_exact_law():
    """t = 2 us + bytes / 4 TB/s at 1, 10, 100 MB; t = FLOPs / 500 TFLOP/s at 1e12 and 3e12."""
    x = [1e6, 1e7, 1e8]
    alpha, rate, res = affine_fit(x, [2e-6 + b / 4e12 for b in x])
    assert alpha == pytest.approx(2e-6, rel=1e-6) and rate == pytest.approx(4e12, rel=1e-6)
    assert max(map(abs, res)) < 1e-6
    r, res = rate_fit([1e12, 3e12], [2e-3, 6e-3])
    assert r == pytest.approx(5e14) and res == [0.0, 0.0]


def test_the_sampler_a_slot_from_run_3s_two_readings():
    """-np 8 greedy on the host 12.010 ms a token, on the GPU 9.562 ms: (12.010 - 9.562) / 8 = 0.306 ms a slot."""
    assert sampler_element_s(0.012010, 0.009562) * 128_256 == pytest.approx(0.306e-3, rel=1e-3)


def test_run_3s_files_give_the_stated_figures():
    """From the committed run: batched-bench B 1 5.063 ms, B 2 7.406 ms; stage O's 32 layers 3.790 / 4.947 ms and
    lm_head 0.2743 / 0.2427 ms at n 1 / 2 -> (2.343 - 1.157 + 0.0316) / 32 = 38.05 us; the default chain 12.988 ms
    less 9.562 ms over 8 slots = 0.428 ms a slot, less one row of logits' copy (9.2 us at run 5's ~55.6 GB/s)."""
    d = derive(RUN3)
    assert d["eager_layer_s"] == 0.0  # run 5: no host excess past one token; the retired figure in its source
    assert "38.1 us a layer" in d["sources"]["eager_layer_s"]
    assert d["sampler_host_element_s"] * 128_256 == pytest.approx(0.428e-3 - 513_024 / 55.6e9, rel=4e-3)
    k = d["kernels"]["H200"]
    # stage O's one-row rows read the weights at 3.3-4.0 GB/ms; the batched path's slower
    assert 3.3e12 < k["gemv_bw"] < 4.1e12 and k["gemm_stream_bw"] < k["gemv_bw"]
    assert eager_layer_s({"mm-qo-n1": 0, "mm-qo-n2": 0, "mm-kv-n1": 0, "mm-kv-n2": 0, "mm-gate_up-n1": 0,
                          "mm-gate_up-n2": 0, "mm-down-n1": 0, "mm-down-n2": 0, "mm-lm_head-n1": 0,
                          "mm-lm_head-n2": 0}, {1: 1e-3, 2: 1.32e-3}) == pytest.approx(10e-6)
