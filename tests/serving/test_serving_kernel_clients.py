"""The compiled record loop (serving.kernel) with vLLM's admission lag (async scheduling: a request that arrives
during step n is first scheduled in step n + 2; EngineScheduling.admission_lag) and with --max-concurrency clients
(a closed loop: the next request is sent when a slot frees, plus think time), against the Python loop: the same
engine records, routing and per-request send, first-token, finish, TTFT and TPOT to float rounding (1e-9 relative),
one replica (Simulator.run's loop, serving.kernel_single) and fleets (Fleet.run's, serving.kernel_loop).

Each case also checks that what it exercises happened (the lag moved some first tokens, slots were waited on,
requests were preempted), so a run that ignored the feature on both sides could not pass unnoticed.
"""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

pytest.importorskip("numba")

from roofline.engines.scheduling import scheduling  # noqa: E402
from roofline.serving import kernel  # noqa: E402
from roofline.serving.clients import Clients  # noqa: E402
from roofline.serving.fleet import Fleet  # noqa: E402
from roofline.serving.pool import KVPool  # noqa: E402
from roofline.serving.scheduler import SchedulerConfig  # noqa: E402
from tests.serving.test_serving_kernel import H100, assert_same, python_loop, requests, simulator  # noqa: E402


def vllm(max_tokens: int, **kw):
    profile = scheduling("vllm", H100, "api", 1, context_len=max_tokens)
    assert profile.admission_lag  # vLLM's default: async scheduling on
    return simulator(max_tokens, engine=profile, **kw)


def assert_same_fleet(sim, n: int, router: str, reqs, clients=None) -> None:
    fast = Fleet(sim, n, router).run(reqs, clients)
    slow = Fleet(python_loop(sim), n, router).run(reqs, clients)
    assert np.array_equal(fast.routed, slow.routed)
    assert fast.trace.requests.arrival_s == pytest.approx(slow.trace.requests.arrival_s, rel=1e-9, abs=1e-12)
    assert_same(fast.trace, slow.trace)
    for mine, theirs in zip(fast.replicas, slow.replicas, strict=True):
        assert_same(mine, theirs)


@pytest.mark.parametrize("rate", [3.0, 12.0, 60.0])
def test_vllms_admission_lag_gives_the_python_loops_times_up_to_saturation(rate):
    """3 req/s: mostly idle; 60 req/s: past saturation (the queue builds up while requests arrive)."""
    reqs = requests(rate, 120)
    sim = vllm(reqs.max_tokens)
    assert kernel.covers(sim, reqs) is None
    fast = sim.run(reqs)
    assert_same(fast, python_loop(sim).run(reqs))
    no_lag = simulator(reqs.max_tokens, engine=dataclasses.replace(sim.engine, admission_lag=False)).run(reqs)
    assert np.any(fast.first_token_s > no_lag.first_token_s)  # the lag held some requests back a step
    if rate == 60.0:
        assert fast.steps[:, 3].max() >= 40  # a third of the requests queued at once


def test_vllms_admission_lag_with_preemption_single_and_fleet():
    reqs = requests(40.0, 150)
    sim = vllm(reqs.max_tokens, scheduler=SchedulerConfig(max_num_batched_tokens=512, max_num_seqs=64))
    sim.pool = KVPool.uniform(6000 * 131072, 16, 131072, reqs.max_tokens, "test: a small pool")
    slow = python_loop(sim).run(reqs)
    assert slow.preemptions > 0
    assert_same(sim.run(reqs), slow)
    assert_same_fleet(sim, 2, "least-outstanding", reqs)


@pytest.mark.parametrize("n,router", [(1, "least-outstanding"), (3, "least-outstanding"), (3, "round-robin")])
def test_a_fleet_with_vllms_admission_lag_gives_the_python_loops_routing_and_times(n, router):
    reqs = requests(10.0 * n, 150)
    assert_same_fleet(vllm(reqs.max_tokens), n, router, reqs)


@pytest.mark.parametrize("clients", [Clients(max_concurrency=4), Clients(max_concurrency=12, think_s=0.5)])
@pytest.mark.parametrize("lag", [False, True])
def test_closed_loop_clients_give_the_python_loops_sends_and_times(clients, lag):
    """--rate inf (every request ready at 0) and a Poisson rate, each behind N slots; one replica and a fleet."""
    for rate in (float("inf"), 20.0):
        reqs = requests(rate, 100)
        sim = vllm(reqs.max_tokens)
        if not lag:
            sim = simulator(reqs.max_tokens, engine=dataclasses.replace(sim.engine, admission_lag=False))
        assert kernel.covers(sim, reqs, clients) is None
        fast, slow = sim.run(reqs, clients=clients), python_loop(sim).run(reqs, clients=clients)
        assert fast.requests.arrival_s == pytest.approx(slow.requests.arrival_s, rel=1e-9, abs=1e-12)
        assert_same(fast, slow)
        assert np.any(fast.requests.arrival_s > reqs.arrival_s)  # some requests waited for a slot
        assert np.all(fast.steps[:, 2] + fast.steps[:, 3] <= clients.max_concurrency)
        assert_same_fleet(sim, 2, "least-outstanding", reqs, clients)
