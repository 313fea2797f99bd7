"""Speculative decoding in a fleet's compiled record loop (serving.kernel_loop with serving.kernel_spec) against
Fleet.run's Python loop (Simulator(kernel=False)): the same engine records per replica and merged, the same routing,
acceptance draws and per-request times to 1e-9, for a draft model (with vLLM's drafter host floor a pass), EAGLE with
per-position acceptance and MTP, behind the round-robin, least-outstanding and prefix-aware routers, under vLLM's
profile (admission lag, graph padding, sampler) and the ideal engine, with preemption in a small pool and
--max-concurrency clients.

Each case asserts speculative behaviour in the Python reference run itself (test_serving_speculative_fast.
assert_speculative: accepted drafts, verify records, the draft's passes priced and its KV in the pool) and that every
replica served requests. The last tests break the compiled loop's draws (another seed, another acceptance) or its
draft cost (no host floor a pass) and check that the comparison then fails: equality is not vacuous.
"""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

pytest.importorskip("numba")

from roofline.serving import kernel  # noqa: E402
from roofline.serving.clients import Clients  # noqa: E402
from roofline.serving.fleet import Fleet  # noqa: E402
from roofline.serving.kernel_spec import FLOOR  # noqa: E402
from roofline.serving.prefix import parse_prefix  # noqa: E402
from tests.serving.test_serving_kernel_spec import python_loop  # noqa: E402
from tests.serving.test_serving_speculative_fast import (  # noqa: E402
    SPECS,
    assert_same,
    assert_speculative,
    requests,
    simulator,
)


def assert_same_fleet(fast, slow) -> None:
    """The merged trace, each replica's own and the routing, equal."""
    assert np.array_equal(fast.routed, slow.routed)
    assert_same(fast.trace, slow.trace)
    assert len(fast.replicas) == len(slow.replicas)
    for mine, theirs in zip(fast.replicas, slow.replicas, strict=True):
        assert_same(mine, theirs)


def compare(sim, reqs, replicas: int, router: str, clients=None):
    """The Python fleet's run (checked speculative, every replica used) and the compiled one's."""
    assert kernel.covers(sim, reqs, clients, router=router) is None
    assert sim.use_kernel(reqs, clients, router=router)
    reference = Fleet(python_loop(sim), replicas, router).run(reqs, clients)
    assert_speculative(sim, reference.trace, reqs)
    assert np.array_equal(np.unique(reference.routed), np.arange(replicas))
    return Fleet(sim, replicas, router).run(reqs, clients), reference


@pytest.mark.parametrize("spec", SPECS)
@pytest.mark.parametrize("engine", [None, "vllm"])
@pytest.mark.parametrize("router", ["round-robin", "least-outstanding"])
def test_a_compiled_fleet_gives_the_python_fleets_speculative_records_and_times(spec, engine, router):
    reqs = requests(24.0, 90)
    sim = simulator(spec, engine, reqs.max_tokens, kernel=True)
    fast, reference = compare(sim, reqs, 3, router)
    assert_same_fleet(fast, reference)


@pytest.mark.parametrize("spec", SPECS)
def test_the_prefix_aware_router_with_a_cache_gives_the_python_fleets_times(spec):
    reqs = parse_prefix("system:1024:4", requests(30.0, 90, seed=11), 0)[0]
    sim = simulator(spec, "vllm", reqs.max_tokens, kernel=True)
    fast, reference = compare(sim, reqs, 3, "prefix-aware")
    assert reference.trace.prefix_cache["hit_rate"] > 0
    assert_same_fleet(fast, reference)


def test_preemption_in_small_pools_gives_the_python_fleets_times():
    reqs = requests(60.0, 90, seed=9)
    sim = simulator(SPECS[0], "vllm", reqs.max_tokens, kernel=True)
    sim.pool = dataclasses.replace(sim.pool, capacity_bytes=sim.pool.seq_bytes[reqs.max_tokens] * 6)
    fast, reference = compare(sim, reqs, 2, "least-outstanding")
    assert all(t.preemptions > 0 for t in reference.replicas)
    assert_same_fleet(fast, reference)


@pytest.mark.parametrize("spec", SPECS[1:])
def test_closed_loop_clients_give_the_python_fleets_times(spec):
    reqs = requests(20.0, 90, seed=13)
    sim = simulator(spec, "vllm", reqs.max_tokens, kernel=True)
    fast, reference = compare(sim, reqs, 3, "least-outstanding", Clients(max_concurrency=8, think_s=0.2))
    assert_same_fleet(fast, reference)


def test_a_fleet_of_one_replays_the_single_replicas_compiled_run():
    reqs = requests(10.0, 60, seed=3)
    sim = simulator(SPECS[1], "vllm", reqs.max_tokens, kernel=True)
    alone = sim.run(reqs)
    assert_speculative(sim, alone, reqs)
    assert_same(Fleet(sim, 1, "round-robin").run(reqs).trace, alone)


def _broken(monkeypatch, change) -> None:
    """The compiled loop's `spec` arguments altered by `change` (the Python loop keeps its own)."""
    original = kernel._spec_args

    def altered(sim):
        rng, acceptance, spec_cfg, *rest = original(sim)
        return tuple(change(rng, acceptance.copy(), spec_cfg.copy())) + tuple(rest)

    monkeypatch.setattr(kernel, "_spec_args", altered)


@pytest.mark.parametrize("change", [
    lambda rng, acc, cfg: (np.random.default_rng(1), acc, cfg),  # another stream of draws
    lambda rng, acc, cfg: (rng, acc * 0.9, cfg),  # another acceptance per position
    lambda rng, acc, cfg: (rng, acc, np.where(np.arange(len(cfg)) == FLOOR, 0.0, cfg)),  # no drafter host floor
], ids=["seed", "acceptance", "draft-cost"])
def test_breaking_the_draws_or_the_draft_cost_fails_the_comparison(monkeypatch, change):
    reqs = requests(24.0, 60)
    sim = simulator(SPECS[0], "vllm", reqs.max_tokens, kernel=True)
    reference = Fleet(python_loop(sim), 2, "round-robin").run(reqs)
    assert sim.draft.pass_host_s > 0
    assert_same_fleet(Fleet(sim, 2, "round-robin").run(reqs), reference)
    _broken(monkeypatch, change)
    with pytest.raises(AssertionError):
        assert_same_fleet(Fleet(sim, 2, "round-robin").run(reqs), reference)


@pytest.mark.parametrize("spec", SPECS[:2])
def test_chat_sessions_in_a_speculative_fleet_give_the_python_fleets_times(spec):
    """Both session-16 branches together (fleetspec, sessfast): a fleet of 3 under vLLM with speculative decoding
    and chat sessions of 3 turns, each turn sent 0.5 s after its predecessor finishes (serving.clients)."""
    from tests.serving.test_serving_kernel_sessions import assert_session_rules, chats

    reqs = chats(6.0, 120, 3, seed=29)
    sim = simulator(spec, "vllm", reqs.max_tokens, kernel=True)
    clients = Clients(think_s=0.5, session_turns=3)
    fast, reference = compare(sim, reqs, 3, "least-outstanding", clients)
    assert_same_fleet(fast, reference)
    assert_session_rules(fast.trace, reqs, clients, True)
