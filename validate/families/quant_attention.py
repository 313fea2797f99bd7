"""Family "quant_attention": GQA decode attention over a quantized KV cache, dequantization fused.

The cache is stored exactly as roofline's TensorQuant counts it (packing.py: codes, scales, zeros, fp16
sinks and window, bytes by part = `layout_bytes`). Kernel 1 gives each program one KV head of one
sequence (its GROUP query heads, padded to >= 16 rows for tl.dot) and one part of the context: either a
chunk of the middle, where both K and V are quantized, or a chunk of the "tail" (the sinks, the fp16
windows and the tokens where only one of K, V is still fp16). Each part writes the flash-decoding
partials m, l, acc (log2 domain, as attention_fp16) and attention_fp16.reduce_kernel merges them.

Per group of G elements with dequantization x = a*u + c (packing.py), the middle applies (a, c):
  outer groups (the group runs across the reduction: KIVI's K over tokens, per-token V over channels):
      per element, x = a*u + c, then the dot product  (2 FLOPs per element);
  inner groups (along the reduction, InnerQ §4.4; SKVQ's K): once per group and query row,
      s_t = sum_g a_gt (q_g . u_gt) + c_gt sum(q_g),   o_d = a_d (p . u_d) + c_d sum(p)   (2/G per element
      and row), the V block being exactly one group of G tokens.
SKVQ's channel reorder is folded into W_q and W_o: the kernel attends in the stored (permuted) order.
"""

from __future__ import annotations

import triton
import triton.language as tl

from validate.families.packing import layout_bytes

__all__ = ["QuantAttention", "decode", "layout_bytes", "quant_decode_kernel", "sm90_spec"]

LOG2E = 1.4426950408889634
HEADS, KV_HEADS, HEAD_DIM = 32, 8, 128  # Llama-3.1-8B
METHODS = ("kivi-2", "kivi-4", "innerq-base", "innerq-hybrid", "skvq-k2v2")
BATCHES = (1, 8, 32)
CONTEXTS = (4096, 16384, 65536, 131072)
QUICK = (("kivi-2", 1, 16384), ("kivi-4", 8, 65536), ("innerq-base", 32, 4096), ("innerq-hybrid", 1, 131072),
         ("skvq-k2v2", 8, 16384))
BLOCK_N = 64  # tokens per block unless a V block must be one group of G tokens
TAIL_TOKENS = 64  # tokens per tail part
CHECK_TOKENS = 4096


