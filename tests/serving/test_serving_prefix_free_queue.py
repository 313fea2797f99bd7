"""Unused cached prefixes are free room, evicted only when an allocation takes their pages (vLLM's free queue:
serving.prefix's module docstring). vLLM 0.24 (vllm/v1/core/): BlockPool.get_num_free_blocks is the free queue's
length, cached blocks with ref_cnt 0 included (block_pool.py:692-698); allocate_slots returns None, touching and
popping nothing, when the blocks to allocate exceed it (kv_cache_manager.py:372-387 for the whole prompt under
scheduler_reserve_full_isl, 405-420 for the step's tokens), a request's own unused hit blocks counted among them
(single_type_kv_cache_manager.py:174-180); only then are its hit blocks touched and the step's new blocks popped from
the queue's front, each cached block popped evicted (kv_cache_manager.py:422-440, block_pool.py:542-572).

Each expected outcome is derived by hand below, on a pool of 1 byte per token in 16-token pages (seq_bytes[n] =
16 ceil(n / 16)) of 128 bytes (8 pages), with two roots: A (32 tokens, 2 pages) shared by the requests that name
it, B (32 tokens) named by the others with nothing shared (shared 0: B is never cached). The rule roofline had
before (evict at the test, for the whole room asked) is derived beside it, to show the cases tell the two apart.
"""

from __future__ import annotations

import numpy as np

from roofline.serving.pool import KVPool
from roofline.serving.prefix import _tree
from roofline.serving.prefix_cache import PrefixCache
from roofline.serving.requests import Requests
from roofline.serving.scheduler import Scheduler, SchedulerConfig

A, B = 0, 1


def _scheduler(rows, budget: int, full: bool, a_tokens: int = 32) -> Scheduler:
    """rows: (root, shared tokens, prompt, output) per request, all waiting at t = 0 in this order; A of
    `a_tokens`."""
    pool = KVPool.uniform(128, 16, 1.0, 4096, "test: 8 pages of 16 tokens, 1 byte per token")
    root, shared, prompt, output = (np.array(col, dtype=np.int64) for col in zip(*rows, strict=True))
    tree = _tree([-1, -1], [0, 0], [a_tokens, 32], root, shared, "system")
    reqs = Requests(np.zeros(len(rows)), prompt, output, tree)
    sched = Scheduler(reqs, pool, SchedulerConfig(budget, 256, admit_full_prompt=full),
                      PrefixCache(tree, pool.seq_bytes, 16))
    sched.waiting.extend(range(len(rows)))
    sched.arrived = len(rows)
    return sched


def _run(sched: Scheduler, steps: int, watch=None) -> dict[int, tuple[int, int]]:
    """Step one step at a time (step k at time k); per request its admission step and hit (the first chunk's
    start). watch(step, sched) is called after each commit."""
    started: dict[int, tuple[int, int]] = {}
    for step in range(1, steps + 1):
        sched.now = float(step)
        plan = sched.schedule()
        if plan is None:
            break
        for pos, start in zip(plan.chunk_pos.tolist(), plan.chunk_start.tolist(), strict=True):
            started.setdefault(int(sched.ids[pos]), (step, int(start)))
        sched.commit(plan, float(step))
        if watch is not None:
            watch(step, sched)
    return started


