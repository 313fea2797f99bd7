"""The serving record loop over flat arrays, compiled by numba (njit, cache=True): serving.kernel runs it with the
model's step law compiled separately (a numba cfunc of serving.closedform's law source, passed in as a first-class
function of one signature, so this loop compiles once per machine whatever the model, and numba caches it).

It replays, for the cases serving.kernel.covers admits (open-loop arrivals, no prefix cache, no speculative decoding,
no preloaded KV, pp = 1), exactly the decisions of serving.scheduler.Scheduler (schedule, _plan_running, _admit,
_preempt_last, block_length, commit_block, _complete), of Simulator.run / Fleet.run (blocks of decode-only steps cut
at the next arrival, or at the step during which a request is routed to the replica) and the step times of
serving.closedform.ClosedForm.work / time with the engine's padding and host overheads. Scheduler state per replica
lives in int64 arrays st[r, field, position] (fields below), per-replica scalars in ri[r, k] / rf[r, k]; the waiting
queues are one linked list over request ids (a request waits in at most one queue).

Decode-only blocks evaluate the law at every step (the numpy reference path's per-step evaluation), not by the closed
form's linear stretches; both equal the per-step times to float rounding.
"""

import math

import numpy as np
from numba import njit

# st fields: running sequences (ids .. res) and the plan of the block in flight (dec .. chdone)
IDS, COMP, KNOWN, GEN, OUT, RES, DEC, CHPOS, CHSTART, CHTOK, CHDONE = range(11)
ST_FIELDS = 11
# ri fields: per-replica integers
N_RUN, NDEC, NCH, TOKENS, ACTIVE, NSTEPS, STEPS, M, PREEMPT, WHEAD, WTAIL, WLEN, REC, PAD = range(14)
RI_FIELDS = 14
USED, START = range(2)  # rf fields
# cfg: mnbt, max_seqs, chunked, mixed, reserve_full, monotone, pad_scope, max_step_tokens, R, router, block, overlap,
# single (Simulator.run: every request due is queued before the replica schedules; Fleet.run starts it at the first)
MNBT, MAX_SEQS, CHUNKED, MIXED, RESERVE, MONOTONE, PAD_SCOPE, MAX_STEP, NREP, ROUTER, BLOCK, OVERLAP, SINGLE = range(13)
CAPACITY, STEP_S, PER_SEQ_S = range(3)  # fcfg
REC_FIELDS = 8  # start_s, duration_s, running, waiting, kv_used_bytes, preemptions, tokens, replica


@njit(cache=True)
def padded(tokens, decode_only, sizes, scope):
    """EngineScheduling.padded_tokens: the smallest captured size >= tokens (scope 1: any step, 2: decode-only)."""
    if scope == 0 or len(sizes) == 0 or (scope == 2 and not decode_only):
        return tokens
    i = np.searchsorted(sizes, tokens)
    return sizes[i] if i < len(sizes) else tokens


@njit(cache=True)
def plan_running(r, decodes, chunks, st, held, ri, seq, cfg):
    """Scheduler._plan_running: decodes first, then chunks in admission order; returns the bytes they need."""
    n = ri[r, N_RUN]
    nd = 0
    need = 0.0
    for i in range(n):
        c = st[r, COMP, i]
        if decodes and st[r, KNOWN, i] - c == 1 and c > 0:
            st[r, DEC, nd] = i
            nd += 1
            extra = seq[c + 1] - held[r, i]
            if extra > 0.0:
                need += extra
    ri[r, NDEC], ri[r, NCH], ri[r, TOKENS] = nd, 0, nd
    if nd == n or not chunks:
        return need
    budget = cfg[MNBT] - nd
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


@njit(cache=True)
def room(r, need, rf, fcfg):
    """Scheduler._room without a prefix cache."""
    return need - (fcfg[CAPACITY] - rf[r, USED]) <= 0


