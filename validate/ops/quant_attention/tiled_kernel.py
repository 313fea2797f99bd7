"""Fast quantized decode attention over the tiled layouts of common/tiling.py (`Tiling`); kernel.decode
calls tiled_launch.fast_decode for caches stored tiled and plain.py's kernel for the plain layout.

Middle loop (one program: one KV head of one sequence over `chunk` tokens): the rows of every dot are
ROWS = NSUB * GP, GP = next_pow2(GROUP) query heads of row block kb = 0..NSUB-1, and each row block attends
its own sub-tile of R tokens per step (the K and V of one token stay paired, so attention is unchanged;
the NSUB running softmax states of a head merge at the end). One step covers NSUB * R tokens:
  * codes come as int16 words whose two bytes hold 8/a codes each (common.tiling.code_positions); one
    inline-asm instruction group turns the pair of words a thread holds into fp16 for both bytes at once:
    and (field f kept in place) + prmt with 0x64 -> 1024 + 2^(a f) u exactly (3-bit: plane B's bit or-ed
    in at 2f + 2), no shifts, no int->float conversion, no shared-memory round trip of dequantized data
    (the dot reads the words in its operand layout; 16-bit words keep kWidth = 2, so no register moves);
  * groups along the dot's reduction (KIVI's K over tokens, per-token V groups over channels): per element
    x = a (v 2^(-af) - 1024 2^(-af)) + c in two f16x2 FMAs, (a, c) loaded as vectors along the reduction;
  * groups across it (InnerQ/SKVQ K over channels, InnerQ V over tokens): the dot runs on the raw 1024 +
    2^(af) u values and the scale, zero and 1024 offset apply to its [ROWS, *] output once per group
    (q pre-scaled by 2^(-af) for K; row weights for V).
The tail (sinks, leftover quantized tokens, fp16 windows) is dequantized element by element.
"""

from __future__ import annotations

import triton
import triton.language as tl

from validate.common.triton_helpers import softmax_step
from validate.ops.quant_attention.tiled_dequant import (
    CVC,
    CVT,
    TK,
    TV,
    affine16,
    deq_pair,
    op,
    plane_b,
    put,
    raw_pair,
    row_affine,
    slab,
)
from validate.ops.quant_attention.tiled_tail import tail_part

# VAR bits (issue 14, KIVI variants; 0: none, the other presets' kernel and KIVI's old one): QALL, the q.k dots of K
# grouped along tokens share one unmasked q per half (validate/notes/2026-11-23-kivi-kernel-variants.md;
# tiled_launch.LAUNCH sets it for KIVI)
QALL = tl.constexpr(1)


@triton.jit(do_not_specialize=["num_sinks", "win_k", "win_v", "num_mid", "tail_len", "num_parts"])
def fast_decode_kernel(
        q_ptr, kc, kc16, ks, kz, k_sinks, k_win, vc, vc16, vs, vz, v_sinks, v_win, m_ptr, l_ptr, acc_ptr,
        qk_scale, num_sinks, nq_k, nq_v, win_k, win_v, nq_mid, chunk, num_mid, tail_len, num_parts,
        TAIL: tl.constexpr, KV_HEADS: tl.constexpr, GROUP: tl.constexpr, GP: tl.constexpr, NSUB: tl.constexpr,
        D: tl.constexpr, R: tl.constexpr, K_KIND: tl.constexpr, K_A: tl.constexpr, K_B: tl.constexpr,
        K_G: tl.constexpr, K_MODE: tl.constexpr, V_KIND: tl.constexpr, V_A: tl.constexpr, V_B: tl.constexpr,
        V_G: tl.constexpr, V_MODE: tl.constexpr, K_OFF: tl.constexpr, V_OFF: tl.constexpr, EMU: tl.constexpr,
        VAR: tl.constexpr):
    pid = tl.program_id(0)
    bh = (tl.program_id(2) * KV_HEADS + tl.program_id(1)).to(tl.int64)  # sequence b, KV head h
    kc, kc16, ks, kz, vc, vc16, vs, vz = slab(bh, kc, kc16, ks, kz, vc, vc16, vs, vz, nq_k, nq_v, D, K_A, K_B, K_G,
                                              V_A, V_B, V_G)  # this (b, h)'s slab of every tensor
    k_sinks += bh * num_sinks * D
    v_sinks += bh * num_sinks * D
    k_win += bh * win_k * D
    v_win += bh * win_v * D
    if TAIL:
        tail_part(q_ptr, kc, ks, kz, k_sinks, k_win, vc, vs, vz, v_sinks, v_win, m_ptr, l_ptr, acc_ptr, bh, pid,
                  qk_scale, num_sinks, nq_k, nq_v, nq_mid, chunk, num_mid, tail_len, num_parts, GROUP, GP, D, R,
                  K_KIND, K_A, K_B, K_G, K_MODE, K_OFF, V_KIND, V_A, V_B, V_G, V_MODE, V_OFF, EMU)
    else:
        _middle_part(q_ptr, kc, kc16, ks, kz, vc, vc16, vs, vz, m_ptr, l_ptr, acc_ptr, bh, pid, qk_scale, nq_v,
                     nq_mid, chunk, num_parts, GROUP, GP, NSUB, D, R, K_KIND, K_A, K_B, K_G, K_MODE, K_OFF, V_KIND,
                     V_A, V_B, V_G, V_MODE, V_OFF, EMU, VAR)


