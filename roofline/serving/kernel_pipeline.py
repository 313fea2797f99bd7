"""A pipelined step's GPU seconds in the compiled record loop (numba njit, cache=True): serving.pipeline's law, the
same arithmetic as ClosedForm.pipelined, on the loop's flat arrays (serving.kernel_block.extend calls it when
cfg[PP] > 1; serving.kernel_spec for a verify step and a draft model's passes)."""

import math

import numpy as np
from numba import njit

from roofline.serving.kernel_layout import FILL, HANDOFF_BPS, HANDOFF_BYTES, HANDOFF_LAT_S, MAX_STEP, MICRO, PASS, PP


@njit(cache=True, inline="always")
def pipelined_s(q, weights, wrow, seqs, tokens, decodes, imb, cfg, fcfg, law):
    """GPU seconds of a step of `seqs` sequences (`decodes` decoding) over `tokens` tokens (pad included) on cfg[PP]
    stages with up to cfg[MICRO] micro-batches, or in the engine's passes of cfg[PASS] tokens (PhaseModel.pipeline):
    staged_s with the target's largest step and its stages' handoff (fcfg)."""
    return staged_s(q, weights, wrow, seqs, tokens, decodes, imb, cfg[PP], cfg[MICRO], cfg[PASS], cfg[MAX_STEP],
                    fcfg[HANDOFF_BYTES], fcfg[HANDOFF_BPS], fcfg[HANDOFF_LAT_S], law, cfg[FILL])


@njit(cache=True, inline="always")
def staged_s(q, weights, wrow, seqs, tokens, decodes, imb, pp, micro, pass_tokens, max_step, handoff_bytes,
             handoff_bps, handoff_lat_s, law, fill):
    """PhaseModel.pipeline's step on `pp` stages with up to `micro` micro-batches (pp 1: one), at least
    ceil(tokens / pass_tokens) where the engine's passes split a step (PhaseModel.micro_count), of a model whose law,
    weights table, imbalance and largest step these are (the target's, or a draft model's: serving.kernel_spec): `q`,
    the step's non-weight work over the law's live entries, becomes the micro-batch's (scaled by b / seqs, plus
    weights row `wrow` at rint(tokens b / seqs) tokens, capped at max_step; overwritten), timed by `law` at the
    micro-batch's decode imbalance, then slots x (time / pp + handoff(b)), handoff(b) = b x handoff_bytes /
    handoff_bps + handoff_lat_s (serving.pipeline.handoff_terms); slots m + pp - 1 where the engine fills and drains
    its pipeline every step (`fill`), else max(m, pp) (engines.timing.pipeline_slots)."""
    m = min(micro, seqs) if pp > 1 else 1
    if pass_tokens > 0:
        m = max(m, math.ceil(tokens / pass_tokens))
    b = seqs / m
    scale = b / seqs
    tok = min(int(np.rint(tokens * b / seqs)), max_step)
    for j in range(len(q)):
        q[j] = q[j] * scale + weights[wrow, tok, j]
    whole = law(q, imb[math.ceil(decodes * b / seqs)])
    slots = m + pp - 1 if fill else max(m, pp)
    return slots * (whole / pp + (b * handoff_bytes / handoff_bps + handoff_lat_s))
