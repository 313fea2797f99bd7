"""The scheduler half of serving.kernel_loop's compiled record loop: serving.scheduler.Scheduler's decisions
(schedule, _plan_running, _admit, _take, _preempt_last, _room, block_length, commit_block / commit /
_commit_decodes, _complete, _publish), preloaded KV included (speculative decoding's plan here, its accepted drafts
applied before `commit` by serving.kernel_spec.accept), over the flat per-replica arrays whose layout
serving.kernel_loop documents (numba njit, cache=True); with cfg[PREFIX] the prefix cache's hits, publications,
free queue and evictions (serving.kernel_prefix, kernel_free_queue, over `pfx`) as the Scheduler makes them at the
same points (PrefixCache.settle, take_pages, spend_pages: settle, take_pages, spend_seq), a preempted request's own
pages hit at its re-admission (own_hit, claim) and its hit counted once, at its first prefill (count; uncounted at a
preemption before its first token)."""

import math

from numba import njit

from roofline.serving.kernel_free_queue import (
    claim,
    evictable_for,
    own_hit,
    spend,
    spent_bytes,
    take,
    take_spent,
    unused_bytes,
)
from roofline.serving.kernel_layout import (
    ANC,
    BASE,
    BLOCK,
    CAPACITY,
    CHDONE,
    CHPOS,
    CHSTART,
    CHTOK,
    CHUNKED,
    COMP,
    COUNTED,
    DEC,
    FULL_PROMPT,
    GEN,
    HITS,
    IDS,
    KNOWN,
    LEAF,
    LLEN,
    LOADS,
    MAX_SEQS,
    MIXED,
    MNBT,
    MONOTONE,
    N_RUN,
    NCH,
    NDEC,
    OUT,
    PAGE,
    POSTS,
    PREEMPT,
    PREFIX,
    PSTEP,
    QUERIES,
    RES,
    RESERVE,
    RLEN,
    SAVE_B,
    SAVE_BYTE_S,
    SAVE_S,
    SAVE_TOKEN_B,
    SAVES,
    SHARED,
    SPEC,
    STAMPED,
    STEPS,
    TOKENS,
    USED,
    WHEAD,
    WLEN,
    WTAIL,
)
from roofline.serving.kernel_prefix import (
    P_SHARED,
    acquire,
    count,
    failed,
    failed_again,
    failed_room,
    full_ancestors,
    hit,
    leaf_slot,
    prefetch_leaf,
    publish,
    publish_leaf,
    release,
)
from roofline.serving.kernel_remote import post, promote


@njit(cache=True)
def plan_running(r, decodes, chunks, st, held, ri, seq, cfg):
    """Scheduler._plan_running: decodes first, then chunks in admission order; returns the bytes they need. With
    speculative decoding (cfg[SPEC] = K) a decoding sequence verifies K drafts: K + 1 tokens, pages to K past its
    context."""
    n = ri[r, N_RUN]
    nd = 0
    need = 0.0
    spec, top = cfg[SPEC], len(seq) - 1
    for i in range(n):
        c = st[r, COMP, i]
        if decodes and st[r, KNOWN, i] - c == 1 and c > 0:
            st[r, DEC, nd] = i
            nd += 1
            extra = seq[min(c + 1 + spec, top) if spec else c + 1] - held[r, i]
            if extra > 0.0:
                need += extra
    ri[r, NDEC], ri[r, NCH], ri[r, TOKENS] = nd, 0, nd * (1 + spec)
    if nd == n or not chunks:
        return need
    budget = cfg[MNBT] - nd * (1 + spec)
    nc = 0
    for i in range(n):
        c = st[r, COMP, i]
        todo = st[r, KNOWN, i] - c
        if todo == 1 and c > 0:
            continue
        if budget <= 0:
            break
        k = min(todo, budget)
        budget -= k
        st[r, CHPOS, nc], st[r, CHSTART, nc], st[r, CHTOK, nc], st[r, CHDONE, nc] = i, c, k, 1 if k == todo else 0
        nc += 1
        extra = seq[c + k] - held[r, i]
        need += extra if extra > 0.0 else 0.0
        ri[r, TOKENS] += k
    ri[r, NCH] = nc
    return need


