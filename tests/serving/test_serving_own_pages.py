"""A preempted request's own pages without a shared-prefix workload, against vLLM 0.11.0 and 0.24.0 (vllm/v1/core/).

vLLM V1 with prefix caching on (its default for generative models: engine/arg_utils.py@v0.11.0 lines 1540-1561) hashes
every full block a request computes whatever its prompt shares (kv_cache_manager.py@v0.11.0 allocate_slots ->
cache_blocks, lines 296-302); a preemption frees them to the free queue with their hashes, tail first, and sets
num_computed_tokens = 0 (sched/scheduler.py@v0.11.0 lines 262-282, single_type_kv_cache_manager.py lines 156-171); the
step that preempted admits nothing (line 335) and the re-admission's get_computed_blocks finds the blocks no allocation
has popped since, up to num_tokens - 1 (kv_cache_manager.py lines 154-191), counting those still in the free queue among
the blocks it allocates (single_type_kv_cache_manager.py lines 59-86). The same lines in 0.24.0
(tests/serving/test_serving_prefix_preempt.py). So the re-admission recomputes only what allocations took; with
prefix caching off it recomputes everything. Before this rule roofline kept a cache only for a workload with a shared
prefix (--prefix), and a preempted request of any other workload recomputed its whole sequence under vLLM too.

Every expected value is derived by hand below, on a pool of 1 byte per token in 16-token pages (seq_bytes[n] =
16 ceil(n / 16)), requests without any shared content (Requests.prefix None), all sent at t = 0, vLLM's profile with
0.11's first-chunk admission and no admission lag (what a step admits does not depend on either here but for the
former). The recomputed tokens are read from the engine records' token column: every token a step computes is counted
once, so their sum is sum(prompt + output - 1) plus what re-admissions recomputed.
"""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from roofline.catalogue import load_hardware
from roofline.engines.scheduling import scheduling
from roofline.serving.prefix import cache_tree, own_pages
from roofline.serving.prefix_cache import PrefixCache
from roofline.serving.requests import Requests
from roofline.serving.scheduler import Scheduler, SchedulerConfig

# (prompt, output) per request, pool bytes, token budget per step; the pool; the step-by-step admissions
from tests.serving.test_serving_prefix_preempt import AFTER_FIRST_TOKEN, BEFORE_FIRST_TOKEN, _pool
from tests.serving.test_serving_prefix_preempt import _admissions as step_admissions

H100 = load_hardware("H100-SXM")


def _requests(rows) -> Requests:
    """The preempt test's requests without its shared system prompt: a workload sharing nothing."""
    prompt, output = (np.array(col, dtype=np.int64) for col in zip(*rows, strict=True))
    return Requests(np.zeros(len(rows)), prompt, output)


def _vllm(budget: int, caching: bool = True):
    """vLLM's profile with the case's budget, first-chunk admission (0.11) and no admission lag."""
    profile = scheduling("vllm", H100, "api", 1).with_overrides(max_num_seqs=256, max_num_batched_tokens=budget,
                                                               prefix_caching=caching)
    return dataclasses.replace(profile, admit_full_prompt=False, admission_lag=False)


def test_the_cache_a_run_keeps():
    """vLLM with prefix caching on keeps one for a workload that shares nothing (its own pages); off, none; SGLang
    and the ideal engine as before (a cache only for a shared workload); a run with preloaded KV (a disaggregated
    decode pool) none of its own pages; a shared workload its own tree."""
    reqs = _requests(AFTER_FIRST_TOKEN[0])
    tree = cache_tree(_vllm(256), reqs)
    assert tree is not None and tree.kind == "own" and list(tree.leaf) == [0, 0] and list(tree.shared) == [0, 0]
    assert int(tree.length[0]) == 0
    assert cache_tree(_vllm(256, caching=False), reqs) is None
    assert cache_tree(scheduling("sglang", H100, "api", 1, context_len=4096), reqs) is None
    assert cache_tree(scheduling("ideal", H100, "api", 1), reqs) is None
    assert cache_tree(_vllm(256), reqs, preloaded=np.array([31, 31])) is None
    shared = dataclasses.replace(reqs, prefix=own_pages(2))
    assert cache_tree(_vllm(256), shared) is shared.prefix