def test_a_failed_admission_leaves_the_unused_prefixes_cached():
    """First-chunk admission, 256 tokens a step, A of 16 tokens (1 page). r0 = A + 16 (32 tokens, 1 out),
    rp, rq = 24 tokens each (B, 2 out: 2 pages, the second half full), r2 = 65 tokens (B, 1 out: 5 pages, 80 bytes),
    r3 = A + 16 (32, 1 out).
    Step 1: r0, rp, rq start (32 bytes each, from the never-used pages: 32 left); r2's 80 > 32, nothing cached yet:
    it waits. r0 publishes A and ends: its own page (16) is freed to the queue, then A (16, unused), both at 1 (a
    request's blocks are freed tail first). Pool: A 16, rp 32, rq 32 held; queue: r0's page, A; 32 never used.
    Step 2: rp, rq decode their 25th token within their second page. r2 asks 80 > 48 free (the queue's 16 and 32
    never used) + 16 (A, not on its path): it waits, and A stays cached. (The old rule evicted 80 - 48 = 32 for it
    first: all of A, and still failed.) rp and rq end: their first pages (16 each) join the queue at 2, their half
    full second pages are never-used room again (vLLM prepends unhashed blocks): 64 never used.
    Step 3: r2 (80 <= 112 free) takes the 64 never-used bytes and 16 from the queue's front: r0's page; r3 hits A
    (16 tokens: min(16 cached, 16 shared, 31) in pages), asks seq[32] - 16 = 16 <= 32 and takes rp's page (A, its
    own hit, left the queue when it was admitted). Hits: 16. (The old rule: r3 hit 0.)"""
    sched = _scheduler([(A, 16, 32, 1), (B, 0, 24, 2), (B, 0, 24, 2), (B, 0, 65, 1), (A, 16, 32, 1)], budget=256,
                       full=False, a_tokens=16)
    seen = {}
    started = _run(sched, 3, lambda step, s: seen.setdefault(step, (s.cache.cached.tolist(), s.cache.spent_bytes)))
    assert started == {0: (1, 0), 1: (1, 0), 2: (1, 0), 3: (3, 0), 4: (3, 16)}
    assert seen[1] == ([16, 0], 16) and seen[2] == ([16, 0], 48)
    assert seen[3] == ([16, 0], 16 + 64 + 16)  # rq's page, then r2's 4 full pages and r3's own (both ended at 3)
    assert sched.cache.hit_tokens == 16 and sched.cache.query_tokens == 32 + 24 + 24 + 65 + 32


def test_the_whole_prompt_gate_evicts_only_what_the_first_chunk_takes():
    """vLLM 0.24's whole-prompt admission, 64 tokens a step. r0 = A + 16 (48 tokens, 1 out), rx = 16 tokens (B, 2
    out), r1 = 80 tokens (B, 1 out), r2 = A + 16 (48, 1 out).
    Step 1: r0 (48) and rx (16) start and prefill; r0 publishes A and ends: A (32, unused) and rx's 16 held.
    Step 2: rx's 17th token takes a page (16); 63 tokens of budget: r1's first chunk is 63 tokens, 64 bytes, its
    whole prompt seq[80] = 80 bytes, against 128 - 48 - 16 = 64 empty and A's 32: 80 <= 96, admitted; its chunk's 64
    are empty pages, so nothing is evicted (the old rule evicted 80 - 64 = 16 for the gate: A's tail page). rx emits
    its 2nd token and ends (its 32 freed): A's 32 and r1's 64 held.
    Step 3: r1's last 17 tokens take its 5th page (16 of the 32 empty); 47 tokens of budget left: r2 hits A's 32
    tokens, asks seq[48] - 32 = 16 <= 16 empty: admitted at step 3 with a hit of 32, nothing evicted; both end
    there. (The old rule: A's first page only, a hit of 16.)"""
    sched = _scheduler([(A, 32, 48, 1), (B, 0, 16, 2), (B, 0, 80, 1), (A, 32, 48, 1)], budget=64, full=True)
    seen = {}
    started = _run(sched, 3, lambda step, s: seen.setdefault(step, (s.cache.cached.tolist(), s.used_bytes)))
    assert started == {0: (1, 0), 1: (1, 0), 2: (2, 0), 3: (3, 32)}
    assert seen[2] == ([32, 0], 32 + 64)
    assert seen[3] == ([32, 0], 32)  # r1 and r2 ended at step 3: A alone
    assert sched.cache.hit_tokens == 32


