"""A replica's planned block's step times in the compiled record loops (numba njit, cache=True): the step-time
half of serving.kernel_loop (Fleet.run's loop) and serving.kernel_single (Simulator.run's), split from the event
loop along the seam between deciding what runs (the scheduler, the events) and timing it.

- padded: the engine's padding of a step's tokens to its captured sizes (EngineScheduling.padded_tokens);
- extend: a block's decode-only (or one mixed) step ends evaluated as far as the event loop needs them:
  ClosedForm.work and .time per step (pp > 1: serving.kernel_pipeline), the engine's padding and host overheads
  (EngineOverheads.combine); decode-only blocks evaluate the law at every step (the numpy reference path's
  per-step evaluation), not by the closed form's linear stretches: both equal the per-step times to float
  rounding;
- host_next: when the engine schedules the step after a given one under the admission lag (simulate.host_start);
- cut_at: where a request arriving mid-block cuts it (Simulator.cut).
Scheduler state per replica: serving.kernel_loop's st / ri / rf arrays (field indices: serving.kernel_layout).
"""

import numpy as np
from numba import njit

from roofline.serving.kernel_layout import (
    CHDONE,
    CHSTART,
    CHTOK,
    COMP,
    DEC,
    EAGER_ABOVE,
    EAGER_L,
    EAGER_PREFILL,
    EAGER_S,
    GRAPH_S,
    HOST,
    LAG,
    LAUNCH,
    LOADS,
    MAX_STEP,
    NCH,
    NDEC,
    OVERLAP,
    PAD,
    PASS,
    PER_SEQ_S,
    PP,
    SAMPLER_ROW_S,
    SAMPLER_S,
    SLACK,
    STEP_S,
    STEPS,
    TOKEN_S,
    M,
)
from roofline.serving.kernel_pipeline import pipelined_s
from roofline.serving.kernel_views import prefetch

# extend's `ahead` for a caller that needs no step past `until`; int64 like kernel_loop.AHEAD, not a literal 0: numba
# compiles a function once per literal value it is passed
NO_AHEAD = np.int64(0)


@njit(cache=True, inline="always")
def padded(tokens, decode_only, sizes, scope, ndec):
    """EngineScheduling.padded_tokens: the smallest captured size >= tokens (scope 1: any step, 2: decode-only) of
    sizes[:ndec]; a step with chunks, where sizes holds prefill buckets past ndec (SGLang's), the smallest of those
    >= tokens if at most twice the tokens (scheduling.sglang_prefill_padded), else tokens."""
    if not decode_only and len(sizes) > ndec:
        i = np.searchsorted(sizes[ndec:], tokens)
        if i < len(sizes) - ndec and sizes[ndec + i] <= 2 * tokens:
            return sizes[ndec + i]
        return tokens
    if scope == 0 or ndec == 0 or (scope == 2 and not decode_only):
        return tokens
    i = np.searchsorted(sizes[:ndec], tokens)
    return sizes[i] if i < ndec else tokens


@njit(cache=True)
def eager_launch(r, st, ri, rf, cfg, fcfg):
    """The eager launch of replica r's planned block's steps past the host's lead into its first step (rf's SLACK),
    as extend will set rf[r, EAGER_L] (Simulator.block_launch_s' second part) before a step is evaluated: a
    completion's closed-loop slot frees after it (Simulator.release_at_launch). Not for a verify step
    (kernel_spec.spec_step_s sets its own)."""
    nd, nc = ri[r, NDEC], ri[r, NCH]
    if cfg[OVERLAP] == 0 or cfg[LAG] == 0 or nd + nc == 0:
        return 0.0
    n_new = 0
    for j in range(nc):
        n_new += st[r, CHTOK, j]
    eager = fcfg[EAGER_S] > 0.0 and nd + n_new > (cfg[EAGER_PREFILL] if n_new else cfg[EAGER_ABOVE])
    return max(0.0, fcfg[EAGER_S] - rf[r, SLACK]) if eager else 0.0


@njit(cache=True, inline="always")
def soonest(r, m, nd, st, nirr):
    """The first step at or after step m of replica r's decode block at which one of its sequences' contexts
    (computed tokens + step) is irregular (ClosedForm.irregular: leaves the decode table's line), from `nirr`, the
    next irregular context at or after each context (serving.kernel._closed_tables)."""
    top = len(nirr) - 1
    soon = nirr[top]
    for j in range(nd):
        c = st[r, COMP, st[r, DEC, j]]
        soon = min(soon, nirr[min(c + m, top)] - c)
    return soon


