"""serving.prefix.PrefixCache in flat arrays, for the compiled record loop (numba njit, cache=True): the same
decisions on the same state, per replica r.

State (`pfx`, built by serving.kernel): the tree (parent, start, length, leaf, shared, depth: nodes on the path from a
root, the root counting one) and per replica and node the cached tokens, running requests using it and cached
children (pc[r, CACHED | REFS | KIDS, node]), its last use (plast[r, node]), and the LRU heap of (last use, -depth,
node) entries (hkey[r, slot], hint[r, 0 | 1, slot]; its size in ri[r, HSIZE]). The heap is Python's heapq's: a min-
heap under the tuple order, entries made stale by a later use skipped when popped (PrefixCache.evict). Pops depend
only on the set of keys, and a node's live key is unique (its node id is in it), so any binary heap pops the same
nodes; when the heap's slots run out, the entries that are stale now are dropped (one per node kept): a node that
becomes evictable again is pushed anew at that moment (PrefixCache.release, .evict), so a dropped entry is never
the one that would have been popped.
"""

import numpy as np
from numba import njit

from roofline.serving.kernel_layout import CACHED, HITS, HSIZE, KIDS, PAGE, QUERIES, REFS


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
def _path(i, pfx):
    """Request i's path, root first, into the scratch buffer; returns its length."""
    parent, leaf, depth, buf = pfx[0], pfx[3], pfx[5], pfx[11]
    node = leaf[i]
    if node < 0:
        return 0
    d = depth[node]
    for k in range(d - 1, -1, -1):
        buf[k] = node
        node = parent[node]
    return d


@njit(cache=True)
def cached_prefix(r, i, pfx):
    """PrefixCache.cached_prefix: tokens of request i's path cached contiguously from its start."""
    length, pc, buf = pfx[2], pfx[6], pfx[11]
    h = 0
    for k in range(_path(i, pfx)):
        node = buf[k]
        c = pc[r, CACHED, node]
        h += c
        if c < length[node]:
            break
    return h


@njit(cache=True)
def hit(r, i, todo, pfx, cfg):
    """PrefixCache.hit: the cached shared prefix in whole pages, at most todo - 1 tokens."""
    h = min(cached_prefix(r, i, pfx), pfx[4][i], todo - 1)
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


@njit(cache=True)
def _sift_down(r, pos, size, hkey, hint):
    """Restore the heap below slot `pos`."""
    while True:
        a, b = 2 * pos + 1, 2 * pos + 2
        small = pos
        if a < size and _less(hkey[r, a], hint[r, 0, a], hint[r, 1, a], hkey[r, small], hint[r, 0, small],
                              hint[r, 1, small]):
            small = a
        if b < size and _less(hkey[r, b], hint[r, 0, b], hint[r, 1, b], hkey[r, small], hint[r, 0, small],
                              hint[r, 1, small]):
            small = b
        if small == pos:
            return
        hkey[r, pos], hkey[r, small] = hkey[r, small], hkey[r, pos]
        for f in range(2):
            hint[r, f, pos], hint[r, f, small] = hint[r, f, small], hint[r, f, pos]
        pos = small


@njit(cache=True, inline="always")
def _evictable(r, node, pc):
    """PrefixCache._evictable."""
    return pc[r, REFS, node] == 0 and pc[r, CACHED, node] > 0 and pc[r, KIDS, node] == 0


