"""Speculative decoding's step in the compiled record loop (numba njit, cache=True): serving.kernel_single (one
replica) and serving.kernel_loop (a fleet: each replica r's state st[r], ri[r]) run it in place of a decode block when
cfg[SPEC] = K > 0, for the runs serving.kernel.covers admits.

It computes what Simulator.block_ends' speculative branch and serving.speculative.DraftCost compute, on the closed
form's live-space tables (serving.kernel._tables) with the laws compiled as numba cfuncs (serving.kernel.compiled_law):
- the verify step: every decoding sequence's last token and its K drafts as a chunk of K + 1 tokens after its
  computed tokens (ending its prompt: one logits row), then the step's prompt chunks, with the engine's padding
  (ClosedForm.chunk_work, timed at 0 decode sequences);
- the draft's K passes (DraftCost._closed_s): a draft model's first pass over every request's step tokens plus one
  slot (K + 2 after a decoding sequence's computed tokens; a chunk's tokens + 1), then K - 1 one-token passes at
  the tokens held after it, each at least the drafter's host work a pass (vLLM: DraftCost.pass_host_s), on the
  draft model's own tables and law; an EAGLE / MTP head's K passes over the decoding sequences at context + k on
  the target's tables with the once-counted law (ClosedForm(once=True));
- the step's wall time: EngineOverheads.combine of verify + drafts over the step's sequences and tokens;
- the accepted drafts (Simulator.accepted): per decoding sequence, in the plan's order, K uniforms from the run's
  numpy Generator's PCG64 stream (serving.kernel_rng draws it inline: the same doubles as Generator.random,
  consumed row by row as Speculative.draw's (n, K) array), the leading ones below the per-position acceptance,
  capped at what the request has left to generate less one. A fleet draws from one Generator as Fleet.run does
  (seeded SPEC_SEED, shared by the replicas), in the order its blocks are committed (Fleet.run's event order).
"""

from numba import njit

from roofline.serving.kernel_layout import (
    ACTIVE,
    CHDONE,
    CHSTART,
    CHTOK,
    COMP,
    DEC,
    EAGER_ABOVE,
    EAGER_L,
    EAGER_PREFILL,
    EAGER_S,
    FILL,
    GEN,
    GRAPH_S,
    KNOWN,
    LAG,
    LAUNCH,
    LOADS,
    MAX_STEP,
    MICRO,
    NCH,
    NDEC,
    OUT,
    OVERLAP,
    PAD,
    PER_SEQ_S,
    PP,
    SAMPLER_ROW_S,
    SAMPLER_S,
    SLACK,
    SPEC,
    STEP_S,
    TOKEN_S,
    M,
)
from roofline.serving.kernel_pipeline import pipelined_s, staged_s
from roofline.serving.kernel_rng import leading_below
from roofline.serving.kernel_views import prefetch

# spec_cfg fields: 1 for an EAGLE / MTP head (0: a draft model), the drafter's host floor a pass (s), the draft
# model's largest step in tokens (its weights table's last row), its pipeline stages' handoff terms (pp > 1:
# serving.pipeline.handoff_terms of the draft's PhaseModel)
HEAD, FLOOR, DRAFT_MAX_STEP, D_HANDOFF_BYTES, D_HANDOFF_BPS, D_HANDOFF_LAT_S = range(6)
SPEC_CFG_FIELDS = 6


@njit(cache=True, inline="always")
def _chunks(r, q, tab, st, ri, spec, extra, pad):
    """ClosedForm.chunk_work into q: the decoding sequences as chunks of `spec` + 1 + `extra` tokens after their
    computed tokens, then the step's chunks, each `extra` tokens longer, all ending their prompt when `extra` (a
    draft model's first pass) else as planned; `pad` padding tokens. Returns the tokens (without padding)."""
    const, pre_slope, pre_icpt, dec_rows, _dec_at, pre_rows, pre_at, prefix_at, _w, _imb, _s, _sl, _irr, _nirr = tab
    nd, nc = ri[r, NDEC], ri[r, NCH]
    n_new, n_done = nd * (spec + 1 + extra), nd
    for j in range(nc):
        n_new += st[r, CHTOK, j] + extra
        n_done += 1 if extra else st[r, CHDONE, j]
    for j in range(len(q)):
        q[j] = const[j] * pad + (pre_slope[j] * n_new + pre_icpt[j] * n_done)
    for j in range(nd + nc):
        if j < nd:
            a, c, d = st[r, COMP, st[r, DEC, j]], spec + 1 + extra, 1
        else:
            a, c = st[r, CHSTART, j - nd], st[r, CHTOK, j - nd] + extra
            d = 1 if extra else st[r, CHDONE, j - nd]
        for x in range(len(pre_at)):
            v = pre_rows[a + c, x] - pre_rows[a, x]
            q[pre_at[x]] += v + pre_rows[0, x] if d else v
        for x in range(len(prefix_at)):
            q[prefix_at[x]] += dec_rows[a, x] - dec_rows[0, x]
    return n_new


