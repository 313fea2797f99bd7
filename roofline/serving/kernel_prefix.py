"""serving.prefix_cache.PrefixCache in flat arrays, for the compiled record loop (numba njit, cache=True): the same
decisions on the same state, per replica r.

State (`pfx` = (pi, pf, pm), built by serving.kernel.prefix_state: three flat arrays, since numba counts references on
every array a call passes, per call): in pi, after a header of offsets (P_*), the tree (parent, start, length, depth:
nodes on the path from a root, the root counting one; per request leaf and shared) and per replica and slot the cached
tokens, running requests using it and cached children (CACHED, REFS, KIDS side by side in 4 words), the LRU heap's
(-depth, node) and scratch space, and per replica a generation (GENERATION: bumped by every change of the replica's
cache or heap) with the generation, request and hit of its last failed admission (serving.kernel_sched.admit), the count
of admissions that took such a failure's walks instead of their own (AGAIN), the slots given (SLOTS), the nodes no
running request uses that hold cached pages (UNUSED: PrefixCache's unused_nodes) and the free queue's spent runs' ring
head and length and PrefixCache._apart (SHEAD, SLEN, APART: serving.kernel_free_queue); in pf each replica's slots' last
use and the heap's keys (last use), then per replica the bytes of those unused nodes' pages (PrefixCache.unused_bytes),
the room its last failed admission found in the cache (PrefixCache.evictable_for) and PrefixCache.spent_bytes, then per
replica the ring of pi[P_RUNS] spent runs (free time, bytes, owner + 1: a preempted request's, PrefixCache.own_hit), and
per request in pi the ring slot + 1 and first and last token of its own run (OWN_WORDS, written only at its preemption;
valid while that slot's owner is still the request); in pm (int32) per replica and node its slot + 1 (0: none yet). A
replica gives a node a slot at its first use (_slot), so the state of the nodes it uses lies together, one line per
node, and only those pages are ever written: indexed by node, a chat fleet's 32 replicas x 3.2M nodes x 4 arrays were
3.3 GB of pages zeroed as the sparse writes reached them, each node's fields four cache misses apart. The heap's size is
ri[r, HSIZE]. The heap is Python's heapq's: a min-heap under the tuple order, entries made stale by a later use skipped
when popped (PrefixCache._top). Pops depend only on the set of keys, and a node's live key is unique (its node id is in
it), so any binary heap pops the same nodes; when the heap's slots run out, the entries that are stale now are dropped
(one per node kept): a node that becomes evictable again is pushed anew at that moment (PrefixCache.release,
._evict_top), so a dropped entry is never the one that would have been popped.
"""

import numpy as np
from numba import njit

from roofline.serving.kernel_layout import CACHED, HITS, HSIZE, KIDS, PAGE, QUERIES, REFS, RHITS, RQUERIES
from roofline.serving.kernel_views import prefetch
from roofline.serving.prefix_cache import SPENT_RUNS

# pi's header: nodes, heap slots, replicas, spent runs per replica, then where each part starts (per node: parent,
# start, length, depth; per request: leaf, shared; per replica and node: CACHED, REFS, KIDS; per replica and slot:
# -depth, node; scratch; per replica: GENERATION .. APART; per request: its own spent run, OWN_WORDS)
(P_K, P_H, P_NREP, P_RUNS, P_PARENT, P_START, P_LENGTH, P_DEPTH, P_LEAF, P_SHARED, P_PC, P_HINT, P_MARK, P_BUF, P_GEN,
 P_OWN, P_HEADER) = range(17)
