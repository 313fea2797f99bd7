"""The serving record loop over flat arrays, compiled by numba (njit, cache=True): serving.kernel runs it with the
model's step law compiled separately (a numba cfunc of serving.closedform's law source, passed in as a first-class
function of one signature, so this loop compiles once per machine whatever the model, and numba caches it).

It replays, for the cases serving.kernel.covers admits (open-loop or --max-concurrency clients, chat sessions, the
engine's admission lag, the engine's prefix cache (serving.kernel_prefix), speculative decoding (serving.kernel_spec),
preloaded KV (a disaggregated decode pool), any pp), exactly the decisions of serving.scheduler.Scheduler
(serving.kernel_sched), of Fleet.run (blocks of decode-only steps cut at the step during which a request is routed to
the replica, or with vLLM's admission lag the step after; serving.kernel_single is Simulator.run's loop) and the step
times of serving.closedform.ClosedForm.work / time with the engine's padding and host overheads (serving.kernel_block:
a block's steps evaluated as far as the event order needs them). Scheduler state per
replica lives in int64 arrays st[r, field, position] (field indices: serving.kernel_layout), per-replica scalars in
ri[r, k] / rf[r, k]; the waiting and held queues are linked lists over request ids (serving.kernel_queue); the prefix
caches' state is `pfx` (serving.kernel_prefix).
"""

import math

import numpy as np
from numba import njit

from roofline.serving.kernel_block import NO_AHEAD, cut_at, eager_launch, extend, host_next, padded
from roofline.serving.kernel_layout import (
    ACTIVE,
    BAL_ABS,
    BAL_REL,
    BLOCK,
    CACHE_THR,
    CONC,
    EAGER_L,
    HHEAD,
    HLEN,
    HTAIL,
    LAG,
    LAUNCH_COL,
    LOADS,
    N_RUN,
    NCH,
    NREP,
    NSIZES,
    NSTEPS,
    OVERLAP,
    PAD,
    PAD_SCOPE,
    PREEMPT,
    REC,
    REC_FIELDS,
    RF_FIELDS,
    RHEAD,
    RI_FIELDS,
    RLEN,
    ROUTER,
    RTAIL,
    SLACK,
    SPEC,
    ST_FIELDS,
    ST_PAD,
    START,
    STEPS,
    TOKENS,
    TREE,
    TSCHED,
    USED,
    WAKE,
    WHEAD,
    WLEN,
    WTAIL,
    M,
)
from roofline.serving.kernel_prefix import hit_on_path, path_of
from roofline.serving.kernel_queue import (
    TURNS,
    admit_held,
    enqueue,
    hold,
    next_arrival,
    release,
    running_ids,
    take_due,
    turn_ends,
)
from roofline.serving.kernel_remote import observe, report, serial, spin, wake
from roofline.serving.kernel_sched import block_length, commit, schedule
from roofline.serving.kernel_spec import accept, plan_step
from roofline.serving.kernel_views import borrowed

# steps a fleet's replica evaluates at least per visit of the event loop (beyond the next arrival's time): each visit
# costs numba's reference counts of its ~20 arrays, about a step's own arithmetic; a step past a later cut is wasted
AHEAD = np.int64(4)


