"""Preloaded KV (a disaggregated decode pool, serving.disagg: requests arrive with all but the last prompt token's KV)
in the compiled record loop (serving.kernel_sched.admit / preempt_last, serving.kernel_loop.run_loop's `pre`) against
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


def same_fleet(sim, n: int, router: str, reqs, preloaded):
    assert kernel.covers(sim, reqs, None, preloaded, router) is None
    fast = Fleet(sim, n, router).run(reqs, preloaded=preloaded)
    slow = Fleet(python_loop(sim), n, router).run(reqs, preloaded=preloaded)
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