# per request, from pi[P_OWN] + OWN_WORDS i: the ring slot + 1 of the spent run its preemption queued (0: none; valid
# while that slot holds a run of its own: kernel_free_queue.own_hit), the tokens the run starts and ends at
OWN_SLOT, OWN_START, OWN_FULL = range(3)
OWN_WORDS = 3
RUN_FIELDS = 3  # a spent run in the ring: free time, bytes, owner + 1 (0: none), as floats
# per replica, from pi[P_GEN] + GEN_FIELDS r (shead, slen: the spent runs' ring's head and length; apart: a node
# became unused since the last run, PrefixCache._apart)
GENERATION, FAILED_GEN, FAILED_ID, FAILED_HIT, AGAIN, SLOTS, UNUSED, SHEAD, SLEN, APART = range(10)
GEN_FIELDS = 10
# per replica, in pf after the last uses and the heap's keys; then per replica the spent runs' ring (time, bytes)
UNUSED_BYTES, FAILED_ROOM, SPENT_BYTES = range(3)
PF_FIELDS = 3
SLOT_WORDS = 4  # a slot's words in pi: CACHED, REFS, KIDS and one unused (a slot within one 64-byte line)


def prefix_state(parent, start, length, leaf, shared, replicas: int, runs: int = SPENT_RUNS) -> tuple:
    """`pfx` for a tree (int64 arrays) and `replicas` empty caches; the heap has 2 x nodes + 16 slots (live entries
    are at most one per node: a compaction frees at least half); the free queue's ring holds `runs` spent runs
    (PrefixCache's SPENT_RUNS: the same merge past it)."""
    k, n = len(parent), len(leaf)
    depth = depths(parent)
    heap = 2 * k + 16
    sizes = [k, k, k, k, n, n, replicas * SLOT_WORDS * k, replicas * 2 * heap, k, max(1, int(depth.max(initial=1))),
             GEN_FIELDS * replicas, OWN_WORDS * n]
    offsets = P_HEADER + np.concatenate([[0], np.cumsum(sizes)[:-1]])
    pi = np.zeros(P_HEADER + sum(sizes), dtype=np.int64)
    pi[:P_HEADER] = [k, heap, replicas, runs, *offsets]
    for at, part in zip(offsets, (parent, start, length, depth, leaf, shared), strict=False):
        pi[at:at + len(part)] = part
    gen = offsets[P_GEN - P_PARENT]
    pi[gen + FAILED_ID:gen + GEN_FIELDS * replicas:GEN_FIELDS] = -1  # no failed admission yet
    pi[gen + APART:gen + GEN_FIELDS * replicas:GEN_FIELDS] = 1  # no spent run yet
    pf = np.zeros(replicas * (k + heap + PF_FIELDS + RUN_FIELDS * runs))
    return pi, pf, np.zeros(replicas * k, dtype=np.int32)


@njit(cache=True, inline="always")
def _slot(pfx, r, node):
    """Replica r's slot of `node`, given at its first use (the next of r's dense slots, its words still zero)."""
    pi, pm = pfx[0], pfx[2]
    at = r * pi[P_K] + node
    s = pm[at]
    if s == 0:
        g = pi[P_GEN] + GEN_FIELDS * r + SLOTS
        pi[g] += 1
        s = pi[g]
        pm[at] = s
    return s - 1


@njit(cache=True, inline="always")
def _pc(pi, r, f, slot):
    """Where replica r's field f (CACHED, REFS, KIDS) of the node in `slot` is in pi."""
    return pi[P_PC] + (r * pi[P_K] + slot) * SLOT_WORDS + f


@njit(cache=True, inline="always")
def _peek(pfx, r, f, node):
    """Replica r's field f of `node`, without giving it a slot: 0 for a node r never used (as a fresh slot's)."""
    pi = pfx[0]
    s = pfx[2][r * pi[P_K] + node]
    return pi[_pc(pi, r, f, s - 1)] if s else 0


@njit(cache=True, inline="always")
def _last(pi, r, slot):
    """Where replica r's last use of the node in `slot` is in pf."""
    return r * pi[P_K] + slot


@njit(cache=True, inline="always")
def _hi(pi, r, f, slot):
    """Where replica r's heap slot's -depth (f 0) or node (f 1) is in pi."""
    return pi[P_HINT] + (r * 2 + f) * pi[P_H] + slot


@njit(cache=True, inline="always")
def _hk(pi, r, slot):
    """Where replica r's heap slot's key (last use) is in pf."""
    return pi[P_NREP] * pi[P_K] + r * pi[P_H] + slot