@njit(cache=True)
def admit(r, need, st, held, ri, rf, nxt, generated, prompt, output, seq, cfg, fcfg):
    """Scheduler._admit and _take without a prefix cache or preloaded KV: first come first served."""
    budget = cfg[MNBT] - ri[r, TOKENS]
    n0 = ri[r, N_RUN]
    na = 0
    while ri[r, WLEN] > 0 and budget > 0 and n0 + na < cfg[MAX_SEQS]:
        i = ri[r, WHEAD]
        todo = prompt[i] + generated[i]
        k = min(todo, budget)
        if k < todo and not cfg[CHUNKED]:
            break
        cost = (seq[prompt[i] + output[i]] if cfg[RESERVE] else seq[k]) - 0.0
        if cost > fcfg[CAPACITY] - rf[r, USED] - need:
            break
        ri[r, WHEAD] = nxt[i]
        ri[r, WLEN] -= 1
        if ri[r, WLEN] == 0:
            ri[r, WTAIL] = -1
        p = n0 + na
        st[r, IDS, p], st[r, COMP, p], st[r, KNOWN, p] = i, 0, todo
        st[r, GEN, p], st[r, OUT, p] = generated[i], output[i]
        st[r, RES, p] = prompt[i] + output[i] if cfg[RESERVE] else 0
        held[r, p] = 0.0
        nc = ri[r, NCH]
        st[r, CHPOS, nc], st[r, CHSTART, nc], st[r, CHTOK, nc], st[r, CHDONE, nc] = p, 0, k, 1 if k == todo else 0
        ri[r, NCH] = nc + 1
        ri[r, TOKENS] += k
        budget -= k
        need += cost
        na += 1
    ri[r, N_RUN] = n0 + na
    return need


@njit(cache=True)
def preempt_last(r, st, held, ri, rf, nxt, generated, seq):
    """Scheduler._preempt_last: the last admitted sequence returns to the head of the queue (recompute)."""
    ri[r, N_RUN] -= 1
    last = ri[r, N_RUN]
    victim = st[r, IDS, last]
    rf[r, USED] -= held[r, last] - seq[0]
    generated[victim] = st[r, GEN, last]
    nxt[victim] = ri[r, WHEAD]
    ri[r, WHEAD] = victim
    if ri[r, WLEN] == 0:
        ri[r, WTAIL] = victim
    ri[r, WLEN] += 1
    ri[r, PREEMPT] += 1


@njit(cache=True)
def schedule(r, st, held, ri, rf, nxt, generated, prompt, output, seq, cfg, fcfg):
    """Scheduler.schedule: whether replica r has a step to run (its plan left in st / ri)."""
    if not cfg[MIXED]:
        need = plan_running(r, False, True, st, held, ri, seq, cfg)
        if room(r, need, rf, fcfg):
            need = admit(r, need, st, held, ri, rf, nxt, generated, prompt, output, seq, cfg, fcfg)
            if ri[r, TOKENS]:
                return True
    need = plan_running(r, True, cfg[MIXED] != 0, st, held, ri, seq, cfg)
    preempted = False
    while not room(r, need, rf, fcfg) and ri[r, N_RUN]:
        preempt_last(r, st, held, ri, rf, nxt, generated, seq)
        preempted = True
        need = plan_running(r, True, cfg[MIXED] != 0, st, held, ri, seq, cfg)
    if not preempted and cfg[MIXED]:
        need = admit(r, need, st, held, ri, rf, nxt, generated, prompt, output, seq, cfg, fcfg)
    return ri[r, TOKENS] > 0


