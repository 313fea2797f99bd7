"""Preloaded KV (a disaggregated decode pool, serving.disagg: requests arrive with all but the last prompt token's KV)
and the host seconds its load costs the step that admits it (the connector's post, load_host_s), in the compiled
record loop (serving.kernel_sched.admit / preempt_last, serving.kernel_loop.run_loop's `pre`) against
the Python loop: the same engine records, routing and per-request first-token, finish, TTFT and TPOT to float rounding
(1e-9 relative), for decode fleets of 1-3 replicas, vLLM's admission lag on and off, a pool small enough to preempt
(a preempted request loses its preloaded KV and recomputes its prompt), reserve-to-the-end admission, a prefix cache
competing with the preloaded tokens, and whole disaggregated runs (both pools).

Expectations by hand: a request with its prompt less one token preloaded computes that token (its first output) and
then one token per decode step, so without preemption a decode pool computes exactly sum(output tokens); a preempted
request recomputes its prompt, so with preemption it computes more.
"""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

pytest.importorskip("numba")

from roofline.engines.scheduling import scheduling  # noqa: E402
from roofline.serving import kernel  # noqa: E402
from roofline.serving.disagg import Disaggregated, KvLink  # noqa: E402
from roofline.serving.fleet import Fleet  # noqa: E402
from roofline.serving.prefix import parse_prefix  # noqa: E402
from roofline.serving.scheduler import SchedulerConfig  # noqa: E402
from tests.serving.test_serving_kernel import H100, assert_same, python_loop, requests, simulator  # noqa: E402
from tests.serving.test_serving_kernel_clients import vllm  # noqa: E402
from tests.serving.test_serving_kernel_prefix import small_pool  # noqa: E402


def same_fleet(sim, n: int, router: str, reqs, preloaded, load_host_s=None):
    assert kernel.covers(sim, reqs, None, preloaded, router) is None
    fast = Fleet(sim, n, router).run(reqs, preloaded=preloaded, load_host_s=load_host_s)
    slow = Fleet(python_loop(sim), n, router).run(reqs, preloaded=preloaded, load_host_s=load_host_s)
    assert np.array_equal(fast.routed, slow.routed)
    assert_same(fast.trace, slow.trace)
    assert fast.trace.prefix_cache == slow.trace.prefix_cache
    for mine, theirs in zip(fast.replicas, slow.replicas, strict=True):
        assert_same(mine, theirs)
    return fast, slow


@pytest.mark.parametrize("n,router", [(1, "least-outstanding"), (2, "least-outstanding"), (3, "round-robin")])
@pytest.mark.parametrize("lag", [True, False])
def test_a_decode_pool_gives_the_python_loops_routing_and_times(n, router, lag):
    """Every request brings its prompt less one token: the pool computes sum(output) tokens, no prompt."""
    reqs = requests(15.0 * n, 150)
    sim = vllm(reqs.max_tokens)
    sim.engine = dataclasses.replace(sim.engine, admission_lag=lag)
    fast, _ = same_fleet(sim, n, router, reqs, reqs.prompt_tokens - 1)
    assert fast.trace.preemptions == 0
    assert fast.trace.steps[:, 6].sum() == reqs.output_tokens.sum()
    colocated = Fleet(sim, n, router).run(reqs).trace
    assert np.median(fast.trace.ttft_s) < np.median(colocated.ttft_s)  # no prefill on the decode side


def test_a_preempting_decode_pool_recomputes_what_it_lost():
    """A 9,000-token pool: sequences are preempted, lose their preloaded KV and recompute their prompts."""
    reqs = requests(40.0, 150)
    sim = vllm(reqs.max_tokens, scheduler=SchedulerConfig(max_num_batched_tokens=512, max_num_seqs=64))
    small_pool(sim, reqs, 9000)
    fast, slow = same_fleet(sim, 2, "least-outstanding", reqs, reqs.prompt_tokens - 1)
    assert slow.trace.preemptions > 0
    assert fast.trace.steps[:, 6].sum() > reqs.output_tokens.sum()


def test_reserve_to_the_end_admission_with_preloaded_kv():
    """TensorRT-LLM's GUARANTEED_NO_EVICT: a request is admitted only when the pool holds it to its last token."""
    reqs = requests(30.0, 120)
    profile = scheduling("trtllm", H100, "api", 1, context_len=reqs.max_tokens)
    assert profile.preemption == "none"
    sim = simulator(reqs.max_tokens, engine=profile)
    small_pool(sim, reqs, 12000)
    fast, _ = same_fleet(sim, 2, "least-outstanding", reqs, reqs.prompt_tokens - 1)
    assert fast.trace.steps[:, 3].max() > 0  # requests waited for room
    assert fast.trace.steps[:, 6].sum() == reqs.output_tokens.sum()


