"""validate.clients.step_costs's pure-Python side (no torch, no GPU): its plan, rate and clock summaries, its CLI."""

import json

import pytest

from validate.clients import step_costs, step_costs_core


def test_flops_by_hand():
    # Llama-3.1-8B fused qkv at 512 tokens: 2 x 512 x 6144 x 4096
    assert step_costs_core.gemm_flops(512, 6144, 4096) == 25_769_803_776
    # causal flash, 32 heads, d 128, P 4: 4 x 32 x 128 x (4 x 5 / 2) = 163,840
    assert step_costs_core.flash_flops(4) == 163_840
    names = [g["name"] for g in step_costs_core.plan()["h1"]["gemm"]]
    assert len(names) == 16 and "gemm_down_m16384" in names


def test_rate_summary_by_hand():
    # four 1 s-work replays: two of 0.25 s (4/s), then two of 0.5 s (2/s); settle after 0.5 s
    starts, durations = [0.0, 0.25, 0.5, 1.0], [0.25, 0.25, 0.5, 0.5]
    s = step_costs_core.rate_summary(starts, durations, 1.0, settle_s=0.5, bin_s=0.5)
    assert s["first"] == 4.0 and s["steady"] == 2.0 and s["all"] == pytest.approx(4 / 1.5)
    assert s["last_half_s"] == 2.0  # only the replay starting at 1.0 (end 1.5, window from 1.0)
    assert s["series"] == [[0.0, 4.0], [0.5, 2.0], [1.0, 2.0]]


def test_clock_summary_window_and_nearest():
    samples = [[0.0, 1980, 300.0, 40, "0x0"], [0.1, 1755, 700.0, 60, "0x4"], [0.2, 1755, None, 61, "0x4"]]
    inside = step_costs_core.clock_summary(samples, 0.05, 0.25)
    assert inside["samples"] == 2 and inside["sm_mhz"] == 1755 and inside["power_w"] == 700.0
    assert inside["reasons"] == ["0x4"]
    nearest = step_costs_core.clock_summary(samples, 0.01, 0.02)  # a burst between two samples: the nearest one
    assert nearest["samples"] == 1 and nearest["sm_mhz"] == 1980
    assert step_costs_core.clock_summary([], 0.0, 1.0) is None


def test_moe_law():
    # 2 experts x 28672 x 4096 bf16 = 469,762,048 bytes at 2.748 TB/s + 4.941 us
    assert step_costs_core.moe_law(2, 28672, 4096, 4.941e-6, 2.748e12) == pytest.approx(4.941e-6 + 469_762_048 /
    2.748e12)


def test_dry_run_cli(tmp_path):
    out = tmp_path / "probe.json"
    assert step_costs.main(["--out", str(out), "--dry-run"]) == 0
    gemm = json.loads(out.read_text())["cases"][0]
    # 800 TFLOP/s for the first 0.2 s, then 700: the first replay 800, the steady part (after 0.5 s) 700
    assert gemm["sustained"]["first"] == pytest.approx(800) and gemm["steady_tflops"] == pytest.approx(700)
    assert gemm["burst_tflops"] == pytest.approx(800) and gemm["steady_over_burst"] == pytest.approx(0.875)
    assert gemm["sustained"]["clocks"]["steady"]["sm_mhz"] == 1755.0 and gemm["burst_clocks"]["sm_mhz"] == 1980.0


def test_dry_run_rows_calibrate():
    # the probe's row shapes are what validate.clients.calibrate reads: the synthetic run's figures come back
    from validate.clients.calibrate import EAGER_LAYER_CALLS, probe_ceilings

    assert set(EAGER_LAYER_CALLS) <= set(step_costs_core.CHAIN_KINDS)
    out = probe_ceilings(step_costs_core.dry_run(), "dry.json")
    assert out["sustained_gemm_flops_per_s"]["bf16"] == pytest.approx(700e12, rel=1e-3)
    assert out["sustained_attention_flops_per_s"][128] == pytest.approx(700e12, rel=1e-3)
    assert out["burst_sm_clock_hz"] == 1980e6 and out["sustained_sm_clock_hz"] == 1755e6
    assert out["aten_kernel_s"] == pytest.approx(2e-6)
    # 800 until 0.2 s, 700 after: the first settled 50 ms bin starts at 0.2 s and ends at 0.25 s
    assert out["sustained_after_s"] == pytest.approx(0.25)


def test_cli_rejects_unknown_part(tmp_path):
    with pytest.raises(SystemExit) as err:
        step_costs.main(["--out", str(tmp_path / "x.json"), "--part", "h9", "--dry-run"])
    assert err.value.code == 2