@njit(cache=True)
def block_length(r, st, held, ri, rf, seq, cfg, fcfg):
    """Scheduler.block_length: decode-only steps that may run back to back (to the first completion, while the
    pool holds every sequence's next page)."""
    nd = ri[r, NDEC]
    limit = cfg[BLOCK]
    if ri[r, NCH] or nd == 0 or limit <= 1:
        return 1
    k = limit
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
def step_time(r, s, st, ri, q, col, tab, cfg, fcfg, law):
    """Wall seconds of step s of replica r's block: ClosedForm.work and .time (decode contexts advanced by s),
    the engine's padding, then EngineOverheads.combine."""
    const, pre_slope, pre_icpt, dec_rows, dec_at, pre_rows, pre_at, prefix_at, weights, imb, _seq, slope, irr = tab
    nd, nc, pad = ri[r, NDEC], ri[r, NCH], ri[r, PAD]
    for j in range(len(q)):
        q[j] = const[j] * (nd + pad)
    if nd and len(dec_at):
        cr = col[r]  # the decode rows summed over the block's sequences at its previous step (whole numbers: exact)
        if s == 0:
            cr[:] = 0.0
            for j in range(nd):
                c = st[r, COMP, st[r, DEC, j]] + 1
                for x in range(len(dec_at)):
                    cr[x] += dec_rows[c, x]
        else:  # one step on: the table's slope, except where a context leaves its line (ClosedForm.irregular)
            regular = 0
            for j in range(nd):
                a = st[r, COMP, st[r, DEC, j]] + s
                if irr[a]:
                    for x in range(len(dec_at)):
                        cr[x] += dec_rows[a + 1, x] - dec_rows[a, x]
                else:
                    regular += 1
            for x in range(len(dec_at)):
                cr[x] += regular * slope[x]
        for x in range(len(dec_at)):
            q[dec_at[x]] += cr[x]
    n_tokens = nd + pad
    if nc:
        n_new = 0
        n_done = 0
        for j in range(nc):
            n_new += st[r, CHTOK, j]
            n_done += st[r, CHDONE, j]
        n_tokens += n_new
        for j in range(len(q)):
            q[j] += pre_slope[j] * n_new + pre_icpt[j] * n_done
        for j in range(nc):
            a, c, d = st[r, CHSTART, j], st[r, CHTOK, j], st[r, CHDONE, j]
            for x in range(len(pre_at)):
                v = pre_rows[a + c, x] - pre_rows[a, x]
                q[pre_at[x]] += v + pre_rows[0, x] if d else v
            for x in range(len(prefix_at)):
                q[prefix_at[x]] += dec_rows[a, x] - dec_rows[0, x]
    w = weights[2 * (nd > 0) + (nc > 0), min(n_tokens, cfg[MAX_STEP])]
    for j in range(len(q)):
        q[j] += w[j]
    gpu = law(q, imb[nd])
    host = fcfg[STEP_S] + fcfg[PER_SEQ_S] * (nd + nc)
    return max(gpu, host) if cfg[OVERLAP] else gpu + host


@njit(cache=True)
def extend(r, until, st, ri, ends, q, col, tab, cfg, fcfg, law):
    """Evaluate replica r's block steps until one ends at or past `until` from its start, or the (cut) block ends."""
    m = ri[r, M]
    while m < ri[r, STEPS] and (m == 0 or ends[r, m - 1] < until):
        t = step_time(r, m, st, ri, q, col, tab, cfg, fcfg, law)
        ends[r, m] = t if m == 0 else ends[r, m - 1] + t
        m += 1
    ri[r, M] = m


@njit(cache=True)
def cut_at(r, until, ri, ends):
    """Steps of replica r's block that run when a request reaches it `until` after the block's start: the step
    during which it arrives is the last (np.searchsorted(ends, until) + 1 over the steps evaluated)."""
    for i in range(ri[r, M]):
        if ends[r, i] >= until:
            ri[r, STEPS] = min(ri[r, STEPS], i + 1)
            return


@njit(cache=True)
def complete(r, now, st, held, ri, rf, finish, seq):
    """Scheduler._complete for every running sequence whose generated tokens reached its output: stamp, free,
    compact in order. Returns how many finished."""
    n = ri[r, N_RUN]
    w = 0
    ended = 0
    for i in range(n):
        if st[r, GEN, i] >= st[r, OUT, i]:
            finish[st[r, IDS, i]] = now
            rf[r, USED] -= held[r, i] - seq[0]
            ended += 1
            continue
        if w != i:
            for f in range(RES + 1):
                st[r, f, w] = st[r, f, i]
            held[r, w] = held[r, i]
        w += 1
    ri[r, N_RUN] = w
    return ended


