"""Chat sessions (serving.clients: turn j + 1 is sent think time after turn j finishes; serving.prefix.sessions: its
prompt carries the conversation so far) in the compiled record loop (serving.kernel_queue's session heap, the loops
of serving.kernel_single and serving.kernel_loop) against the Python loop: the same engine records, routing, and
per-request send, first-token, finish, TTFT and TPOT to float rounding (1e-9 relative), one replica and fleets, with
the engine's prefix cache on and off, vLLM's admission lag on and off, and a small pool that preempts.

Each case also checks the session rules from their definition, not from either loop's output: a session's first turn
is sent at its arrival, every later turn exactly think time after its predecessor's finish (so never before it),
later turns' prompts are longer, and with the cache on later turns hit the conversation so far.
"""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

pytest.importorskip("numba")

from roofline.serving import kernel  # noqa: E402
from roofline.serving.clients import Clients  # noqa: E402
from roofline.serving.fleet import Fleet  # noqa: E402
from roofline.serving.prefix import sessions  # noqa: E402
from roofline.serving.scheduler import SchedulerConfig  # noqa: E402
from tests.serving.test_serving_kernel import assert_same, python_loop, requests  # noqa: E402
from tests.serving.test_serving_kernel_clients import vllm  # noqa: E402
from tests.serving.test_serving_kernel_prefix import small_pool  # noqa: E402


def chats(rate: float, n: int, turns: int, seed: int = 5, prompt_cap: int = 700):
    """n requests as sessions of `turns` turns, the new message of each turn at most `prompt_cap` tokens."""
    base = requests(rate, n, seed)
    base = dataclasses.replace(base, prompt_tokens=np.minimum(base.prompt_tokens, prompt_cap))
    return sessions(base, turns)[0]


def engine(reqs, lag: bool, caching: bool, **kw):
    """vLLM's profile (admission lag on by default: async scheduling), the lag and the prefix cache as asked."""
    sim = vllm(reqs.max_tokens, **kw)
    sim.engine = dataclasses.replace(sim.engine, admission_lag=lag, prefix_caching=caching)
    return sim


def assert_session_rules(trace, reqs, clients: Clients, caching: bool) -> None:
    """The rules of a chat, from serving.clients' definition (independent of how either loop computes them)."""
    turns, think = clients.session_turns, clients.think_s
    send = trace.requests.arrival_s
    later = np.arange(len(reqs)) % turns != 0
    assert np.array_equal(send[~later], reqs.arrival_s[~later])  # a first turn is sent at its arrival
    prev_finish = trace.finish_s[np.flatnonzero(later) - 1]
    assert send[later] == pytest.approx(prev_finish + think, rel=1e-12, abs=1e-12)  # the release time
    assert np.all(trace.first_token_s[later] > prev_finish + think)  # a turn never starts before that
    assert np.all(reqs.prompt_tokens[later] > reqs.prompt_tokens[np.flatnonzero(later) - 1])
    if caching:
        assert trace.prefix_cache["hit_tokens"] > 0
    else:
        assert trace.prefix_cache is None


def same_run(sim, reqs, clients):
    assert kernel.covers(sim, reqs, clients, single=True) is None
    fast, slow = sim.run(reqs, clients=clients), python_loop(sim).run(reqs, clients=clients)
    assert fast.requests.arrival_s == pytest.approx(slow.requests.arrival_s, rel=1e-9, abs=1e-12)
    assert_same(fast, slow)
    assert fast.prefix_cache == slow.prefix_cache
    return fast, slow


def same_fleet(sim, n: int, router: str, reqs, clients):
    assert kernel.covers(sim, reqs, clients, router=router) is None
    fast = Fleet(sim, n, router).run(reqs, clients)
    slow = Fleet(python_loop(sim), n, router).run(reqs, clients)
    assert np.array_equal(fast.routed, slow.routed)
    assert fast.trace.requests.arrival_s == pytest.approx(slow.trace.requests.arrival_s, rel=1e-9, abs=1e-12)
    assert_same(fast.trace, slow.trace)
    assert fast.trace.prefix_cache == slow.trace.prefix_cache
    for mine, theirs in zip(fast.replicas, slow.replicas, strict=True):
        assert_same(mine, theirs)
        assert mine.prefix_cache == theirs.prefix_cache
    return fast, slow


@pytest.mark.parametrize("caching", [True, False])
@pytest.mark.parametrize("lag", [True, False])
@pytest.mark.parametrize("think", [0.0, 0.5])
def test_sessions_give_the_python_loops_sends_and_times(caching, lag, think):
    """Chats of 4 turns at 8 sessions' first turns per second: turns of many sessions interleave, and a later turn
    arrives while others run (think 0: sent at the very step its predecessor ends)."""
    reqs = chats(8.0, 160, 4)
    sim = engine(reqs, lag, caching)
    clients = Clients(think_s=think, session_turns=4)
    fast, slow = same_run(sim, reqs, clients)
    assert_session_rules(fast, reqs, clients, caching)
    assert_session_rules(slow, reqs, clients, caching)
    firsts = np.arange(0, len(reqs), 4)
    assert not np.all(np.diff(fast.requests.arrival_s) >= 0)  # sends are not in id order (else the heap idled)
    assert fast.requests.arrival_s[firsts[1]] < fast.requests.arrival_s[firsts[0] + 3]