@triton.jit
def _codes(base, pidx, other, stride, plane_b, mask, BITS_A: tl.constexpr, BITS_B: tl.constexpr):
    """Unsigned codes at packed index `pidx`, other index `other` (broadcast): plane A's word
    (pidx // (32/A)) * stride + other holds the low A bits, plane B (rows from plane_b) the high B bits."""
    w = tl.load(base + (pidx // (32 // BITS_A)) * stride + other, mask=mask, other=0)
    u = (w >> ((pidx % (32 // BITS_A)) * BITS_A)) & ((1 << BITS_A) - 1)
    if BITS_B > 0:
        w = tl.load(base + (plane_b + pidx // (32 // BITS_B)) * stride + other, mask=mask, other=0)
        u = u | (((w >> ((pidx % (32 // BITS_B)) * BITS_B)) & ((1 << BITS_B) - 1)) << BITS_A)
    return u


@triton.jit
def _affine(scale, zero, off, mask, MODE: tl.constexpr, OFFSET: tl.constexpr):
    """(a, c) with x = a*u + c: symmetric (s, -s*OFFSET), asymmetric (s, z), hybrid (|s|, z if the
    scale's sign bit is set else -|s|*OFFSET)."""
    raw = tl.load(scale + off, mask=mask, other=0.0)
    a = tl.abs(raw.to(tl.float32))
    if MODE == 0:
        c = -a * OFFSET
    else:
        z = tl.load(zero + off, mask=mask, other=0.0).to(tl.float32)
        if MODE == 1:
            c = z
        else:
            c = tl.where(raw.to(tl.int16, bitcast=True) < 0, z, -a * OFFSET)
    return a, c


@triton.jit
def _dequant(codes, scale, zero, tok, ch, nq, mask, D: tl.constexpr, G: tl.constexpr, TOKENS: tl.constexpr,
             BITS_A: tl.constexpr, BITS_B: tl.constexpr, MODE: tl.constexpr):
    """x[tok, ch] = a*u + c for quantized token indices `tok` (0 = first quantized token) and channels."""
    if TOKENS:
        u = _codes(codes, tok, ch, D, nq * BITS_A // 32, mask, BITS_A, BITS_B)
        a, c = _affine(scale, zero, (tok // G) * D + ch, mask, MODE, 1 << (BITS_A + BITS_B - 1))
    else:
        u = _codes(codes, ch, tok, nq, D * BITS_A // 32, mask, BITS_A, BITS_B)
        a, c = _affine(scale, zero, (ch // G) * nq + tok, mask, MODE, 1 << (BITS_A + BITS_B - 1))
    return a * u.to(tl.float32) + c


@triton.jit
def _tail(codes, scale, zero, sinks, window, tok, ch, ok, num_sinks, nq, D: tl.constexpr, G: tl.constexpr,
          TOKENS: tl.constexpr, BITS_A: tl.constexpr, BITS_B: tl.constexpr, MODE: tl.constexpr):
    """Values at context positions `tok`: sinks [0, S), quantized [S, S + nq), the fp16 window after."""
    j = tok - num_sinks
    in_q = (j >= 0) & (j < nq)
    x = tl.load(sinks + tok * D + ch, mask=ok & (j < 0), other=0.0).to(tl.float32)
    xq = _dequant(codes, scale, zero, j, ch, nq, ok & in_q, D, G, TOKENS, BITS_A, BITS_B, MODE)
    xw = tl.load(window + (j - nq) * D + ch, mask=ok & (j >= nq), other=0.0).to(tl.float32)
    return tl.where(j < 0, x, tl.where(in_q, xq, xw))


@triton.jit
def _operand(x, UPCAST: tl.constexpr):
    """A tl.dot operand: fp32 under the interpreter (no bf16 dot there), bf16 on the GPU."""
    if UPCAST:
        return x.to(tl.float32)
    return x.to(tl.bfloat16)


@triton.jit
def _online(s, ok, m_i, l_i, acc):
    """Online softmax, log2 domain: m' = max(m, max_t s_t), p_t = 2^(s_t - m'), l' = l 2^(m - m') + sum p."""
    s = tl.where(ok[None, :], s, float("-inf"))
    m_new = tl.maximum(m_i, tl.max(s, axis=1))
    alpha = tl.exp2(m_i - m_new)
    p = tl.exp2(s - m_new[:, None])
    return p, m_new, l_i * alpha + tl.sum(p, axis=1), acc * alpha[:, None]


@triton.jit
def _scores_inner(q_rows, row_ok, codes, scale, zero, toks, ok, nq, D: tl.constexpr, G: tl.constexpr,
                  BITS_A: tl.constexpr, BITS_B: tl.constexpr, MODE: tl.constexpr, UPCAST: tl.constexpr,
                  ROWS: tl.constexpr, BLOCK: tl.constexpr):
    """s_t = sum over channel groups g of a_gt (q_g . u_gt) + c_gt sum(q_g): scale and zero once per group."""
    s = tl.zeros([ROWS, BLOCK], dtype=tl.float32)
    for g in tl.static_range(D // G):
        cg = g * G + tl.arange(0, G)
        qg = tl.load(q_rows + cg[None, :], mask=row_ok[:, None], other=0.0)  # [ROWS, G]
        u = _codes(codes, cg[:, None], toks[None, :], nq, D * BITS_A // 32, ok[None, :], BITS_A, BITS_B)  # [G, BLOCK]
        a, c = _affine(scale, zero, g * nq + toks, ok, MODE, 1 << (BITS_A + BITS_B - 1))  # [BLOCK]
        dot = tl.dot(_operand(qg, UPCAST), _operand(u, UPCAST))  # [ROWS, BLOCK]
        s += dot * a[None, :] + tl.sum(qg.to(tl.float32), axis=1)[:, None] * c[None, :]
    return s


@triton.jit
def _pv_inner(p, codes, scale, zero, j0, toks, ok, nq, dd, D: tl.constexpr, G: tl.constexpr,
              BITS_A: tl.constexpr, BITS_B: tl.constexpr, MODE: tl.constexpr, UPCAST: tl.constexpr):
    """o_d = a_d (p . u_d) + c_d sum(p) over one group of G tokens (the block): scale and zero once per group."""
    u = _codes(codes, toks[:, None], dd[None, :], D, nq * BITS_A // 32, ok[:, None], BITS_A, BITS_B)  # [G, D]
    a, c = _affine(scale, zero, (j0 // G) * D + dd, dd < D, MODE, 1 << (BITS_A + BITS_B - 1))  # [D]
    dot = tl.dot(_operand(p, UPCAST), _operand(u, UPCAST))  # [ROWS, D]
    return dot * a[None, :] + tl.sum(p, axis=1)[:, None] * c[None, :]


@triton.jit
def quant_decode_kernel(
        q_ptr, kc, ks, kz, k_sinks, k_win, vc, vs, vz, v_sinks, v_win, m_ptr, l_ptr, acc_ptr,
        qk_scale, num_sinks, nq_k, nq_v, win_k, win_v, nq_mid, chunk, num_mid, tail_len, tail_chunk, num_parts,
        KV_HEADS: tl.constexpr, GROUP: tl.constexpr, GROUP_PAD: tl.constexpr, HEAD_DIM: tl.constexpr,
        BLOCK_N: tl.constexpr, K_TOKENS: tl.constexpr, K_BITS_A: tl.constexpr, K_BITS_B: tl.constexpr,
        K_G: tl.constexpr, K_MODE: tl.constexpr, V_TOKENS: tl.constexpr, V_BITS_A: tl.constexpr,
        V_BITS_B: tl.constexpr, V_G: tl.constexpr, V_MODE: tl.constexpr, UPCAST: tl.constexpr):
    pid = tl.program_id(0)
    bh = (tl.program_id(2) * KV_HEADS + tl.program_id(1)).to(tl.int64)  # sequence b, KV head h
    # this (b, h)'s slab of every tensor: [B, H, ...] contiguous
    kc += bh * (nq_k * (K_BITS_A + K_BITS_B) // 32 * HEAD_DIM)
    ks += bh * (nq_k * HEAD_DIM // K_G)
    kz += bh * (nq_k * HEAD_DIM // K_G)
    vc += bh * (nq_v * (V_BITS_A + V_BITS_B) // 32 * HEAD_DIM)
    vs += bh * (nq_v * HEAD_DIM // V_G)
    vz += bh * (nq_v * HEAD_DIM // V_G)
    k_sinks += bh * num_sinks * HEAD_DIM
    v_sinks += bh * num_sinks * HEAD_DIM
    k_win += bh * win_k * HEAD_DIM
    v_win += bh * win_v * HEAD_DIM
    rows = tl.arange(0, GROUP_PAD)
    row_ok = rows < GROUP
    heads = bh * GROUP + rows  # [GROUP_PAD] rows of q [B * H * GROUP, D]
    dd = tl.arange(0, HEAD_DIM)
    q_rows = q_ptr + heads[:, None] * HEAD_DIM  # [GROUP_PAD, 1]
    q = _operand(tl.load(q_rows + dd[None, :], mask=row_ok[:, None], other=0.0), UPCAST)  # [GROUP_PAD, D]
    m_i = tl.full([GROUP_PAD], -1.0e30, dtype=tl.float32)
    l_i = tl.zeros([GROUP_PAD], dtype=tl.float32)
    acc = tl.zeros([GROUP_PAD, HEAD_DIM], dtype=tl.float32)
    lo = pid * chunk
    hi = tl.minimum(lo + chunk, nq_mid)  # empty for tail parts (pid >= num_mid)
    for j0 in range(lo, hi, BLOCK_N):
        toks = j0 + tl.arange(0, BLOCK_N)  # quantized-token indices
        ok = toks < hi
        if K_TOKENS:
            kt = _dequant(kc, ks, kz, toks[None, :], dd[:, None], nq_k, ok[None, :], HEAD_DIM, K_G, True,
                          K_BITS_A, K_BITS_B, K_MODE)  # [D, BLOCK_N]
            s = tl.dot(q, _operand(kt, UPCAST))
        else:
            s = _scores_inner(q_rows, row_ok, kc, ks, kz, toks, ok, nq_k, HEAD_DIM, K_G, K_BITS_A, K_BITS_B,
                              K_MODE, UPCAST, GROUP_PAD, BLOCK_N)
        p, m_i, l_i, acc = _online(s * qk_scale, ok, m_i, l_i, acc)
        if V_TOKENS:
            acc += _pv_inner(p, vc, vs, vz, j0, toks, ok, nq_v, dd, HEAD_DIM, V_G, V_BITS_A, V_BITS_B, V_MODE,
                             UPCAST)
        else:
            v = _dequant(vc, vs, vz, toks[:, None], dd[None, :], nq_v, ok[:, None], HEAD_DIM, V_G, False,
                         V_BITS_A, V_BITS_B, V_MODE)  # [BLOCK_N, D]
            acc += tl.dot(_operand(p, UPCAST), _operand(v, UPCAST))
    t_lo = (pid - num_mid) * tail_chunk
    t_hi = tl.where(pid >= num_mid, tl.minimum(t_lo + tail_chunk, tail_len), t_lo)  # empty for middle parts
    for i0 in range(t_lo, t_hi, BLOCK_N):
        i = i0 + tl.arange(0, BLOCK_N)  # tail index -> context position: sinks, then past the middle
        ok = i < t_hi
        tok = tl.where(i < num_sinks, i, i + nq_mid)
        kt = _tail(kc, ks, kz, k_sinks, k_win, tok[None, :], dd[:, None], ok[None, :], num_sinks, nq_k, HEAD_DIM,
                   K_G, K_TOKENS, K_BITS_A, K_BITS_B, K_MODE)  # [D, BLOCK_N]
        p, m_i, l_i, acc = _online(tl.dot(q, _operand(kt, UPCAST)) * qk_scale, ok, m_i, l_i, acc)
        v = _tail(vc, vs, vz, v_sinks, v_win, tok[:, None], dd[None, :], ok[:, None], num_sinks, nq_v, HEAD_DIM,
                  V_G, V_TOKENS, V_BITS_A, V_BITS_B, V_MODE)  # [BLOCK_N, D]
        acc += tl.dot(_operand(p, UPCAST), _operand(v, UPCAST))
    part = heads * num_parts + pid  # [GROUP_PAD] row of (b, query head, part)
    tl.store(m_ptr + part, m_i, mask=row_ok)
    tl.store(l_ptr + part, l_i, mask=row_ok)
    tl.store(acc_ptr + part[:, None] * HEAD_DIM + dd[None, :], acc, mask=row_ok[:, None])
