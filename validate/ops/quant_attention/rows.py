"""Quantized decode attention with the tokens as the rows of the dots ("rows" kernel; issue 14, step 1).

Over the same tiled layouts as tiled_kernel.py (common/tiling.py: same tensors, same bytes), one program = the
GROUP query heads of one KV head of one sequence over `chunk` quantized tokens, STEP = NSUB * R tokens a step.
The dots are transposed against tiled_kernel.py's: scores s^T [R tokens, HP heads] = K [R, W] . q^T [W, HP],
so the warps split the tokens (the M of the MMA) and each warp owns whole rows of K and its own share of the
dequantization; q^T (HP = 16 columns, zero past GROUP) is a loop-invariant B operand per channel piece,
loaded once before the loop; there is no row stacking (no NSUB softmax states to merge) and no one-hot
broadcasting of metadata. Every tile is dequantized element by element in registers from the int16 code words
(tiled_dequant.raw_pair: and + prmt -> 1024 + 2^(a f) u; 3-bit codes or-in plane B) and two f16x2 FMAs
(affine_pair: x = (v 2^(-af) - 1024 2^(-af)) a + c) with (a, c) read once per group and tile: a [1, W] row
(groups along tokens: KIVI's K, InnerQ's V) or an [R, 1] / [1, R] column (groups along channels).
The softmax max is one reduction over the step's tokens; the running sum stays an [R, HP] tile reduced at the
end. Values: acc [HP, PW] += p^T [HP, R] . V [R, PW] per channel piece (pieces as tiled_kernel._store_parts).
The tail (sinks, leftover quantized tokens, windows) is tiled_kernel's TAIL part; the merge reduce_kernel.
"""

from __future__ import annotations

import triton
import triton.language as tl

from validate.ops.quant_attention.tiled_dequant import (
    CVC,
    CVT,
    TK,
    TV,
    affine16,
    field_consts,
    op,
    plane_b,
    put,
    raw_pair,
    slab,
)


@triton.jit
def affine_pair(v, a, c, A: tl.constexpr, F: tl.constexpr, EMU: tl.constexpr):
    """Raw values v = 1024 + 2^(A F) u (raw_pair) -> a u + c in fp16 (two f16x2 FMAs per pair)."""
    if EMU:
        u = (v - 1024.0) * (1.0 / (1 << (A * F)))
        return (u * a.to(tl.float32) + c.to(tl.float32)).to(tl.float16).to(tl.float32)
    _, s, n = field_consts(v.shape, A, F)
    return tl.inline_asm_elementwise(
        "{ .reg .b32 t; fma.rn.f16x2 t, $1, $2, $4; fma.rn.f16x2 $0, t, $6, $7; }",
        "=r,r,r,r,r,r,r,r", [v, s, n, a, c], dtype=tl.float16, is_pure=True, pack=2)


@triton.jit
def _q_piece(q_ptr, bh, c0, W: tl.constexpr, GROUP: tl.constexpr, HP: tl.constexpr, D: tl.constexpr,
             EMU: tl.constexpr):
    """q^T of channels c0 .. c0 + W [W, HP] (columns past GROUP zero): a loop-invariant B operand."""
    heads = tl.arange(0, HP)
    ch = tl.arange(0, W)
    ptr = q_ptr + (bh * GROUP + heads.to(tl.int64))[None, :] * D + (c0 + ch)[:, None]
    return op(tl.load(ptr, mask=(heads < GROUP)[None, :], other=0.0), EMU)