@njit(cache=True)
def _compact(r, ri, pfx):
    """Drop the heap's stale entries (not evictable now, or an older use than the node's last), one per node."""
    pc, plast, hkey, hint, mark = pfx[6], pfx[7], pfx[8], pfx[9], pfx[10]
    size, w = ri[r, HSIZE], 0
    for s in range(size):
        node = hint[r, 1, s]
        if mark[node] or not _evictable(r, node, pc) or hkey[r, s] != plast[r, node]:
            continue
        mark[node] = 1
        hkey[r, w], hint[r, 0, w], hint[r, 1, w] = hkey[r, s], hint[r, 0, s], hint[r, 1, s]
        w += 1
    for s in range(w):
        mark[hint[r, 1, s]] = 0
    for s in range(w // 2 - 1, -1, -1):
        _sift_down(r, s, w, hkey, hint)
    ri[r, HSIZE] = w


@njit(cache=True)
def _push(r, key, node, ri, pfx):
    """heapq.heappush(heap, (key, -depth[node], node))."""
    hkey, hint = pfx[8], pfx[9]
    if ri[r, HSIZE] == hkey.shape[1]:
        _compact(r, ri, pfx)
    pos = ri[r, HSIZE]
    ri[r, HSIZE] = pos + 1
    d = -pfx[5][node]
    while pos > 0:
        up = (pos - 1) // 2
        if not _less(key, d, node, hkey[r, up], hint[r, 0, up], hint[r, 1, up]):
            break
        hkey[r, pos], hint[r, 0, pos], hint[r, 1, pos] = hkey[r, up], hint[r, 0, up], hint[r, 1, up]
        pos = up
    hkey[r, pos], hint[r, 0, pos], hint[r, 1, pos] = key, d, node


@njit(cache=True)
def acquire(r, i, now, pfx):
    """PrefixCache.acquire: request i runs; its nodes are in use at `now`."""
    pc, plast, buf = pfx[6], pfx[7], pfx[11]
    for k in range(_path(i, pfx)):
        node = buf[k]
        pc[r, REFS, node] += 1
        plast[r, node] = now
    return 0


@njit(cache=True)
def release(r, i, now, stamp, ri, pfx):
    """PrefixCache.release: request i left at `now` (stamp false: was not admitted, its last use kept)."""
    pc, plast, buf = pfx[6], pfx[7], pfx[11]
    for k in range(_path(i, pfx)):
        node = buf[k]
        pc[r, REFS, node] -= 1
        if stamp:
            plast[r, node] = now
        if pc[r, CACHED, node] and not pc[r, REFS, node]:
            _push(r, plast[r, node], node, ri, pfx)
    return 0


@njit(cache=True)
def publish(r, i, upto, pfx):
    """PrefixCache.publish: request i's first `upto` shared tokens join the cache; returns the cached prefix before."""
    parent, start, length, pc, buf = pfx[0], pfx[1], pfx[2], pfx[6], pfx[11]
    before = cached_prefix(r, i, pfx)
    if upto <= before:
        return before
    for k in range(_path(i, pfx)):
        node = buf[k]
        s = start[node]
        if upto <= s:
            break
        want = min(upto - s, length[node])
        old = pc[r, CACHED, node]
        if want > old:
            pc[r, CACHED, node] = want
            if old == 0 and parent[node] >= 0:
                pc[r, KIDS, parent[node]] += 1
    return before


@njit(cache=True)
def evict(r, need_bytes, ri, pfx, seq, cfg):
    """PrefixCache.evict: free at least `need_bytes` from the least recently used tails, page by page; returns the
    bytes freed (the same float operations: each page's (seq[s + old] - seq[s]) - (seq[s + new] - seq[s]))."""
    parent, start, pc, plast, hkey, hint = pfx[0], pfx[1], pfx[6], pfx[7], pfx[8], pfx[9]
    page = cfg[PAGE]
    freed = 0.0
    while freed < need_bytes and ri[r, HSIZE] > 0:
        t, node = hkey[r, 0], hint[r, 1, 0]
        last = ri[r, HSIZE] - 1
        hkey[r, 0], hint[r, 0, 0], hint[r, 1, 0] = hkey[r, last], hint[r, 0, last], hint[r, 1, last]
        ri[r, HSIZE] = last
        _sift_down(r, 0, last, hkey, hint)
        if not _evictable(r, node, pc) or t != plast[r, node]:
            continue
        s = start[node]
        while freed < need_bytes and pc[r, CACHED, node] > 0:
            old = pc[r, CACHED, node]
            new = max(0, (old - 1) // page * page)
            freed += (seq[s + old] - seq[s]) - (seq[s + new] - seq[s])
            pc[r, CACHED, node] = new
        if pc[r, CACHED, node] > 0:
            _push(r, t, node, ri, pfx)
        else:
            up = parent[node]
            if up >= 0:
                pc[r, KIDS, up] -= 1
                if _evictable(r, up, pc):
                    _push(r, plast[r, up], up, ri, pfx)
    return freed


@njit(cache=True, inline="always")
def count(r, hit_tokens, todo, ri):
    """PrefixCache.count: an admission asked for `todo` prompt tokens and found `hit_tokens` cached."""
    ri[r, HITS] += hit_tokens
    ri[r, QUERIES] += todo