def test_preloaded_kv_and_a_prefix_cache_take_the_larger_start():
    """Some requests bring more tokens than the cache holds for them, some fewer (then the hit counts): both of
    Scheduler._take's branches, with evictions in a small pool."""
    reqs, _ = parse_prefix("system:1024:4", requests(25.0, 160), 0)
    sim = vllm(reqs.max_tokens)
    small_pool(sim, reqs, 9000)
    rng = np.random.default_rng(1)
    preloaded = (reqs.prompt_tokens * rng.uniform(0.0, 1.0, len(reqs))).astype(np.int64)
    fast, slow = same_fleet(sim, 2, "prefix-aware", reqs, preloaded)
    assert slow.trace.prefix_cache["hit_tokens"] > 0


def test_whole_disaggregated_runs_give_the_python_loops_times():
    """Both pools through the kernel against both through the Python loop, 1:1 and 2:3."""
    reqs = requests(20.0, 160)
    for p_rep, d_rep in ((1, 1), (2, 3)):
        runs = []
        for on in (True, False):
            prefill, decode = vllm(reqs.max_tokens), vllm(reqs.max_tokens)
            prefill.kernel = decode.kernel = on
            runs.append(Disaggregated(prefill, decode, p_rep, d_rep, KvLink(50e9, 5e-6)).run(reqs))
        fast, slow = runs
        assert_same(fast.trace, slow.trace)
        assert_same(fast.decode, slow.decode)
        assert fast.transfer_s == pytest.approx(slow.transfer_s, rel=1e-12)


def test_preloaded_kv_that_does_not_fit_the_requests_is_not_covered():
    reqs = requests(10.0, 40)
    sim = vllm(reqs.max_tokens)
    assert kernel.covers(sim, reqs, None, reqs.prompt_tokens[:10] - 1) is not None
    assert kernel.covers(sim, reqs, None, np.full(len(reqs), -1)) is not None
    assert kernel.covers(sim, reqs, None, reqs.prompt_tokens - 1, single=True) is not None


@pytest.mark.parametrize("lag", [True, False])
def test_kv_loads_posted_by_the_admitting_step_give_the_python_loops_times(lag):
    """Each request's load is host work of the step that admits it: the same records and times in both loops, and
    every running sequence's steps are longer than without the loads."""
    reqs = requests(30.0, 150)
    sim = vllm(reqs.max_tokens)
    sim.engine = dataclasses.replace(sim.engine, admission_lag=lag)
    loads = np.random.default_rng(2).uniform(0.0, 4e-3, len(reqs))
    fast, _ = same_fleet(sim, 2, "least-outstanding", reqs, reqs.prompt_tokens - 1, loads)
    without = Fleet(sim, 2, "least-outstanding").run(reqs, preloaded=reqs.prompt_tokens - 1).trace
    assert np.mean(fast.trace.tpot_s) > np.mean(without.tpot_s)


def test_a_preempted_request_posts_no_second_load():
    """A preempted request loses its preloaded KV and recomputes its prompt: its re-admission loads nothing, in both
    loops alike."""
    reqs = requests(40.0, 150)
    sim = vllm(reqs.max_tokens, scheduler=SchedulerConfig(max_num_batched_tokens=512, max_num_seqs=64))
    small_pool(sim, reqs, 9000)
    fast, slow = same_fleet(sim, 2, "least-outstanding", reqs, reqs.prompt_tokens - 1, np.full(len(reqs), 2e-3))
    assert slow.trace.preemptions > 0


def _pair(load_b: float):
    """Request A alone, then B arriving while A decodes; B's load `load_b` s, A's none (one replica, no lag)."""
    reqs = requests(1.0, 2)
    reqs = dataclasses.replace(reqs, arrival_s=np.array([0.0, 0.05]), prompt_tokens=np.array([512, 512]),
                               output_tokens=np.array([200, 20]))
    sim = vllm(reqs.max_tokens)
    sim.engine = dataclasses.replace(sim.engine, admission_lag=False)
    return Fleet(sim, 1, "round-robin").run(reqs, preloaded=reqs.prompt_tokens - 1,
                                            load_host_s=np.array([0.0, load_b])).trace


def test_a_load_longer_than_the_step_delays_every_running_sequence_by_itself():
    """By hand: a step's wall time with asynchronous scheduling is max(GPU, host + loads); with a load far above the
    GPU's ~10 ms step the admitting step takes host + load, so 0.3 s more load moves B's first token and A's finish
    (A decodes through that step) by 0.3 s, and nothing else changes."""
    short, long = _pair(0.4), _pair(0.7)
    assert long.first_token_s[1] - short.first_token_s[1] == pytest.approx(0.3, rel=1e-9)
    assert long.finish_s[0] - short.finish_s[0] == pytest.approx(0.3, rel=1e-9)
    assert long.first_token_s[0] == short.first_token_s[0]
