"""Fleets (serving.fleet): N replicas behind a router on one clock.

Expectations: one replica is the single-replica simulator exactly; round-robin replicas are independent, so each
replays the single simulator on its own share of the stream; the prefix hits of each router follow, by hand, from
which replica has already seen a request's system prompt (every request runs alone).
"""

from __future__ import annotations

import json

import numpy as np
import pytest

from roofline.catalogue import load_hardware, load_model
from roofline.cli import main
from roofline.methods import parse_method
from roofline.serving.fleet import Fleet, fewest_replicas
from roofline.serving.prefix import parse_prefix
from roofline.serving.requests import LengthDist, Requests, poisson_requests
from roofline.serving.simulate import Simulator, Slo
from roofline.specs import Workload

MODEL, H100 = load_model("Llama-3.1-8B"), load_hardware("H100-SXM")


def simulator(max_tokens: int) -> Simulator:
    wl = Workload(context_tokens=max_tokens, prefill_chunk_tokens=8192)
    return Simulator(MODEL, H100, wl, parse_method("bf16"), max_tokens=max_tokens)


def mixed(rate: float, n: int, seed: int = 0) -> Requests:
    return poisson_requests(rate, n, LengthDist.parse("uniform:256:2048", "p"), LengthDist.parse("uniform:16:256", "o"),
                            seed)


def test_one_replica_is_the_single_simulator_exactly():
    reqs = mixed(12.0, 300)
    sim = simulator(reqs.max_tokens)
    one, fleet = sim.run(reqs), Fleet(sim, 1).run(reqs).trace
    assert np.array_equal(one.first_token_s, fleet.first_token_s)
    assert np.array_equal(one.finish_s, fleet.finish_s)
    assert np.array_equal(one.steps, fleet.steps)


def test_one_replica_replays_the_single_simulator_with_vllms_admission_lag():
    """vLLM's profile (async scheduling: a request arriving during a step joins the step after the next) gives the
    same per-request times and steps in a one-replica fleet as in Simulator.run."""
    from roofline.engines.scheduling import scheduling

    reqs = mixed(12.0, 300)
    profile = scheduling("vllm", H100, "api", 1, context_len=reqs.max_tokens)
    assert profile.admission_lag
    wl = Workload(context_tokens=reqs.max_tokens, prefill_chunk_tokens=profile.max_num_batched_tokens)
    sim = Simulator(MODEL, H100, wl, parse_method("bf16"), max_tokens=reqs.max_tokens, engine=profile)
    one, fleet = sim.run(reqs), Fleet(sim, 1).run(reqs).trace
    assert np.array_equal(one.first_token_s, fleet.first_token_s)
    assert np.array_equal(one.finish_s, fleet.finish_s)
    assert np.array_equal(one.steps, fleet.steps)


def test_round_robin_replicas_each_replay_their_share():
    reqs = mixed(24.0, 300, seed=1)
    sim = simulator(reqs.max_tokens)
    run = Fleet(sim, 3, "round-robin").run(reqs)
    assert np.array_equal(run.routed, np.arange(300) % 3)
    for j in range(3):
        share = Requests(reqs.arrival_s[j::3], reqs.prompt_tokens[j::3], reqs.output_tokens[j::3])
        alone = sim.run(share)
        assert run.trace.first_token_s[j::3] == pytest.approx(alone.first_token_s, rel=1e-12)
        assert run.trace.finish_s[j::3] == pytest.approx(alone.finish_s, rel=1e-12)


def test_least_outstanding_spreads_a_burst_evenly():
    reqs = poisson_requests(float("inf"), 10, LengthDist.parse("512", "p"), LengthDist.parse("32", "o"), 0)
    run = Fleet(simulator(544), 4, "least-outstanding").run(reqs)
    assert run.routed.tolist() == [0, 1, 2, 3, 0, 1, 2, 3, 0, 1]  # all at t = 0: the emptiest, lowest index first


def test_prefix_aware_routing_keeps_a_system_prompt_on_one_replica():
    base = poisson_requests(0.001, 40, LengthDist.parse("128", "p"), LengthDist.parse("4", "o"), 3)  # each alone
    reqs, tree = parse_prefix("system:1024:4", base, 3)
    sim = simulator(1024 + 128 + 4)
    aware = Fleet(sim, 4, "prefix-aware").run(reqs).trace.prefix_cache
    assert aware["hit_tokens"] == (40 - len(set(tree.leaf.tolist()))) * 1024  # a miss only the first time
    rr = Fleet(sim, 4, "round-robin").run(reqs).trace.prefix_cache
    seen: set[tuple[int, int]] = set()
    expected = 0
    for i, p in enumerate(tree.leaf.tolist()):
        expected += 1024 * ((i % 4, p) in seen)
        seen.add((i % 4, p))
    assert rr["hit_tokens"] == expected < aware["hit_tokens"]


def test_fewest_replicas_meets_the_slo_and_one_fewer_does_not():
    reqs = mixed(40.0, 400, seed=2)
    sim = simulator(reqs.max_tokens)
    slo = Slo(ttft_s=0.3, tpot_s=0.03)
    found = fewest_replicas(sim, reqs, slo, "least-outstanding", start=1)
    n = found["replicas"]
    assert n is not None and n >= 2

    def p99s(k: int) -> tuple[float, float]:
        t = Fleet(sim, k).run(reqs).trace
        return float(np.percentile(t.ttft_s, 99)), float(np.percentile(t.tpot_s, 99))

    ttft, tpot = p99s(n)
    assert ttft <= slo.ttft_s and tpot <= slo.tpot_s
    ttft, tpot = p99s(n - 1)
    assert ttft > slo.ttft_s or tpot > slo.tpot_s


def test_cli_fleet(capsys):
    argv = ["simulate", "--model", "Llama-3.1-8B", "--hardware", "H100-SXM", "--method", "bf16", "--json",
            "--rate", "20", "--requests", "60", "--prompt-tokens", "512", "--output-tokens", "16",
            "--replicas", "3", "--router", "round-robin"]
    assert main(argv) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["replicas"]["requests"] == [20, 20, 20]
    assert main([*argv, "--size-fleet"]) == 2
    assert "--size-fleet" in capsys.readouterr().err