@njit(cache=True, inline="always")
def _ask_rows(r, st, ri, tab, c):
    """Ask for the table lines the verify step (_chunks: prefill rows at a decoding sequence's context a and a + `c`,
    decode row a) and an EAGLE / MTP head's first pass (_head_s: decode row a + 1, the next irregular context after
    a + 1) read per decoding sequence, before any is read: in a fleet the other replicas' records evict replica r's
    rows between its steps, and asked for at once their misses overlap instead of each stalling its gather (the
    gathers' loads led a 32-replica EAGLE fleet's perf profile: benchmarks/serving_scale.md). Changes no value."""
    _cst, _ps, _pi, dec_rows, _da, pre_rows, _pa, _xa, _w, _imb, _seq, _sl, _irr, nirr = tab
    wp, wd, top = pre_rows.shape[1], dec_rows.shape[1], len(nirr) - 1
    for j in range(ri[r, NDEC]):
        a = st[r, COMP, st[r, DEC, j]]
        prefetch(pre_rows, a * wp)  # each row's first and last element: a row may span two lines
        prefetch(pre_rows, a * wp + wp - 1)
        prefetch(pre_rows, (a + c) * wp)
        prefetch(pre_rows, (a + c) * wp + wp - 1)
        prefetch(dec_rows, a * wd)  # rows a and a + 1, contiguous
        prefetch(dec_rows, (a + 1) * wd)
        prefetch(dec_rows, (a + 2) * wd - 1)
        prefetch(nirr, min(a + 1, top))


@njit(cache=True, inline="always")
def _decodes(r, q, tab, st, ri, shift, chunks, max_step, again, weighted=True):
    """ClosedForm.work of a decode-only pass into q: the decoding sequences at their context (computed tokens + 1)
    + `shift`, and (`chunks`: a draft model's later passes) each chunk's sequence at its chunk's end + `shift`.
    `again`: q holds the previous pass of the same sequences, whose entries other than the decode table's columns
    (the constant work per sequence and the weights) this one shares, so only those columns are computed (the same
    operations in the same order). `weighted` False: without the weights (a pipelined pass adds its micro-batch's,
    serving.kernel_pipeline.staged_s). Returns how many sequences."""
    const, _ps, _pi, dec_rows, dec_at, _pr, _pa, _xa, weights, _imb, _seq, _slope, _irr, _nirr = tab
    nd, nc = ri[r, NDEC], ri[r, NCH]
    n = nd + (nc if chunks else 0)
    if again:
        for x in range(len(dec_at)):
            q[dec_at[x]] = const[dec_at[x]] * n
    else:
        for j in range(len(q)):
            q[j] = const[j] * n
    for j in range(n):
        if j < nd:
            a = st[r, COMP, st[r, DEC, j]] + 1 + shift
        else:
            a = st[r, CHSTART, j - nd] + st[r, CHTOK, j - nd] + shift
        for x in range(len(dec_at)):
            q[dec_at[x]] += dec_rows[a, x]
    row, w = 2 if n > 0 else 0, min(n, max_step)
    if not weighted:
        return n
    if again:
        for x in range(len(dec_at)):
            q[dec_at[x]] += weights[row, w, dec_at[x]]
    else:
        for j in range(len(q)):
            q[j] += weights[row, w, j]
    return n


