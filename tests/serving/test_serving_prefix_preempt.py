"""A preempted request's own pages and the hit counter, against vLLM 0.24 (vllm/v1/core/).

Own pages. vLLM hashes every full block a request computes, output included (kv_cache_manager.py:447-456), and a
preemption frees them to the free queue's back tail first (sched/scheduler.py:1107-1128 _preempt_request,
single_type_kv_cache_manager.py:401-409, block_pool.py:614-635); the re-admission's get_computed_blocks walks the
request's block hashes, prompt and output so far, up to num_tokens - 1 (kv_cache_manager.py:202-242): it finds the
blocks no allocation has popped since, a prefix of them (the tail went first). The admission counts the hit blocks that
sit in the free queue among the blocks it allocates (single_type_kv_cache_manager.py:174-180): they are not room for it.

The counter. vllm:prompt_tokens_cached / vllm:prompt_tokens add a request's PrefillStats once, with its first output
(v1/metrics/stats.py:304-311, 365-367; the output processor's is_prefilling); the scheduler sets them at every
admission while the request has not yet sent them (sched/scheduler.py:763-769) and they leave with its first token
(scheduler.py:1700, v1/request.py:302-307). So a request preempted after its first token is not counted again, and one
preempted before it is counted with the admission that ends in that token.

Every expected value is derived by hand below, on a pool of 1 byte per token in 16-token pages (seq_bytes[n] =
16 ceil(n / 16)), requests sharing nothing (root B, shared 0: every page they compute is their own), all waiting at
t = 0, steps one at a time (step k at time k). Before this rule roofline recomputed a preempted request's own pages and
counted every admission.
"""

from __future__ import annotations

import numpy as np
import pytest

from roofline.serving.pool import KVPool
from roofline.serving.prefix import _tree
from roofline.serving.prefix_cache import PrefixCache
from roofline.serving.requests import Requests
from roofline.serving.scheduler import Scheduler, SchedulerConfig

# (prompt, output) per request, pool bytes, token budget per step
AFTER_FIRST_TOKEN = ([(32, 40), (32, 40)], 128, 256)
BEFORE_FIRST_TOKEN = ([(16, 8), (95, 1)], 96, 32)


def _requests(rows) -> tuple[Requests, object]:
    prompt, output = (np.array(col, dtype=np.int64) for col in zip(*rows, strict=True))
    tree = _tree([-1], [0], [32], np.zeros(len(rows)), np.zeros(len(rows)), "system")
    return Requests(np.zeros(len(rows)), prompt, output, tree), tree


def _pool(capacity: int) -> KVPool:
    return KVPool.uniform(capacity, 16, 1.0, 4096, f"test: {capacity // 16} pages of 16 tokens, 1 byte per token")


def _scheduler(case) -> Scheduler:
    rows, capacity, budget = case
    reqs, tree = _requests(rows)
    pool = _pool(capacity)
    sched = Scheduler(reqs, pool, SchedulerConfig(budget, 256), PrefixCache(tree, pool.seq_bytes, 16))
    sched.waiting.extend(range(len(rows)))
    sched.arrived = len(rows)
    return sched


def _admissions(sched: Scheduler, steps: int) -> list[tuple[int, int, int]]:
    """Run step by step; every admission as (step, request, tokens it starts after)."""
    seen, step = [], [0]
    take = sched._take

    def logged(i, todo, budget, free):
        out = take(i, todo, budget, free)
        if out is not None:
            seen.append((step[0], i, out[1]))
        return out

    sched._take = logged
    for k in range(1, steps + 1):
        step[0] = k
        sched.now = float(k)
        plan = sched.schedule()
        if plan is None:
            break
        sched.commit(plan, float(k))
    return seen


def test_a_request_preempted_after_its_first_token_hits_its_own_pages_left_in_the_queue():
    """256 tokens a step, 8 pages. r0, r1 = 32 tokens, 40 out. Step 1: both prefill (32 bytes each), emit a token;
    step k: computed 31 + k, generated k. Step 34 needs a fifth page each (context 65) with the pool full: r1 is
    preempted with 64 computed, 33 generated: its 4 full pages (64 bytes) join the queue, tail first; r0's page
    takes the queue's front: r1's last page. Step 35: r1 (known 32 + 33 = 65) finds its first 3 pages (48 tokens), asks
    seq[65] - 48 = 32 bytes against 128 - 80 = 48 free less its own 48: it waits, as at every step until r0 ends at
    step 40 (71 computed: 4 full pages queued behind r1's, its fifth never-used room). Step 41: 128 free less 48 = 80:
    r1 starts after its 48 own tokens and computes 17 (it recomputed all 65 before). The counter: 0 of 32 for each,
    once; the re-admission apart: 48 of 65 cached (before: 0 of 65, and counted among the prompt tokens)."""
    sched = _scheduler(AFTER_FIRST_TOKEN)
    assert _admissions(sched, 45) == [(1, 0, 0), (1, 1, 0), (41, 1, 48)]
    assert sched.preemptions == 1
    c = sched.cache
    assert (c.hit_tokens, c.query_tokens, c.resumed_hit_tokens, c.resumed_tokens) == (0, 64, 48, 65)