@triton.jit
def _middle_part(q_ptr, kc, kc16, ks, kz, vc, vc16, vs, vz, m_ptr, l_ptr, acc_ptr, bh, pid, qk_scale, nq_v, nq_mid,
                 chunk, num_parts, GROUP: tl.constexpr, GP: tl.constexpr, NSUB: tl.constexpr, D: tl.constexpr,
                 R: tl.constexpr, K_KIND: tl.constexpr, K_A: tl.constexpr, K_B: tl.constexpr, K_G: tl.constexpr,
                 K_MODE: tl.constexpr, K_OFF: tl.constexpr, V_KIND: tl.constexpr, V_A: tl.constexpr,
                 V_B: tl.constexpr, V_G: tl.constexpr, V_MODE: tl.constexpr, V_OFF: tl.constexpr, EMU: tl.constexpr,
                 VAR: tl.constexpr):
    """Middle part `pid`: quantized tokens [pid chunk, min((pid + 1) chunk, nq_mid)) of (b, h), NSUB * R per step
    (row block kb attends tokens j0 + kb R + rr), its partials stored as part `pid`."""
    ROWS: tl.constexpr = NSUB * GP
    rows = tl.arange(0, ROWS)
    kb = rows // GP  # row block
    hh = rows % GP
    row_ok = hh < GROUP
    q_rows = q_ptr + (bh * GROUP + hh)[:, None] * D
    rr = tl.arange(0, R)
    if K_KIND == TK:
        qops = _q_halves(q_rows, row_ok, kb, 1 if QALL & VAR else NSUB, D, EMU, QALL & VAR)
        qsums = ()
        qoffs = ()
    else:
        qops, qsums, qoffs = _q_fields(q_rows, row_ok, kb, NSUB, D, R, K_A, K_G, EMU)
    # value accumulators: channel pieces of PW channels (their channels: _store_parts)
    if V_KIND == TV:
        NPIECE: tl.constexpr = 2
        PW: tl.constexpr = D // 2
    elif V_KIND == CVT:
        NPIECE: tl.constexpr = 8 // V_A
        PW: tl.constexpr = D * V_A // 8
    else:
        NPIECE: tl.constexpr = 2 * (8 // V_A)
        PW: tl.constexpr = D * V_A // 16
    accs = ()
    for _ in tl.static_range(NPIECE):
        accs = accs + (tl.zeros([ROWS, PW], dtype=tl.float32),)
    m_i = tl.full([ROWS], -1.0e30, dtype=tl.float32)
    l_i = tl.zeros([ROWS], dtype=tl.float32)
    lo = pid * chunk
    for j0 in range(lo, tl.minimum(lo + chunk, nq_mid), NSUB * R):
        if K_KIND == TK:
            s = _scores_along(qops, kc16, ks, kz, j0, rr, kb, ROWS, NSUB, D, R, K_A, K_G, K_MODE, K_OFF, EMU,
                              QALL & VAR)
        else:
            s = _scores_across(qops, qsums, qoffs, kc, kc16, ks, kz, j0, rr, kb, ROWS, NSUB, D, R, K_A, K_B, K_G,
                               K_MODE, K_OFF, EMU)  # [ROWS, R]
        p, alpha, m_i, l_i = softmax_step(s * qk_scale, m_i, l_i)
        scaled = ()
        for i in tl.static_range(NPIECE):
            scaled = scaled + (accs[i] * alpha[:, None],)
        accs = scaled
        p16 = op(p, EMU)
        if V_KIND == TV:
            accs = _values_tv(accs, p16, vc, vc16, vs, vz, j0, rr, kb, nq_v, ROWS, NSUB, D, R, V_A, V_B, V_G, V_MODE,
                              V_OFF, EMU)
        elif V_KIND == CVT:
            accs = _values_cvt(accs, p16, vc16, vs, vz, j0, rr, kb, NSUB, D, R, V_A, V_G, V_MODE, V_OFF, EMU)
        else:
            accs = _values_cvc(accs, p16, vc16, vs, vz, j0, rr, kb, NSUB, D, R, V_A, V_G, V_MODE, V_OFF, EMU)
    _store_parts(m_i, l_i, accs, m_ptr, l_ptr, acc_ptr, bh, pid, num_parts, GROUP, GP, NSUB, D, V_KIND, NPIECE, PW)


@triton.jit
def _q_halves(q_rows, row_ok, kb, NSUB: tl.constexpr, D: tl.constexpr, EMU: tl.constexpr, ALL: tl.constexpr):
    """K grouped along tokens: per row block qb and half of the channels, row block qb's copy of q [ROWS, D/2]
    (zero elsewhere), loop-invariant operands of the q.k dots; ALL (variant QALL, NSUB 1): every row's q."""
    QH: tl.constexpr = D // 2
    qcol = tl.arange(0, QH)
    qops = ()
    for qb in tl.static_range(NSUB):
        for qsec in tl.static_range(2):
            ok = row_ok if ALL else row_ok & (kb == qb)
            x = tl.load(q_rows + qsec * QH + qcol[None, :], mask=ok[:, None], other=0.0)
            qops = qops + (op(x, EMU),)
    return qops


@triton.jit
def _q_fields(q_rows, row_ok, kb, NSUB: tl.constexpr, D: tl.constexpr, R: tl.constexpr, K_A: tl.constexpr,
              K_G: tl.constexpr, EMU: tl.constexpr):
    """K grouped along channels: per field f, half and row block, q's channels of that sub-tile scaled by 2^(-a f)
    [ROWS, W] (zero outside the row block); per channel group, the row sums of q and of 1024 x the scaled q."""
    QW: tl.constexpr = D * K_A // 16
    qcol = tl.arange(0, QW)
    qops = ()
    qsums = ()
    qoffs = ()
    for _ in tl.static_range(D // K_G):
        qsums = qsums + (0.0,)
        qoffs = qoffs + (0.0,)
    ones = op(tl.full([QW, R], 1.0, tl.float32), EMU)
    for qf in tl.static_range(8 // K_A):
        for qsec in tl.static_range(2):
            x = tl.load(q_rows + qf * 2 * QW + qsec * QW + qcol[None, :], mask=row_ok[:, None],
                        other=0.0).to(tl.float32)
            xs = op(x * (1.0 / (1 << (K_A * qf))), EMU)  # exact: a power of two
            # row sums through a dot: they land in the layout of the loop's dot outputs
            qsums = put(qsums, (qf * 2 * QW + qsec * QW) // K_G, qsums[(qf * 2 * QW + qsec * QW) // K_G]
                        + tl.max(tl.dot(op(x, EMU), ones), axis=1))
            qoffs = put(qoffs, (qf * 2 * QW + qsec * QW) // K_G, qoffs[(qf * 2 * QW + qsec * QW) // K_G]
                        + 1024.0 * tl.max(tl.dot(xs, ones), axis=1))
            for qb in tl.static_range(NSUB):
                qops = qops + (tl.where((kb == qb)[:, None], xs, 0.0),)
    return qops, qsums, qoffs


@triton.jit
def _scores_along(qops, kc16, ks, kz, j0, rr, kb, ROWS: tl.constexpr, NSUB: tl.constexpr, D: tl.constexpr,
                  R: tl.constexpr, K_A: tl.constexpr, K_G: tl.constexpr, K_MODE: tl.constexpr, K_OFF: tl.constexpr,
                  EMU: tl.constexpr, ALL: tl.constexpr):
    """Scores [ROWS, R] of a step, K grouped along tokens ("TK"): each word dequantized per element (deq_pair).
    ALL (variant QALL): one unmasked q per half for every sub-tile, the row block's rows kept by a select (the
    A operands of the 2 NSUB dots are 2 tiles, not 2 NSUB)."""
    FK: tl.constexpr = 8 // K_A
    H2: tl.constexpr = D // 2
    col = tl.arange(0, H2)
    s = tl.zeros([ROWS, R], dtype=tl.float32)
    for c in tl.static_range(NSUB // FK):
        cid = j0 // (FK * R) + c
        w = tl.load(kc16 + cid * (R * H2) + rr[:, None] * H2 + col[None, :])  # [R, D/2]
        for f in tl.static_range(FK):
            t = (j0 + (c * FK + f) * R) // K_G
            a0, c0 = affine16(ks, kz, t * D + col, K_MODE, K_OFF, EMU)
            a1, c1 = affine16(ks, kz, t * D + H2 + col, K_MODE, K_OFF, EMU)
            x0, x1 = deq_pair(w, a0[None, :], c0[None, :], a1[None, :], c1[None, :], K_A, f, EMU)
            if ALL:
                d = tl.dot(qops[0], tl.trans(op(x0, EMU)))
                d = tl.dot(qops[1], tl.trans(op(x1, EMU)), d)
                s = tl.where((kb == c * FK + f)[:, None], d, s)
            else:
                s = tl.dot(qops[2 * (c * FK + f)], tl.trans(op(x0, EMU)), s)  # (constexpr index)
                s = tl.dot(qops[2 * (c * FK + f) + 1], tl.trans(op(x1, EMU)), s)
    return s


@triton.jit
def _scores_across(qops, qsums, qoffs, kc, kc16, ks, kz, j0, rr, kb, ROWS: tl.constexpr, NSUB: tl.constexpr,
                   D: tl.constexpr, R: tl.constexpr, K_A: tl.constexpr, K_B: tl.constexpr, K_G: tl.constexpr,
                   K_MODE: tl.constexpr, K_OFF: tl.constexpr, EMU: tl.constexpr):
    """Scores [ROWS, R] of a step, K grouped along channels ("CK"): dots on the raw words per channel group,
    then scale, zero and the 1024 offset once per group (row_affine)."""
    W: tl.constexpr = D * K_A // 16
    NG: tl.constexpr = D // K_G
    FK: tl.constexpr = 8 // K_A
    col = tl.arange(0, W)
    ds = ()
    for _ in tl.static_range(NG):
        ds = ds + (tl.zeros([ROWS, R], dtype=tl.float32),)
    for k in tl.static_range(NSUB):
        tok = j0 + k * R + rr
        row16 = tok[:, None] * (D * (K_A + K_B) // 16)
        w = tl.load(kc16 + row16 + col[None, :])  # [R, W]
        hb = w
        if K_B:
            hb = plane_b(kc, kc16, tok[:, None] * (D * (K_A + K_B) // 8) + D * K_A // 8,
                         row16 + D * K_A // 16, R, W, EMU)
        for f in tl.static_range(FK):
            x0, x1 = raw_pair(w, hb, K_A, K_B, f, EMU)
            ds = put(ds, (f * 2 * W) // K_G, tl.dot(qops[(f * 2) * NSUB + k], tl.trans(op(x0, EMU)),
                                                    ds[(f * 2 * W) // K_G]))
            ds = put(ds, (f * 2 * W + W) // K_G,  # (indices inline: constexpr)
                     tl.dot(qops[(f * 2 + 1) * NSUB + k], tl.trans(op(x1, EMU)), ds[(f * 2 * W + W) // K_G]))
    KP: tl.constexpr = 16 if NSUB <= 16 else NSUB
    kk = tl.arange(0, KP)
    moff = (j0 // R + kk[:, None]) * (R * NG) + rr[None, :]  # chunk-transposed [KP, R] per group
    s = tl.zeros([ROWS, R], dtype=tl.float32)
    for gi in tl.static_range(NG):
        a, c = row_affine(ks, kz, moff + gi * R, (kk < NSUB)[:, None], kb, K_MODE, K_OFF, KP, EMU)
        s += a * (ds[gi] - qoffs[gi][:, None]) + c * qsums[gi][:, None]
    return s


@triton.jit
def _values_tv(accs, p16, vc, vc16, vs, vz, j0, rr, kb, nq_v, ROWS: tl.constexpr, NSUB: tl.constexpr,
               D: tl.constexpr, R: tl.constexpr, V_A: tl.constexpr, V_B: tl.constexpr, V_G: tl.constexpr,
               V_MODE: tl.constexpr, V_OFF: tl.constexpr, EMU: tl.constexpr):
    """accs + p.v of a step, V grouped along tokens ("TV"): dots on the raw words, then per row block its
    group's scale, zero, 1024 offset and 2^(-a f) (two pieces of D/2 channels)."""
    FV: tl.constexpr = 8 // V_A
    H2V: tl.constexpr = D // 2
    colv = tl.arange(0, H2V)
    da0 = tl.zeros([ROWS, H2V], dtype=tl.float32)
    da1 = tl.zeros([ROWS, H2V], dtype=tl.float32)
    for c in tl.static_range(NSUB // FV):
        cid = j0 // (FV * R) + c
        w = tl.load(vc16 + cid * (R * H2V) + colv[:, None] * R + rr[None, :])  # [D/2, R]
        hb = w
        if V_B:
            hb = plane_b(vc, vc16, nq_v * D * V_A // 8 + cid * (R * H2V) + colv[:, None] * R,
                         nq_v * D * V_A // 16 + (cid * (R * H2V) + colv[:, None] * R) // 2, H2V, R, EMU)
        for f in tl.static_range(FV):
            pk = tl.where((kb == c * FV + f)[:, None], p16, 0.0)
            x0, x1 = raw_pair(w, hb, V_A, V_B, f, EMU)
            da0 = tl.dot(pk, tl.trans(op(x0, EMU)), da0)
            da1 = tl.dot(pk, tl.trans(op(x1, EMU)), da1)
    psum = tl.sum(p16.to(tl.float32), axis=1)
    wv = tl.exp2(-(V_A * (kb % FV)).to(tl.float32))  # 2^(-a f) of the row block's field
    VP: tl.constexpr = 16 if NSUB <= 16 else NSUB
    kv = tl.arange(0, VP)
    t = ((j0 + kv * R) // V_G)[:, None] * D + colv[None, :]  # [KP, D/2]
    a, c = row_affine(vs, vz, t, (kv < NSUB)[:, None], kb, V_MODE, V_OFF, VP, EMU)
    accs = put(accs, 0, accs[0] + a * ((da0 - 1024.0 * psum[:, None]) * wv[:, None]) + c * psum[:, None])
    a, c = row_affine(vs, vz, t + H2V, (kv < NSUB)[:, None], kb, V_MODE, V_OFF, VP, EMU)
    accs = put(accs, 1, accs[1] + a * ((da1 - 1024.0 * psum[:, None]) * wv[:, None]) + c * psum[:, None])
    return accs


@triton.jit
def _values_cvt(accs, p16, vc16, vs, vz, j0, rr, kb, NSUB: tl.constexpr, D: tl.constexpr, R: tl.constexpr,
                V_A: tl.constexpr, V_G: tl.constexpr, V_MODE: tl.constexpr, V_OFF: tl.constexpr, EMU: tl.constexpr):
    """accs + p.v of a step, V grouped along channels with a word's bytes two token sub-tiles ("CVT"): per element
    dequantization (deq_pair), piece f = field f's PER channels."""
    FV: tl.constexpr = 8 // V_A
    PER: tl.constexpr = D * V_A // 8
    NGV: tl.constexpr = D // V_G
    colv = tl.arange(0, PER)
    for c in tl.static_range(NSUB // 2):
        cid = j0 // (2 * R) + c
        w = tl.load(vc16 + cid * (R * PER) + colv[:, None] * R + rr[None, :])  # [PER, R]
        p0 = tl.where((kb == 2 * c)[:, None], p16, 0.0)
        p1 = tl.where((kb == 2 * c + 1)[:, None], p16, 0.0)
        for f in tl.static_range(FV):
            meta = cid * (2 * R * NGV) + ((f * PER) // V_G) * (2 * R) + rr
            a0, c0 = affine16(vs, vz, meta, V_MODE, V_OFF, EMU)
            a1, c1 = affine16(vs, vz, meta + R, V_MODE, V_OFF, EMU)
            x0, x1 = deq_pair(w, a0[None, :], c0[None, :], a1[None, :], c1[None, :], V_A, f, EMU)
            acc = tl.dot(p0, tl.trans(op(x0, EMU)), accs[f])
            accs = put(accs, f, tl.dot(p1, tl.trans(op(x1, EMU)), acc))
    return accs


@triton.jit
def _values_cvc(accs, p16, vc16, vs, vz, j0, rr, kb, NSUB: tl.constexpr, D: tl.constexpr, R: tl.constexpr,
                V_A: tl.constexpr, V_G: tl.constexpr, V_MODE: tl.constexpr, V_OFF: tl.constexpr, EMU: tl.constexpr):
    """accs + p.v of a step, V grouped along channels with a word's bytes two channel sub-tiles ("CVC"): per
    element dequantization, piece 2f + byte = W2 channels."""
    FV: tl.constexpr = 8 // V_A
    W2: tl.constexpr = D * V_A // 16
    NGV: tl.constexpr = D // V_G
    colv = tl.arange(0, W2)
    for k in tl.static_range(NSUB):
        cid = j0 // R + k
        w = tl.load(vc16 + cid * (R * W2) + colv[:, None] * R + rr[None, :])  # [W, R]
        pk = tl.where((kb == k)[:, None], p16, 0.0)
        for f in tl.static_range(FV):
            meta = cid * (R * NGV) + rr
            a0, c0 = affine16(vs, vz, meta + ((f * 2 * W2) // V_G) * R, V_MODE, V_OFF, EMU)
            a1, c1 = affine16(vs, vz, meta + ((f * 2 * W2 + W2) // V_G) * R, V_MODE, V_OFF, EMU)
            x0, x1 = deq_pair(w, a0[None, :], c0[None, :], a1[None, :], c1[None, :], V_A, f, EMU)
            accs = put(accs, 2 * f, tl.dot(pk, tl.trans(op(x0, EMU)), accs[2 * f]))
            accs = put(accs, 2 * f + 1, tl.dot(pk, tl.trans(op(x1, EMU)), accs[2 * f + 1]))
    return accs


@triton.jit
def _store_parts(m_i, l_i, accs, m_ptr, l_ptr, acc_ptr, bh, pid, num_parts, GROUP: tl.constexpr, GP: tl.constexpr,
                 NSUB: tl.constexpr, D: tl.constexpr, V_KIND: tl.constexpr, NPIECE: tl.constexpr,
                 PW: tl.constexpr):
    """Merge the NSUB softmax states of each head and store the part's m, l [GP] and acc [GP, D]."""
    mr = tl.reshape(m_i, [NSUB, GP])
    mx = tl.max(mr, axis=0)
    sc = tl.exp2(mr - mx[None, :])  # [NSUB, GP]
    heads = tl.arange(0, GP)
    part = (bh * GROUP + heads) * num_parts + pid
    h_ok = heads < GROUP
    tl.store(m_ptr + part, mx, mask=h_ok)
    tl.store(l_ptr + part, tl.sum(tl.reshape(l_i, [NSUB, GP]) * sc, axis=0), mask=h_ok)
    for i in tl.static_range(NPIECE):
        c0 = i * PW  # TV, CVT: piece i = channels i*PW.., CVC: piece 2f + second = f*2PW + second*PW
        if V_KIND == CVC:
            c0 = (i // 2) * 2 * PW + (i % 2) * PW
        x = tl.sum(tl.reshape(accs[i], [NSUB, GP, PW]) * sc[:, :, None], axis=0)  # [GP, PW]
        tl.store(acc_ptr + part[:, None] * D + c0 + tl.arange(0, PW)[None, :], x, mask=h_ok[:, None])