@njit(cache=True)
def emit(r, p, now, st, first):
    """A running sequence at position p emits a token (known and generated grow; the first one is stamped)."""
    st[r, GEN, p] += 1
    st[r, KNOWN, p] += 1
    i = st[r, IDS, p]
    if math.isnan(first[i]):
        first[i] = now


@njit(cache=True)
def commit(r, now, st, held, ri, rf, first, finish, seq):
    """Scheduler.commit_block / commit / _commit_decodes without drafts or a prefix cache."""
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
    ends_any = False
    for j in range(nd + nc):
        if j >= nd and not st[r, CHDONE, j - nd]:
            continue
        p = st[r, DEC, j] if j < nd else st[r, CHPOS, j - nd]
        emit(r, p, now, st, first)
        ends_any = ends_any or st[r, GEN, p] >= st[r, OUT, p]
    return complete(r, now, st, held, ri, rf, finish, seq) if ends_any else 0


@njit(cache=True)
def start(r, now, next_arrival, st, held, ri, rf, ends, nxt, generated, prompt, output, rec, nrec, q, col, tab, cfg,
          fcfg, sizes, law):
    """Fleet._start / one iteration of Simulator.run: schedule replica r's next block at `now` and record it."""
    in_run, in_wait = ri[r, N_RUN], ri[r, WLEN]
    if not schedule(r, st, held, ri, rf, nxt, generated, prompt, output, tab[10], cfg, fcfg):
        ri[r, ACTIVE] = 0
        return nrec
    ri[r, ACTIVE] = 1
    rf[r, START] = now
    ri[r, NSTEPS] = block_length(r, st, held, ri, rf, tab[10], cfg, fcfg)
    ri[r, STEPS] = ri[r, NSTEPS]
    ri[r, M] = 0
    ri[r, PAD] = padded(ri[r, TOKENS], ri[r, NCH] == 0, sizes, cfg[PAD_SCOPE]) - ri[r, TOKENS]
    rec[nrec, 0], rec[nrec, 1], rec[nrec, 2], rec[nrec, 3] = now, 0.0, in_run, in_wait
    rec[nrec, 4], rec[nrec, 5], rec[nrec, 6], rec[nrec, 7] = rf[r, USED], ri[r, PREEMPT], ri[r, TOKENS], r
    ri[r, REC] = nrec
    if cfg[NREP] == 1 and next_arrival < math.inf:  # one replica cuts its block at the next arrival
        until = next_arrival - now
        extend(r, until, st, ri, ends, q, col, tab, cfg, fcfg, law)
        cut_at(r, until, ri, ends)
    return nrec + 1


@njit(cache=True)
def route(k, ri, cfg):
    """Fleet._route without a prefix cache: round-robin, or the fewest outstanding (lowest index on ties)."""
    if cfg[ROUTER] == 0:
        return k % cfg[NREP]
    best, load = 0, ri[0, N_RUN] + ri[0, WLEN]
    for j in range(1, cfg[NREP]):
        x = ri[j, N_RUN] + ri[j, WLEN]
        if x < load:
            best, load = j, x
    return best


@njit(cache=True)
def rekey(r, t, key, full, ri, rf, ends):
    """Replica r's place in the event order: its block's end when every step up to the cut is evaluated (full), else
    a lower bound of it (the last evaluated step's end; at least `t`, the time it was evaluated past); inf idle."""
    m, steps = ri[r, M], ri[r, STEPS]
    full[r] = ri[r, ACTIVE] != 0 and m >= steps
    if not ri[r, ACTIVE]:
        key[r] = math.inf
    elif full[r]:
        key[r] = rf[r, START] + ends[r, steps - 1]
    else:
        key[r] = max(rf[r, START] + ends[r, m - 1], t) if m else max(rf[r, START], t)