def test_a_request_preempted_before_its_first_token_is_counted_once_with_the_admission_that_ends_in_it():
    """32 tokens a step, 6 pages (96 bytes). r0 = 16 tokens, 8 out; r1 = 95 tokens, 1 out.
    Step 1: r0 prefills (16 bytes) and emits; r1 starts, 16 tokens (16 bytes).
    Step 2: r0's 17th token takes a page (16); r1 computes 31 more, to 47 (32 bytes): 80 used.
    Step 3: r1's next 31 tokens ask 32 bytes against 16 free: r1 (no token yet) is preempted with 47 computed: its 2
    full pages (32 bytes) join the queue, its half page is never-used room; its count (0 of 95) is withdrawn.
    Step 4: r1 finds its 32 tokens, asks seq[63] - 32 = 32 bytes against 96 - 32 free less its own 32: admitted after
    32 tokens, computes 31 (to 63, 64 bytes held: 96 used). Step 5: its next chunk asks 32 against 0 free: preempted
    again with 63 computed (3 full pages, 48 bytes, queued; 32 of 95 withdrawn). Steps 6-8: it finds 48 tokens and asks
    seq[79] - 48 = 32 against 96 - 32 - 48 = 16: it waits; r0 ends at step 8 (23 computed: a full page queued, behind
    r1's). Step 9: 96 - 48 = 48 free: admitted after its 48 tokens, to 79; step 10 it takes r0's queued page for its
    last 16 tokens and emits. The counter: r0 0 of 16, r1 48 of 95 (its last admission's), once each; nothing
    resumed."""
    sched = _scheduler(BEFORE_FIRST_TOKEN)
    assert _admissions(sched, 12) == [(1, 0, 0), (1, 1, 0), (4, 1, 32), (9, 1, 48)]
    assert sched.preemptions == 2
    c = sched.cache
    assert (c.hit_tokens, c.query_tokens, c.resumed_hit_tokens, c.resumed_tokens) == (48, 16 + 95, 0, 0)


def test_the_own_pages_an_allocation_popped_are_recomputed():
    """PrefixCache alone: request 0 preempted with 80 computed, 16 owned by the cache (shared) : its pages 16..80 (64
    bytes) are queued as its own; an allocation takes 20 bytes from the queue's front (its tail page and 4 bytes of
    the next: vLLM pops whole blocks, so both are gone): its re-admission at the cached prefix 16 finds 16..48 (2
    pages, 32 bytes); at a cached prefix that is not where they start (0: the shared page was evicted) nothing; and
    another request never."""
    tree = _tree([-1], [0], [16], [0, 0], [16, 0], "system")
    cache = PrefixCache(tree, _pool(256).seq_bytes, 16)
    cache.spend_pages(80, 16, 1.0, owner=0)
    assert cache.spent_bytes == 64
    assert cache.own_hit(0, 16, 81) == (80, 64.0)
    assert cache.take(20) == 0.0  # spent pages: nothing cached evicted
    assert cache.own_hit(0, 16, 81) == (48, 32.0)
    assert cache.own_hit(0, 0, 81) == (0, 0.0) and cache.own_hit(1, 16, 81) == (16, 0.0)
    assert cache.own_hit(0, 16, 40) == (32, 16.0)  # at most todo - 1 tokens, whole pages
    cache.claim(0, 16)  # admitted: the run leaves the queue (the 12 bytes left of a taken page are never-used room)
    assert cache.spent_bytes == 0.0 and cache.own_hit(0, 16, 81) == (16, 0.0)


@pytest.mark.parametrize("case, stats", [
    (AFTER_FIRST_TOKEN, (0, 64, 48, 65)),
    (BEFORE_FIRST_TOKEN, (48, 16 + 95, 0, 0)),
], ids=["after-first-token", "before-first-token"])
def test_the_compiled_loop_counts_and_hits_as_derived_by_hand(case, stats):
    """The two runs above through Simulator.run, compiled (serving.kernel) and the Python loop: the same hit counts as
    derived by hand, the same records and times. The simulator runs decode-only steps in blocks while nothing can
    change them; a step that preempted is not one of them (vLLM admits nothing in it, sched/scheduler.py:626, but may
    at the next step): run as a block to r0's end, step 3 would have left r1 out until step 9 (32 of 95 counted)."""
    pytest.importorskip("numba")
    from roofline.serving import kernel
    from tests.serving.test_serving_kernel import assert_same, python_loop, simulator

    rows, capacity, budget = case
    reqs, _ = _requests(rows)
    sim = simulator(4096, scheduler=SchedulerConfig(budget, 256))
    sim.pool = _pool(capacity)
    assert kernel.covers(sim, reqs) is None
    fast, slow = sim.run(reqs), python_loop(sim).run(reqs)
    assert_same(fast, slow)
    keys = ("hit_tokens", "query_tokens", "resumed_hit_tokens", "resumed_tokens")
    assert tuple(fast.prefix_cache[k] for k in keys) == tuple(slow.prefix_cache[k] for k in keys) == stats
    assert fast.preemptions == slow.preemptions == (1 if case is AFTER_FIRST_TOKEN else 2)