@triton.jit
def rows_decode_kernel(
        q_ptr, kc, kc16, ks, kz, vc, vc16, vs, vz, m_ptr, l_ptr, acc_ptr, qk_scale, nq_k, nq_v, nq_mid, chunk,
        num_parts, KV_HEADS: tl.constexpr, GROUP: tl.constexpr, HP: tl.constexpr, NSUB: tl.constexpr,
        D: tl.constexpr, R: tl.constexpr, K_KIND: tl.constexpr, K_A: tl.constexpr, K_B: tl.constexpr,
        K_G: tl.constexpr, K_MODE: tl.constexpr, K_OFF: tl.constexpr, V_KIND: tl.constexpr, V_A: tl.constexpr,
        V_B: tl.constexpr, V_G: tl.constexpr, V_MODE: tl.constexpr, V_OFF: tl.constexpr, EMU: tl.constexpr):
    pid = tl.program_id(0)
    bh = (tl.program_id(2) * KV_HEADS + tl.program_id(1)).to(tl.int64)  # sequence b, KV head h
    kc, kc16, ks, kz, vc, vc16, vs, vz = slab(bh, kc, kc16, ks, kz, vc, vc16, vs, vz, nq_k, nq_v, D, K_A, K_B, K_G,
                                              V_A, V_B, V_G)  # this (b, h)'s slab of every tensor
    # q^T pieces: TK two halves of D/2 channels; CK per field f and byte b the W channels f 2W + b W ..
    if K_KIND == TK:
        QW: tl.constexpr = D // 2
        NQ: tl.constexpr = 2
    else:
        QW: tl.constexpr = D * K_A // 16
        NQ: tl.constexpr = 2 * (8 // K_A)
    qs = ()
    for i in tl.static_range(NQ):
        qs = qs + (_q_piece(q_ptr, bh, i * QW, QW, GROUP, HP, D, EMU),)
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
        accs = accs + (tl.zeros([HP, PW], dtype=tl.float32),)
    m_i = tl.full([HP], -1.0e30, dtype=tl.float32)
    l_t = tl.zeros([R, HP], dtype=tl.float32)  # running sums per token row, reduced once at the end
    rr = tl.arange(0, R)
    lo = pid.to(tl.int64) * chunk  # (int64 offsets inside the slab too)
    for j0 in range(lo, tl.minimum(lo + chunk, nq_mid), NSUB * R):
        if K_KIND == TK:
            ss = _scores_tk(qs, kc16, ks, kz, j0, rr, NSUB, D, R, K_A, K_G, K_MODE, K_OFF, EMU)
        else:
            ss = _scores_ck(qs, kc, kc16, ks, kz, j0, rr, HP, NSUB, D, R, K_A, K_B, K_G, K_MODE, K_OFF, EMU)
        mx = tl.max(ss[0], axis=0)
        for k in tl.static_range(1, NSUB):
            mx = tl.maximum(mx, tl.max(ss[k], axis=0))
        m_new = tl.maximum(m_i, mx * qk_scale)
        alpha = tl.exp2(m_i - m_new)
        m_i = m_new
        ps = ()
        l_t = l_t * alpha[None, :]
        for k in tl.static_range(NSUB):
            p = tl.exp2(ss[k] * qk_scale - m_new[None, :])  # [R, HP]
            l_t += p
            ps = ps + (op(tl.trans(p), EMU),)  # [HP, R]: the A operand of p.v
        scaled = ()
        for i in tl.static_range(NPIECE):
            scaled = scaled + (accs[i] * alpha[:, None],)
        accs = _values(scaled, ps, vc, vc16, vs, vz, j0, rr, nq_v, NSUB, D, R, V_KIND, V_A, V_B, V_G, V_MODE, V_OFF,
                       EMU)
    heads = tl.arange(0, HP)
    h_ok = heads < GROUP
    part = (bh * GROUP + heads) * num_parts + pid
    tl.store(m_ptr + part, m_i, mask=h_ok)
    tl.store(l_ptr + part, tl.sum(l_t, axis=0), mask=h_ok)
    for i in tl.static_range(NPIECE):
        c0 = i * PW  # TV, CVT: piece i = channels i PW ..; CVC: piece 2f + b = channels f 2PW + b PW ..
        if V_KIND == CVC:
            c0 = (i // 2) * 2 * PW + (i % 2) * PW
        tl.store(acc_ptr + part[:, None] * D + c0 + tl.arange(0, PW)[None, :], accs[i], mask=h_ok[:, None])


@triton.jit
def _scores_tk(qs, kc16, ks, kz, j0, rr, NSUB: tl.constexpr, D: tl.constexpr, R: tl.constexpr, K_A: tl.constexpr,
               K_G: tl.constexpr, K_MODE: tl.constexpr, K_OFF: tl.constexpr, EMU: tl.constexpr):
    """Scores s^T [R, HP] of the NSUB sub-tiles of a step, K grouped along tokens ("TK", chunks of FK sub-tiles,
    words [R, D/2] whose bytes are channels c and c + D/2): (a, c) one [1, D/2] row per sub-tile and half."""
    FK: tl.constexpr = 8 // K_A
    H2: tl.constexpr = D // 2
    col = tl.arange(0, H2)
    ss = ()
    for c in tl.static_range(NSUB // FK):
        cid = j0 // (FK * R) + c
        w = tl.load(kc16 + cid * (R * H2) + rr[:, None] * H2 + col[None, :])  # [R, D/2]
        for f in tl.static_range(FK):
            t = (j0 + (c * FK + f) * R) // K_G
            a0, c0 = affine16(ks, kz, t * D + col, K_MODE, K_OFF, EMU)
            a1, c1 = affine16(ks, kz, t * D + H2 + col, K_MODE, K_OFF, EMU)
            v0, v1 = raw_pair(w, w, K_A, 0, f, EMU)
            x0 = affine_pair(v0, a0[None, :], c0[None, :], K_A, f, EMU)
            x1 = affine_pair(v1, a1[None, :], c1[None, :], K_A, f, EMU)
            s = tl.dot(op(x0, EMU), qs[0])
            ss = ss + (tl.dot(op(x1, EMU), qs[1], s),)
    return ss


@triton.jit
def _scores_ck(qs, kc, kc16, ks, kz, j0, rr, HP: tl.constexpr, NSUB: tl.constexpr, D: tl.constexpr,
               R: tl.constexpr, K_A: tl.constexpr, K_B: tl.constexpr, K_G: tl.constexpr, K_MODE: tl.constexpr,
               K_OFF: tl.constexpr, EMU: tl.constexpr):
    """Scores s^T [R, HP] per sub-tile, K grouped along channels ("CK", token rows of words whose bytes are
    channels f 2W + i and f 2W + W + i; per-token metadata chunk-transposed): (a, c) one [R, 1] column per
    sub-tile and channel piece."""
    W: tl.constexpr = D * K_A // 16
    NG: tl.constexpr = D // K_G
    FK: tl.constexpr = 8 // K_A
    col = tl.arange(0, W)
    ss = ()
    for k in tl.static_range(NSUB):
        tok = j0 + k * R + rr
        row16 = tok[:, None] * (D * (K_A + K_B) // 16)
        w = tl.load(kc16 + row16 + col[None, :])  # [R, W]
        hb = w
        if K_B:
            hb = plane_b(kc, kc16, tok[:, None] * (D * (K_A + K_B) // 8) + D * K_A // 8,
                         row16 + D * K_A // 16, R, W, EMU)
        moff = (j0 // R + k) * (R * NG) + rr  # [R] run of one group's metadata
        s = tl.zeros([R, HP], dtype=tl.float32)
        for f in tl.static_range(FK):
            v0, v1 = raw_pair(w, hb, K_A, K_B, f, EMU)
            a0, c0 = affine16(ks, kz, moff + ((f * 2 * W) // K_G) * R, K_MODE, K_OFF, EMU)
            a1, c1 = affine16(ks, kz, moff + ((f * 2 * W + W) // K_G) * R, K_MODE, K_OFF, EMU)
            s = tl.dot(op(affine_pair(v0, a0[:, None], c0[:, None], K_A, f, EMU), EMU), qs[2 * f], s)
            s = tl.dot(op(affine_pair(v1, a1[:, None], c1[:, None], K_A, f, EMU), EMU), qs[2 * f + 1], s)
        ss = ss + (s,)
    return ss


@triton.jit
def _values(accs, ps, vc, vc16, vs, vz, j0, rr, nq_v, NSUB: tl.constexpr, D: tl.constexpr, R: tl.constexpr,
            V_KIND: tl.constexpr, V_A: tl.constexpr, V_B: tl.constexpr, V_G: tl.constexpr, V_MODE: tl.constexpr,
            V_OFF: tl.constexpr, EMU: tl.constexpr):
    """accs + p^T . V of a step, per V kind: TV words [D/2, R] per field (token sub-tile), (a, c) a [D/2, 1]
    column; CVT words [PER, R] of two token sub-tiles, field f = piece f; CVC words [W2, R] of one sub-tile,
    bytes and fields = pieces 2f + b; per-token (a, c) [1, R] rows."""
    FV: tl.constexpr = 8 // V_A
    if V_KIND == TV:
        H2: tl.constexpr = D // 2
        colv = tl.arange(0, H2)
        for c in tl.static_range(NSUB // FV):
            cid = j0 // (FV * R) + c
            base = cid * (R * H2) + colv[:, None] * R
            w = tl.load(vc16 + base + rr[None, :])  # [D/2, R]
            hb = w
            if V_B:
                hb = plane_b(vc, vc16, nq_v * D * V_A // 8 + base, nq_v * D * V_A // 16 + base // 2, H2, R, EMU)
            for f in tl.static_range(FV):
                t = (j0 + (c * FV + f) * R) // V_G
                a0, c0 = affine16(vs, vz, t * D + colv, V_MODE, V_OFF, EMU)
                a1, c1 = affine16(vs, vz, t * D + H2 + colv, V_MODE, V_OFF, EMU)
                v0, v1 = raw_pair(w, hb, V_A, V_B, f, EMU)
                x0 = op(affine_pair(v0, a0[:, None], c0[:, None], V_A, f, EMU), EMU)
                x1 = op(affine_pair(v1, a1[:, None], c1[:, None], V_A, f, EMU), EMU)
                accs = put(accs, 0, tl.dot(ps[c * FV + f], tl.trans(x0), accs[0]))
                accs = put(accs, 1, tl.dot(ps[c * FV + f], tl.trans(x1), accs[1]))
    elif V_KIND == CVT:
        PER: tl.constexpr = D * V_A // 8
        NGV: tl.constexpr = D // V_G
        colv = tl.arange(0, PER)
        for c in tl.static_range(NSUB // 2):
            cid = j0 // (2 * R) + c
            w = tl.load(vc16 + cid * (R * PER) + colv[:, None] * R + rr[None, :])  # [PER, R]
            for f in tl.static_range(FV):
                meta = cid * (2 * R * NGV) + ((f * PER) // V_G) * (2 * R) + rr
                a0, c0 = affine16(vs, vz, meta, V_MODE, V_OFF, EMU)
                a1, c1 = affine16(vs, vz, meta + R, V_MODE, V_OFF, EMU)
                v0, v1 = raw_pair(w, w, V_A, 0, f, EMU)
                x0 = op(affine_pair(v0, a0[None, :], c0[None, :], V_A, f, EMU), EMU)
                x1 = op(affine_pair(v1, a1[None, :], c1[None, :], V_A, f, EMU), EMU)
                acc = tl.dot(ps[2 * c], tl.trans(x0), accs[f])
                accs = put(accs, f, tl.dot(ps[2 * c + 1], tl.trans(x1), acc))
    else:
        W2: tl.constexpr = D * V_A // 16
        NGV: tl.constexpr = D // V_G
        colv = tl.arange(0, W2)
        for k in tl.static_range(NSUB):
            cid = j0 // R + k
            w = tl.load(vc16 + cid * (R * W2) + colv[:, None] * R + rr[None, :])  # [W2, R]
            meta = cid * (R * NGV) + rr
            for f in tl.static_range(FV):
                a0, c0 = affine16(vs, vz, meta + ((f * 2 * W2) // V_G) * R, V_MODE, V_OFF, EMU)
                a1, c1 = affine16(vs, vz, meta + ((f * 2 * W2 + W2) // V_G) * R, V_MODE, V_OFF, EMU)
                v0, v1 = raw_pair(w, w, V_A, 0, f, EMU)
                x0 = op(affine_pair(v0, a0[None, :], c0[None, :], V_A, f, EMU), EMU)
                x1 = op(affine_pair(v1, a1[None, :], c1[None, :], V_A, f, EMU), EMU)
                accs = put(accs, 2 * f, tl.dot(ps[k], tl.trans(x0), accs[2 * f]))
                accs = put(accs, 2 * f + 1, tl.dot(ps[k], tl.trans(x1), accs[2 * f + 1]))
    return accs
