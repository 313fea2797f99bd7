"""XQuant's fused decode with the latent shared by several KV heads (launch.decode(variant="shared")).

fused_kernel (kernel.py) gives each program ONE KV head, so under GQA every program dequantizes the whole latent
tile [BLOCK_N, LAT] that all H_kv heads share: H_kv dequantizations per token block (structure/xquant.json: the
kernel is issue-bound, its remat GEMMs already on wgmma). shared_kernel gives a program HPP consecutive KV heads:
each latent tile [BLOCK_N, R] is dequantized once and is the register operand of ONE wgmma whose other operand is
the HPP heads' columns of W side by side ([R, HPP d_h/2] per RoPE half for K, [R, HPP d_h] for V), so the
dequantization per token falls from H_kv to H_kv / HPP and each wgmma is HPP times wider.

Attention of the HPP heads' HPP * GROUP query rows at once, one state per row:
  s   = Q_bd [ROWS, HPP d_h] x K_all^T,   Q_bd block-diagonal (row r = (head j, query g) holds q_r in head j's
        columns, zeros elsewhere), so row r scores only against its own head's keys;
  acc = P x V_all [ROWS, HPP d_h]; row r keeps the columns of its head j (the other blocks are never stored).
Under GQA (GROUP 4) HPP 4 fills the 16 rows an mma.sync tile has, which fused_kernel pads from 4.
The partials (m, l, acc per query head and part) are fused_kernel's, merged by flash_decode.reduce_kernel.
"""

from __future__ import annotations

import triton
import triton.language as tl

from validate.common.triton_helpers import online, operand
from validate.ops.xquant.kernel import _slabs, _values, _xk_tile


@triton.jit
def _rope_heads(kl, kh, toks, log2_theta, HPP: tl.constexpr, HALF: tl.constexpr):
    """kernel._rope of HPP heads side by side ([N, HPP * HALF], head-major columns): cos and sin [N, HALF] once,
    broadcast over the heads (every head rotates channel i at the same angle)."""
    inv = tl.exp2(-(tl.arange(0, HALF).to(tl.float32) / HALF) * log2_theta)  # [HALF]
    ang = toks.to(tl.float32)[:, None] * inv[None, :]  # [N, HALF]
    n = tl.floor(ang * 0.15915494309189535 + 0.5)
    red = (ang - n * 6.28125) - n * 0.0019353071795864769
    cos, sin = tl.cos(red)[:, None, :], tl.sin(red)[:, None, :]  # [N, 1, HALF]
    N: tl.constexpr = kl.shape[0]
    kl3, kh3 = tl.reshape(kl, [N, HPP, HALF]), tl.reshape(kh, [N, HPP, HALF])
    return tl.reshape(kl3 * cos - kh3 * sin, [N, HPP * HALF]), tl.reshape(kh3 * cos + kl3 * sin, [N, HPP * HALF])