@njit(cache=True, inline="always")
def _pu(pi, r, f):
    """Where replica r's float field f (UNUSED_BYTES, FAILED_ROOM) is in pf."""
    return pi[P_NREP] * (pi[P_K] + pi[P_H]) + r * PF_FIELDS + f


@njit(cache=True, inline="always")
def _ring(pi, r, slot, f):
    """Where replica r's spent run in ring `slot` has its free time (f 0), bytes (f 1) or owner + 1 (f 2) in pf."""
    return pi[P_NREP] * (pi[P_K] + pi[P_H] + PF_FIELDS) + (r * pi[P_RUNS] + slot) * RUN_FIELDS + f


@njit(cache=True, inline="always")
def _gen(pi, r, f):
    """Where replica r's per-replica integer f (GENERATION .. APART) is in pi."""
    return pi[P_GEN] + GEN_FIELDS * r + f


@njit(cache=True, inline="always")
def _unused(pi, r):
    """Where replica r's count of unused nodes holding cached pages is in pi."""
    return pi[P_GEN] + GEN_FIELDS * r + UNUSED


@njit(cache=True, inline="always")
def _node_bytes(pi, node, cached, seq):
    """PrefixCache._node_bytes: the bytes of `node`'s first `cached` tokens."""
    s = pi[pi[P_START] + node]
    return seq[s + cached] - seq[s]


@njit(cache=True, inline="always")
def _bump(pi, r):
    """Replica r's cache or heap changed: a new generation."""
    pi[pi[P_GEN] + GEN_FIELDS * r + GENERATION] += 1


@njit(cache=True)
def depths(parent):
    """Nodes on each node's path from its root (PrefixCache.depth: len(tree.path(node)))."""
    out = np.zeros(len(parent), dtype=np.int64)
    for j in range(len(parent)):
        d, node = 0, j
        while node >= 0:
            d += 1
            node = parent[node]
        out[j] = d
    return out


@njit(cache=True, inline="always")
def _path(i, pi):
    """Request i's path, root first, into the scratch buffer (from pi[pi[P_BUF]]); returns its length."""
    node = pi[pi[P_LEAF] + i]
    if node < 0:
        return 0
    d = pi[pi[P_DEPTH] + node]
    buf = pi[P_BUF]
    for k in range(d - 1, -1, -1):
        pi[buf + k] = node
        node = pi[pi[P_PARENT] + node]
    return d


@njit(cache=True)
def cached_prefix(r, i, pfx):
    """PrefixCache.cached_prefix: tokens of request i's path cached contiguously from its start."""
    pi = pfx[0]
    h = 0
    buf = pi[P_BUF]
    for k in range(_path(i, pi)):
        node = pi[buf + k]
        c = _peek(pfx, r, CACHED, node)
        h += c
        if c < pi[pi[P_LENGTH] + node]:
            break
    return h


@njit(cache=True)
def hit(r, i, todo, pfx, cfg):
    """PrefixCache.hit: the cached shared prefix in whole pages, at most todo - 1 tokens."""
    pi = pfx[0]
    h = min(cached_prefix(r, i, pfx), pi[pi[P_SHARED] + i], todo - 1)
    page = cfg[PAGE]
    return max(h, 0) // page * page


@njit(cache=True)
def path_of(i, pfx):
    """Request i's path into the scratch buffer, once for a router's queries of every replica (hit_on_path)."""
    return _path(i, pfx[0])


@njit(cache=True, inline="always")
def hit_on_path(r, i, d, todo, pfx, cfg):
    """hit(r, i, todo) on the path path_of(i) left in the scratch buffer (d nodes): the same arithmetic."""
    pi = pfx[0]
    h = 0
    buf = pi[P_BUF]
    for k in range(d):
        node = pi[buf + k]
        c = _peek(pfx, r, CACHED, node)
        h += c
        if c < pi[pi[P_LENGTH] + node]:
            break
    h = min(h, pi[pi[P_SHARED] + i], todo - 1)
    page = cfg[PAGE]
    return max(h, 0) // page * page