@njit(cache=True, inline="always")
def _head_s(r, st, ri, cfg, dlaw, dq, tab, col):
    """An EAGLE / MTP head's K passes' seconds (DraftCost._closed_s: ClosedForm.work of the decoding sequences at
    context + j, j = 0 .. K - 1, on the target's tables, timed by the once-counted law `dlaw`). Pass j's decode
    table sum is kept in `col` (scratch, at least the decode columns long): pass 0 gathers each sequence's row,
    pass j adds each sequence's step from context + j - 1 to context + j, which is the table's slope except where
    that context is irregular (ClosedForm.irregular; `nirr` tells, per sequence, how many passes stay on the line).
    The table holds whole numbers whose sums are exact (kernel._law_reason), so the sums equal the gathered ones
    (ClosedForm.work's `_dec_rows[context].sum(axis=0)`), and q = const x n + sum + weights as ClosedForm.work."""
    const, _ps, _pi, dec_rows, dec_at, _pr, _pa, _xa, weights, imb, _seq, slope, irr, nirr = tab
    nd, k, ncol = ri[r, NDEC], cfg[SPEC], len(dec_at)
    top = len(nirr) - 1
    for x in range(ncol):
        col[x] = 0.0
    soon = k
    for j in range(nd):
        a = st[r, COMP, st[r, DEC, j]] + 1
        for x in range(ncol):
            col[x] += dec_rows[a, x]
        soon = min(soon, nirr[min(a, top)] - a)  # passes 1 .. soon step on the line
    row, w = 2 if nd > 0 else 0, min(nd, cfg[MAX_STEP])
    total = 0.0
    for j in range(k):
        if j == 0:
            for i in range(len(dq)):
                dq[i] = const[i] * nd
            for x in range(ncol):
                dq[dec_at[x]] += col[x]
            for i in range(len(dq)):
                dq[i] += weights[row, w, i]
        else:
            if j <= soon:
                for x in range(ncol):
                    col[x] += nd * slope[x]
            else:
                regular = 0
                for s in range(nd):
                    b = st[r, COMP, st[r, DEC, s]] + j  # context + j - 1 -> context + j
                    if irr[b]:
                        for x in range(ncol):
                            col[x] += dec_rows[b + 1, x] - dec_rows[b, x]
                    else:
                        regular += 1
                for x in range(ncol):
                    col[x] += regular * slope[x]
            for x in range(ncol):
                c = dec_at[x]
                dq[c] = const[c] * nd + col[x] + weights[row, w, c]
        total += dlaw(dq, imb[nd])
    return total


@njit(cache=True, inline="always")
def _draft_s(r, st, ri, cfg, spec_cfg, dtab, dlaw, dq, tab, col):
    """DraftCost._closed_s: the K draft passes' seconds (an EAGLE / MTP head's: _head_s, `col` its scratch)."""
    k = cfg[SPEC]
    if spec_cfg[HEAD]:
        return _head_s(r, st, ri, cfg, dlaw, dq, tab, col)
    floor, max_step, imb, weights = spec_cfg[FLOOR], int(spec_cfg[DRAFT_MAX_STEP]), dtab[9], dtab[8]
    n_new = _chunks(r, dq, dtab, st, ri, k, 1, 0)
    pp, micro = cfg[PP], cfg[MICRO]
    hb, hbps, hlat = spec_cfg[D_HANDOFF_BYTES], spec_cfg[D_HANDOFF_BPS], spec_cfg[D_HANDOFF_LAT_S]
    if pp > 1:  # pp > 1: each pass pipelined on the draft's stages (StepModel.step_time of the draft's PhaseModel)
        seqs = ri[r, NDEC] + ri[r, NCH]
        total = max(floor, staged_s(dq, weights, 1, seqs, n_new, 0, imb, pp, micro, 0, max_step, hb, hbps, hlat, dlaw,
                                         cfg[FILL]))
    else:
        for j in range(len(dq)):
            dq[j] += weights[1, min(n_new, max_step), j]
        total = max(floor, dlaw(dq, imb[0]))
    for j in range(1, k):
        # after the first pass: context + 1, chunk end + 1
        if pp > 1:
            n = _decodes(r, dq, dtab, st, ri, 1 + j, True, max_step, False, False)
            t = staged_s(dq, weights, 2 if n > 0 else 0, n, n, n, imb, pp, micro, 0, max_step, hb, hbps, hlat, dlaw,
                         cfg[FILL])
        else:
            n = _decodes(r, dq, dtab, st, ri, 1 + j, True, max_step, j > 1)
            t = dlaw(dq, imb[n])
        total += max(floor, t)
    return total