# room, admit and block_length are inlined where they are called as the test that settles most calls (per engine
# record: no prefix cache; nothing waiting; a verify step or a step with chunks), the rest a call: a call counts a
# reference to each array it is passed (numba's NRT_incref at entry, NRT_decref at exit, calls even for the loop's
# views that hold none; ~20 arrays for admit), paid by a speculative fleet at every record for admissions that find
# nothing waiting (benchmarks/serving_scale.md, branch spd25)
@njit(cache=True, inline="always")
def room(r, need, ri, rf, seq, cfg, fcfg, pfx):
    """Scheduler._room: whether the running sequences' `need` more bytes fit, unused cached prefixes counted as free;
    only if they do, their pages are taken (take_pages). Without a prefix cache: whether they fit (_room's test)."""
    if not cfg[PREFIX]:
        return not need - (fcfg[CAPACITY] - rf[r, USED]) > 0
    return _room(r, need, ri, rf, seq, cfg, fcfg, pfx)


@njit(cache=True)
def _room(r, need, ri, rf, seq, cfg, fcfg, pfx):
    """room, with or without a prefix cache."""
    free = fcfg[CAPACITY] - rf[r, USED]
    short = need - free
    if short > 0 and (not cfg[PREFIX] or short > unused_bytes(r, pfx)):
        return False
    if cfg[PREFIX]:
        take_pages(r, need, free, ri, rf, seq, cfg, pfx)
    return True


@njit(cache=True, inline="always")
def take_pages(r, nbytes, free, ri, rf, seq, cfg, pfx):
    """PrefixCache.take_pages: `nbytes` from the never-used room (free less the spent pages), then from the free
    queue's front (kernel_free_queue.take; take_spent when a spent run covers it), the cached bytes it evicts leaving
    the pool's count."""
    empty = free - spent_bytes(r, pfx)
    if nbytes > empty:
        need = nbytes - max(empty, 0.0)
        if not take_spent(r, need, pfx):
            rf[r, USED] -= take(r, need, ri, pfx, seq, cfg)


@njit(cache=True, inline="always")
def settle(r, ri, rf, seq, cfg, fcfg, pfx):
    """PrefixCache.settle: the pages a block of decode steps took beyond the never-used ones, from the queue's front."""
    over = rf[r, USED] + spent_bytes(r, pfx) - fcfg[CAPACITY]
    if over > 0 and not take_spent(r, over, pfx):
        rf[r, USED] -= take(r, over, ri, pfx, seq, cfg)


@njit(cache=True, inline="always")
def spend_seq(r, p, now, owner, st, seq, cfg, pfx):
    """PrefixCache.spend_pages: the full pages of the running sequence at p past what the cache owns join the free
    queue (`owner`: a preempted request's id, else -1)."""
    page = cfg[PAGE]
    full = st[r, COMP, p] // page * page
    b = st[r, BASE, p]
    if full > b:
        spend(r, seq[full] - seq[b], now, owner, b, full, pfx)


@njit(cache=True, inline="always")
def admit(r, now, need, st, held, ri, rf, nxt, generated, pre, prompt, output, seq, cfg, fcfg, pfx):
    """_admit when a request waits or a remote load has been reported (with neither it changes nothing and returns
    `need`)."""
    if ri[r, WLEN] > 0 or (len(pre[2]) > 0 and ri[r, RLEN] > 0):
        return _admit(r, now, need, st, held, ri, rf, nxt, generated, pre, prompt, output, seq, cfg, fcfg, pfx)
    return need


