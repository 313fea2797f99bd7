"""One replica's record loop as Simulator.run runs it, compiled (numba njit, cache=True): serving.kernel runs it for
Simulator.run (serving.kernel_loop.run_loop runs fleets, Fleet.run's event order).

Simulator.run's loop: the requests that reached the engine by `seen` (with the lag: the start of the last step,
vLLM's async scheduling, EngineScheduling.admission_lag; else the clock) join the queue; the scheduler plans a step;
idle, the clock jumps to the next arrival (and an idle engine sees it at once); else a block of decode-only steps
runs, cut at the step during which the next arrival comes (with the lag: one step later, since it is seen only at
the start of the step after the one it arrived in; one that arrived before the block and is not yet seen: after its
first step: Simulator.cut), and is committed; completions release closed-loop clients' next sends (or
chat sessions' next turns: serving.kernel_queue.turn_ends). With speculative decoding every step is one verify step
and its draft passes (serving.kernel_spec), its accepted drafts drawn before the commit.
"""

import math

import numpy as np
from numba import njit

from roofline.serving.kernel_block import NO_AHEAD, eager_launch, extend, host_next, padded
from roofline.serving.kernel_layout import (
    BLOCK,
    CONC,
    EAGER_L,
    LAG,
    LAUNCH_COL,
    N_RUN,
    NCH,
    NSIZES,
    OVERLAP,
    PAD,
    PAD_SCOPE,
    PREEMPT,
    REC_FIELDS,
    RF_FIELDS,
    RI_FIELDS,
    SLACK,
    SPEC,
    ST_FIELDS,
    ST_PAD,
    STEPS,
    TOKENS,
    USED,
    WHEAD,
    WLEN,
    WTAIL,
    M,
)
from roofline.serving.kernel_loop import grow
from roofline.serving.kernel_queue import TURNS, enqueue, next_arrival, release, running_ids, take_due, turn_ends
from roofline.serving.kernel_sched import block_length, commit, schedule
from roofline.serving.kernel_spec import accept, spec_step_s

# the replica's index as the scheduler's functions are passed it: an int64, not a literal 0 (numba compiles a
# function once per literal value it is passed), so the versions kernel_loop's fleets compile serve this loop too
R0 = np.int64(0)


@njit(cache=True)
def block_steps(nxt, now, lag, st, ri, rf, ends, q, col, tab, cfg, fcfg, law):
    """Simulator._block and cut: how many of the planned block's steps run before the next arrival (at `nxt`) is
    seen, its step ends evaluated through the last of them."""
    steps = ri[0, STEPS]
    if nxt < math.inf and steps > 1:
        until = nxt - now
        extend(R0, until, NO_AHEAD, st, ri, rf, ends, q, col, tab, cfg, fcfg, law)
        during = ri[0, M]
        for i in range(ri[0, M]):
            if ends[0, i] >= until:
                during = i
                break
        late = lag and nxt >= now and not (during < ri[0, M] and until <= host_next(R0, during, rf, ends))
        steps = min(steps, during + (2 if late else 1))
    ri[0, STEPS] = steps
    extend(R0, math.inf, NO_AHEAD, st, ri, rf, ends, q, col, tab, cfg, fcfg, law)
    return steps