@njit(cache=True)
def extend(r, until, ahead, st, ri, rf, ends, q, col, tab, cfg, fcfg, law):
    """Evaluate replica r's block steps until one ends at or past `until` from its start and at least `ahead` more
    than were evaluated, or the (cut) block ends (steps past a later cut are evaluated for nothing, never used).

    Step s's wall seconds: ClosedForm.work and .time (decode contexts advanced by s), the engine's padding, then
    EngineOverheads.combine; in an asynchronous loop with the admission lag, the host's chain (scheduling.
    chained_ends: from rf's SLACK at the block's first step, rf's HOST between calls). The tables are unpacked once
    per call, not per step: numba counts references on every
    array it binds to a name (an atomic increment and decrement each), which per step cost more than the step's
    arithmetic (perf: NRT_incref / NRT_decref ~40 % of a 32-replica run's samples with a step function per step).
    The per-sequence test of a step's contexts against the table's irregular ones runs only at the steps where one
    is (`soonest`); the others add nd times the slope, as that test finds: per step O(1) instead of O(nd) (a chat
    fleet runs ~90 sequences a replica). Within a call the steps of a decode-only block differ only in the decode
    table's columns of q (the constant work per sequence, the padding and the weights are the block's), so after the
    first step only those columns are computed, by the same operations in the same order."""
    m = ri[r, M]
    steps = ri[r, STEPS]
    least = m + ahead
    if m >= steps or (m > 0 and m >= least and ends[r, m - 1] >= until):
        return
    nd, nc, pad = ri[r, NDEC], ri[r, NCH], ri[r, PAD]
    timed = cfg[OVERLAP] != 0 and cfg[LAG] != 0  # Simulator.block_launch_s: 0 outside an asynchronous loop
    if nd + nc == 0:  # a step that only posts remote loads (kernel_remote): host work, no forward (block_ends)
        ends[r, 0] = fcfg[STEP_S] + fcfg[PER_SEQ_S] * 0 + rf[r, LOADS]
        rf[r, LAUNCH] = ends[r, 0] if timed else 0.0
        rf[r, EAGER_L] = 0.0
        ri[r, M] = 1
        return
    const, pre_slope, pre_icpt, dec_rows, dec_at, pre_rows, pre_at, prefix_at, weights, imb, _s, slope, irr, nirr = tab
    n_dec_cols, n_live = len(dec_at), len(q)
    n_new = 0  # the chunks' tokens (a block with chunks is one step)
    n_done = 0
    for j in range(nc):
        n_new += st[r, CHTOK, j]
        n_done += st[r, CHDONE, j]
    wrow, wcol = 2 * (nd > 0) + (nc > 0), min(nd + pad + n_new, cfg[MAX_STEP])
    # loads: a step with chunks is a block; every real token adds the host's per-token work (EngineOverheads.combine)
    host = fcfg[STEP_S] + fcfg[PER_SEQ_S] * (nd + nc) + fcfg[TOKEN_S] * (nd + n_new) + rf[r, LOADS]
    if nc:  # a step with prefill chunks rebuilds the engine's graph (EngineOverheads.graph_s)
        host += fcfg[GRAPH_S]
    overlap = cfg[OVERLAP] != 0
    # past the capture sizes (EngineOverheads.eager): a step with chunks against the prefill graphs' limit
    eager = fcfg[EAGER_S] > 0.0 and nd + n_new > (cfg[EAGER_PREFILL] if n_new else cfg[EAGER_ABOVE])
    sampler = fcfg[SAMPLER_S] + fcfg[SAMPLER_ROW_S] * (nd + nc)  # the engine's sampler (EngineOverheads.combine)
    launch = (host + fcfg[EAGER_S] if eager else host) if timed else 0.0
    rf[r, LAUNCH] = launch
    rf[r, EAGER_L] = max(0.0, fcfg[EAGER_S] - rf[r, SLACK]) if timed and eager else 0.0
    hs = rf[r, HOST] if m > 0 else -rf[r, SLACK]  # the host's start of step m's work (scheduling.chained_ends)
    soon = soonest(r, m, nd, st, nirr) if m > 0 and nd and n_dec_cols else 0
    first = True  # q's entries outside the decode columns stay as the first step left them (no chunks: see above)
    while m < steps and (m < least or m == 0 or ends[r, m - 1] < until):
        if first or nc:
            for j in range(n_live):
                q[j] = const[j] * (nd + pad)
        else:
            for x in range(n_dec_cols):
                q[dec_at[x]] = const[dec_at[x]] * (nd + pad)
        if nd and n_dec_cols:
            # col[r]: the decode rows summed over the block's sequences at its previous step (whole numbers: exact)
            if m == 0:
                for x in range(n_dec_cols):
                    col[r, x] = 0.0
                w = dec_rows.shape[1]
                for j in range(nd):  # the rows' lines asked for first, both ends (a row may span two lines)
                    at = (st[r, COMP, st[r, DEC, j]] + 1) * w
                    prefetch(dec_rows, at)
                    prefetch(dec_rows, at + w - 1)
                for j in range(nd):
                    c = st[r, COMP, st[r, DEC, j]] + 1
                    for x in range(n_dec_cols):
                        col[r, x] += dec_rows[c, x]
                soon = soonest(r, 1, nd, st, nirr)
            elif m < soon:  # every context stays on its line: the loop below would find nd regular ones
                for x in range(n_dec_cols):
                    col[r, x] += nd * slope[x]
            else:  # one step on: the table's slope, except where a context leaves its line (ClosedForm.irregular)
                regular = 0
                for j in range(nd):
                    a = st[r, COMP, st[r, DEC, j]] + m
                    if irr[a]:
                        for x in range(n_dec_cols):
                            col[r, x] += dec_rows[a + 1, x] - dec_rows[a, x]
                    else:
                        regular += 1
                for x in range(n_dec_cols):
                    col[r, x] += regular * slope[x]
                soon = soonest(r, m + 1, nd, st, nirr)
            for x in range(n_dec_cols):
                q[dec_at[x]] += col[r, x]
        if nc:
            for j in range(n_live):
                q[j] += pre_slope[j] * n_new + pre_icpt[j] * n_done
            for j in range(nc):
                a, c, d = st[r, CHSTART, j], st[r, CHTOK, j], st[r, CHDONE, j]
                for x in range(len(pre_at)):
                    v = pre_rows[a + c, x] - pre_rows[a, x]
                    q[pre_at[x]] += v + pre_rows[0, x] if d else v
                for x in range(len(prefix_at)):
                    q[prefix_at[x]] += dec_rows[a, x] - dec_rows[0, x]
        if cfg[PP] > 1 or (cfg[PASS] > 0 and nd + pad + n_new > cfg[PASS]):
            # the pipeline's micro-batch and stage slots, or the engine's passes (serving.pipeline): it overwrites
            # q, so a pipelined block recomputes q whole at every step (`first` stays true)
            gpu = pipelined_s(q, weights, wrow, nd + nc, nd + pad + n_new, nd, imb, cfg, fcfg, law)
        else:
            if first or nc:
                for j in range(n_live):
                    q[j] += weights[wrow, wcol, j]
            else:
                for x in range(n_dec_cols):
                    q[dec_at[x]] += weights[wrow, wcol, dec_at[x]]
            first = False
            gpu = law(q, imb[nd])
        if sampler > 0.0:
            gpu = gpu + sampler
        if timed:  # the host's chain (scheduling.chained_ends): an eager step's launch from the host's start
            s0 = ends[r, m - 1] if m > 0 else 0.0
            ends[r, m] = max(s0 + gpu, hs + launch) if eager else s0 + max(gpu, launch)
            hs = max(hs + launch, s0)
        else:
            if eager:
                t = max(gpu, host + fcfg[EAGER_S]) if overlap else host + max(gpu, fcfg[EAGER_S])
            else:
                t = max(gpu, host) if overlap else gpu + host
            ends[r, m] = t if m == 0 else ends[r, m - 1] + t
        m += 1
    ri[r, M] = m
    rf[r, HOST] = hs


