"""The pool's cache of a PrefixTree's pages and its free queue (PrefixCache), as vLLM's automatic prefix caching keeps
them (vllm-project/vllm 0.24, vllm/v1/core/: block_pool.py, kv_cache_utils.py FreeKVCacheBlockQueue,
kv_cache_manager.py, single_type_kv_cache_manager.py).

Hits. A page is cached once it is full of computed tokens; a new request reuses the longest cached prefix of its path,
in whole pages, leaving at least its last token to compute (the hit skips those tokens' prefill: the chunk starts at the
hit, and attention still reads them). A cached segment holds the method's own bytes for those tokens (the pool's
per-sequence table: seq_bytes[start + cached] - seq_bytes[start]), so a compressed method keeps more prefixes warm in
the same pool. For methods whose bytes per token are not uniform (full-precision windows, sinks) that difference is the
marginal cost of extending a sequence, an approximation for a segment shared by many sequences.

The free queue. vLLM hashes every full block a request computes, its own prompt and output too
(kv_cache_manager.py:447-456), and frees a request's blocks tail first (single_type_kv_cache_manager.py:401-409):
hashed ones join the queue's back, the others (a last partial page) its front (block_pool.py:614-635). The queue's
length is the free room (BlockPool.get_num_free_blocks, block_pool.py:692-698): cached blocks no request uses count as
free. An allocation pops blocks from the front and evicts what it pops (get_new_blocks, block_pool.py:542-572): never
used blocks first (the queue starts as all of them), then the least recently freed ("the least recent used block is at
the front ... the one with more hash tokens (the tail of a block chain) is at the front", kv_cache_utils.py:188-195).
So a prefix no request uses is evicted when the allocations since it was freed have used the room ahead of it, the
spent pages of the requests freed before it included, not when the pool's empty pages run out. Here: the nodes no
running request uses (`unused_bytes`; the LRU heap of their tails, by last use) and the spent pages, a request's own
full pages freed when it ends or is preempted (`spent_bytes`: runs of [free time, bytes, owner, first and last token])
are the queue; the pool's never-used room is what neither they nor the running sequences hold (Scheduler: capacity -
used - spent). `take` pops from the front. A request's own hit leaves the queue when it is admitted (BlockPool.touch,
block_pool.py:597-612), so its unused pages are not room for it (`evictable_for`: SingleTypeKVCacheManager.
get_num_blocks_to_allocate counts them among the blocks to allocate, single_type_kv_cache_manager.py:174-180).

Preemption. vLLM's preemption frees a request's blocks like an end (sched/scheduler.py:1107-1128 _preempt_request:
_free_request_blocks, num_computed_tokens = 0) and its re-admission looks its block hashes up again, prompt and output
so far, up to num_tokens - 1 (kv_cache_manager.py:202-242 get_computed_blocks): it finds its own blocks that no
allocation has popped since, a prefix of them since the tail went first. Nobody else can: their hashes chain its own
tokens. Here a preempted request's spent run is its own (`own_hit`: the pages still in it, from where the run starts,
when its cached prefix reaches there; `claim` takes the run out of the queue at its admission); a finished request's
run is hit by nobody, so its bytes stand for it. The hit statistics count what vLLM's vllm:prompt_tokens_cached /
vllm:prompt_tokens count: each request once, its prompt and the hit of the admission that ends in its first token
(v1/metrics/stats.py:304-311 from the PrefillStats sent with its first output, sched/scheduler.py:763-769, 1700); the
re-admissions after a first token apart (`resumed_*`).

Not modelled: vLLM's references are per page, this cache's per node: a running request holds its whole path, pages
past its hit included. At equal free times every spent run goes before every node (vLLM orders the requests freed in
one step one after the other). Past SPENT_RUNS queued runs a preempted request's run joins the last and is hit by
nobody.
"""

from __future__ import annotations

import heapq
from collections import deque

import numpy as np

from roofline.serving.prefix import PrefixTree

SPENT_RUNS = 1 << 16  # runs of spent pages the free queue keeps apart; past it a new run joins the last (the compiled
# twin's ring per replica: 1 MiB of floats); runs merge whenever no node became unused between them, so this is
# reached only with that many prefixes freed among the spent runs still queued