@njit(cache=True)
def _admit(r, now, need, st, held, ri, rf, nxt, generated, pre, prompt, output, seq, cfg, fcfg, pfx):
    """Scheduler._admit and _take: first come first served; with a prefix cache a request starts at its hit (it
    holds those pages at once, the cache owns them) and fits if the empty bytes and the unused cached pages but its
    own path's (kernel_free_queue.evictable_for) hold what it asks for; then it acquires its path and its first chunk's
    pages are taken (take_pages); a request that does not fit changes nothing. With preloaded KV
    (`pre`, tokens per request; empty: none) a request whose preloaded tokens (at most all but its last) exceed its
    hit starts after them, holding nothing yet (its pages are counted in its first chunk's cost, the cache owns none
    of them). With cfg[FULL_PROMPT] the room asked for is that of all its known tokens (Scheduler._take's gate).
    A retry of the queue's head whose last attempt failed with the cache unchanged since (kernel_prefix.failed_again)
    takes that failure's hit and room instead of walking its path again."""
    budget = cfg[MNBT] - ri[r, TOKENS]
    n0 = ri[r, N_RUN]
    na = 0
    cache = cfg[PREFIX] != 0
    hops = len(pre[2]) > 0  # remote loads (kernel_remote): the reported ones first, a new one posted
    if hops and ri[r, RLEN]:
        na = promote(r, n0, budget, st, held, ri, rf, nxt, generated, pre, prompt, output, seq, cfg)
        budget -= na
    while ri[r, WLEN] > 0 and budget > 0 and n0 + na < cfg[MAX_SEQS]:
        i = ri[r, WHEAD]
        todo = prompt[i] + generated[i]
        if hops and min(pre[0][i], todo - 1) > 0:
            head = nxt[i]
            if not post(r, i, todo, fcfg[CAPACITY] - rf[r, USED] - need, ri, rf, nxt, pre, seq):
                break
            ri[r, WHEAD] = head
            ri[r, WLEN] -= 1
            if ri[r, WLEN] == 0:
                ri[r, WTAIL] = -1
            continue
        again = failed_again(r, i, pfx) if cache else -1
        h = again if again >= 0 else (hit(r, i, todo, pfx, cfg) if cache else 0)
        hx, own = own_hit(r, i, h, todo, pfx, seq, cfg) if cache else (h, 0.0)  # its own spent pages too
        s, b = hx, h  # the tokens it starts after, those the cache owns
        hold_bytes = seq[hx] if cache else 0.0
        loaded = len(pre[0]) > 0 and min(pre[0][i], todo - 1) > hx
        if loaded:
            s, b, hold_bytes, hx, own = min(pre[0][i], todo - 1), 0, 0.0, h, 0.0
        k = min(todo - s, budget)
        if k < todo - s and not cfg[CHUNKED]:
            break
        cost = (seq[prompt[i] + output[i]] if cfg[RESERVE] else seq[s + k]) - hold_bytes
        gate = max(cost, seq[todo] - hold_bytes) if cfg[FULL_PROMPT] else cost  # the room asked for
        free = fcfg[CAPACITY] - rf[r, USED] - need
        free -= own
        if gate > free:
            if not cache:
                break
            spare = failed_room(r, pfx) if again >= 0 else evictable_for(r, i, pfx, seq)
            if gate > free + spare:
                failed(r, i, h, spare, pfx)
                break
        if cache:
            acquire(r, i, now, pfx, seq)
            claim(r, i, -1 if loaded else h, pfx)
            rf[r, USED] += own
            take_pages(r, cost, free, ri, rf, seq, cfg, pfx)
            count(r, hx, todo, generated[i] > 0, ri)
        if loaded and len(pre[1]):
            rf[r, LOADS] += pre[1][i]
        ri[r, WHEAD] = nxt[i]
        ri[r, WLEN] -= 1
        if ri[r, WLEN] == 0:
            ri[r, WTAIL] = -1
        p = n0 + na
        st[r, IDS, p], st[r, COMP, p], st[r, KNOWN, p], st[r, BASE, p] = i, s, todo, b
        st[r, GEN, p], st[r, OUT, p], st[r, STAMPED, p] = generated[i], output[i], 0
        if cache:
            st[r, SHARED, p], st[r, ANC, p], st[r, COUNTED, p] = pfx[0][pfx[0][P_SHARED] + i], -1, hx
        st[r, RES, p] = prompt[i] + output[i] if cfg[RESERVE] else 0
        held[r, p] = hold_bytes
        nc = ri[r, NCH]
        st[r, CHPOS, nc], st[r, CHSTART, nc], st[r, CHTOK, nc] = p, s, k
        st[r, CHDONE, nc] = 1 if k == todo - s else 0
        ri[r, NCH] = nc + 1
        ri[r, TOKENS] += k
        budget -= k
        need += cost
        na += 1
    if na > 0 and rf[r, SAVES] > 0 and (fcfg[SAVE_S] > 0.0 or fcfg[SAVE_BYTE_S] > 0.0):
        # llama-server saves the idle slots to its host prompt cache first (Scheduler._admit, timing mechanism 18)
        rf[r, LOADS] += rf[r, SAVES] * fcfg[SAVE_S] + rf[r, SAVE_B] * fcfg[SAVE_TOKEN_B] * fcfg[SAVE_BYTE_S]
        rf[r, SAVES] = 0.0
        rf[r, SAVE_B] = 0.0
    ri[r, N_RUN] = n0 + na
    return need