# inlined into launch (so into events and arrive), as kernel_sched.commit into events: a call counts a reference to
# each array it is passed (numba's NRT_incref at entry and NRT_decref at exit, calls even for the loop's views that
# hold none), ~25 arrays each, and those calls were an EAGLE fleet's largest cost per record after the verify step's
# own work: inlined, 32 x 100,000 took ~45 CPU-s instead of ~63 (benchmarks/serving_scale.md, branch spd25)
@njit(cache=True, inline="always")
def start(r, now, st, held, ri, rf, ends, nxt, generated, pre, prompt, output, rec, nrec, seq, cfg, fcfg, sizes,
          clock, pfx):
    """Fleet._start: schedule replica r's next block at `now` and record it (a fleet of one then cuts it at the
    next arrival: cut_one). Under the admission lag the held requests that arrived by the start of the last block's
    last step (after a step that started KV loads, no earlier than kernel_remote.serial) join first; an idle replica
    sees every held request; while some stay held the block is one step (they are seen after it)."""
    idle = ri[r, ACTIVE] == 0
    # the schedule's time (Fleet._start's `seen`): under the admission lag a busy replica's last step's start (its
    # end where its launch ended with it: kernel_block.host_next), and the host's lead into the next block
    seen, slack = now, 0.0
    if not idle and cfg[LAG]:
        host = host_next(r, ri[r, STEPS] - 1, rf, ends)
        seen = rf[r, START] + host
        if cfg[OVERLAP]:
            slack = ends[r, ri[r, STEPS] - 1] - host
    if not idle and cfg[LAG] and rf[r, LOADS] > 0.0:  # after a step that started KV loads: Fleet._serial
        seen = max(seen, serial(r, st, ri, rf, cfg, fcfg))
    if ri[r, HLEN]:  # only a replica whose block just ended holds requests (an idle one queues them at once)
        admit_held(r, seen, ri, nxt, clock)
    if idle and ri[r, RLEN]:
        spin(r, now, ri, nxt, pre)
    rf[r, TSCHED] = seen
    in_run, in_wait = ri[r, N_RUN], ri[r, WLEN] + ri[r, RLEN]
    ok = schedule(r, now, st, held, ri, rf, nxt, generated, pre, prompt, output, seq, cfg, fcfg, pfx)
    if not ok and ri[r, HLEN]:  # idle but for requests that came after the schedule: no lead before them
        slack = 0.0
        admit_held(r, math.inf, ri, nxt, clock)
        in_run, in_wait = ri[r, N_RUN], ri[r, WLEN] + ri[r, RLEN]
        ok = schedule(r, now, st, held, ri, rf, nxt, generated, pre, prompt, output, seq, cfg, fcfg, pfx)
    if ok and ri[r, RLEN]:
        observe(r, ri, rf, nxt, pre)
    if not ok:
        ri[r, ACTIVE] = 0
        rf[r, SLACK] = 0.0
        wake(r, now, ri, rf, nxt, pre)
        return nrec
    ri[r, ACTIVE] = 1
    rf[r, START] = now
    rf[r, SLACK] = slack
    ri[r, NSTEPS] = block_length(r, st, held, ri, rf, seq, cfg, fcfg)
    ri[r, STEPS] = ri[r, NSTEPS]
    ri[r, M] = 0
    ri[r, PAD] = padded(ri[r, TOKENS], ri[r, NCH] == 0, sizes, cfg[PAD_SCOPE], cfg[NSIZES]) - ri[r, TOKENS]
    rec[nrec, 0], rec[nrec, 1], rec[nrec, 2], rec[nrec, 3] = now, 0.0, in_run, in_wait
    rec[nrec, 4], rec[nrec, 5], rec[nrec, 6], rec[nrec, 7] = rf[r, USED], ri[r, PREEMPT], ri[r, TOKENS], r
    ri[r, REC] = nrec
    if ri[r, HLEN]:
        ri[r, STEPS] = 1
    return nrec + 1


@njit(cache=True)
def cut_one(r, now, next_arrival, st, ri, rf, ends, q, col, tab, cfg, fcfg, law):
    """A fleet of one replica cuts the block it just started at the next arrival, as Simulator.cut does (with the
    admission lag: the step after; a block kept to one step for held requests is left so)."""
    if ri[r, ACTIVE] and next_arrival < math.inf and ri[r, HLEN] == 0:
        until = next_arrival - now
        extend(r, until, NO_AHEAD, st, ri, rf, ends, q, col, tab, cfg, fcfg, law)
        cut_at(r, until, ri, rf, ends, 2 if cfg[LAG] and next_arrival >= now else 1)


@njit(cache=True, inline="always")
def outstanding(j, ri):
    """_Replica.outstanding: replica j's requests running, waiting, held, and loading their KV remotely."""
    return ri[j, N_RUN] + ri[j, WLEN] + ri[j, HLEN] + ri[j, RLEN]


@njit(cache=True)
def route(k, i, ri, cfg, fcfg, prompt, pfx):
    """Fleet._route: round-robin, or the fewest outstanding (lowest index on ties), or (router 2, prefix-aware with
    a prefix cache) serving.router.choose: the fewest outstanding when the loads are imbalanced past the thresholds,
    else the longest cached prefix in whole pages (ties: fewest outstanding) when it is more than cache_threshold of
    the prompt, else the smallest router tree (ties: fewest outstanding); the chosen replica's tree grows by the
    prompt less its hit."""
    if cfg[ROUTER] == 0:
        return k % cfg[NREP]
    least, lo, hi = 0, outstanding(0, ri), outstanding(0, ri)
    for j in range(1, cfg[NREP]):
        x = outstanding(j, ri)
        if x < lo:
            least, lo = j, x
        hi = max(hi, x)
    if cfg[ROUTER] == 1:
        return least
    d = path_of(i, pfx)
    if hi - lo > cfg[BAL_ABS] and hi > lo * fcfg[BAL_REL]:
        best = least
    else:
        best, load = 0, outstanding(0, ri)
        most = hit_on_path(0, i, d, prompt[i], pfx, cfg)
        for j in range(1, cfg[NREP]):
            x = outstanding(j, ri)
            h = hit_on_path(j, i, d, prompt[i], pfx, cfg)
            if h > most or (h == most and x < load):
                best, load, most = j, x, h
        rate = most / prompt[i] if prompt[i] else 0.0
        if not rate > fcfg[CACHE_THR]:
            best, load = 0, outstanding(0, ri)
            for j in range(1, cfg[NREP]):
                x = outstanding(j, ri)
                if ri[j, TREE] < ri[best, TREE] or (ri[j, TREE] == ri[best, TREE] and x < load):
                    best, load = j, x
    ri[best, TREE] += prompt[i] - hit_on_path(best, i, d, prompt[i], pfx, cfg)
    return best