@njit(cache=True, inline="always")
def spec_step_s(r, st, ri, rf, tab, cfg, fcfg, law, q, spec_cfg, dtab, dlaw, dq):
    """Wall seconds of the planned speculative step: verify + the draft's passes, through the engine's overheads
    (EngineOverheads.combine over the step's sequences and its unpadded tokens). With pp > 1 the verify step and a
    draft model's passes are pipelined steps (serving.kernel_pipeline, as StepModel.step_time times them for the
    Python loop: PhaseModel.pipeline's law keeps no state between steps, so it applies to each pass as to any
    step); an EAGLE / MTP head's passes are timed whole (StepModel.once_time has no pipeline)."""
    pad = ri[r, PAD]
    _ask_rows(r, st, ri, tab, cfg[SPEC] + 1)
    n_new = _chunks(r, q, tab, st, ri, cfg[SPEC], 0, pad)
    weights = tab[8]
    seqs = ri[r, NDEC] + ri[r, NCH]
    if cfg[PP] > 1:  # StepModel.step_time's pipeline branch: every sequence a chunk, none decoding (weights row 1)
        verify = pipelined_s(q, weights, 1, seqs, n_new + pad, 0, tab[9], cfg, fcfg, law)
    else:
        for j in range(len(q)):
            q[j] += weights[1, min(n_new + pad, cfg[MAX_STEP]), j]
        verify = law(q, tab[9][0])
    gpu = verify + _draft_s(r, st, ri, cfg, spec_cfg, dtab, dlaw, dq, tab, q)  # q: free after the verify's law
    host = fcfg[STEP_S] + fcfg[PER_SEQ_S] * seqs + fcfg[TOKEN_S] * n_new + rf[r, LOADS]
    if ri[r, NCH]:  # EngineOverheads.graph_s
        host += fcfg[GRAPH_S]
    if fcfg[SAMPLER_S] > 0.0 or fcfg[SAMPLER_ROW_S] > 0.0:
        gpu = gpu + (fcfg[SAMPLER_S] + fcfg[SAMPLER_ROW_S] * seqs)
    eager = fcfg[EAGER_S] > 0.0 and n_new > (cfg[EAGER_PREFILL] if ri[r, NCH] else cfg[EAGER_ABOVE])
    # Simulator.block_launch_s: the step's host seconds in an asynchronous loop
    timed = cfg[OVERLAP] != 0 and cfg[LAG] != 0
    rf[r, LAUNCH] = (host + fcfg[EAGER_S] if eager else host) if timed else 0.0
    rf[r, EAGER_L] = max(0.0, fcfg[EAGER_S] - rf[r, SLACK]) if timed and eager else 0.0
    if timed and eager:  # the host's chain from the lead into the step (scheduling.chained_ends: one step)
        return max(0.0 + gpu, -rf[r, SLACK] + rf[r, LAUNCH])
    if eager:
        return max(gpu, host + fcfg[EAGER_S]) if cfg[OVERLAP] else host + max(gpu, fcfg[EAGER_S])
    return max(gpu, host) if cfg[OVERLAP] else gpu + host


@njit(cache=True, inline="always")
def accept(r, st, ri, pcg, acceptance):
    """Simulator.accepted, applied as Scheduler.commit applies it (before the step's own token): each decoding
    sequence's accepted drafts are computed, generated and known tokens too. The draws: K a sequence from the
    PCG64 stream whose state and jumps `pcg` holds (serving.kernel_rng: Generator.random's doubles, in order)."""
    s_hi, s_lo = pcg[0, 0], pcg[0, 1]
    for j in range(ri[r, NDEC]):
        p = st[r, DEC, j]
        m, s_hi, s_lo = leading_below(s_hi, s_lo, pcg, acceptance)
        extra = min(m + 1, st[r, OUT, p] - st[r, GEN, p]) - 1
        st[r, COMP, p] += extra
        st[r, GEN, p] += extra
        st[r, KNOWN, p] += extra
    pcg[0, 0], pcg[0, 1] = s_hi, s_lo


@njit(cache=True, inline="always")
def plan_step(r, st, ri, rf, ends, q, tab, cfg, fcfg, law, spec):
    """A fleet replica's block just planned (serving.kernel_loop.start), under speculative decoding: its one verify
    step's end (Fleet._start's Simulator.block_ends, one step) evaluated at once (nothing left for kernel_block.extend,
    so the event order sees the block's end)."""
    if cfg[SPEC] and ri[r, ACTIVE]:
        _rng, _acceptance, spec_cfg, dtab, dlaw, dq = spec
        ends[r, 0] = spec_step_s(r, st, ri, rf, tab, cfg, fcfg, law, q, spec_cfg, dtab, dlaw, dq)
        ri[r, M] = 1