def _admissions(rows, capacity, budget, caching: bool) -> tuple[list[tuple[int, int, int]], int]:
    """Scheduler steps one at a time (step k at time k) with the cache the vLLM profile keeps: every admission as
    (step, request, tokens it starts after), and the preemptions."""
    reqs, pool = _requests(rows), _pool(capacity)
    tree = cache_tree(_vllm(budget, caching), reqs)
    cache = None if tree is None else PrefixCache(tree, pool.seq_bytes, 16)
    sched = Scheduler(reqs, pool, SchedulerConfig(budget, 256), cache)
    sched.waiting.extend(range(len(rows)))
    sched.arrived = len(rows)
    return step_admissions(sched, 59), sched.preemptions


def test_a_preempted_request_of_a_workload_sharing_nothing_hits_its_own_pages():
    """AFTER_FIRST_TOKEN (the derivation in test_serving_prefix_preempt.py): r1 is preempted at step 34 with 64
    computed; its 4 full pages queue, r0's page takes the last; r1 waits until r0 ends at step 40 and starts at step 41
    after its 48 own tokens. BEFORE_FIRST_TOKEN: r1 preempted at step 3 with 47 computed starts at step 4 after its 32
    (2 full pages), preempted at step 5 with 63 starts at step 9 after 48. With prefix caching off (vLLM recomputes
    from 0: num_computed_tokens = 0 and no hit): AFTER_FIRST_TOKEN r1 asks seq[65] = 80 bytes against 48 free until r0
    ends, then starts at 0 at step 41; BEFORE_FIRST_TOKEN r1 restarts at 0 at step 4 (31 tokens, 32 bytes of 64 free),
    reaches 62 at step 5, asks 32 more at step 6 with 0 free (r0 holds 32, r1 64): preempted again, restarts at 0 at
    step 7."""
    assert _admissions(*AFTER_FIRST_TOKEN, caching=True) == ([(1, 0, 0), (1, 1, 0), (41, 1, 48)], 1)
    assert _admissions(*AFTER_FIRST_TOKEN, caching=False) == ([(1, 0, 0), (1, 1, 0), (41, 1, 0)], 1)
    assert _admissions(*BEFORE_FIRST_TOKEN, caching=True) == ([(1, 0, 0), (1, 1, 0), (4, 1, 32), (9, 1, 48)], 2)
    assert _admissions(*BEFORE_FIRST_TOKEN, caching=False) == ([(1, 0, 0), (1, 1, 0), (4, 1, 0), (7, 1, 0)], 2)


@pytest.mark.parametrize("case, caching, recomputed", [
    (AFTER_FIRST_TOKEN, True, 16), (AFTER_FIRST_TOKEN, False, 64),
    (BEFORE_FIRST_TOKEN, True, 15 + 15), (BEFORE_FIRST_TOKEN, False, 47 + 62),
], ids=["after-first-token-on", "after-first-token-off", "before-first-token-on", "before-first-token-off"])
def test_the_simulator_recomputes_what_vllm_recomputes_compiled_and_in_python(case, caching, recomputed):
    """The runs above through Simulator.run under vLLM's profile, compiled (serving.kernel) and the Python loop: the
    same records and times, the preemptions derived above, and every token computed once but what the re-admissions
    recomputed. After its first token r1 had computed 64 (tokens 0..63): on, it restarts at 48 (16 again); off, at 0
    (64 again). Before it: on, 47 - 32 = 15 and 63 - 48 = 15 again; off, 47 and 62. No hit statistics: they are a
    shared workload's (the JSON's prefix_cache)."""
    pytest.importorskip("numba")
    from roofline.serving import kernel
    from tests.serving.test_serving_kernel import assert_same, python_loop, simulator

    rows, capacity, budget = case
    reqs = _requests(rows)
    sim = simulator(4096, engine=_vllm(budget, caching))
    sim.pool = _pool(capacity)
    assert kernel.covers(sim, reqs) is None
    fast, slow = sim.run(reqs), python_loop(sim).run(reqs)
    assert_same(fast, slow)
    assert fast.preemptions == slow.preemptions == (1 if case is AFTER_FIRST_TOKEN else 2)
    once = int((reqs.prompt_tokens + reqs.output_tokens - 1).sum())
    assert int(fast.steps[:, 6].sum()) == int(slow.steps[:, 6].sum()) == once + recomputed
    assert fast.prefix_cache is None and slow.prefix_cache is None