@njit(cache=True, inline="always")
def _less(k1, d1, n1, k2, d2, n2):
    """Python's tuple order on (last use, -depth, node)."""
    if k1 != k2:
        return k1 < k2
    if d1 != d2:
        return d1 < d2
    return n1 < n2


@njit(cache=True, inline="always")
def _entry_less(pi, pf, r, a, b):
    """Heap slot a's entry orders before slot b's."""
    return _less(pf[_hk(pi, r, a)], pi[_hi(pi, r, 0, a)], pi[_hi(pi, r, 1, a)], pf[_hk(pi, r, b)],
                 pi[_hi(pi, r, 0, b)], pi[_hi(pi, r, 1, b)])


@njit(cache=True, inline="always")
def _move(pi, pf, r, to, frm):
    """Copy heap slot `frm`'s entry into slot `to`."""
    pf[_hk(pi, r, to)] = pf[_hk(pi, r, frm)]
    pi[_hi(pi, r, 0, to)] = pi[_hi(pi, r, 0, frm)]
    pi[_hi(pi, r, 1, to)] = pi[_hi(pi, r, 1, frm)]


@njit(cache=True)
def _sift_down(r, pos, size, pi, pf):
    """Restore the heap below slot `pos`."""
    while True:
        a, b = 2 * pos + 1, 2 * pos + 2
        small = pos
        if a < size and _entry_less(pi, pf, r, a, small):
            small = a
        if b < size and _entry_less(pi, pf, r, b, small):
            small = b
        if small == pos:
            return
        key, d, node = pf[_hk(pi, r, pos)], pi[_hi(pi, r, 0, pos)], pi[_hi(pi, r, 1, pos)]
        _move(pi, pf, r, pos, small)
        pf[_hk(pi, r, small)], pi[_hi(pi, r, 0, small)], pi[_hi(pi, r, 1, small)] = key, d, node
        pos = small


@njit(cache=True, inline="always")
def _evictable(pi, r, slot):
    """PrefixCache._evictable, of the node in replica r's `slot`."""
    return (pi[_pc(pi, r, REFS, slot)] == 0 and pi[_pc(pi, r, CACHED, slot)] > 0
            and pi[_pc(pi, r, KIDS, slot)] == 0)