def test_an_idle_prefix_goes_before_the_pages_freed_after_it():
    """Every full page a request held joins the free queue when it ends, behind the prefixes freed before it; an
    allocation that finds no never-used page takes the queue's front, an older prefix before them. 256 tokens a step.
    r0 = A + 16 (48 tokens, 1 out), r1 = 79 tokens (B, 2 out: 5 pages), r2 = 64 (B, 1 out), r3 = A + 16 (48, 1 out).
    Step 1: r0 (48) and r1 (80) take all 128 never-used bytes; r2 waits. r0 publishes A and ends: its own page, then
    A, join the queue at 1 (16 + 32 bytes).
    Step 2: r1's 80th token fits its 5th page. r2 asks 64 > 16 (r0's page) + 32 (A): it waits. r1 ends: its 5 pages
    (80) join the queue at 2.
    Step 3: r2 fits (64 <= 96 free) and takes the queue's front: r0's page (16), A (32: evicted), 16 of r1's pages.
    r3 finds nothing cached (hit 0) and takes 48 more of r1's pages. (Counting r1's freed pages as empty, r2 takes
    them and r3 hits A's 32 tokens; the rule before evicted A at step 2's failed admission instead.)"""
    sched = _scheduler([(A, 32, 48, 1), (B, 0, 79, 2), (B, 0, 64, 1), (A, 32, 48, 1)], budget=256, full=False)
    seen = {}
    started = _run(sched, 3, lambda step, s: seen.setdefault(step, (s.cache.cached.tolist(), s.cache.spent_bytes)))
    assert started == {0: (1, 0), 1: (1, 0), 2: (3, 0), 3: (3, 0)}
    assert seen[1] == ([32, 0], 16) and seen[2] == ([32, 0], 16 + 80)
    assert seen[3] == ([32, 0], 16 + 64 + 16)  # r3 published A again; r1's last page, r2's 4 and r3's own
    assert sched.cache.hit_tokens == 0


def test_an_admission_evicts_the_pages_its_chunk_lacks_least_recently_used_first():
    """The step's pages beyond the empty ones are taken from the cache, and no more. r0 = A + 16 (48, 1 out) and
    ry = B + 16 with nothing shared, 1 out, at step 1: A cached (32) and unused. Then at step 2 r1 = 120 tokens (B, 1
    out) in one chunk: seq[120] = 128 bytes against 96 empty and A's 32 (128 <= 128): admitted; the 32 bytes the
    empty pages lack are A's two pages, evicted (the old rule did the same here: the test and the taking agree)."""
    sched = _scheduler([(A, 32, 48, 1), (B, 0, 48, 1), (B, 0, 120, 1)], budget=256, full=True)
    seen = {}
    started = _run(sched, 2, lambda step, s: seen.setdefault(step, (s.cache.cached.tolist(), s.used_bytes)))
    assert started == {0: (1, 0), 1: (1, 0), 2: (2, 0)}
    assert seen[1] == ([32, 0], 32) and seen[2] == ([0, 0], 0)  # r1 ended at step 2 too


def test_unused_bytes_follow_the_references():
    """PrefixCache.unused_bytes / evictable_for by hand: r0 and r1 share A; A's 32 tokens published by r0.
    While r0 runs nothing is unused; r1 admitted beside it and r0 gone: still none (r1 holds A); both gone: A's
    32 bytes; evictable for r1 (whose path is A): 0, for r2 (path B): 32; evicting a page leaves 16."""
    tree = _tree([-1, -1], [0, 0], [32, 32], [A, A, B], [32, 32, 0], "system")
    cache = PrefixCache(tree, KVPool.uniform(128, 16, 1.0, 256, "test").seq_bytes, 16)
    cache.acquire(0, 1.0)
    cache.publish(0, 32)
    assert cache.unused_bytes == 0.0
    cache.acquire(1, 2.0)
    cache.release(0, 3.0)
    assert cache.unused_bytes == 0.0 and cache.unused_nodes == 0
    cache.release(1, 4.0)
    assert (cache.unused_bytes, cache.unused_nodes) == (32.0, 1)
    assert cache.evictable_for(1) == 0.0 and cache.evictable_for(2) == 32.0
    assert cache.take(10) == 16 and cache.unused_bytes == 16.0
    cache.acquire(1, 5.0)
    assert (cache.unused_bytes, cache.unused_nodes) == (0.0, 0)