@njit(cache=True, inline="always")
def preempt_last(r, now, st, held, ri, rf, nxt, generated, pre, seq, cfg, pfx):
    """Scheduler._preempt_last: the last admitted sequence returns to the head of the queue (recompute); the pages
    the prefix cache owns stay; its preloaded KV is lost."""
    ri[r, N_RUN] -= 1
    last = ri[r, N_RUN]
    victim = st[r, IDS, last]
    rf[r, USED] -= held[r, last] - seq[st[r, BASE, last]]
    if cfg[PREFIX]:
        if st[r, GEN, last] == 0:  # PrefixCache.uncount: its first prefill is counted at its next admission
            ri[r, HITS] -= st[r, COUNTED, last]
            ri[r, QUERIES] -= st[r, KNOWN, last]
        spend_seq(r, last, now, victim, st, seq, cfg, pfx)
        release(r, victim, now, ri, pfx, seq)
    if len(pre[0]):
        pre[0][victim] = 0
    generated[victim] = st[r, GEN, last]
    nxt[victim] = ri[r, WHEAD]
    ri[r, WHEAD] = victim
    if ri[r, WLEN] == 0:
        ri[r, WTAIL] = victim
    ri[r, WLEN] += 1
    ri[r, PREEMPT] += 1


@njit(cache=True)
def schedule(r, now, st, held, ri, rf, nxt, generated, pre, prompt, output, seq, cfg, fcfg, pfx):
    """Scheduler.schedule at `now` (the prefix cache's clock): whether replica r has a step to run (its plan left in
    st / ri; rf's LOADS, the host seconds of the KV loads of the requests it admits)."""
    rf[r, LOADS] = 0.0
    ri[r, POSTS] = 0
    ri[r, PSTEP] = 0
    if cfg[PREFIX]:
        settle(r, ri, rf, seq, cfg, fcfg, pfx)
    if not cfg[MIXED]:
        need = plan_running(r, False, True, st, held, ri, seq, cfg)
        if room(r, need, ri, rf, seq, cfg, fcfg, pfx):
            need = admit(r, now, need, st, held, ri, rf, nxt, generated, pre, prompt, output, seq, cfg, fcfg, pfx)
            if ri[r, TOKENS]:
                return True
    need = plan_running(r, True, cfg[MIXED] != 0, st, held, ri, seq, cfg)
    preempted = False
    while not room(r, need, ri, rf, seq, cfg, fcfg, pfx) and ri[r, N_RUN]:
        preempt_last(r, now, st, held, ri, rf, nxt, generated, pre, seq, cfg, pfx)
        preempted = True
        need = plan_running(r, True, cfg[MIXED] != 0, st, held, ri, seq, cfg)
    ri[r, PSTEP] = 1 if preempted else 0
    if not preempted and cfg[MIXED]:
        need = admit(r, now, need, st, held, ri, rf, nxt, generated, pre, prompt, output, seq, cfg, fcfg, pfx)
    return ri[r, TOKENS] > 0 or ri[r, POSTS] > 0