@njit(cache=True, inline="always")
def rekey(r, t, key, full, ri, rf, ends):
    """Replica r's place in the event order: its block's end when every step up to the cut is evaluated (full), else
    a lower bound of it (the last evaluated step's end; at least `t`, the time it was evaluated past); inf idle."""
    m, steps = ri[r, M], ri[r, STEPS]
    full[r] = ri[r, ACTIVE] == 0 or m >= steps
    if not ri[r, ACTIVE]:
        key[r] = rf[r, WAKE]  # an idle replica's remote load due (kernel_remote.wake), else inf
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


# inlined into its two callers: events calls it once per engine record, where a call (of ~30 arguments, the tables
# flattened) measured ~30 % of an EAGLE fleet's loop (serving_scale.md, session 22)
@njit(cache=True, inline="always")
def launch(r, now, arrived, sent, nrec, rec, clock, st, held, ri, rf, ends, nxt, generated, pre, prompt, output, q,
           col, tab, cfg, fcfg, sizes, law, key, full, pfx, ses, spec):
    """Fleet._start at `now` as the event loop calls it (a block just committed, a remote load due on an idle
    replica, a request routed to an idle one): the record table grown when full, replica r's next block scheduled
    and recorded (start), under speculative decoding its verify step timed (kernel_spec.plan_step), a fleet of one's
    block cut at the next arrival (cut_one), and r's place in the event order set. Returns (records written, the
    record table)."""
    nrec, rec = begin(r, now, nrec, rec, clock, st, held, ri, rf, ends, nxt, generated, pre, prompt, output, q, tab,
                      cfg, fcfg, sizes, law, pfx, spec)
    settle_block(r, now, arrived, sent, clock, st, ri, rf, ends, q, col, tab, cfg, fcfg, law, key, full, ses)
    return nrec, rec


@njit(cache=True, inline="always")
def begin(r, now, nrec, rec, clock, st, held, ri, rf, ends, nxt, generated, pre, prompt, output, q, tab, cfg, fcfg,
          sizes, law, pfx, spec):
    """launch's first half: the record table grown when full, replica r's next block scheduled and recorded (start),
    under speculative decoding its verify step timed (kernel_spec.plan_step). Returns (records written, the table)."""
    if nrec + 1 >= rec.shape[0]:
        rec = grow(rec)
    nrec = start(r, now, st, held, ri, rf, ends, nxt, generated, pre, prompt, output, rec, nrec, tab[10], cfg, fcfg,
                 sizes, clock, pfx)
    plan_step(r, st, ri, rf, ends, q, tab, cfg, fcfg, law, spec)
    return nrec, rec


@njit(cache=True, inline="always")
def settle_block(r, now, arrived, sent, clock, st, ri, rf, ends, q, col, tab, cfg, fcfg, law, key, full, ses):
    """launch's second half: a fleet of one's block cut at the next arrival (cut_one), r's place in the event order
    set."""
    if cfg[NREP] == 1:
        cut_one(r, now, next_arrival(arrived, sent, clock, ses), st, ri, rf, ends, q, col, tab, cfg, fcfg, law)
    rekey(r, now, key, full, ri, rf, ends)