def test_the_cache_makes_later_turns_faster_to_first_token():
    """The later turns' prompts are mostly the conversation so far: with the cache on their TTFT is shorter."""
    reqs = chats(4.0, 120, 3, seed=7)
    clients = Clients(think_s=1.0, session_turns=3)
    on, _ = same_run(engine(reqs, True, True), reqs, clients)
    off, _ = same_run(engine(reqs, True, False), reqs, clients)
    later = np.arange(len(reqs)) % 3 != 0
    assert np.median(on.ttft_s[later]) < np.median(off.ttft_s[later])


@pytest.mark.parametrize("caching", [True, False])
def test_sessions_in_a_small_pool_that_preempts(caching):
    """A 10,000-token pool against conversations up to ~3,000 tokens and 48 of them at a time: requests are
    preempted (and, with the cache, cached turns evicted)."""
    reqs = chats(30.0, 192, 4, seed=11)
    sim = engine(reqs, True, caching, scheduler=SchedulerConfig(max_num_batched_tokens=1024, max_num_seqs=48))
    small_pool(sim, reqs, 10000)
    clients = Clients(think_s=0.2, session_turns=4)
    fast, slow = same_run(sim, reqs, clients)
    assert slow.preemptions > 0
    assert_session_rules(fast, reqs, clients, caching)


@pytest.mark.parametrize("n,router", [(2, "least-outstanding"), (3, "round-robin"), (4, "prefix-aware")])
@pytest.mark.parametrize("caching", [True, False])
def test_a_fleet_of_sessions_gives_the_python_loops_routing_and_times(n, router, caching):
    """2-4 replicas; with the prefix-aware router and the cache on, turns follow their conversation's cache."""
    reqs = chats(6.0 * n, 160, 4, seed=13)
    sim = engine(reqs, True, caching)
    clients = Clients(think_s=0.3, session_turns=4)
    fast, _ = same_fleet(sim, n, router, reqs, clients)
    assert_session_rules(fast.trace, reqs, clients, caching)
    assert len(np.unique(fast.routed)) == n


def test_one_replica_fleet_matches_the_single_loop():
    """A fleet of one (serving.kernel_loop with its cut at the next arrival) against Simulator.run's loop."""
    reqs = chats(10.0, 120, 4, seed=17)
    sim = engine(reqs, True, True)
    clients = Clients(think_s=0.1, session_turns=4)
    fleet, _ = same_fleet(sim, 1, "least-outstanding", reqs, clients)
    assert_same(fleet.trace, sim.run(reqs, clients=clients))


def test_a_wrong_release_time_fails(monkeypatch):
    """The checks above are not vacuous: a kernel sending each next turn without the think time (at its
    predecessor's finish) fails both the session rules and the equality with the Python loop."""
    reqs = chats(8.0, 80, 4)
    sim = engine(reqs, False, True)
    clients = Clients(think_s=0.5, session_turns=4)
    monkeypatch.setattr(kernel, "run", _run_with(kernel.run, Clients(think_s=0.0, session_turns=4)))
    trace = sim.run(reqs, clients=clients)
    with pytest.raises(AssertionError):
        assert_session_rules(trace, reqs, clients, True)
    with pytest.raises(AssertionError):
        assert_same(trace, python_loop(sim).run(reqs, clients=clients))


def _run_with(run, clients):
    """kernel.run as called, but with `clients` (the think time dropped)."""
    def wrapped(sim, requests, _clients=None, *args, **kw):
        return run(sim, requests, clients, *args, **kw)
    return wrapped


def test_a_last_session_cut_short():
    """150 requests in sessions of 4: the last session has 2 turns (Arrivals sends no turn past the last request)."""
    reqs = chats(8.0, 150, 4, seed=19)
    clients = Clients(think_s=0.25, session_turns=4)
    fast, _ = same_run(engine(reqs, True, True), reqs, clients)
    assert_session_rules(fast, reqs, clients, True)
    assert np.all(np.isfinite(fast.finish_s))


def test_sessions_with_speculative_decoding_on_one_replica():
    """Sessions and speculative decoding (serving.kernel_spec) in one run: the same draws, sends and times."""
    from tests.serving.test_serving_speculative_fast import SPECS, assert_speculative
    from tests.serving.test_serving_speculative_fast import simulator as spec_simulator
    reqs = chats(6.0, 120, 3, seed=23)
    sim = spec_simulator(SPECS[0], "vllm", reqs.max_tokens, kernel=True)
    clients = Clients(think_s=0.5, session_turns=3)
    fast, slow = same_run(sim, reqs, clients)
    assert_session_rules(fast, reqs, clients, True)
    assert_speculative(sim, slow, reqs)