@njit(cache=True, inline="always")
def block_length(r, st, held, ri, rf, seq, cfg, fcfg):
    """Scheduler.block_length: decode-only steps that may run back to back (to the first completion, while the
    pool holds every sequence's next page); one for a step with chunks or none decoding, a verify step, a pending
    remote load, a step that preempted, or blocks of one step."""
    if ri[r, NCH] or ri[r, NDEC] == 0 or cfg[BLOCK] <= 1 or cfg[SPEC] or ri[r, RLEN] or ri[r, PSTEP]:
        return 1
    return _block_length(r, st, held, ri, rf, seq, cfg, fcfg)


@njit(cache=True)
def _block_length(r, st, held, ri, rf, seq, cfg, fcfg):
    """block_length of a decode-only block of more than one step allowed."""
    nd = ri[r, NDEC]
    k = cfg[BLOCK]
    rest = rf[r, USED]
    for j in range(nd):
        p = st[r, DEC, j]
        if st[r, GEN, p] == 0:
            return 1
        k = min(k, st[r, OUT, p] - st[r, GEN, p])
        rest -= held[r, p]
    if k <= 1:
        return 1
    cap = fcfg[CAPACITY]
    if cfg[MONOTONE]:
        total_bytes = 0.0
        for j in range(nd):
            p = st[r, DEC, j]
            total_bytes += seq[max(st[r, COMP, p] + k, st[r, RES, p])]
        if total_bytes + rest <= cap:
            return k
    for s in range(k):
        used = 0.0
        for j in range(nd):
            p = st[r, DEC, j]
            used += seq[max(st[r, COMP, p] + 1 + s, st[r, RES, p])]
        if used + rest > cap:
            return s if s > 0 else 1
    return k


@njit(cache=True)
def complete(r, now, st, held, ri, rf, finish, seq, cfg, pfx):
    """Scheduler._complete for every running sequence whose generated tokens reached its output: stamp, free (but
    the pages the prefix cache owns), release its cached path, compact in order. Returns how many finished."""
    n = ri[r, N_RUN]
    w = 0
    ended = 0
    for i in range(n):
        if st[r, GEN, i] >= st[r, OUT, i]:
            finish[st[r, IDS, i]] = now
            rf[r, USED] -= held[r, i] - seq[st[r, BASE, i]]
            rf[r, SAVES] += 1.0  # its KV, saved when the next request starts (Scheduler._complete)
            rf[r, SAVE_B] += st[r, KNOWN, i] - 1  # its tokens (kernel_layout)
            if cfg[PREFIX]:
                spend_seq(r, i, now, -1, st, seq, cfg, pfx)
                release(r, st[r, IDS, i], now, ri, pfx, seq)
            ended += 1
            continue
        if w != i:
            for f in range(RES + 1):
                st[r, f, w] = st[r, f, i]
            st[r, BASE, w], st[r, STAMPED, w] = st[r, BASE, i], st[r, STAMPED, i]
            if cfg[PREFIX]:  # set at admission only with a prefix cache, read only with one
                st[r, SHARED, w], st[r, ANC, w] = st[r, SHARED, i], st[r, ANC, i]
                st[r, LEAF, w], st[r, LLEN, w] = st[r, LEAF, i], st[r, LLEN, i]
                st[r, COUNTED, w] = st[r, COUNTED, i]
            held[r, w] = held[r, i]
        w += 1
    ri[r, N_RUN] = w
    return ended


@njit(cache=True, inline="always")
def emit(r, p, now, st, first):
    """A running sequence at position p emits a token (known and generated grow; the first one is stamped). Its
    request's first-token time is read only at its first emission since admission (st's STAMPED): after it the time
    is set (stamped then or before), so the test `first[i]` is NaN, which the Scheduler makes at every emission,
    is false at every later one; a record's emissions then read no array indexed by request id (at 3.2M requests
    `first` is 25 MB: each read a cache miss)."""
    st[r, GEN, p] += 1
    st[r, KNOWN, p] += 1
    if not st[r, STAMPED, p]:
        st[r, STAMPED, p] = 1
        i = st[r, IDS, p]
        if math.isnan(first[i]):
            first[i] = now