@njit(cache=True, inline="always")
def host_next(r, i, rf, ends):
    """serving.simulate.host_start: when (from the block's start) the engine schedules the step after step i of
    replica r's block under the admission lag, from the host's chain (rf's LAUNCH, 0 outside an asynchronous loop,
    and SLACK): that step's start where the GPU bounds the steps, its end where its launch ends with it."""
    launch = rf[r, LAUNCH]
    host = -rf[r, SLACK]
    for j in range(i + 1):
        host = max(host + launch, ends[r, j - 1] if j > 0 else 0.0)
    if ends[r, i] - host <= 1e-9 * launch:
        return ends[r, i]
    return host


@njit(cache=True)
def cut_at(r, until, ri, rf, ends, later):
    """Steps of replica r's block that run when a request reaches it `until` after the block's start: the step
    during which it arrives is the last (np.searchsorted(ends, until) + 1 over the steps evaluated), or with the
    engine's admission lag (`later` 2) the step after it, unless it arrives by the next step's schedule (host_next)
    (Simulator.cut)."""
    for i in range(ri[r, M]):
        if ends[r, i] >= until:
            k = 1 if later == 2 and until <= host_next(r, i, rf, ends) else later
            ri[r, STEPS] = min(ri[r, STEPS], i + k)
            return
