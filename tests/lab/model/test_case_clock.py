"""validate.model.case_clock: a case is predicted at the SM clock recorded while it was timed."""

import pytest

from validate.model import case_clock
from validate.model.hardware import load_hardware


def test_case_mhz_rounds_to_the_clock_steps_and_ignores_bad_values() -> None:
    assert case_clock.case_mhz({"clocks": {"sm_mhz": 1837.5}}) in (1830, 1845)  # between two 15 MHz steps
    assert case_clock.case_mhz({"clocks": {"sm_mhz": 1605.0}}) == 1605
    for bad in ({}, {"clocks": None}, {"clocks": {"sm_mhz": None}}, {"clocks": {"sm_mhz": -5}},
                {"clocks": {"sm_mhz": True}}, {"clocks": {"sm_mhz": "1980"}}):
        assert case_clock.case_mhz(bad) is None


def test_onchip_rates_scale_with_the_case_clock_and_dram_does_not() -> None:
    h100 = load_hardware("H100-SXM")  # sm_clock_hz 1.98 GHz, the boost clock of the on-chip microbenchmarks
    row = {"clocks": {"sm_mhz": 1605.0}}  # aquakv-2_b8_l65536 on the H100, nvidia-h100-clocked.json
    s = 1605 / 1980
    assert case_clock.scale(h100, row) == pytest.approx(s)
    hw = case_clock.at_case_clock(h100, row)
    m, m0 = hw.measured, h100.measured
    assert hw.sm_clock_hz == pytest.approx(1.605e9)
    assert m.dispatch_ops_per_s == pytest.approx(m0.dispatch_ops_per_s * s)  # 116.5 x 132 x 1.605 GHz
    assert m.dispatch_ops_per_s == pytest.approx(116.5 * 132 * 1.605e9, rel=2e-3)
    assert m.shared_memory_bytes_per_s == pytest.approx(m0.shared_memory_bytes_per_s * s)
    assert m.read_bytes_per_s == m0.read_bytes_per_s  # HBM: its own clock
    assert m.gemm_flops_per_s == m0.gemm_flops_per_s  # the big-GEMM ceiling: no recorded clock, not rescaled
    assert h100.measured.dispatch_ops_per_s == m0.dispatch_ops_per_s  # the catalogue's spec is not changed


def test_tensor_rates_rescale_from_the_clock_they_were_measured_at() -> None:
    # validate/results/experiments/nvidia-h100-wgmma-probe.json: wgmma_n64_rs_p1 0.628 ms -> 902.5 TFLOP/s while the
    # probe read 1754 MHz; nvidia-h100-onchip-probe.json: mma_sync 6.463e14 FLOP/s at 1833.8 MHz
    h100 = load_hardware("H100-SXM")
    m0 = h100.measured
    assert m0.wgmma_clock_hz["n64.rs.p1"] == pytest.approx(1.754e9, rel=1e-3)
    assert m0.mma_sync_clock_hz == pytest.approx(1.834e9, rel=1e-3)
    for mhz in (1605.0, 1980.0):  # below the wgmma's own clock, and above it (a light case at the boost clock)
        m = case_clock.at_case_clock(h100, {"clocks": {"sm_mhz": mhz}}).measured
        assert m.wgmma_flops_per_s["n64.rs.p1"] == pytest.approx(902.5e12 * mhz / 1754.3, rel=2e-3)
        assert m.mma_sync_flops_per_s == pytest.approx(6.463e14 * mhz / 1833.8, rel=2e-3)
        # the same per-clock rate at every case clock: 4096 FLOP per SM per clock within the probe's 5 %
        assert m.wgmma_flops_per_s["n64.rs.p1"] / (132 * mhz * 1e6) == pytest.approx(4096, rel=0.06)


def test_no_clock_keeps_the_spec_and_the_boost_clock_caps_it() -> None:
    h100 = load_hardware("H100-SXM")
    assert case_clock.at_case_clock(h100, {}) is h100
    at_boost = case_clock.at_case_clock(h100, {"clocks": {"sm_mhz": 1980.0}})
    above = case_clock.at_case_clock(h100, {"clocks": {"sm_mhz": 2100.0}})  # never faster than the boost
    assert at_boost.sm_clock_hz == above.sm_clock_hz == h100.sm_clock_hz
    assert at_boost.measured.shared_memory_bytes_per_s == h100.measured.shared_memory_bytes_per_s
    assert above.measured.wgmma_flops_per_s == at_boost.measured.wgmma_flops_per_s
    bare = h100.model_copy(update={"measured": h100.measured.model_copy(update={"wgmma_clock_hz": {},
                                                                               "mma_sync_clock_hz": None})})
    assert case_clock.at_case_clock(bare, {"clocks": {"sm_mhz": 1980.0}}) is bare  # nothing recorded to rescale


def test_compare_predicts_a_clocked_row_slower_and_says_so() -> None:
    from validate.model.compare import compare

    h100 = load_hardware("H100-SXM")
    params = {"method": "aquakv:bits=2", "num_heads": 32, "num_kv_heads": 8, "head_dim": 128, "batch": 8,
              "context": 65536}
    base = {"family": "aquakv", "name": "aquakv-2_b8_l65536", "params": params, "ms": 6.5}
    rows = [base, {**base, "name": "slow", "clocks": {"sm_mhz": 1605.0}}]
    report = compare({"env": {"device": "NVIDIA H100 80GB HBM3"}, "cases": rows}, h100)
    got = {r["name"]: r for r in report["families"]["aquakv"]["rows"]}
    assert got["slow"]["note"] == "at 1605 MHz" and got["aquakv-2_b8_l65536"]["note"] == ""
    assert got["slow"]["predicted_ms"] > got["aquakv-2_b8_l65536"]["predicted_ms"]


def test_the_probe_clock_is_preferred_to_nvidia_smi() -> None:
    # fused_b8_l16384 on the H100 (nvidia-h100-probe-grid-xq.json): nvidia-smi 1980, the in-GPU probe 1853.9
    row = {"clocks": {"sm_mhz": 1980.0, "probe_mhz": 1853.9}}
    assert case_clock.case_mhz(row) == 1860  # 1853.9 rounded to the 15 MHz steps
    h100 = load_hardware("H100-SXM")
    assert case_clock.at_case_clock(h100, row).sm_clock_hz == pytest.approx(1.86e9)
    assert case_clock.case_mhz({"clocks": {"probe_mhz": 1500.0}}) == 1500  # a probe without nvidia-smi
