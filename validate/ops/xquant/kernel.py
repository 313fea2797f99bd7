"""XQuant's Triton kernels (seed 000 §3): decode attention that rematerializes K and V from cached quantized
latents, the kernel that materializes K and V instead, the cuBLAS path's two memory-bound kernels (dequant_kernel:
the latents to bf16; rope_kernel: RoPE on K in place), and XQuant-CL's accumulator update; their torch references
are reference.py's.

Storage (validate.common.recipes, exactly as roofline's TensorQuant counts it; one latent row per token, shared by
every KV head), per sequence at context L, group G, b-bit asymmetric codes with fp16 scale and zero:
  GQA  XK = X U_k [L, r]: per-channel groups of G tokens (codes packed along tokens); the last L mod G
       tokens wait in an fp16 block window.  XV = X U_v [L, r]: per-token groups of G channels.
  MHA  X [L, d] per-token groups of G channels; K and V both come from it (r = d).
  Weights W_k, W_v [r, H_kv d_h] bf16: GQA's fused Sigma_k B_k^T, Sigma_v B_v^T (r = d/g); MHA's W_k, W_v.
Remat of KV head h at token t (position t; RoPE after the remat, rotate-half pairs (i, i + d_h/2)):
  k_t = rope(x^K_t W_k[:, h d_h : (h+1) d_h]),   v_t = x^V_t W_v[:, h d_h : (h+1) d_h]   (2 r d_h MACs)
  rope: (k1, k2) -> (k1 cos a - k2 sin a, k2 cos a + k1 sin a),  a_ti = t theta^(-i / (d_h/2))
The fused kernel keeps K and V [N, d_h] of a block of N tokens in registers, attends with
the flash-decoding partials of validate.common.flash_decode (log2 domain) and its reduce kernel merges the parts.
"""

from __future__ import annotations

import triton
import triton.language as tl

from validate.common.quant_triton import code_float, repeat, unpack
from validate.common.triton_helpers import online, operand
from validate.ops.xquant.deq_pairs import pair_channels, x_pairs, xt_pairs


@triton.jit
def _dequant(wa, wb, a, c, BITS_A: tl.constexpr, BITS_B: tl.constexpr, G: tl.constexpr):
    """x = a*u + c from the code planes' bytes (u unpacked along the last axis); (a, c) repeated G times
    along it when they hold one column per group, else broadcast."""
    u = unpack(wa.to(tl.int32), BITS_A)
    if BITS_B > 0:
        u = u | (unpack(wb.to(tl.int32), BITS_B) << BITS_A)
    a, c = a.to(tl.float32), c.to(tl.float32)
    if a.shape[1] * G == u.shape[1]:
        a, c = repeat(a, G), repeat(c, G)
    return a * code_float(u) + c


@triton.jit
def _order(R: tl.constexpr, PAIRS: tl.constexpr):
    """The latent channels (0..R) of a tile's operand columns: deq_pairs.pair_channels with PAIRS, else in order."""
    if PAIRS:
        return pair_channels(R)
    return tl.arange(0, R)