@njit(cache=True)
def _compact(r, ri, pfx):
    """Drop the heap's stale entries (not evictable now, or an older use than the node's last), one per node."""
    pi, pf = pfx[0], pfx[1]
    size, w, mark = ri[r, HSIZE], np.int64(0), pi[P_MARK]  # not a literal 0: _sift_down compiles once for w
    for s in range(size):
        node = pi[_hi(pi, r, 1, s)]
        if pi[mark + node]:
            continue
        at = _slot(pfx, r, node)
        if not _evictable(pi, r, at) or pf[_hk(pi, r, s)] != pf[_last(pi, r, at)]:
            continue
        pi[mark + node] = 1
        _move(pi, pf, r, w, s)
        w += 1
    for s in range(w):
        pi[mark + pi[_hi(pi, r, 1, s)]] = 0
    for s in range(w // 2 - 1, -1, -1):
        _sift_down(r, s, w, pi, pf)
    ri[r, HSIZE] = w


@njit(cache=True)
def _push(r, key, node, ri, pfx):
    """heapq.heappush(heap, (key, -depth[node], node))."""
    pi, pf = pfx[0], pfx[1]
    _bump(pi, r)
    if ri[r, HSIZE] == pi[P_H]:
        _compact(r, ri, pfx)
    pos = ri[r, HSIZE]
    ri[r, HSIZE] = pos + 1
    d = -pi[pi[P_DEPTH] + node]
    while pos > 0:
        up = (pos - 1) // 2
        if not _less(key, d, node, pf[_hk(pi, r, up)], pi[_hi(pi, r, 0, up)], pi[_hi(pi, r, 1, up)]):
            break
        _move(pi, pf, r, pos, up)
        pos = up
    pf[_hk(pi, r, pos)], pi[_hi(pi, r, 0, pos)], pi[_hi(pi, r, 1, pos)] = key, d, node


@njit(cache=True)
def acquire(r, i, now, pfx, seq):
    """PrefixCache.acquire: request i is admitted; its nodes are in use at `now` (their unused pages leave the free
    room, in path order; none left unused: the room is 0.0 exactly)."""
    pi, pf = pfx[0], pfx[1]
    _bump(pi, r)
    buf = pi[P_BUF]
    for k in range(_path(i, pi)):
        node = pi[buf + k]
        at = _slot(pfx, r, node)
        c = pi[_pc(pi, r, CACHED, at)]
        if not pi[_pc(pi, r, REFS, at)] and c:
            pf[_pu(pi, r, UNUSED_BYTES)] -= _node_bytes(pi, node, c, seq)
            pi[_unused(pi, r)] -= 1
        pi[_pc(pi, r, REFS, at)] += 1
        pf[_last(pi, r, at)] = now
    if not pi[_unused(pi, r)]:
        pf[_pu(pi, r, UNUSED_BYTES)] = 0.0
    return 0


@njit(cache=True)
def release(r, i, now, ri, pfx, seq):
    """PrefixCache.release: request i left at `now`; nodes nobody uses join the heap and the free room."""
    pi, pf = pfx[0], pfx[1]
    _bump(pi, r)
    buf = pi[P_BUF]
    for k in range(_path(i, pi)):
        node = pi[buf + k]
        at = _slot(pfx, r, node)
        pi[_pc(pi, r, REFS, at)] -= 1
        pf[_last(pi, r, at)] = now
        c = pi[_pc(pi, r, CACHED, at)]
        if c and not pi[_pc(pi, r, REFS, at)]:
            pf[_pu(pi, r, UNUSED_BYTES)] += _node_bytes(pi, node, c, seq)
            pi[_unused(pi, r)] += 1
            pi[_gen(pi, r, APART)] = 1
            _push(r, pf[_last(pi, r, at)], node, ri, pfx)
    return 0


@njit(cache=True)
def publish(r, i, upto, pfx):
    """PrefixCache.publish: request i's first `upto` shared tokens join the cache; returns the cached prefix before."""
    pi = pfx[0]
    before = cached_prefix(r, i, pfx)
    if upto <= before:
        return before
    buf = pi[P_BUF]
    for k in range(_path(i, pi)):
        node = pi[buf + k]
        s = pi[pi[P_START] + node]
        if upto <= s:
            break
        want = min(upto - s, pi[pi[P_LENGTH] + node])
        at = _pc(pi, r, CACHED, _slot(pfx, r, node))
        old = pi[at]
        if want > old:
            _bump(pi, r)
            pi[at] = want
            parent = pi[pi[P_PARENT] + node]
            if old == 0 and parent >= 0:
                pi[_pc(pi, r, KIDS, _slot(pfx, r, parent))] += 1
    return before


@njit(cache=True)
def full_ancestors(r, i, pfx):
    """The tokens of the nodes before request i's leaf on its path when each is wholly cached on replica r and they
    end where the leaf starts, else -1. While i runs it holds every node of its path (acquire), so none is evicted
    (PrefixCache._evictable: no references) and cached tokens only grow (publish): the answer stays true until i
    is released, and publish_leaf may stand for publish."""
    pi = pfx[0]
    d = _path(i, pi)
    if d == 0:
        return -1
    buf = pi[P_BUF]
    tot = 0
    for k in range(d - 1):
        node = pi[buf + k]
        length = pi[pi[P_LENGTH] + node]
        if _peek(pfx, r, CACHED, node) < length:
            return -1
        tot += length
    return tot if tot == pi[pi[P_START] + pi[buf + d - 1]] else -1


@njit(cache=True)
def leaf_slot(r, i, pfx):
    """Request i's leaf's slot on replica r and the leaf's tokens (for publish_leaf)."""
    pi = pfx[0]
    leaf = pi[pi[P_LEAF] + i]
    return _slot(pfx, r, leaf), pi[pi[P_LENGTH] + leaf]


@njit(cache=True, inline="always")
def prefetch_leaf(r, slot, pfx):
    """Ask for the line of replica r's `slot` (a leaf publish_leaf is about to read) ahead of its use."""
    pi = pfx[0]
    prefetch(pi, _pc(pi, r, CACHED, slot))


@njit(cache=True)
def publish_leaf(r, i, slot, anc, length, upto, pfx):
    """publish(r, i, upto) for a request whose path's nodes before its leaf (in replica r's `slot`, `length` tokens)
    are wholly cached, `anc` tokens ending where the leaf starts (full_ancestors): the same result and effect
    without the path. cached_prefix sums the full nodes and then the leaf's cached tokens, anc + cached; publish's
    walk leaves a full node unchanged (min(upto - start, length) <= length = cached) and never stops before the leaf
    (upto > anc >= each start), so only the leaf may grow, to min(upto - anc, length)."""
    pi = pfx[0]
    at = _pc(pi, r, CACHED, slot)
    old = pi[at]
    before = anc + old
    if upto <= before:
        return before
    want = min(upto - anc, length)
    if want > old:
        _bump(pi, r)
        pi[at] = want
        parent = pi[pi[P_PARENT] + pi[pi[P_LEAF] + i]] if old == 0 else -1
        if parent >= 0:
            pi[_pc(pi, r, KIDS, _slot(pfx, r, parent))] += 1
    return before


@njit(cache=True)
def pop(r, ri, pfx):
    """heapq.heappop of replica r's heap: the top entry's key (last use) and node."""
    pi, pf = pfx[0], pfx[1]
    _bump(pi, r)
    t, node = pf[_hk(pi, r, 0)], pi[_hi(pi, r, 1, 0)]
    last = ri[r, HSIZE] - 1
    _move(pi, pf, r, 0, last)
    ri[r, HSIZE] = last
    _sift_down(r, 0, last, pi, pf)
    return t, node


@njit(cache=True, inline="always")
def count(r, hit_tokens, todo, resumed, ri):
    """PrefixCache.count: an admission asked for `todo` known tokens and found `hit_tokens` cached (`resumed`: a
    re-admission after the request's first token)."""
    if resumed:
        ri[r, RHITS] += hit_tokens
        ri[r, RQUERIES] += todo
    else:
        ri[r, HITS] += hit_tokens
        ri[r, QUERIES] += todo


@njit(cache=True)
def failed_again(r, i, pfx):
    """The hit of request i's last failed admission on replica r when nothing in r's cache or heap has changed
    since (the same generation), else -1; such an admission takes that failure's hit and room (failed_room) for its
    own walks'. A failed admission changes nothing in the cache (serving.kernel_sched.admit: no acquire, no evict),
    so with the generation unchanged both are what the walks would find."""
    pi = pfx[0]
    g = pi[P_GEN] + GEN_FIELDS * r
    if pi[g + FAILED_ID] != i or pi[g + FAILED_GEN] != pi[g + GENERATION]:
        return -1
    pi[g + AGAIN] += 1
    return pi[g + FAILED_HIT]


@njit(cache=True, inline="always")
def failed_room(r, pfx):
    """evictable_for of the request of replica r's last failed admission, as that failure found it."""
    pi = pfx[0]
    return pfx[1][_pu(pi, r, FAILED_ROOM)]


@njit(cache=True)
def failed(r, i, h, room, pfx):
    """Request i's admission on replica r failed with hit h and `room` (evictable_for) in the cache: the cache's
    generation now is that failure's."""
    pi = pfx[0]
    g = pi[P_GEN] + GEN_FIELDS * r
    pi[g + FAILED_GEN], pi[g + FAILED_ID], pi[g + FAILED_HIT] = pi[g + GENERATION], i, h
    pfx[1][_pu(pi, r, FAILED_ROOM)] = room


def repeats(pfx) -> list[int]:
    """Per replica, the admissions that took a failed admission's walks (failed_again), from a run's `pfx`."""
    pi = pfx[0]
    return [int(pi[pi[P_GEN] + GEN_FIELDS * r + AGAIN]) for r in range(int(pi[P_NREP]))]
