"""The fast kernel's tail (sinks, leftover quantized tokens, fp16 windows): values read element by element at
any context position of a tiled layout (common/tiling.py's code_positions and meta_positions), and the tail
part's attention."""

from __future__ import annotations

import triton
import triton.language as tl

from validate.common.quant_triton import affine_masked
from validate.common.triton_helpers import softmax_step
from validate.ops.quant_attention.tiled_dequant import CK, CVT, TK, TV, op

TAIL_TOKENS = tl.constexpr(64)  # tokens per tail program (and per tail step)


@triton.jit
def code_at(codes, j, ch, nq, ok, KIND: tl.constexpr, A: tl.constexpr, B: tl.constexpr, D: tl.constexpr,
             R: tl.constexpr):
    """Code u of quantized token j, channel ch (common.tiling.code_positions)."""
    FA: tl.constexpr = 8 // A
    if KIND == TK or KIND == TV:
        H2: tl.constexpr = D // 2
        full = nq // (FA * R) * (FA * R)
        cid = j // (FA * R)
        i = j % (FA * R)
        f = i // R
        r = i % R
        second = ch // H2
        col = ch % H2
        if KIND == TK:
            word = cid * (R * H2) + r * H2 + col
        else:
            word = cid * (R * H2) + col * R + r
        tail = j - full
        byte = tl.where(j < full, 2 * word + second, full * D // FA + tail // FA * D + ch)
        shift = tl.where(j < full, f * A, tail % FA * A)
        u = (tl.load(codes + byte, mask=ok, other=0).to(tl.int32) >> shift) & ((1 << A) - 1)
        if B:
            base = nq * D * A // 8
            byte = tl.where(j < full, base + word, base + full * H2 // FA + tail // 8 * D + ch)
            shift = tl.where(j < full, 2 * f + second, tail % 8)
            u = u | (((tl.load(codes + byte, mask=ok, other=0).to(tl.int32) >> shift) & 1) << A)
        return u
    if KIND == CK:
        W: tl.constexpr = D * A // 16
        f = ch // (2 * W)
        second = ch % (2 * W) // W
        col = ch % W
        row = j.to(tl.int64) * (D * (A + B) // 8)
        u = (tl.load(codes + row + 2 * col + second, mask=ok, other=0).to(tl.int32) >> (f * A)) & ((1 << A) - 1)
        if B:
            bits = tl.load(codes + row + D * A // 8 + col, mask=ok, other=0).to(tl.int32)
            u = u | (((bits >> (2 * f + second)) & 1) << A)
        return u
    if KIND == CVT:
        PER: tl.constexpr = D * A // 8
        full = nq // (2 * R) * (2 * R)
        i = j % (2 * R)
        col = ch % PER
        byte = tl.where(j < full, j // (2 * R) * (2 * R * PER) + col * (2 * R) + 2 * (i % R) + i // R, j * PER + col)
        return (tl.load(codes + byte, mask=ok, other=0).to(tl.int32) >> (ch // PER * A)) & ((1 << A) - 1)
    W2: tl.constexpr = D * A // 16  # CVC
    full = nq // R * R
    second = ch % (2 * W2) // W2
    col = ch % W2
    byte = tl.where(j < full, j // R * (R * 2 * W2) + col * (2 * R) + 2 * (j % R) + second,
                    j * (2 * W2) + 2 * col + second)
    return (tl.load(codes + byte, mask=ok, other=0).to(tl.int32) >> (ch // (2 * W2) * A)) & ((1 << A) - 1)


@triton.jit
def meta_at(j, ch, nq, KIND: tl.constexpr, G: tl.constexpr, D: tl.constexpr, R: tl.constexpr):
    """Offset of the scale (and zero) of quantized token j, channel ch (common.tiling.meta_positions)."""
    NG: tl.constexpr = D // G
    if KIND == TK or KIND == TV:
        return (j // G) * D + ch
    T: tl.constexpr = R * 2 if KIND == CVT else R
    full = nq // T * T
    return tl.where(j < full, j // T * (T * NG) + (ch // G) * T + j % T, j * NG + ch // G)


@triton.jit
def tail_values(codes, scale, zero, sinks, window, tok, ch, ok, num_sinks, nq, KIND: tl.constexpr,
                 A: tl.constexpr, B: tl.constexpr, G: tl.constexpr, MODE: tl.constexpr, OFFSET: tl.constexpr,
                 D: tl.constexpr, R: tl.constexpr):
    """Values at context positions `tok`: sinks [0, S), quantized [S, S + nq), the fp16 window after."""
    j = tok - num_sinks
    in_q = (j >= 0) & (j < nq) & ok
    jq = tl.where(in_q, j, 0)
    u = code_at(codes, jq, ch, nq, in_q, KIND, A, B, D, R)
    meta = meta_at(jq, ch, nq, KIND, G, D, R)
    a, c = affine_masked(scale, zero, meta, in_q, MODE, OFFSET)
    xq = a * u.to(tl.float32) + c
    x = tl.load(sinks + tok * D + ch, mask=ok & (j < 0), other=0.0).to(tl.float32)
    xw = tl.load(window + (j - nq) * D + ch, mask=ok & (j >= nq), other=0.0).to(tl.float32)
    return tl.where(j < 0, x, tl.where(in_q, xq, xw))


@triton.jit
def tail_part(q_ptr, kc, ks, kz, k_sinks, k_win, vc, vs, vz, v_sinks, v_win, m_ptr, l_ptr, acc_ptr, bh, pid,
               qk_scale, num_sinks, nq_k, nq_v, nq_mid, chunk, num_mid, tail_len, num_parts, GROUP: tl.constexpr,
               GP: tl.constexpr, D: tl.constexpr, R: tl.constexpr, K_KIND: tl.constexpr, K_A: tl.constexpr,
               K_B: tl.constexpr, K_G: tl.constexpr, K_MODE: tl.constexpr, K_OFF: tl.constexpr,
               V_KIND: tl.constexpr, V_A: tl.constexpr, V_B: tl.constexpr, V_G: tl.constexpr, V_MODE: tl.constexpr,
               V_OFF: tl.constexpr, EMU: tl.constexpr):
    """One tail part: positions [0, S) and [S + nq_mid, L) (sinks, leftover quantized tokens, windows)."""
    RP: tl.constexpr = 16 if GP <= 16 else GP
    heads = tl.arange(0, RP)
    row_ok = heads < GROUP
    dd = tl.arange(0, D)
    q = op(tl.load(q_ptr + (bh * GROUP + heads)[:, None] * D + dd[None, :], mask=row_ok[:, None], other=0.0), EMU)
    m_i = tl.full([RP], -1.0e30, dtype=tl.float32)
    l_i = tl.zeros([RP], dtype=tl.float32)
    acc = tl.zeros([RP, D], dtype=tl.float32)
    lo = pid * chunk
    for i0 in range(lo, tl.minimum(lo + chunk, tail_len), TAIL_TOKENS):
        i = i0 + tl.arange(0, TAIL_TOKENS)
        ok = i < tail_len
        tok = tl.where(i < num_sinks, i, i + nq_mid)
        kt = tail_values(kc, ks, kz, k_sinks, k_win, tok[None, :], dd[:, None], ok[None, :], num_sinks, nq_k,
                         K_KIND, K_A, K_B, K_G, K_MODE, K_OFF, D, R)  # [D, T]
        s = tl.dot(q, op(kt, EMU)) * qk_scale
        p, alpha, m_i, l_i = softmax_step(tl.where(ok[None, :], s, float("-inf")), m_i, l_i)
        v = tail_values(vc, vs, vz, v_sinks, v_win, tok[:, None], dd[None, :], ok[:, None], num_sinks, nq_v,
                        V_KIND, V_A, V_B, V_G, V_MODE, V_OFF, D, R)  # [T, D]
        acc = acc * alpha[:, None] + tl.dot(op(p, EMU), op(v, EMU))
    part = (bh * GROUP + heads) * num_parts + num_mid + pid
    tl.store(m_ptr + part, m_i, mask=row_ok)
    tl.store(l_ptr + part, l_i, mask=row_ok)
    tl.store(acc_ptr + part[:, None] * D + dd[None, :], acc, mask=row_ok[:, None])
