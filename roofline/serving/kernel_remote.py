"""Remote KV loads in serving.kernel_loop's compiled record loop (numba njit, cache=True): a disaggregated decode
pool under an engine with a KV connector (serving.disagg's two hops), as serving.scheduler.Scheduler takes them
(serving.remote.RemoteLoads; Scheduler's t_sched, the promotions and posts of _admit, the observation of schedule
and the report of commit). A replica's loads in flight are a linked list over request ids through `nxt`
(ri's RHEAD, RTAIL, RLEN; a request is in at most one of a replica's lists) in the order they were posted; `pre`:
(preloaded tokens, load host seconds, transfer seconds, ready_s, report_s), the last three empty without remote
loads. report_s is inf until the load is observed, OBSERVED while the step that observed it is in flight, then the
time it was reported.
"""

import math

from numba import njit

from roofline.serving.kernel_layout import (
    BASE,
    CHDONE,
    CHPOS,
    CHSTART,
    CHTOK,
    COMP,
    EAGER_ABOVE,
    EAGER_PREFILL,
    EAGER_S,
    GEN,
    GRAPH_S,
    IDS,
    KNOWN,
    LOADS,
    MAX_SEQS,
    NCH,
    NDEC,
    OUT,
    PER_SEQ_S,
    POSTS,
    RES,
    RESERVE,
    RHEAD,
    RLEN,
    RTAIL,
    SPEC,
    STAMPED,
    STEP_S,
    TOKEN_S,
    TOKENS,
    TSCHED,
    USED,
    WAKE,
)
from roofline.serving.remote import OBSERVED


@njit(cache=True)
def post(r, i, todo, room_bytes, ri, rf, nxt, pre, seq):
    """_admit's remote load of request i at the head of the waiting queue (the caller pops it when this returns
    True): its prompt's pages now if they fit in `room_bytes`, its post's host seconds to the step, its completion
    at t_sched + its transfer; False when it does not fit (the admission stops)."""
    cost = seq[todo]
    if cost > room_bytes:
        return False
    rf[r, USED] += cost
    if len(pre[1]):
        rf[r, LOADS] += pre[1][i]
    ri[r, POSTS] += 1
    nxt[i] = -1
    if ri[r, RLEN] == 0:
        ri[r, RHEAD] = i
    else:
        nxt[ri[r, RTAIL]] = i
    ri[r, RTAIL] = i
    ri[r, RLEN] += 1
    pre[3][i], pre[4][i] = rf[r, TSCHED] + pre[2][i], math.inf
    return True


@njit(cache=True)
def promote(r, n0, budget, st, held, ri, rf, nxt, generated, pre, prompt, output, seq, cfg):
    """_admit's first pass (vLLM's skipped_waiting before its waiting queue): the loads reported by t_sched, in order,
    while the budget and the sequence cap allow, start running at their last prompt token (one token, their pages
    held since the post). Returns how many it admitted (at positions n0 ..)."""
    na = 0
    prev, i = -1, ri[r, RHEAD]
    rep, t = pre[4], rf[r, TSCHED]
    while i >= 0 and budget > 0 and n0 + na < cfg[MAX_SEQS]:
        nx = nxt[i]
        if 0.0 <= rep[i] <= t:
            if prev < 0:
                ri[r, RHEAD] = nx
            else:
                nxt[prev] = nx
            if ri[r, RTAIL] == i:
                ri[r, RTAIL] = prev
            ri[r, RLEN] -= 1
            todo = prompt[i] + generated[i]
            p = n0 + na
            st[r, IDS, p], st[r, COMP, p], st[r, KNOWN, p], st[r, BASE, p] = i, todo - 1, todo, 0
            st[r, GEN, p], st[r, OUT, p], st[r, STAMPED, p] = generated[i], output[i], 0
            st[r, RES, p] = prompt[i] + output[i] if cfg[RESERVE] else 0
            held[r, p] = seq[todo]
            nc = ri[r, NCH]
            st[r, CHPOS, nc], st[r, CHSTART, nc], st[r, CHTOK, nc], st[r, CHDONE, nc] = p, todo - 1, 1, 1
            ri[r, NCH] = nc + 1
            ri[r, TOKENS] += 1
            budget -= 1
            na += 1
        else:
            prev = i
        i = nx
    if ri[r, RLEN] == 0:
        ri[r, RHEAD], ri[r, RTAIL] = -1, -1
    return na


@njit(cache=True)
def observe(r, ri, rf, nxt, pre):
    """RemoteLoads.observe (Scheduler.schedule's step that runs): the loads complete by t_sched are observed,
    reported when it commits."""
    i = ri[r, RHEAD]
    while i >= 0:
        if pre[4][i] == math.inf and pre[3][i] <= rf[r, TSCHED]:
            pre[4][i] = OBSERVED
        i = nxt[i]


@njit(cache=True)
def report(r, now, ri, nxt, pre):
    """RemoteLoads.report, Scheduler.commit: the loads the committed step observed are reported at its end."""
    i = ri[r, RHEAD]
    while i >= 0:
        if pre[4][i] == OBSERVED:
            pre[4][i] = now
        i = nxt[i]


@njit(cache=True)
def spin(r, t, ri, nxt, pre):
    """RemoteLoads.spin: an idle engine reports each load complete by `t` at its completion."""
    i = ri[r, RHEAD]
    while i >= 0:
        if pre[4][i] == math.inf and pre[3][i] <= t:
            pre[4][i] = pre[3][i]
        i = nxt[i]


@njit(cache=True)
def wake(r, now, ri, rf, nxt, pre):
    """An idle replica's next event (Fleet._start's): max(now, RemoteLoads.wake_s), inf without loads in flight."""
    soon = math.inf
    i = ri[r, RHEAD]
    while i >= 0:
        soon = min(soon, pre[3][i] if pre[4][i] == math.inf else pre[4][i])
        i = nxt[i]
    rf[r, WAKE] = max(now, soon) if soon < math.inf else math.inf


@njit(cache=True)
def serial(r, st, ri, rf, cfg, fcfg):
    """Fleet._serial: the earliest schedule after replica r's last step, one that started KV loads (rf's LOADS > 0;
    its plan still in st / ri): that step's schedule (TSCHED) plus its host work, EngineOverheads.host_s over its
    sequences and its tokens (a decode's drafts included)."""
    nd, nc = ri[r, NDEC], ri[r, NCH]
    tokens = nd * (1 + cfg[SPEC])
    for j in range(nc):
        tokens += st[r, CHTOK, j]
    host = fcfg[STEP_S] + fcfg[PER_SEQ_S] * (nd + nc) + fcfg[TOKEN_S] * tokens + rf[r, LOADS]
    if nc:  # EngineOverheads.graph_s
        host += fcfg[GRAPH_S]
    if fcfg[EAGER_S] and tokens > (cfg[EAGER_PREFILL] if nc else cfg[EAGER_ABOVE]):
        host = host + fcfg[EAGER_S]
    return rf[r, TSCHED] + host
