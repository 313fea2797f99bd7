"""validate.engines.api_loop: vLLM 0.24's API server as one asyncio loop; the expected values are worked by hand from
the module's equations, and run 24's figures from its /metrics scrapes as `vllm serve` wrote them."""

import math

import pytest

from validate.engines.api_loop import LoopCosts, loop, run24_api_excess_s, run24_point


def test_an_idle_server_adds_nothing():
    lp = loop(LoopCosts(10e-6, 5e-6, 20e-6), 0, 1e-3)
    assert lp.excess_s() == 0.0 and lp.way_out_s == 0.0


def test_below_saturation_a_token_waits_the_busy_remainder_then_its_step():
    # u = (10 + 10 x 5) / 1000 = 0.06; r1 = 0.06 + 10 x 20 / 1000 = 0.26; B = 0.26 ms;
    # remainder 0.26^2 / 2 = 0.0338 ms; way out 0.2938 ms; three hops in 0.1014 ms
    lp = loop(LoopCosts(10e-6, 5e-6, 20e-6), 10, 1e-3)
    assert lp.load_steps == pytest.approx(0.06)
    assert lp.load_one_token_chunks == pytest.approx(0.26)
    assert lp.tokens_per_chunk == 1.0 and lp.cycle_s == 1e-3
    assert lp.way_out_s == pytest.approx(0.2938e-3)
    assert lp.excess_s() == pytest.approx(0.3952e-3)
    assert lp.excess_s(hops_in=1) == pytest.approx(0.3276e-3)


def test_past_saturation_chunks_coalesce_and_the_cycle_is_what_the_chunks_leave():
    # u = 40 x 10 / 1000 = 0.4; r1 = 0.4 + 40 x 50 / 1000 = 2.4; C = 40 x 50 us / 0.6 = 3.3333 ms,
    # 3.3333 tokens a chunk; way out 1.5 C = 5 ms; a hop C / 2; three hops and the way out 10 ms
    lp = loop(LoopCosts(0.0, 10e-6, 50e-6), 40, 1e-3)
    assert lp.load_one_token_chunks == pytest.approx(2.4)
    assert lp.cycle_s == pytest.approx(10e-3 / 3)
    assert lp.tokens_per_chunk == pytest.approx(10 / 3)
    assert lp.way_out_s == pytest.approx(5e-3)
    assert lp.excess_s() == pytest.approx(10e-3)


def test_per_output_work_past_the_step_period_never_catches_up():
    lp = loop(LoopCosts(0.0, 30e-6, 50e-6), 40, 1e-3)  # u = 1.2
    assert math.isinf(lp.cycle_s) and math.isinf(lp.excess_s())


def test_a_slower_host_scales_every_cost():
    # the first case on a host twice as slow: r1 = 0.52, B = 0.52 ms, way out 0.52 + 0.52^2 / 2 = 0.6552 ms
    lp = loop(LoopCosts(10e-6, 5e-6, 20e-6).scaled(2.0), 10, 1e-3)
    assert lp.way_out_s == pytest.approx(0.6552e-3)


def test_run24_points_read_the_engine_step_and_the_probes_prefill():
    # N 4: 13,301 inter-token latencies summing to 27.756 s (2.0869 ms a step); 20 prefills (the probes alone)
    # averaging 8.5632 ms; the probe's client TTFT median 18.13 ms (p4.json)
    p = run24_point(4)
    assert p["step_period_s"] == pytest.approx(2.0869e-3, rel=1e-4)
    assert p["prefill_lo_s"] == pytest.approx(8.5632e-3, rel=1e-4) == p["prefill_hi_s"]
    assert p["ttft_p50_s"] == pytest.approx(18.134e-3, rel=1e-3)
    # N 64: 36 prefills summing to 548.36 ms, 16 of them run 16's streams finishing in the window
    p = run24_point(64)
    assert p["prefill_hi_s"] == pytest.approx(548.36e-3 / 20, rel=1e-3)
    assert p["prefill_lo_s"] == pytest.approx((548.36e-3 - 16 * 5.6353e-3) / 20, rel=1e-3)


def test_run24_api_excess_at_64_streams_is_the_client_ttft_less_the_engine_prefill_growth():
    # client TTFT medians 103.63 - 14.09 = 89.54 ms; prefill growth 27.42 - 5.64 = 21.78 ms (hi) or
    # 22.91 - 5.64 = 17.27 ms (lo): 67.8 .. 72.3 ms
    lo, hi = run24_api_excess_s(64)
    assert lo == pytest.approx(67.76e-3, abs=0.05e-3)
    assert hi == pytest.approx(72.27e-3, abs=0.05e-3)


def test_run25_h200_host_costs_from_its_raw_files():
    # run 25's rep-1 (nvidia-h200-api-loop-2026-12-02-run25): costs.json's least squares give 7.5433 us an output and a
    # negative intercept (read 0); serve-16-1.94.json: cpu 7.2555 s, 7,732 steps at 119.68 us (step_s_by_outputs 16),
    # 115,184 chunks -> (7.2555 - 0.92537) / 115184 = 54.96 us a chunk. This CPU (three repetitions, medians): 1.06 +
    # 16 x 8.075 + 44.08 = 174.3 us against rep-1's 0 + 16 x 7.543 + 54.96 = 175.7 us: H1's ratio 1.01 on rep-1.
    from validate.engines.api_loop import ROOT, _rep_costs, judge25, measured_costs

    folder = ROOT / "validate/results/engines/nvidia-h200-api-loop-2026-12-02-run25"
    costs = _rep_costs(folder / "rep-1")
    assert costs.step_s == 0.0
    assert costs.output_s == pytest.approx(7.5433e-6, rel=1e-4)
    assert costs.chunk_s == pytest.approx(54.96e-6, rel=1e-3)
    here, _ = measured_costs()
    work = [c.step_s + 16 * c.output_s + c.chunk_s for c in (costs, here)]
    assert work[0] / work[1] == pytest.approx(175.65 / 174.34, rel=2e-3)
    assert "H2 (N 64 within 30 %): refuted" in judge25(folder)