# inlined into the loops (one call site each): see serving.kernel_loop.start
@njit(cache=True, inline="always")
def commit(r, now, st, held, ri, rf, first, finish, seq, cfg, pfx):
    """Scheduler.commit_block / commit / _commit_decodes without drafts; with a prefix cache, _publish after the
    pages are counted."""
    steps, nd, nc = ri[r, STEPS], ri[r, NDEC], ri[r, NCH]
    for j in range(nd):
        p = st[r, DEC, j]
        st[r, COMP, p] += steps  # steps - 1 by commit_block, one by commit
        if steps > 1:
            st[r, GEN, p] += steps - 1
            st[r, KNOWN, p] += steps - 1
    for j in range(nc):
        st[r, COMP, st[r, CHPOS, j]] += st[r, CHTOK, j]
    delta = 0.0
    for j in range(nd + nc):
        p = st[r, DEC, j] if j < nd else st[r, CHPOS, j - nd]
        new = seq[max(st[r, COMP, p], st[r, RES, p])]
        delta += new - held[r, p]
        held[r, p] = new
    rf[r, USED] += delta
    if cfg[PREFIX]:
        publish_all(r, st, ri, rf, seq, cfg, pfx)
    ends_any = False
    for j in range(nd + nc):
        if j >= nd and not st[r, CHDONE, j - nd]:
            continue
        p = st[r, DEC, j] if j < nd else st[r, CHPOS, j - nd]
        emit(r, p, now, st, first)
        ends_any = ends_any or st[r, GEN, p] >= st[r, OUT, p]
    return complete(r, now, st, held, ri, rf, finish, seq, cfg, pfx) if ends_any else 0


@njit(cache=True)
def publish_all(r, st, ri, rf, seq, cfg, pfx):
    """Scheduler._publish over the step's sequences (decodes, then chunks): shared tokens computed, in whole pages,
    join the cache; a sequence's own copy of pages the cache already held is freed (its request's shared tokens
    from st's SHARED, copied at admission). Once the nodes before a sequence's leaf are wholly cached
    (kernel_prefix.full_ancestors, kept in st's ANC and LEAF until it leaves), its publications take
    kernel_prefix.publish_leaf: the same result without the path's walks (a chat turn publishes a page of its own
    node every page of tokens it decodes; those walks' reads of node-indexed arrays led a chat fleet's profile)."""
    nd, nc, page = ri[r, NDEC], ri[r, NCH], cfg[PAGE]
    # BASE is a whole number of pages (a hit, a publication or 0): a page more is computed when x >= BASE + page
    for j in range(nd):  # the leaves' lines asked for first (their misses overlap)
        p = st[r, DEC, j]
        if st[r, ANC, p] >= 0 and min(st[r, COMP, p], st[r, SHARED, p]) >= st[r, BASE, p] + page:
            prefetch_leaf(r, st[r, LEAF, p], pfx)
    for j in range(nd + nc):
        p = st[r, DEC, j] if j < nd else st[r, CHPOS, j - nd]
        b = st[r, BASE, p]
        x = min(st[r, COMP, p], st[r, SHARED, p])
        if x < b + page:  # u = x // page * page <= b (b a whole number of pages): most sequences, no division
            continue
        u = x // page * page
        i = st[r, IDS, p]
        if st[r, ANC, p] >= 0:
            before = publish_leaf(r, i, st[r, LEAF, p], st[r, ANC, p], st[r, LLEN, p], u, pfx)
        else:
            before = publish(r, i, u, pfx)
            st[r, ANC, p] = full_ancestors(r, i, pfx)
            if st[r, ANC, p] >= 0:
                st[r, LEAF, p], st[r, LLEN, p] = leaf_slot(r, i, pfx)
        if before > b:
            rf[r, USED] -= seq[min(before, u)] - seq[b]
        st[r, BASE, p] = u
