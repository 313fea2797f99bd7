"""serving.prefix_cache.PrefixCache's free queue in the compiled record loop (numba njit, cache=True): the room it
gives (unused_bytes, evictable_for), spent runs joining it (spend), allocations taking its front (take), and a
preempted request's own run hit by its re-admission (own_hit, claim), over serving.kernel_prefix's `pfx`, per replica
r, with PrefixCache's float operations in its order.

The spent runs are a ring of pi[P_RUNS] (time, bytes, owner + 1) triples per replica in pf (kernel_prefix._ring), its
head and length in pi (SHEAD, SLEN), PrefixCache._apart in APART and spent_bytes in pf (SPENT_BYTES); a preempted
request's run is found from its words in pi (kernel_prefix's OWN_WORDS: PrefixCache._own), a claimed run left in the
ring with no bytes and no owner (popped when it reaches the front, as PrefixCache.take pops it). The unused nodes are
kernel_prefix's heap (its key: the node's last use, the time it was freed).
"""

from numba import njit

from roofline.serving.kernel_layout import CACHED, HSIZE, KIDS, PAGE, REFS
from roofline.serving.kernel_prefix import (
    APART,
    OWN_FULL,
    OWN_SLOT,
    OWN_START,
    OWN_WORDS,
    P_BUF,
    P_OWN,
    P_PARENT,
    P_RUNS,
    P_START,
    SHEAD,
    SLEN,
    SPENT_BYTES,
    UNUSED_BYTES,
    _evictable,
    _gen,
    _hi,
    _hk,
    _last,
    _node_bytes,
    _path,
    _pc,
    _peek,
    _pu,
    _push,
    _ring,
    _slot,
    _unused,
    pop,
)


@njit(cache=True)
def evictable_for(r, i, pfx, seq):
    """PrefixCache.evictable_for: the unused cached bytes on replica r an admission of request i may count as free,
    those on its own path (in path order) taken out."""
    pi, pf = pfx[0], pfx[1]
    own = 0.0
    buf = pi[P_BUF]
    for k in range(_path(i, pi)):
        node = pi[buf + k]
        c = _peek(pfx, r, CACHED, node)
        if not _peek(pfx, r, REFS, node) and c:
            own += _node_bytes(pi, node, c, seq)
    return pf[_pu(pi, r, UNUSED_BYTES)] - own


@njit(cache=True, inline="always")
def unused_bytes(r, pfx):
    """PrefixCache.unused_bytes of replica r: the cached pages no running request uses."""
    pi = pfx[0]
    return pfx[1][_pu(pi, r, UNUSED_BYTES)]


@njit(cache=True, inline="always")
def spend(r, nbytes, now, owner, start, full, pfx):
    """PrefixCache.spend: `nbytes` of a request's own full pages (tokens start..full) join replica r's free queue at
    `now` (a new run, or the last one's when no node became unused since it and neither is a preempted request's,
    `owner` >= 0, or when the ring is full); an owned run's slot and tokens are kept per request (OWN_WORDS)."""
    if nbytes <= 0:
        return 0
    pi, pf = pfx[0], pfx[1]
    runs, n = pi[P_RUNS], pi[_gen(pi, r, SLEN)]
    owned = owner >= 0 and n < runs
    if n and not owned and (not pi[_gen(pi, r, APART)] or n == runs):
        last = (pi[_gen(pi, r, SHEAD)] + n - 1) % runs
        pf[_ring(pi, r, last, 2)] = 0.0
        pf[_ring(pi, r, last, 1)] += nbytes
    else:
        slot = (pi[_gen(pi, r, SHEAD)] + n) % runs
        pf[_ring(pi, r, slot, 0)], pf[_ring(pi, r, slot, 1)] = now, nbytes
        pf[_ring(pi, r, slot, 2)] = owner + 1.0 if owned else 0.0
        pi[_gen(pi, r, SLEN)] = n + 1
        if owned:
            at = pi[P_OWN] + OWN_WORDS * owner
            pi[at + OWN_SLOT], pi[at + OWN_START], pi[at + OWN_FULL] = slot + 1, start, full
    pi[_gen(pi, r, APART)] = 1 if owned else 0
    pf[_pu(pi, r, SPENT_BYTES)] += nbytes
    return 0


@njit(cache=True, inline="always")
def own_hit(r, i, h, todo, pfx, seq, cfg):
    """PrefixCache.own_hit: (hit, bytes) of request i's admission on replica r with its own spent pages still queued,
    when its cached prefix h reaches where they start (nothing to read for a request never preempted with pages of
    its own: OWN_SLOT 0)."""
    pi = pfx[0]
    at = pi[P_OWN] + OWN_WORDS * i
    if pi[at + OWN_SLOT] == 0:
        return h, 0.0
    return _own_hit(r, i, h, todo, at, pfx, seq, cfg)


@njit(cache=True)
def _own_hit(r, i, h, todo, at, pfx, seq, cfg):
    """own_hit of a request with a spent run recorded at pi[at]."""
    pi, pf = pfx[0], pfx[1]
    slot, start, full = pi[at + OWN_SLOT] - 1, pi[at + OWN_START], pi[at + OWN_FULL]
    left = pf[_ring(pi, r, slot, 1)]
    if pf[_ring(pi, r, slot, 2)] != i + 1.0 or left <= 0 or h != start:
        return h, 0.0
    page = cfg[PAGE]
    base = seq[start]
    tol = 1e-9 * (seq[full] - base)
    t = full
    while t > start and (seq[t] - base) - left > tol:
        t -= page
    t = min(t, todo - 1) // page * page
    return t, seq[t] - base


