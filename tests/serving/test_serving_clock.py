"""The tensor cores' clock of a serving run (serving.clock; validate/notes/2026-11-29-micro6-duty.md).

Expected values by hand: the H200's burst and sustained GEMM rates are hardware/H200.yaml's measured
gemm_shape_flops_per_s (729.8 TFLOP/s) and sustained_gemm_flops_per_s (660.3); Llama-3.1-8B's GEMM FLOPs a token
are 2 x its linear weights (32 layers of q 4096x4096, k and v 4096x1024, o 4096x4096, gate, up and down 4096x14336,
and the 4096x128,256 LM head: 7,504,658,432 weights; meta-llama/Llama-3.1-8B config.json)."""

from __future__ import annotations

import numpy as np
import pytest

from roofline.catalogue import load_hardware, load_model
from roofline.costmodel.device import burst_options, roofline_for
from roofline.methods import parse_method
from roofline.serving.clock import BURST_DUTY, gemm_duty
from roofline.serving.requests import LengthDist, poisson_requests
from roofline.serving.simulate import Simulator
from roofline.specs import Workload

MODEL, H200 = load_model("Llama-3.1-8B"), load_hardware("H200")
WEIGHTS = 32 * (2 * 4096 * 4096 + 2 * 4096 * 1024 + 3 * 4096 * 14336) + 4096 * 128256
BURST, SUSTAINED = 729.8e12, 660.3e12


def _gemm():
    from roofline.costmodel.ops import Op

    return Op(name="mlp_up", group="mlp", count=1, kind="gemm", dtype="bf16")


def test_burst_options_set_the_sustained_rates_aside():
    sustained, burst = roofline_for(H200), roofline_for(H200, options=burst_options(H200))
    assert sustained.tensor_rate(_gemm()) == pytest.approx(SUSTAINED, rel=1e-12)
    assert burst.tensor_rate(_gemm()) == pytest.approx(BURST, rel=1e-12)
    assert burst.ceilings["clock_ratio"] is None and sustained.ceilings["clock_ratio"] is not None


def test_a_device_without_sustained_figures_has_no_burst_twin():
    a10 = load_hardware("A10")
    assert a10.measured is None or not a10.measured.sustained_gemm_flops_per_s
    assert burst_options(a10) is None


def test_one_tokens_gemm_time_by_hand():
    sim = Simulator(MODEL, H200, Workload(batch=1, context_tokens=2048), parse_method("bf16"), max_tokens=2048,
                    clock="duty")
    assert sim.gemm_s_per_token == pytest.approx(2 * WEIGHTS / SUSTAINED, rel=1e-3)
    assert sim.burst_twin.gemm_s_per_token == pytest.approx(2 * WEIGHTS / BURST, rel=1e-3)


def test_duty_by_hand():
    # two records of 1,000 and 3,000 tokens; requests sent at 1 s and 2 s, the last finished at 5 s: 4 s of wall
    steps = np.array([[1.0, 0.1, 1, 0, 0, 0, 1000], [2.0, 0.2, 2, 0, 0, 0, 3000]], dtype=np.float64)
    duty = gemm_duty(steps, np.array([1.0, 2.0]), np.array([3.0, 5.0]), 1e-4)
    assert duty == pytest.approx(4000 * 1e-4 / 4.0)


def test_a_light_run_runs_at_the_burst_clock_and_a_heavy_one_capped():
    """2 requests/s of 1,024 + 64 tokens keep the GEMMs busy ~5 % of the time (2 x 1,088 x ~23 us): the twin's
    burst rates answer; all at once, 400 prompts of 1,024 (prefill back to back) are above half duty: capped."""
    workload = Workload(batch=1, context_tokens=2048)
    sim = Simulator(MODEL, H200, workload, parse_method("bf16"), max_tokens=2048, clock="duty")
    held = Simulator(MODEL, H200, workload, parse_method("bf16"), max_tokens=2048)  # the default: sustained
    light = poisson_requests(2.0, 60, LengthDist.parse("1024", "prompt"), LengthDist.parse("64", "output"), 0)
    got, capped = sim.run(light), held.run(light)
    burst = sim.burst_twin.run(light)
    assert gemm_duty(capped.steps, capped.requests.arrival_s, capped.finish_s, held.gemm_s_per_token) < BURST_DUTY
    np.testing.assert_array_equal(got.first_token_s, burst.first_token_s)
    assert np.median(got.ttft_s) < np.median(capped.ttft_s)  # the burst clock's prefill is shorter
    heavy = poisson_requests(float("inf"), 400, LengthDist.parse("1024", "prompt"), LengthDist.parse("1", "output"),
                             0)
    got, capped = sim.run(heavy), held.run(heavy)
    assert gemm_duty(capped.steps, capped.requests.arrival_s, capped.finish_s, held.gemm_s_per_token) > BURST_DUTY
    np.testing.assert_array_equal(got.first_token_s, capped.first_token_s)


def test_a_bad_clock_is_refused_by_name():
    with pytest.raises(ValueError, match="clock"):
        Simulator(MODEL, H200, Workload(batch=1, context_tokens=2048), parse_method("bf16"), max_tokens=2048,
                  clock="boost")


def test_the_share_is_a_step_at_half_duty():
    """The burst rate up to duty 0.5 (micro6), the sustained above (serving.clock.sustained_share says why not
    micro7's line)."""
    from roofline.serving.clock import sustained_share

    assert [sustained_share(d) for d in (0.1, 0.5, 0.51, 0.9, 1.7)] == [0.0, 0.0, 1.0, 1.0, 1.0]


def test_rates_between_the_clocks_by_hand():
    """40 % of the way: 729.8 + 0.4 x (660.3 - 729.8) = 702.0 TFLOP/s for a bf16 GEMM on the H200."""
    between = roofline_for(H200, options=burst_options(H200, share=0.4))
    assert between.tensor_rate(_gemm()) == pytest.approx(702.0e12, rel=1e-12)


def test_a_light_fleet_runs_at_the_burst_clock_as_one_replica_does():
    """A fleet takes the rule too (Fleet.run: the busiest replica's GEMM duty): a fleet of one at 2 requests/s is the
    single replica's burst-clock run; a fleet of 2 at that load stays light and runs on the twin."""
    from roofline.serving.fleet import Fleet

    workload = Workload(batch=1, context_tokens=2048)
    sim = Simulator(MODEL, H200, workload, parse_method("bf16"), max_tokens=2048, clock="duty")
    light = poisson_requests(2.0, 60, LengthDist.parse("1024", "prompt"), LengthDist.parse("64", "output"), 0)
    one = Fleet(sim, 1).run(light)
    np.testing.assert_allclose(one.trace.first_token_s, sim.run(light).first_token_s, rtol=1e-12)
    assert one.trace.gemm_clock["clock"] == "burst"
    two = Fleet(sim, 2).run(light)
    np.testing.assert_allclose(two.trace.first_token_s, Fleet(sim.burst_twin, 2).run(light).trace.first_token_s,
                               rtol=1e-12)
    held = Fleet(Simulator(MODEL, H200, workload, parse_method("bf16"), max_tokens=2048), 2).run(light)
    assert np.median(two.trace.ttft_s) < np.median(held.trace.ttft_s)