@njit(cache=True)
def grow(rec):
    """The record table, half as long again."""
    out = np.empty((rec.shape[0] * 3 // 2 + 16, REC_FIELDS))
    out[:rec.shape[0]] = rec
    return out


@njit(cache=True)
def run_loop(clock, prompt, output, tab, sizes, cfg, fcfg, cap, live, law):
    """Simulate every request to completion on cfg[NREP] replicas (Fleet.run's event order; with one replica
    Simulator.run's). Returns (first token, finish, replica of each request, records, preemptions per replica, a
    status: 0 done, 1 idle with requests outstanding)."""
    n, nrep = len(clock), cfg[NREP]
    st = np.zeros((nrep, ST_FIELDS, cap), dtype=np.int64)
    held = np.zeros((nrep, cap))
    ri = np.zeros((nrep, RI_FIELDS), dtype=np.int64)
    ri[:, WHEAD] = -1
    ri[:, WTAIL] = -1
    rf = np.zeros((nrep, 2))
    ends = np.zeros((nrep, cfg[BLOCK]))
    nxt = np.full(n, -1, dtype=np.int64)
    generated = np.zeros(n, dtype=np.int64)
    first, finish = np.full(n, np.nan), np.full(n, np.nan)
    routed = np.full(n, -1, dtype=np.int64)
    rec = np.zeros((max(16, 5 * n // 2), REC_FIELDS))
    q, col = np.zeros(live), np.zeros((nrep, tab[3].shape[1]))
    nrec, done, arrived, k = 0, 0, 0, 0
    key, full = np.full(nrep, math.inf), np.zeros(nrep, dtype=np.bool_)
    while done < n:
        t_arr = clock[arrived] if arrived < n else math.inf
        while True:  # the earliest block end, evaluating steps of blocks that may end before t_arr
            r = np.argmin(key)
            if key[r] == math.inf or full[r] or key[r] >= t_arr:
                break
            extend(r, t_arr - rf[r, START], st, ri, ends, q, col, tab, cfg, fcfg, law)
            rekey(r, t_arr, key, full, ri, rf, ends)
        if key[r] < math.inf and full[r] and (key[r] < t_arr or t_arr == math.inf):
            now = key[r]
            rec[ri[r, REC], 1] = ends[r, ri[r, STEPS] - 1]
            rec[ri[r, REC], 6] = ri[r, TOKENS] * ri[r, STEPS]
            done += commit(r, now, st, held, ri, rf, first, finish, tab[10])
            if nrec + 1 >= rec.shape[0]:
                rec = grow(rec)
            nxt_t = clock[arrived] if arrived < n else math.inf
            nrec = start(r, now, nxt_t, st, held, ri, rf, ends, nxt, generated, prompt, output, rec, nrec, q,
                         col, tab, cfg, fcfg, sizes, law)
            rekey(r, now, key, full, ri, rf, ends)
            continue
        if t_arr == math.inf:
            return first, finish, routed, rec[:nrec], ri[:, PREEMPT].copy(), 1
        while arrived < n and clock[arrived] <= t_arr:
            i = arrived
            arrived += 1
            j = route(k, ri, cfg)
            k += 1
            routed[i] = j
            nxt[i] = -1
            if ri[j, WLEN] == 0:
                ri[j, WHEAD] = i
            else:
                nxt[ri[j, WTAIL]] = i
            ri[j, WTAIL] = i
            ri[j, WLEN] += 1
            if cfg[SINGLE] and arrived < n and clock[arrived] <= t_arr:
                continue  # Simulator.run: the replica sees every request due by now at once
            if not ri[j, ACTIVE]:
                if nrec + 1 >= rec.shape[0]:
                    rec = grow(rec)
                nxt_t = clock[arrived] if arrived < n else math.inf
                nrec = start(j, t_arr, nxt_t, st, held, ri, rf, ends, nxt, generated, prompt, output, rec, nrec, q,
                             col, tab, cfg, fcfg, sizes, law)
            elif ri[j, STEPS] > 1 and (ri[j, M] < ri[j, STEPS] or rf[j, START] + ends[j, ri[j, STEPS] - 1] > t_arr):
                extend(j, t_arr - rf[j, START], st, ri, ends, q, col, tab, cfg, fcfg, law)
                cut_at(j, t_arr - rf[j, START], ri, ends)
            rekey(j, t_arr, key, full, ri, rf, ends)
    return first, finish, routed, rec[:nrec], ri[:, PREEMPT].copy(), 0