@njit(cache=True)
def arrive(t_arr, arrived, sent, k, nrec, rec, clock, routed, st, held, ri, rf, ends, nxt, generated, pre, prompt,
           output, q, col, tab, cfg, fcfg, sizes, law, key, full, pfx, ses, spec):
    """Fleet.run's arrivals at t_arr: each request due (serving.kernel_queue.take_due: in id order, or with chat
    sessions the turns sent) is routed and queued (held, under the admission lag, by a busy replica); an idle replica
    starts (under speculative decoding: its verify step timed, kernel_spec.plan_step), a busy one's block is cut at
    the step during which the request arrives (with the lag: the step after it; a verify step is a block of one)."""
    while True:
        i = take_due(t_arr, arrived, sent, clock, ses)
        if i < 0:
            break
        arrived += 1
        j = route(k, i, ri, cfg, fcfg, prompt, pfx)
        k += 1
        routed[i] = j
        lag = cfg[LAG] != 0 and ri[j, ACTIVE] != 0
        if lag:
            hold(j, i, ri, nxt)
        else:
            enqueue(j, i, ri, nxt)
        if not ri[j, ACTIVE]:
            nrec, rec = launch(j, t_arr, arrived, sent, nrec, rec, clock, st, held, ri, rf, ends, nxt, generated, pre,
                               prompt, output, q, col, tab, cfg, fcfg, sizes, law, key, full, pfx, ses, spec)
            continue
        if ri[j, STEPS] > 1 and (ri[j, M] < ri[j, STEPS] or rf[j, START] + ends[j, ri[j, STEPS] - 1] > t_arr):
            extend(j, t_arr - rf[j, START], NO_AHEAD, st, ri, rf, ends, q, col, tab, cfg, fcfg, law)
            cut_at(j, t_arr - rf[j, START], ri, rf, ends, 2 if lag else 1)
        rekey(j, t_arr, key, full, ri, rf, ends)
    return arrived, k, nrec, rec