class PrefixCache:
    """The cached pages of a PrefixTree in one pool: per node the tokens cached (a prefix of its segment, whole
    pages within the request's view), running requests using it, last use; and the pool's free queue: the unused
    nodes' pages (`unused_bytes`, over `unused_nodes` nodes, 0.0 exactly when there are none) and the spent pages
    (`spent_bytes`: a request's own full pages, freed when it ends or is preempted, runs of [free time, bytes]), which
    allocations take least recently freed first, spent pages before a node freed at the same time (module
    docstring)."""

    def __init__(self, tree: PrefixTree, seq_bytes: np.ndarray, page_tokens: int) -> None:
        self.tree, self.seq, self.page = tree, seq_bytes, page_tokens
        k = len(tree.parent)
        self.cached = np.zeros(k, dtype=np.int64)
        self.refs = np.zeros(k, dtype=np.int64)
        self.cached_children = np.zeros(k, dtype=np.int64)
        self.last_use = np.zeros(k)
        self.depth = np.array([len(tree.path(j)) for j in range(k)])
        self._paths: dict[int, list[int]] = {}
        self._heap: list[tuple[float, int, int]] = []
        self.bytes = 0.0
        self.unused_bytes = 0.0
        self.unused_nodes = 0
        self._spent: deque[list[float]] = deque()
        self.spent_bytes = 0.0
        self._apart = True  # the next spent run may not join the last (a node became unused since, or it is owned)
        self._own: dict[int, list] = {}  # a preempted request's own run, while it waits (own_hit)
        self.hit_tokens = 0  # vLLM's prompt_tokens_cached: per request, at the admission that ends in its first token
        self.query_tokens = 0  # vLLM's prompt_tokens: per request, its prompt, once
        self.resumed_hit_tokens = 0  # re-admissions after a first token: known tokens found cached
        self.resumed_tokens = 0  # ... and known tokens (prompt and output so far) asked for

    def path(self, i: int) -> list[int]:
        """Request i's nodes, root first (memoised by leaf)."""
        leaf = int(self.tree.leaf[i])
        if leaf not in self._paths:
            self._paths[leaf] = self.tree.path(leaf) if leaf >= 0 else []
        return self._paths[leaf]

    def cached_prefix(self, i: int) -> int:
        """Tokens of request i's path cached contiguously from its start."""
        h = 0
        for node in self.path(i):
            c = int(self.cached[node])
            h += c
            if c < self.tree.length[node]:
                break
        return h

    def hit(self, i: int, todo: int) -> int:
        """Tokens request i would skip: its shared, cached prefix in whole pages, at most todo - 1 (the last token
        is computed to produce the next one)."""
        h = min(self.cached_prefix(i), int(self.tree.shared[i]), todo - 1)
        return max(h, 0) // self.page * self.page

    def count(self, hit: int, todo: int, resumed: bool) -> None:
        """An admission asked for `todo` known tokens and found `hit` cached: a request's first prefill (its prompt;
        vLLM's prompt_tokens and prompt_tokens_cached) or, `resumed`, the re-admission of a request preempted after
        its first token (which vLLM's counters leave out)."""
        if resumed:
            self.resumed_hit_tokens += hit
            self.resumed_tokens += todo
        else:
            self.hit_tokens += hit
            self.query_tokens += todo

    def uncount(self, hit: int, todo: int) -> None:
        """A request counted at its admission (`hit` of `todo` prompt tokens) was preempted before its first token:
        vLLM counts its prefill once, at the admission that ends in a token (its prefill_stats, set at each
        admission, are sent with its first output: sched/scheduler.py:763-769, 1700; v1/request.py:302-307)."""
        self.hit_tokens -= hit
        self.query_tokens -= todo

    def own_hit(self, i: int, hit: int, todo: int) -> tuple[int, float]:
        """(hit, bytes) of request i's admission with its own spent pages: a request preempted after computing full
        pages past what the cache owns finds those still queued (vLLM hashes them: they are popped tail first, so
        what is left is their head) when its cached prefix `hit` reaches where they start, in whole pages, at most
        todo - 1 tokens (get_computed_blocks over the request's block hashes, prompt and output:
        kv_cache_manager.py:202-242); bytes: those pages' (0.0 when there are none)."""
        run = self._own.get(i)
        if run is None or run[2] != i or run[1] <= 0 or hit != run[3]:
            return hit, 0.0
        start, full = run[3], run[4]
        base = self.seq[start]
        tol = 1e-9 * (self.seq[full] - base)
        t = full
        while t > start and (self.seq[t] - base) - run[1] > tol:
            t -= self.page
        t = min(t, todo - 1) // self.page * self.page
        return t, float(self.seq[t] - base)

    def claim(self, i: int, hit: int) -> None:
        """Request i is admitted with the cached prefix `hit`: its own spent run is no longer its own; when `hit` is
        where the run starts (own_hit applied) the run leaves the queue (the pages it hits are the request's again, the
        rest of a page an allocation had begun to take is never-used room), else it stays queued (vLLM: blocks no hash
        chain reaches are still eviction candidates)."""
        run = self._own.pop(i, None)
        if run is None or run[2] != i or run[1] <= 0:
            return
        run[2] = -1
        if hit == run[3]:
            self.spent_bytes -= run[1]
            run[1] = 0.0

    def _node_bytes(self, node: int, cached: int) -> float:
        s = int(self.tree.start[node])
        return float(self.seq[s + cached] - self.seq[s])

    def acquire(self, i: int, now: float) -> None:
        """Request i is admitted: its nodes cannot be evicted (their unused pages leave the free room)."""
        for node in self.path(i):
            if not self.refs[node] and self.cached[node]:
                self.unused_bytes -= self._node_bytes(node, int(self.cached[node]))
                self.unused_nodes -= 1
            self.refs[node] += 1
            self.last_use[node] = now
        if not self.unused_nodes:
            self.unused_bytes = 0.0

    def release(self, i: int, now: float) -> None:
        """Request i left (finished or preempted) at `now`: nodes nobody uses become evictable, least recently used
        first, and their pages free room."""
        for node in self.path(i):
            self.refs[node] -= 1
            self.last_use[node] = now
            if self.cached[node] and not self.refs[node]:
                self.unused_bytes += self._node_bytes(node, int(self.cached[node]))
                self.unused_nodes += 1
                self._apart = True
                heapq.heappush(self._heap, (self.last_use[node], -int(self.depth[node]), node))

    def evictable_for(self, i: int) -> float:
        """Bytes an admission of request i may count as free beyond the pool's empty pages: every unused cached page
        but those on its own path, which its admission takes out of the free queue (vLLM counts its unused hit
        blocks among the blocks to allocate: single_type_kv_cache_manager.py:174-180)."""
        own = 0.0
        for node in self.path(i):
            if not self.refs[node] and self.cached[node]:
                own += self._node_bytes(node, int(self.cached[node]))
        return self.unused_bytes - own

    def publish(self, i: int, upto: int) -> int:
        """Request i has computed its first `upto` shared tokens (whole pages): they join the cache. Returns the
        cached prefix before (the caller frees its own copy of what was already cached)."""
        before = self.cached_prefix(i)
        if upto <= before:
            return before
        for node in self.path(i):
            s, length = int(self.tree.start[node]), int(self.tree.length[node])
            if upto <= s:
                break
            want = min(upto - s, length)
            old = int(self.cached[node])
            if want > old:
                self.bytes += self._node_bytes(node, want) - self._node_bytes(node, old)
                self.cached[node] = want
                if old == 0 and self.tree.parent[node] >= 0:
                    self.cached_children[self.tree.parent[node]] += 1
        return before

    def _evictable(self, node: int) -> bool:
        return self.refs[node] == 0 and self.cached[node] > 0 and self.cached_children[node] == 0

    def spend(self, nbytes: float, now: float, owner: int = -1, start: int = 0, full: int = 0) -> None:
        """A request's own full pages (`nbytes`, tokens start..full) join the free queue's back at `now` (module
        docstring); the run joins the last one unless a node became unused between the two (then the node lies
        between them) or either is `owner`'s, a preempted request's (own_hit: a run of its own while the queue has
        room for one, SPENT_RUNS)."""
        if nbytes <= 0:
            return
        owned = owner >= 0 and len(self._spent) < SPENT_RUNS
        if self._spent and not owned and (not self._apart or len(self._spent) == SPENT_RUNS):
            self._spent[-1][2] = -1
            self._spent[-1][1] += nbytes
        else:
            run = [now, nbytes, owner if owned else -1, start, full]
            self._spent.append(run)
            if owned:
                self._own[owner] = run
        self._apart = owned
        self.spent_bytes += nbytes

    def spend_pages(self, computed: int, owned: int, now: float, owner: int = -1) -> None:
        """A sequence leaves at `now` with `computed` tokens, the cache owning its first `owned`: its own full pages
        past them are spent (spend; `owner`: a preempted request's id); a last partial page is never-used room at once
        (vLLM prepends unhashed blocks)."""
        full = computed // self.page * self.page
        if full > owned:
            self.spend(float(self.seq[full] - self.seq[owned]), now, owner, owned, full)

    def take_pages(self, nbytes: float, free: float) -> float:
        """A step's allocation of `nbytes` when `free` bytes are neither held by a running sequence nor cached (the
        step's earlier pages counted): the never-used ones (free less the spent pages) first, the rest from the
        queue's front (take); returns the cached bytes evicted."""
        empty = free - self.spent_bytes
        return self.take(nbytes - max(empty, 0.0)) if nbytes > empty else 0.0

    def settle(self, used: float, capacity: float) -> float:
        """The pages a block of decode steps took (Scheduler.block_length, never the cache's) beyond the never-used
        ones, from the queue's front before the next step reads the cache: `used` bytes held and cached in a pool of
        `capacity`; returns the cached bytes evicted."""
        over = used + self.spent_bytes - capacity
        return self.take(over) if over > 0 else 0.0

    def _top(self) -> int:
        """The least recently used evictable node (the heap's stale entries dropped on the way), or -1."""
        while self._heap:
            t, _, node = self._heap[0]
            if self._evictable(node) and t == self.last_use[node]:
                return node
            heapq.heappop(self._heap)
        return -1

    def _evict_top(self, node: int, need_bytes: float) -> float:
        """Evict the heap's top `node` page by page from its tail until `need_bytes` are freed or it is gone;
        returns the bytes freed."""
        t = heapq.heappop(self._heap)[0]
        freed = 0.0
        while freed < need_bytes and self.cached[node] > 0:
            old = int(self.cached[node])
            new = max(0, (old - 1) // self.page * self.page)
            freed += self._node_bytes(node, old) - self._node_bytes(node, new)
            self.cached[node] = new
        if self.cached[node] > 0:
            heapq.heappush(self._heap, (t, -int(self.depth[node]), node))
        else:
            self.unused_nodes -= 1
            parent = int(self.tree.parent[node])
            if parent >= 0:
                self.cached_children[parent] -= 1
                if self._evictable(parent):
                    heapq.heappush(self._heap, (self.last_use[parent], -int(self.depth[parent]), parent))
        return freed

    def take(self, need_bytes: float) -> float:
        """An allocation takes `need_bytes` beyond the never-used pages from the free queue's front (BlockPool.
        get_new_blocks, block_pool.py:542-572): spent runs and unused nodes' tails by free time, a spent run first
        at equal times, until they are covered or the queue is empty; returns the cached bytes evicted."""
        taken = evicted = 0.0
        while taken < need_bytes:
            node = self._top()
            if self._spent and (node < 0 or self._spent[0][0] <= self.last_use[node]):
                run = self._spent[0]
                k = min(run[1], need_bytes - taken)
                run[1] -= k
                taken += k
                self.spent_bytes -= k
                if run[1] <= 0:
                    self._spent.popleft()
                    if not self._spent:
                        self.spent_bytes = 0.0
            elif node >= 0:
                freed = self._evict_top(node, need_bytes - taken)
                taken += freed
                evicted += freed
            else:
                break
        self.bytes -= evicted
        self.unused_bytes = self.unused_bytes - evicted if self.unused_nodes else 0.0
        return evicted

    def stats(self) -> dict[str, float | int | str]:
        """Hit statistics (hit_stats) of this cache."""
        return hit_stats(self.tree.kind, self.hit_tokens, self.query_tokens, self.resumed_hit_tokens,
                         self.resumed_tokens)


def hit_stats(workload: str, hit: int, query: int, resumed_hit: int, resumed: int) -> dict[str, float | int | str]:
    """The JSON's `prefix_cache`: hit_rate = hit_tokens / query_tokens, each request counted once, at its first
    prefill (vLLM's vllm:prompt_tokens_cached / vllm:prompt_tokens: v1/metrics/stats.py:277-311, fed by the
    prefill_stats a request sends with its first output); resumed_hit_tokens of resumed_tokens: the re-admissions
    of requests preempted after their first token (prompt and output so far, the cached ones skipped), which that
    counter leaves out (vLLM's logged hit rate counts every scheduling attempt: docs/serving.md)."""
    return {"workload": workload, "hit_rate": hit / query if query else 0.0, "hit_tokens": int(hit),
            "query_tokens": int(query), "resumed_hit_tokens": int(resumed_hit), "resumed_tokens": int(resumed)}


def merged_stats(per: list[dict]) -> dict[str, float | int | str]:
    """A fleet's hit statistics: its replicas' hit_stats summed."""
    keys = ("hit_tokens", "query_tokens", "resumed_hit_tokens", "resumed_tokens")
    return hit_stats(per[0]["workload"], *(sum(int(p[k]) for p in per) for k in keys))