@njit(cache=True, inline="always")
def claim(r, i, h, pfx):
    """PrefixCache.claim: request i is admitted on replica r with the cached prefix h; its own spent run, if it has
    one, is no longer its own, and leaves the queue when h is where it starts."""
    pi, pf = pfx[0], pfx[1]
    at = pi[P_OWN] + OWN_WORDS * i
    s = pi[at + OWN_SLOT]
    if s == 0:
        return 0
    pi[at + OWN_SLOT] = 0
    owner, left = _ring(pi, r, s - 1, 2), _ring(pi, r, s - 1, 1)
    if pf[owner] != i + 1.0 or pf[left] <= 0:
        return 0
    pf[owner] = 0.0
    if h == pi[at + OWN_START]:
        pf[_pu(pi, r, SPENT_BYTES)] -= pf[left]
        pf[left] = 0.0
    return 0


@njit(cache=True, inline="always")
def spent_bytes(r, pfx):
    """PrefixCache.spent_bytes of replica r."""
    pi = pfx[0]
    return pfx[1][_pu(pi, r, SPENT_BYTES)]


@njit(cache=True)
def _top(r, ri, pfx):
    """PrefixCache._top: replica r's least recently used evictable node (stale heap entries popped), or -1."""
    pi, pf = pfx[0], pfx[1]
    while ri[r, HSIZE] > 0:
        node = pi[_hi(pi, r, 1, 0)]
        at = _slot(pfx, r, node)
        if _evictable(pi, r, at) and pf[_hk(pi, r, 0)] == pf[_last(pi, r, at)]:
            return node
        pop(r, ri, pfx)
    return -1


@njit(cache=True)
def _evict_top(r, node, need_bytes, ri, pfx, seq, cfg):
    """PrefixCache._evict_top: evict replica r's heap top `node` page by page from its tail until `need_bytes` are
    freed or it is gone (each page's (seq[s + old] - seq[s]) - (seq[s + new] - seq[s])); returns the bytes freed."""
    pi, pf = pfx[0], pfx[1]
    page = cfg[PAGE]
    t, _ = pop(r, ri, pfx)
    slot = _slot(pfx, r, node)
    s = pi[pi[P_START] + node]
    at = _pc(pi, r, CACHED, slot)
    c, base = pi[at], seq[s]
    freed = 0.0
    # after the first page c is a whole number of pages: (c - 1) // page * page is c - page, without the division
    if freed < need_bytes and c > 0:
        new = max(0, (c - 1) // page * page)
        freed += (seq[s + c] - base) - (seq[s + new] - base)
        c = new
    while freed < need_bytes and c > 0:
        new = c - page
        freed += (seq[s + c] - base) - (seq[s + new] - base)
        c = new
    pi[at] = c
    if c > 0:
        _push(r, t, node, ri, pfx)
    else:
        pi[_unused(pi, r)] -= 1
        up = pi[pi[P_PARENT] + node]
        if up >= 0:
            above = _slot(pfx, r, up)
            pi[_pc(pi, r, KIDS, above)] -= 1
            if _evictable(pi, r, above):
                _push(r, pf[_last(pi, r, above)], up, ri, pfx)
    return freed


@njit(cache=True, inline="always")
def take_spent(r, need_bytes, pfx):
    """take(r, need_bytes) when no node is unused and the queue's head run holds need_bytes, inlined (a call costs
    the references of every array it passes): the same float operations (the run's k = min(bytes, need_bytes - 0.0)
    is need_bytes; nothing evicted, unused_bytes already 0.0). Returns whether it applied."""
    pi, pf = pfx[0], pfx[1]
    if pi[_unused(pi, r)] or not pi[_gen(pi, r, SLEN)]:
        return False
    head = pi[_gen(pi, r, SHEAD)]
    at = _ring(pi, r, head, 1)
    if pf[at] < need_bytes:
        return False
    k = min(pf[at], need_bytes - 0.0)
    pf[at] -= k
    pf[_pu(pi, r, SPENT_BYTES)] -= k
    if pf[at] <= 0:
        pi[_gen(pi, r, SHEAD)] = (head + 1) % pi[P_RUNS]
        pi[_gen(pi, r, SLEN)] -= 1
        if not pi[_gen(pi, r, SLEN)]:
            pf[_pu(pi, r, SPENT_BYTES)] = 0.0
    return True


@njit(cache=True)
def take(r, need_bytes, ri, pfx, seq, cfg):
    """PrefixCache.take on replica r: `need_bytes` from the free queue's front (spent runs and unused nodes' tails by
    free time, a run first at equal times); returns the cached bytes evicted."""
    pi, pf = pfx[0], pfx[1]
    runs = pi[P_RUNS]
    taken = 0.0
    evicted = 0.0
    while taken < need_bytes:
        node = _top(r, ri, pfx)
        head = pi[_gen(pi, r, SHEAD)]
        if pi[_gen(pi, r, SLEN)] and (node < 0 or pf[_ring(pi, r, head, 0)] <= pf[_last(pi, r, _slot(pfx, r, node))]):
            at = _ring(pi, r, head, 1)
            k = min(pf[at], need_bytes - taken)
            pf[at] -= k
            taken += k
            pf[_pu(pi, r, SPENT_BYTES)] -= k
            if pf[at] <= 0:
                pi[_gen(pi, r, SHEAD)] = (head + 1) % runs
                pi[_gen(pi, r, SLEN)] -= 1
                if not pi[_gen(pi, r, SLEN)]:
                    pf[_pu(pi, r, SPENT_BYTES)] = 0.0
        elif node >= 0:
            freed = _evict_top(r, node, need_bytes - taken, ri, pfx, seq, cfg)
            taken += freed
            evicted += freed
        else:
            break
    u = _pu(pi, r, UNUSED_BYTES)
    pf[u] = pf[u] - evicted if pi[_unused(pi, r)] else 0.0
    return evicted