@triton.jit
def _keys_heads(kc, ks, kz, kw, wk, toks, ok, j0, nq_k, log2_theta, h0, TAIL: tl.constexpr, K_TOKENS: tl.constexpr,
                LAT: tl.constexpr, KV_DIM: tl.constexpr, HEAD_DIM: tl.constexpr, HPP: tl.constexpr,
                BLOCK_N: tl.constexpr, R: tl.constexpr, BITS_A: tl.constexpr, BITS_B: tl.constexpr, G: tl.constexpr,
                UPCAST: tl.constexpr):
    """K's halves [BLOCK_N, HPP * HALF] of KV heads h0..h0+HPP-1 (column c: head h0 + c // HALF, channel
    c % HALF of its lower half; kh the upper), RoPE applied: each latent tile x [BLOCK_N, R] dequantized once,
    times the HPP heads' columns of W_k in one dot per half."""
    HALF: tl.constexpr = HEAD_DIM // 2
    W: tl.constexpr = HPP * HALF
    rr = tl.arange(0, R)
    cc = tl.arange(0, W)
    cols = (h0 + cc // HALF) * HEAD_DIM + cc % HALF  # [W] columns of W_k
    kl = tl.zeros([BLOCK_N, W], dtype=tl.float32)
    kh = tl.zeros([BLOCK_N, W], dtype=tl.float32)
    for c0 in range(0, LAT, R):
        x = operand(_xk_tile(kc, ks, kz, kw, toks, ok, j0, nq_k, c0, TAIL, K_TOKENS, LAT, R, BLOCK_N, BITS_A,
                              BITS_B, G), UPCAST)  # [BLOCK_N, R]
        w = wk + (c0 + rr)[:, None].to(tl.int64) * KV_DIM + cols[None, :]  # [R, W]
        kl += tl.dot(x, operand(tl.load(w), UPCAST))
        kh += tl.dot(x, operand(tl.load(w + HALF), UPCAST))
    return _rope_heads(kl, kh, toks, log2_theta, HPP, HALF)


@triton.jit
def shared_kernel(q_ptr, kc, ks, kz, kw, vc, vs, vz, wk, wv, m_ptr, l_ptr, acc_ptr, qk_scale, log2_theta, context,
                  nq_k, win_k, chunk, num_mid, num_parts, TAIL: tl.constexpr, K_TOKENS: tl.constexpr,
                  KV_HEADS: tl.constexpr, GROUP: tl.constexpr, HPP: tl.constexpr, ROWS_PAD: tl.constexpr,
                  HEAD_DIM: tl.constexpr, LAT: tl.constexpr, BLOCK_N: tl.constexpr, R: tl.constexpr,
                  BITS_A: tl.constexpr, BITS_B: tl.constexpr, G: tl.constexpr, UPCAST: tl.constexpr):
    h0 = tl.program_id(0) * HPP
    pid = tl.program_id(1)
    b = tl.program_id(2).to(tl.int64)
    kc, ks, kz, kw, vc, vs, vz = _slabs(kc, ks, kz, kw, vc, vs, vz, b, nq_k, win_k, context, LAT, BITS_A + BITS_B, G)
    HALF: tl.constexpr = HEAD_DIM // 2
    WK: tl.constexpr = HPP * HALF
    WV: tl.constexpr = HPP * HEAD_DIM
    rows = tl.arange(0, ROWS_PAD)
    row_ok = rows < HPP * GROUP
    heads = (b * KV_HEADS + h0) * GROUP + rows  # [ROWS_PAD] rows of q [B * H, HEAD_DIM]
    cc = tl.arange(0, WK)
    own = ((rows // GROUP)[:, None] == (cc // HALF)[None, :]) & row_ok[:, None]  # [ROWS_PAD, WK] block diagonal
    q_rows = q_ptr + heads[:, None] * HEAD_DIM + (cc % HALF)[None, :]
    q_lo = operand(tl.load(q_rows, mask=own, other=0.0), UPCAST)  # [ROWS_PAD, WK]
    q_hi = operand(tl.load(q_rows + HALF, mask=own, other=0.0), UPCAST)
    m_i = tl.full([ROWS_PAD], -1.0e30, dtype=tl.float32)
    l_i = tl.zeros([ROWS_PAD], dtype=tl.float32)
    acc = tl.zeros([ROWS_PAD, WV], dtype=tl.float32)
    if TAIL:
        lo, part = nq_k + pid * BLOCK_N, num_mid + pid
        hi = tl.minimum(lo + BLOCK_N, context)
    else:
        lo, hi, part = pid * chunk, tl.minimum(pid * chunk + chunk, nq_k), pid
    for j0 in range(lo, hi, BLOCK_N):
        toks = j0 + tl.arange(0, BLOCK_N)
        ok = toks < hi
        kl, kh = _keys_heads(kc, ks, kz, kw, wk, toks, ok, j0, nq_k, log2_theta, h0, TAIL, K_TOKENS, LAT,
                             KV_HEADS * HEAD_DIM, HEAD_DIM, HPP, BLOCK_N, R, BITS_A, BITS_B, G, UPCAST)
        kl, kh = tl.trans(operand(kl, UPCAST)), tl.trans(operand(kh, UPCAST))  # [WK, BLOCK_N]
        s = tl.dot(q_lo, kl) + tl.dot(q_hi, kh)  # [ROWS_PAD, BLOCK_N]
        p, m_i, l_i, acc = online(s * qk_scale, ok, m_i, l_i, acc)
        v = _values(vc, vs, vz, wv, toks, ok, h0 * HEAD_DIM, LAT, KV_HEADS * HEAD_DIM, WV, BLOCK_N, R, BITS_A,
                    BITS_B, G, UPCAST)  # [BLOCK_N, HPP * HEAD_DIM]
        acc += tl.dot(operand(p, UPCAST), operand(v, UPCAST))
    # row r keeps its own head's block of acc
    jj = tl.arange(0, HPP)
    mine = (rows // GROUP)[:, None, None] == jj[None, :, None]
    acc = tl.sum(tl.where(mine, tl.reshape(acc, [ROWS_PAD, HPP, HEAD_DIM]), 0.0), axis=1)  # [ROWS_PAD, HEAD_DIM]
    out = heads * num_parts + part  # [ROWS_PAD] row of (b, query head, part)
    dd = tl.arange(0, HEAD_DIM)
    tl.store(m_ptr + out, m_i, mask=row_ok)
    tl.store(l_ptr + out, l_i, mask=row_ok)
    tl.store(acc_ptr + out[:, None] * HEAD_DIM + dd[None, :], acc, mask=row_ok[:, None])


def rows_pad(hpp: int, group: int) -> int:
    """Query rows of a shared_kernel program, padded to a power of two >= 16 (tl.dot's smallest M)."""
    return max(16, triton.next_power_of_2(hpp * group))