@njit(cache=True)
def run_single(clock, send, arrival, prompt, output, tab, sizes, cfg, fcfg, cap, live, law, pfx, spec, ses):
    """Simulator.run on flat arrays: (first token, finish, records, the replica's integers ri (preemptions,
    prefix-cache hits), a status: 0 done, 1 idle with requests outstanding).
    `clock`: engine arrival times (open loop: all; closed loop: the first cfg[CONC], the rest
    filled with `send` as completions free slots). `spec`: speculative decoding's (the acceptance draws' PCG64
    stream, serving.kernel_rng's, the per-position acceptance, serving.kernel_spec's spec_cfg, the draft's tables,
    its law, its work vector), used when cfg[SPEC] > 0: a step is one verify step and its draft passes. `ses`: chat
    sessions (serving.kernel_queue: the first turns in arrival order and the heap of later turns sent; state[TURNS]
    0 without sessions): a turn is sent when its predecessor finishes, plus think time."""
    pcg, acceptance, spec_cfg, dtab, dlaw, dq = spec
    n = len(clock)
    sessions = ses[1][TURNS] != 0
    was = np.empty(cap if sessions else 0, dtype=np.int64)
    # Simulator.run: no preloaded KV nor remote loads (serving.disagg's pools are fleets: kernel_loop)
    no_pre = (np.zeros(0, dtype=np.int64), np.zeros(0), np.zeros(0), np.zeros(0), np.zeros(0))
    lag = cfg[LAG] != 0
    sent = n if cfg[CONC] == 0 else min(cfg[CONC], n)
    st = np.zeros((1, ST_FIELDS, cap + ST_PAD), dtype=np.int64)
    held = np.zeros((1, cap + ST_PAD))
    ri = np.zeros((1, RI_FIELDS), dtype=np.int64)
    ri[0, WHEAD] = -1
    ri[0, WTAIL] = -1
    rf = np.zeros((1, RF_FIELDS))
    ends = np.zeros((1, cfg[BLOCK]))
    nxt_id = np.full(n, -1, dtype=np.int64)
    generated = np.zeros(n, dtype=np.int64)
    first, finish = np.full(n, np.nan), np.full(n, np.nan)
    rec = np.zeros((max(16, 5 * n // 2), REC_FIELDS))
    q, col = np.zeros(live), np.zeros((1, tab[3].shape[1]))
    seq = tab[10]
    now, seen = 0.0, 0.0
    nrec, done, arrived = 0, 0, np.int64(0)  # arrived: as R0, take_due's fleet version
    # Simulator.release_at_launch: completions whose closed-loop slots free once the next step is launched
    timed = cfg[OVERLAP] != 0 and lag
    late = cfg[CONC] != 0 and timed
    ended = 0
    slack = 0.0  # the host's lead into the next block's first step (Simulator.run's; 0 after idling)
    while done < n:
        limit = seen if lag else now
        while True:
            i = take_due(limit, arrived, sent, clock, ses)
            if i < 0:
                break
            enqueue(R0, i, ri, nxt_id)
            arrived += 1
        in_run, in_wait = ri[0, N_RUN], ri[0, WLEN]
        nxt = next_arrival(arrived, sent, clock, ses)
        if not schedule(R0, now, st, held, ri, rf, nxt_id, generated, no_pre, prompt, output, seq, cfg, fcfg, pfx):
            if ended:  # idle: the slots free now
                sent = release(ended, now, sent, clock, send, arrival, fcfg)
                ended = 0
                nxt = next_arrival(arrived, sent, clock, ses)
            if nxt == math.inf:
                return first, finish, rec[:nrec], ri, 1
            now = seen = max(now, nxt)
            slack = 0.0
            continue
        rf[0, SLACK] = slack
        ri[0, STEPS] = block_length(R0, st, held, ri, rf, seq, cfg, fcfg)
        ri[0, M] = 0
        ri[0, PAD] = padded(ri[0, TOKENS], ri[0, NCH] == 0, sizes, cfg[PAD_SCOPE], cfg[NSIZES]) - ri[0, TOKENS]
        if cfg[SPEC]:  # Simulator.block_ends' speculative branch: one step (block_length says 1)
            ends[0, 0] = spec_step_s(R0, st, ri, rf, tab, cfg, fcfg, law, q, spec_cfg, dtab, dlaw, dq)
            steps = 1
            if ended:  # a block of one step: its cut is not at an arrival
                sent = release(ended, now + rf[0, EAGER_L], sent, clock, send, arrival, fcfg)
                ended = 0
        else:
            if ended:
                sent = release(ended, now + eager_launch(R0, st, ri, rf, cfg, fcfg), sent, clock, send, arrival, fcfg)
                ended = 0
                nxt = next_arrival(arrived, sent, clock, ses)
            steps = block_steps(nxt, now, lag, st, ri, rf, ends, q, col, tab, cfg, fcfg, law)
        dt = ends[0, steps - 1]
        host = host_next(R0, steps - 1, rf, ends)
        seen = now + host
        slack = dt - host if timed else 0.0
        if nrec + 1 >= rec.shape[0]:
            rec = grow(rec)
        rec[nrec, 0], rec[nrec, 1], rec[nrec, 2], rec[nrec, 3] = now, dt, in_run, in_wait
        rec[nrec, 4], rec[nrec, 5], rec[nrec, 6] = rf[0, USED], ri[0, PREEMPT], ri[0, TOKENS] * steps
        rec[nrec, LAUNCH_COL] = rf[0, EAGER_L]
        nrec += 1
        now += dt
        if cfg[SPEC]:
            accept(R0, st, ri, pcg, acceptance)
        n_was = running_ids(R0, st, ri, was) if sessions else 0
        gone = commit(R0, now, st, held, ri, rf, first, finish, seq, cfg, pfx)
        done += gone
        if gone and late:
            ended = gone
        elif gone and cfg[CONC]:
            sent = release(gone, now, sent, clock, send, arrival, fcfg)
        if gone and sessions:
            turn_ends(R0, st, ri, was, n_was, now, clock, send, ses, fcfg)
    return first, finish, rec[:nrec], ri, 0