@triton.jit
def _x_channels(codes, scale, zero, toks, ok, c0, LAT: tl.constexpr, R: tl.constexpr, BITS_A: tl.constexpr,
                BITS_B: tl.constexpr, G: tl.constexpr):
    """x [BLOCK, R] (tokens `toks`, channels c0..) of a latent with per-token groups of G channels, stored
    in token-major rows of LAT*b/8 bytes (plane A's bytes, then plane B's); (a, c) [BLOCK, R/G] or, for a
    tile inside one group, [BLOCK, 1]."""
    rows = codes + toks[:, None].to(tl.int64) * (LAT * (BITS_A + BITS_B) // 8)
    wa = tl.load(rows + c0 * BITS_A // 8 + tl.arange(0, R * BITS_A // 8)[None, :], mask=ok[:, None], other=0)
    wb = wa
    if BITS_B > 0:
        jb = tl.arange(0, R * BITS_B // 8)
        wb = tl.load(rows + LAT * BITS_A // 8 + c0 * BITS_B // 8 + jb[None, :], mask=ok[:, None], other=0)
    meta = toks[:, None] * (LAT // G) + c0 // G
    if R >= G:
        meta += tl.arange(0, R // G)[None, :]
    a = tl.load(scale + meta, mask=ok[:, None], other=0.0)
    return _dequant(wa, wb, a, tl.load(zero + meta, mask=ok[:, None], other=0.0), BITS_A, BITS_B, G)


@triton.jit
def _xk_tile(kc, ks, kz, kw, toks, ok, j0, nq_k, c0, TAIL: tl.constexpr, K_TOKENS: tl.constexpr, LAT: tl.constexpr,
             R: tl.constexpr, BLOCK_N: tl.constexpr, BITS_A: tl.constexpr, BITS_B: tl.constexpr, G: tl.constexpr,
             PACKED: tl.constexpr = False, EMU: tl.constexpr = False):
    """The K latent's x [BLOCK_N, R] at channels c0..: from the fp16 window (TAIL); from codes packed
    along tokens (byte row r of a plane holds tokens 8r/b.. of every channel, plane B's rows after plane
    A's nq*A/8; the block lies in group j0 // G as BLOCK_N <= G), dequantized as x^T [R, BLOCK_N]; or
    per-token codes (MHA's X; PACKED: deq_pairs.x_pairs, columns in pair_channels' order, as the window's then)."""
    cc = c0 + _order(R, PACKED and not K_TOKENS)
    if TAIL:
        x = tl.load(kw + (toks - nq_k)[:, None].to(tl.int64) * LAT + cc[None, :], mask=ok[:, None], other=0.0)
    elif K_TOKENS and PACKED:
        x = xt_pairs(kc, ks, kz, j0, c0, LAT, R, BLOCK_N, G, EMU)
    elif K_TOKENS:
        ra = tl.arange(0, BLOCK_N * BITS_A // 8)
        wa = tl.load(kc + (j0 * BITS_A // 8 + ra[None, :]).to(tl.int64) * LAT + cc[:, None])  # [R, BLOCK_N*A/8]
        wb = wa
        if BITS_B > 0:
            rb = tl.arange(0, BLOCK_N * BITS_B // 8)
            wb = tl.load(kc + (nq_k * BITS_A // 8 + j0 * BITS_B // 8 + rb[None, :]).to(tl.int64) * LAT + cc[:, None])
        meta = (j0 // G) * LAT + cc[:, None]
        x = tl.trans(_dequant(wa, wb, tl.load(ks + meta), tl.load(kz + meta), BITS_A, BITS_B, G))
    elif PACKED:
        x = x_pairs(kc, ks, kz, toks, ok, c0, LAT, R, G, EMU)
    else:
        x = _x_channels(kc, ks, kz, toks, ok, c0, LAT, R, BITS_A, BITS_B, G)
    return x


@triton.jit
def _rope(kl, kh, toks, log2_theta, HALF: tl.constexpr):
    """Rotate K's halves [N, HALF]: a = t * 2^(-(i/HALF) log2 theta), reduced to [-pi, pi] by
    a - n*6.28125 - n*(2pi - 6.28125) (n*6.28125 is exact for n < 2^15) before cos and sin."""
    inv = tl.exp2(-(tl.arange(0, HALF).to(tl.float32) / HALF) * log2_theta)  # [HALF]
    ang = toks.to(tl.float32)[:, None] * inv[None, :]  # [N, HALF]
    n = tl.floor(ang * 0.15915494309189535 + 0.5)
    red = (ang - n * 6.28125) - n * 0.0019353071795864769
    cos, sin = tl.cos(red), tl.sin(red)
    return kl * cos - kh * sin, kh * cos + kl * sin


@triton.jit
def _keys(kc, ks, kz, kw, wk, toks, ok, j0, nq_k, log2_theta, col0, TAIL: tl.constexpr, K_TOKENS: tl.constexpr,
          LAT: tl.constexpr, KV_DIM: tl.constexpr, HALF: tl.constexpr, BLOCK_N: tl.constexpr, R: tl.constexpr,
          BITS_A: tl.constexpr, BITS_B: tl.constexpr, G: tl.constexpr, UPCAST: tl.constexpr,
          PACKED: tl.constexpr = False, EMU: tl.constexpr = False):
    """K's halves [BLOCK_N, HALF] of the head whose columns start at col0: rope(x W_k[:, h]), the dequantized
    latent the MMA's register operand and W_k's rows streaming through the pipeline as the other. H200 vs
    K^T = W_k^T x^T (each x^T tile stored to shared memory as the B operand): fused_kernel GQA 0.99x, MHA
    1.04x; remat_kernel 1.08x (2.11 -> 1.95 ms at b8 L16K, its best launch each). PACKED: W_k's rows in the
    operand's column order."""
    rr = _order(R, PACKED and not K_TOKENS)
    ii = tl.arange(0, HALF)
    kl = tl.zeros([BLOCK_N, HALF], dtype=tl.float32)
    kh = tl.zeros([BLOCK_N, HALF], dtype=tl.float32)
    for c0 in range(0, LAT, R):
        x = operand(_xk_tile(kc, ks, kz, kw, toks, ok, j0, nq_k, c0, TAIL, K_TOKENS, LAT, R, BLOCK_N, BITS_A,
                              BITS_B, G, PACKED, EMU), UPCAST)  # [BLOCK_N, R]
        w = wk + (c0 + rr)[:, None].to(tl.int64) * KV_DIM + col0 + ii[None, :]  # [R, HALF] of W_k
        kl += tl.dot(x, operand(tl.load(w), UPCAST))
        kh += tl.dot(x, operand(tl.load(w + HALF), UPCAST))
    return _rope(kl, kh, toks, log2_theta, HALF)


@triton.jit
def _values(vc, vs, vz, wv, toks, ok, col0, LAT: tl.constexpr, KV_DIM: tl.constexpr, HEAD_DIM: tl.constexpr,
            BLOCK_N: tl.constexpr, R: tl.constexpr, BITS_A: tl.constexpr, BITS_B: tl.constexpr, G: tl.constexpr,
            UPCAST: tl.constexpr, PACKED: tl.constexpr = False, EMU: tl.constexpr = False):
    """V [BLOCK_N, HEAD_DIM] = x^V W_v[:, h] (per-token groups along the latent; PACKED: deq_pairs.x_pairs, W_v's
    rows in its column order)."""
    rr = _order(R, PACKED)
    dd = tl.arange(0, HEAD_DIM)
    v = tl.zeros([BLOCK_N, HEAD_DIM], dtype=tl.float32)
    for c0 in range(0, LAT, R):
        if PACKED:
            x = operand(x_pairs(vc, vs, vz, toks, ok, c0, LAT, R, G, EMU), UPCAST)  # [BLOCK_N, R]
        else:
            x = operand(_x_channels(vc, vs, vz, toks, ok, c0, LAT, R, BITS_A, BITS_B, G), UPCAST)
        w = tl.load(wv + (c0 + rr)[:, None].to(tl.int64) * KV_DIM + col0 + dd[None, :])  # [R, HEAD_DIM]
        v += tl.dot(x, operand(w, UPCAST))
    return v


@triton.jit
def _slabs(kc, ks, kz, kw, vc, vs, vz, b, nq_k, win_k, context, LAT: tl.constexpr, BITS: tl.constexpr,
           G: tl.constexpr):
    """Sequence b's slab of each latent tensor ([B, 1, ...] contiguous, int64 offsets)."""
    # b is int64: every product below is formed left to right in int64
    return (kc + b * nq_k * LAT * BITS // 8, ks + b * nq_k * LAT // G, kz + b * nq_k * LAT // G,
            kw + b * win_k * LAT, vc + b * context * LAT * BITS // 8, vs + b * context * LAT // G,
            vz + b * context * LAT // G)


@triton.jit
def fused_kernel(q_ptr, kc, ks, kz, kw, vc, vs, vz, wk, wv, m_ptr, l_ptr, acc_ptr, qk_scale, log2_theta, context,
                 nq_k, win_k, chunk, num_mid, num_parts, TAIL: tl.constexpr, K_TOKENS: tl.constexpr,
                 KV_HEADS: tl.constexpr, GROUP: tl.constexpr, GROUP_PAD: tl.constexpr, HEAD_DIM: tl.constexpr,
                 LAT: tl.constexpr, BLOCK_N: tl.constexpr, R: tl.constexpr, BITS_A: tl.constexpr,
                 BITS_B: tl.constexpr, G: tl.constexpr, UPCAST: tl.constexpr, PACKED: tl.constexpr = False,
                 EMU: tl.constexpr = False):
    h = tl.program_id(0)
    pid = tl.program_id(1)
    b = tl.program_id(2).to(tl.int64)
    kc, ks, kz, kw, vc, vs, vz = _slabs(kc, ks, kz, kw, vc, vs, vz, b, nq_k, win_k, context, LAT, BITS_A + BITS_B, G)
    HALF: tl.constexpr = HEAD_DIM // 2
    rows = tl.arange(0, GROUP_PAD)
    row_ok = rows < GROUP
    heads = (b * KV_HEADS + h) * GROUP + rows  # [GROUP_PAD] rows of q [B * H, HEAD_DIM]
    ii = tl.arange(0, HALF)
    q_rows = q_ptr + heads[:, None] * HEAD_DIM
    q_lo = operand(tl.load(q_rows + ii[None, :], mask=row_ok[:, None], other=0.0), UPCAST)  # [GROUP_PAD, HALF]
    q_hi = operand(tl.load(q_rows + HALF + ii[None, :], mask=row_ok[:, None], other=0.0), UPCAST)
    m_i = tl.full([GROUP_PAD], -1.0e30, dtype=tl.float32)
    l_i = tl.zeros([GROUP_PAD], dtype=tl.float32)
    acc = tl.zeros([GROUP_PAD, HEAD_DIM], dtype=tl.float32)
    col0 = h * HEAD_DIM
    if TAIL:
        lo, part = nq_k + pid * BLOCK_N, num_mid + pid
        hi = tl.minimum(lo + BLOCK_N, context)
    else:
        lo, hi, part = pid * chunk, tl.minimum(pid * chunk + chunk, nq_k), pid
    for j0 in range(lo, hi, BLOCK_N):
        toks = j0 + tl.arange(0, BLOCK_N)
        ok = toks < hi
        kl, kh = _keys(kc, ks, kz, kw, wk, toks, ok, j0, nq_k, log2_theta, col0, TAIL, K_TOKENS, LAT,
                       KV_HEADS * HEAD_DIM, HALF, BLOCK_N, R, BITS_A, BITS_B, G, UPCAST, PACKED, EMU)
        kl, kh = tl.trans(operand(kl, UPCAST)), tl.trans(operand(kh, UPCAST))  # [HALF, BLOCK_N]
        s = tl.dot(q_lo, kl) + tl.dot(q_hi, kh)  # [GROUP_PAD, BLOCK_N]
        p, m_i, l_i, acc = online(s * qk_scale, ok, m_i, l_i, acc)
        v = _values(vc, vs, vz, wv, toks, ok, col0, LAT, KV_HEADS * HEAD_DIM, HEAD_DIM, BLOCK_N, R, BITS_A,
                    BITS_B, G, UPCAST, PACKED, EMU)
        acc += tl.dot(operand(p, UPCAST), operand(v, UPCAST))
    out = heads * num_parts + part  # [GROUP_PAD] row of (b, query head, part)
    dd = tl.arange(0, HEAD_DIM)
    tl.store(m_ptr + out, m_i, mask=row_ok)
    tl.store(l_ptr + out, l_i, mask=row_ok)
    tl.store(acc_ptr + out[:, None] * HEAD_DIM + dd[None, :], acc, mask=row_ok[:, None])


@triton.jit
def _block(nq_k, context, TAIL: tl.constexpr, BLOCK_N: tl.constexpr):
    """(j0, toks, ok) of program_id(1)'s BLOCK_N tokens: of the nq_k quantized K tokens, or (TAIL) of K's fp16
    window after them, up to the context."""
    j0 = tl.program_id(1) * BLOCK_N
    end = nq_k
    if TAIL:
        j0 += nq_k
        end = context
    toks = j0 + tl.arange(0, BLOCK_N)
    return j0, toks, toks < end


@triton.jit
def remat_kernel(kc, ks, kz, kw, vc, vs, vz, wk, wv, k_out, v_out, log2_theta, context, nq_k, win_k,
                 TAIL: tl.constexpr, K_TOKENS: tl.constexpr, KV_HEADS: tl.constexpr, HEAD_DIM: tl.constexpr,
                 LAT: tl.constexpr, BLOCK_N: tl.constexpr, R: tl.constexpr, BITS_A: tl.constexpr,
                 BITS_B: tl.constexpr, G: tl.constexpr, UPCAST: tl.constexpr, PACKED: tl.constexpr = False,
                 EMU: tl.constexpr = False):
    h = tl.program_id(0)
    b = tl.program_id(2).to(tl.int64)
    kc, ks, kz, kw, vc, vs, vz = _slabs(kc, ks, kz, kw, vc, vs, vz, b, nq_k, win_k, context, LAT, BITS_A + BITS_B, G)
    HALF: tl.constexpr = HEAD_DIM // 2
    j0, toks, ok = _block(nq_k, context, TAIL, BLOCK_N)
    col0 = h * HEAD_DIM
    kl, kh = _keys(kc, ks, kz, kw, wk, toks, ok, j0, nq_k, log2_theta, col0, TAIL, K_TOKENS, LAT,
                   KV_HEADS * HEAD_DIM, HALF, BLOCK_N, R, BITS_A, BITS_B, G, UPCAST, PACKED, EMU)
    v = _values(vc, vs, vz, wv, toks, ok, col0, LAT, KV_HEADS * HEAD_DIM, HEAD_DIM, BLOCK_N, R, BITS_A, BITS_B, G,
                UPCAST, PACKED, EMU)
    rows = (b * KV_HEADS + h) * context + toks.to(tl.int64)  # [BLOCK_N] rows of K, V [B * H_kv * L, HEAD_DIM]
    ii = tl.arange(0, HALF)
    kt = k_out + rows[:, None] * HEAD_DIM + ii[None, :]  # [BLOCK_N, HALF]
    tl.store(kt, kl.to(k_out.dtype.element_ty), mask=ok[:, None])
    tl.store(kt + HALF, kh.to(k_out.dtype.element_ty), mask=ok[:, None])
    dd = tl.arange(0, HEAD_DIM)
    tl.store(v_out + rows[:, None] * HEAD_DIM + dd[None, :], v.to(v_out.dtype.element_ty), mask=ok[:, None])


@triton.jit
def dequant_kernel(kc, ks, kz, kw, vc, vs, vz, x_out, context, nq_k, win_k, TAIL: tl.constexpr,
                   K_TOKENS: tl.constexpr, LAT: tl.constexpr, BLOCK_N: tl.constexpr, R: tl.constexpr,
                   BITS_A: tl.constexpr, BITS_B: tl.constexpr, G: tl.constexpr):
    """x^K, x^V [2, B*L, LAT] bf16 (x^K the first plane): remat_kernel's latent loads and fp32 dequant, stored
    instead of multiplied (the cuBLAS materialized path, launch.dequantize)."""
    c0 = tl.program_id(0) * R
    b = tl.program_id(2).to(tl.int64)
    kc, ks, kz, kw, vc, vs, vz = _slabs(kc, ks, kz, kw, vc, vs, vz, b, nq_k, win_k, context, LAT, BITS_A + BITS_B, G)
    j0, toks, ok = _block(nq_k, context, TAIL, BLOCK_N)
    xk = _xk_tile(kc, ks, kz, kw, toks, ok, j0, nq_k, c0, TAIL, K_TOKENS, LAT, R, BLOCK_N, BITS_A, BITS_B, G)
    xv = _x_channels(vc, vs, vz, toks, ok, c0, LAT, R, BITS_A, BITS_B, G)
    rows = b * context + toks.to(tl.int64)  # [BLOCK_N] rows of x [B*L, LAT]
    ptr = x_out + rows[:, None] * LAT + c0 + tl.arange(0, R)[None, :]  # [BLOCK_N, R]
    tl.store(ptr, xk.to(x_out.dtype.element_ty), mask=ok[:, None])
    plane = tl.num_programs(2).to(tl.int64) * context * LAT  # x^V after the B*L rows of x^K
    tl.store(ptr + plane, xv.to(x_out.dtype.element_ty), mask=ok[:, None])


@triton.jit
def rope_kernel(k_ptr, log2_theta, rows, context, KV_HEADS: tl.constexpr, HEAD_DIM: tl.constexpr,
                BLOCK_T: tl.constexpr):
    """K [rows = B*L, KV_HEADS*HEAD_DIM] bf16 rotated in place (`_rope`), row r at position r mod context."""
    r = tl.program_id(0) * BLOCK_T + tl.arange(0, BLOCK_T)
    ok = r < rows
    HALF: tl.constexpr = HEAD_DIM // 2
    ii = tl.arange(0, HALF)
    for h in tl.static_range(KV_HEADS):
        lo = k_ptr + r[:, None].to(tl.int64) * (KV_HEADS * HEAD_DIM) + h * HEAD_DIM + ii[None, :]  # [BLOCK_T, HALF]
        kl = tl.load(lo, mask=ok[:, None], other=0.0).to(tl.float32)
        kh = tl.load(lo + HALF, mask=ok[:, None], other=0.0).to(tl.float32)
        kl, kh = _rope(kl, kh, r % context, log2_theta, HALF)
        tl.store(lo, kl.to(k_ptr.dtype.element_ty), mask=ok[:, None])
        tl.store(lo + HALF, kh.to(k_ptr.dtype.element_ty), mask=ok[:, None])


@triton.jit
def acc_update_kernel(dc, ds, dz, u_ptr, acc_ptr, step, inv_step, tokens, D: tl.constexpr, DW: tl.constexpr,
                      BLOCK_T: tl.constexpr, BLOCK_D: tl.constexpr, R: tl.constexpr, UP: tl.constexpr,
                      ACC_BITS: tl.constexpr, BITS_A: tl.constexpr, BITS_B: tl.constexpr, G: tl.constexpr,
                      UPCAST: tl.constexpr):
    b = tl.program_id(2).to(tl.int64)
    toks = tl.program_id(0) * BLOCK_T + tl.arange(0, BLOCK_T)
    ok = toks < tokens
    d0 = tl.program_id(1) * BLOCK_D
    cols = d0 + tl.arange(0, BLOCK_D)
    dc += b * tokens * DW * (BITS_A + BITS_B) // 8  # int64 from b on
    ds += b * tokens * DW // G
    dz += b * tokens * DW // G
    if UP:
        # GQA: the delta lives in the 2d/g-wide U_kv subspace; delta_t = dx_t U_kv^T (u_ptr: U_kv^T [DW, D])
        rr = tl.arange(0, R)
        delta = tl.zeros([BLOCK_T, BLOCK_D], dtype=tl.float32)
        for c0 in range(0, DW, R):
            x = operand(_x_channels(dc, ds, dz, toks, ok, c0, DW, R, BITS_A, BITS_B, G), UPCAST)
            w = tl.load(u_ptr + (c0 + rr)[:, None].to(tl.int64) * D + cols[None, :])  # [R, BLOCK_D]
            delta += tl.dot(x, operand(w, UPCAST))
    else:
        delta = _x_channels(dc, ds, dz, toks, ok, d0, D, BLOCK_D, BITS_A, BITS_B, G)  # [BLOCK_T, BLOCK_D]
    rows = b * tokens + toks.to(tl.int64)
    if ACC_BITS == 16:
        ptr = acc_ptr + rows[:, None] * D + cols[None, :]
        acc = tl.load(ptr, mask=ok[:, None], other=0.0).to(tl.float32)
        tl.store(ptr, (acc + delta).to(acc_ptr.dtype.element_ty), mask=ok[:, None])
    else:
        # 4-bit accumulator: x = step (u - 8), two codes a byte (channel 2j low nibble, 2j + 1 high)
        ptr = acc_ptr + rows[:, None] * (D // 2) + d0 // 2 + tl.arange(0, BLOCK_D // 2)[None, :]
        u = unpack(tl.load(ptr, mask=ok[:, None], other=0).to(tl.int32), 4)  # [BLOCK_T, BLOCK_D]
        x = step * (code_float(u) - 8.0) + delta
        code = tl.minimum(tl.maximum(tl.floor(x * inv_step + 8.5), 0.0), 15.0).to(tl.int32)
        lo, hi = tl.split(tl.reshape(code, [BLOCK_T, BLOCK_D // 2, 2]))
        tl.store(ptr, (lo | (hi << 4)).to(tl.uint8), mask=ok[:, None])