@njit(cache=True)
def run_loop(clock, send, arrival, prompt, output, tab, sizes, cfg, fcfg, cap, live, law, pfx, spec, ses, pre):
    """Simulate every request to completion on cfg[NREP] replicas (Fleet.run's event order). Returns (first token,
    finish, replica of each request, records, per-replica integers ri (preemptions, prefix-cache hits), a status: 0
    done, 1 idle with requests outstanding).
    `clock`: engine arrival times (open loop: all; closed loop: the first cfg[CONC], the rest filled
    with `send` as completions free slots: serving.kernel_queue.release; chat sessions: `ses`, the first turns, the
    rest sent as their predecessors finish: serving.kernel_queue.turn_ends). `spec`: speculative decoding's
    (serving.kernel_single's: the acceptance draws' PCG64 stream, serving.kernel_rng's, one for the fleet as
    Fleet.run keeps one Generator, the per-position acceptance, the draft's spec_cfg, tables, law and work vector),
    used when cfg[SPEC] > 0: each block is one verify step and its draft passes, its accepted drafts drawn as it
    is committed. `pre`: (tokens of KV each request brings, zeroed when it is preempted; the host seconds its load
    costs the step that admits it), a disaggregated decode pool's (serving.disagg), or empty arrays.
    The state is allocated here and held across `events` (the loop itself), which works on views of it that numba
    counts no references for (serving.kernel_views)."""
    n, nrep = len(clock), cfg[NREP]
    sessions = ses[1][TURNS] != 0
    was = np.empty(cap if sessions else 0, dtype=np.int64)
    st = np.zeros((nrep, ST_FIELDS, cap + ST_PAD), dtype=np.int64)
    held = np.zeros((nrep, cap + ST_PAD))
    ri = np.zeros((nrep, RI_FIELDS), dtype=np.int64)
    ri[:, WHEAD] = -1
    ri[:, WTAIL] = -1
    ri[:, HHEAD] = -1
    ri[:, HTAIL] = -1
    ri[:, RHEAD] = -1
    ri[:, RTAIL] = -1
    rf = np.zeros((nrep, RF_FIELDS))
    rf[:, WAKE] = math.inf
    ends = np.zeros((nrep, cfg[BLOCK]))
    nxt = np.full(n, -1, dtype=np.int64)
    generated = np.zeros(n, dtype=np.int64)
    first, finish = np.full(n, np.nan), np.full(n, np.nan)
    routed = np.full(n, -1, dtype=np.int64)
    # a fleet's records, each row written whole by `start` before it is read (np.empty: the pages never written
    # are never faulted in): ~2.6 a request, under speculative decoding (a verify step a record) up to ~9.6 (EAGLE,
    # 32 x 100,000: 30.8M; serving_scale.md), so those runs start at 10 a request instead of growing the table, a
    # copy of it each time, four times
    rec = np.empty((max(16, (40 if cfg[SPEC] else 11) * n // 4), REC_FIELDS))
    q, col = np.zeros(live), np.zeros((nrep, tab[3].shape[1]))
    key, full = np.full(nrep, math.inf), np.zeros(nrep, dtype=np.bool_)
    status, nrec, rec = events(clock, send, arrival, prompt, output, tab, sizes, cfg, fcfg, law, pfx, spec, ses, pre,
                               (was, st, held, ri, rf, ends, nxt, generated, first, finish, routed, q, col, key, full),
                               rec)
    return first, finish, routed, rec[:nrec], ri, status


@njit(cache=True)
def events(clock, send, arrival, prompt, output, tab, sizes, cfg, fcfg, law, pfx, spec, ses, pre, state, rec):
    """run_loop's event loop over its `state` (allocated and held by run_loop) and the inputs, all taken as views
    numba counts no references for (serving.kernel_views.borrowed: per engine record the loop passes ~40 arrays to
    the scheduler's functions, each an atomic count up and down otherwise); `rec`, the records, stays counted (it
    grows, and is returned). Returns (status, records written, the record table)."""
    clock, send, arrival, prompt, output, tab, sizes, cfg, fcfg, law, pfx, spec, ses, pre = borrowed(
        (clock, send, arrival, prompt, output, tab, sizes, cfg, fcfg, law, pfx, spec, ses, pre))
    was, st, held, ri, rf, ends, nxt, generated, first, finish, routed, q, col, key, full = borrowed(state)
    pcg, acceptance = spec[0], spec[1]
    n = len(clock)
    sessions = ses[1][TURNS] != 0
    sent = n if cfg[CONC] == 0 else min(cfg[CONC], n)
    # int64 zeros, not the literal 0: numba types a call first with a loop-carried variable's literal start, so
    # arrive (and its callees given those values: route, take_due, start) would compile twice
    nrec, arrived, k = np.int64(0), np.int64(0), np.int64(0)
    done = 0
    # Simulator.release_at_launch: completions whose closed-loop slots free once the replica's next step is launched
    late = cfg[CONC] != 0 and cfg[OVERLAP] != 0 and cfg[LAG] != 0
    while done < n:
        t_arr = next_arrival(arrived, sent, clock, ses)
        while True:  # the earliest block end, evaluating steps of blocks that may end before t_arr
            r = np.argmin(key)
            if key[r] == math.inf or full[r] or key[r] >= t_arr:
                break
            extend(r, t_arr - rf[r, START], AHEAD, st, ri, rf, ends, q, col, tab, cfg, fcfg, law)
            rekey(r, t_arr, key, full, ri, rf, ends)
        if key[r] < math.inf and full[r] and (key[r] < t_arr or t_arr == math.inf):
            now = key[r]
            ended = 0
            if ri[r, ACTIVE]:  # r's block ends (else r is idle and a remote load of its is due: Fleet.run)
                if ri[r, RLEN]:
                    report(r, now, ri, nxt, pre)
                rec[ri[r, REC], 1] = ends[r, ri[r, STEPS] - 1]
                rec[ri[r, REC], 6] = ri[r, TOKENS] * ri[r, STEPS]
                rec[ri[r, REC], LAUNCH_COL] = rf[r, EAGER_L]
                if cfg[SPEC]:
                    accept(r, st, ri, pcg, acceptance)
                n_was = running_ids(r, st, ri, was) if sessions else 0
                gone = commit(r, now, st, held, ri, rf, first, finish, tab[10], cfg, pfx)
                done += gone
                if gone and late:  # their slots free once r's next step is launched (below)
                    ended = gone
                elif gone and cfg[CONC]:
                    sent = release(gone, now, sent, clock, send, arrival, fcfg)
                if gone and sessions:
                    turn_ends(r, st, ri, was, n_was, now, clock, send, ses, fcfg)
            # launch, with the slots of `ended` freed between its halves: after the new block's first step's eager
            # launch (Fleet._start's `release`; 0 when r idles)
            nrec, rec = begin(r, now, nrec, rec, clock, st, held, ri, rf, ends, nxt, generated, pre, prompt, output, q,
                              tab, cfg, fcfg, sizes, law, pfx, spec)
            if ended:
                eager = 0.0
                if ri[r, ACTIVE]:
                    eager = rf[r, EAGER_L] if cfg[SPEC] else eager_launch(r, st, ri, rf, cfg, fcfg)
                sent = release(ended, now + eager, sent, clock, send, arrival, fcfg)
            settle_block(r, now, arrived, sent, clock, st, ri, rf, ends, q, col, tab, cfg, fcfg, law, key, full, ses)
            continue
        if t_arr == math.inf:
            return 1, nrec, rec
        arrived, k, nrec, rec = arrive(t_arr, arrived, sent, k, nrec, rec, clock, routed, st, held, ri, rf, ends, nxt,
                                       generated, pre, prompt, output, q, col, tab, cfg, fcfg, sizes, law, key, full,
                                       pfx, ses, spec)
    return 0, nrec, rec
