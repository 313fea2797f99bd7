"""XQuant kernels (seed 000 §3): decode attention that rematerializes K and V from cached quantized
latents, the kernel that materializes K and V instead, and XQuant-CL's accumulator update; each beside
its torch reference.

Storage (packing.py, exactly as roofline's TensorQuant counts it; one latent row per token, shared by
every KV head), per sequence at context L, group G, b-bit asymmetric codes with fp16 scale and zero:
  GQA  XK = X U_k [L, r]: per-channel groups of G tokens (codes packed along tokens); the last L mod G
       tokens wait in an fp16 block window.  XV = X U_v [L, r]: per-token groups of G channels.
  MHA  X [L, d] per-token groups of G channels; K and V both come from it (r = d).
  Weights W_k, W_v [r, H_kv d_h] bf16: GQA's fused Sigma_k B_k^T, Sigma_v B_v^T (r = d/g); MHA's W_k, W_v.
Remat of KV head h at token t (position t; RoPE after the remat, rotate-half pairs (i, i + d_h/2)):
  k_t = rope(x^K_t W_k[:, h d_h : (h+1) d_h]),   v_t = x^V_t W_v[:, h d_h : (h+1) d_h]   (2 r d_h MACs)
  rope: (k1, k2) -> (k1 cos a - k2 sin a, k2 cos a + k1 sin a),  a_ti = t theta^(-i / (d_h/2))
The fused kernel keeps K and V [N, d_h] of a block of N tokens in registers, attends with
the flash-decoding partials of attention_fp16 (log2 domain) and its reduce kernel merges the parts.
"""

from __future__ import annotations

import math
import os
from dataclasses import dataclass

import torch
import triton
import triton.language as tl

from validate.families.attention_fp16 import MAX_SPLITS, decode_attention, reduce_kernel
from validate.families.packing import QuantTensor, TensorRecipe, attend, quantize
from validate.families.quant_attention import _float, _online, _operand, _repeat, _unpack

LOG2E = 1.4426950408889634
ROPE_THETA = 500000.0  # Llama-3.1
# launch defaults (the sm_90 specs compile the same): tokens per block, latent channels per MMA step. H200 sweep
# (benchmarks/gpu_sweep_xquant.py, validate/results/nvidia-h200-xquant-sweep.txt): r 128 with 2 stages beat 64 with
# 3 by 1.10-1.23x (fused b8 L16K 2.56 -> 2.10 ms, remat 2.41 -> 2.08, MHA b1 L8K 2.11 -> 1.91); 128 tokens needs
# 8 warps and gave 2.66-2.80 ms. With the keys as rows (_keys), remat_kernel runs best at r 64 and 3 stages
# (b8 L16K 1.94-1.96 ms vs 2.10 at r 128, 2 stages); fused_kernel there: GQA 1.02x, MHA 0.89x
BLOCK_N, R_BLOCK, NUM_WARPS, NUM_STAGES = 64, 128, 4, 2
REMAT_R_BLOCK, REMAT_STAGES = 64, 3
BLOCK_T, BLOCK_D = 32, 128  # accumulator update: tokens x channels per program


@triton.jit
def _dequant(wa, wb, a, c, BITS_A: tl.constexpr, BITS_B: tl.constexpr, G: tl.constexpr):
    """x = a*u + c from the code planes' bytes (u unpacked along the last axis); (a, c) repeated G times
    along it when they hold one column per group, else broadcast."""
    u = _unpack(wa.to(tl.int32), BITS_A)
    if BITS_B > 0:
        u = u | (_unpack(wb.to(tl.int32), BITS_B) << BITS_A)
    a, c = a.to(tl.float32), c.to(tl.float32)
    if a.shape[1] * G == u.shape[1]:
        a, c = _repeat(a, G), _repeat(c, G)
    return a * _float(u) + c


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
             R: tl.constexpr, BLOCK_N: tl.constexpr, BITS_A: tl.constexpr, BITS_B: tl.constexpr, G: tl.constexpr):
    """The K latent's x [BLOCK_N, R] at channels c0..: from the fp16 window (TAIL); from codes packed
    along tokens (byte row r of a plane holds tokens 8r/b.. of every channel, plane B's rows after plane
    A's nq*A/8; the block lies in group j0 // G as BLOCK_N <= G), dequantized as x^T [R, BLOCK_N]; or
    per-token codes (MHA's X)."""
    cc = c0 + tl.arange(0, R)
    if TAIL:
        x = tl.load(kw + (toks - nq_k)[:, None].to(tl.int64) * LAT + cc[None, :], mask=ok[:, None], other=0.0)
    elif K_TOKENS:
        ra = tl.arange(0, BLOCK_N * BITS_A // 8)
        wa = tl.load(kc + (j0 * BITS_A // 8 + ra[None, :]).to(tl.int64) * LAT + cc[:, None])  # [R, BLOCK_N*A/8]
        wb = wa
        if BITS_B > 0:
            rb = tl.arange(0, BLOCK_N * BITS_B // 8)
            wb = tl.load(kc + (nq_k * BITS_A // 8 + j0 * BITS_B // 8 + rb[None, :]).to(tl.int64) * LAT + cc[:, None])
        meta = (j0 // G) * LAT + cc[:, None]
        x = tl.trans(_dequant(wa, wb, tl.load(ks + meta), tl.load(kz + meta), BITS_A, BITS_B, G))
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
          BITS_A: tl.constexpr, BITS_B: tl.constexpr, G: tl.constexpr, UPCAST: tl.constexpr):
    """K's halves [BLOCK_N, HALF] of the head whose columns start at col0: rope(x W_k[:, h]), the dequantized
    latent the MMA's register operand and W_k's rows streaming through the pipeline as the other. H200 vs
    K^T = W_k^T x^T (each x^T tile stored to shared memory as the B operand): fused_kernel GQA 0.99x, MHA
    1.04x; remat_kernel 1.08x (2.11 -> 1.95 ms at b8 L16K, its best launch each)."""
    rr = tl.arange(0, R)
    ii = tl.arange(0, HALF)
    kl = tl.zeros([BLOCK_N, HALF], dtype=tl.float32)
    kh = tl.zeros([BLOCK_N, HALF], dtype=tl.float32)
    for c0 in range(0, LAT, R):
        x = _operand(_xk_tile(kc, ks, kz, kw, toks, ok, j0, nq_k, c0, TAIL, K_TOKENS, LAT, R, BLOCK_N, BITS_A,
                              BITS_B, G), UPCAST)  # [BLOCK_N, R]
        w = wk + (c0 + rr)[:, None].to(tl.int64) * KV_DIM + col0 + ii[None, :]  # [R, HALF] of W_k
        kl += tl.dot(x, _operand(tl.load(w), UPCAST))
        kh += tl.dot(x, _operand(tl.load(w + HALF), UPCAST))
    return _rope(kl, kh, toks, log2_theta, HALF)


@triton.jit
def _values(vc, vs, vz, wv, toks, ok, col0, LAT: tl.constexpr, KV_DIM: tl.constexpr, HEAD_DIM: tl.constexpr,
            BLOCK_N: tl.constexpr, R: tl.constexpr, BITS_A: tl.constexpr, BITS_B: tl.constexpr, G: tl.constexpr,
            UPCAST: tl.constexpr):
    """V [BLOCK_N, HEAD_DIM] = x^V W_v[:, h] (per-token groups along the latent)."""
    rr = tl.arange(0, R)
    dd = tl.arange(0, HEAD_DIM)
    v = tl.zeros([BLOCK_N, HEAD_DIM], dtype=tl.float32)
    for c0 in range(0, LAT, R):
        x = _operand(_x_channels(vc, vs, vz, toks, ok, c0, LAT, R, BITS_A, BITS_B, G), UPCAST)  # [BLOCK_N, R]
        w = tl.load(wv + (c0 + rr)[:, None].to(tl.int64) * KV_DIM + col0 + dd[None, :])  # [R, HEAD_DIM]
        v += tl.dot(x, _operand(w, UPCAST))
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
                 BITS_B: tl.constexpr, G: tl.constexpr, UPCAST: tl.constexpr):
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
    q_lo = _operand(tl.load(q_rows + ii[None, :], mask=row_ok[:, None], other=0.0), UPCAST)  # [GROUP_PAD, HALF]
    q_hi = _operand(tl.load(q_rows + HALF + ii[None, :], mask=row_ok[:, None], other=0.0), UPCAST)
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
                       KV_HEADS * HEAD_DIM, HALF, BLOCK_N, R, BITS_A, BITS_B, G, UPCAST)
        kl, kh = tl.trans(_operand(kl, UPCAST)), tl.trans(_operand(kh, UPCAST))  # [HALF, BLOCK_N]
        s = tl.dot(q_lo, kl) + tl.dot(q_hi, kh)  # [GROUP_PAD, BLOCK_N]
        p, m_i, l_i, acc = _online(s * qk_scale, ok, m_i, l_i, acc)
        v = _values(vc, vs, vz, wv, toks, ok, col0, LAT, KV_HEADS * HEAD_DIM, HEAD_DIM, BLOCK_N, R, BITS_A,
                    BITS_B, G, UPCAST)
        acc += tl.dot(_operand(p, UPCAST), _operand(v, UPCAST))
    out = heads * num_parts + part  # [GROUP_PAD] row of (b, query head, part)
    dd = tl.arange(0, HEAD_DIM)
    tl.store(m_ptr + out, m_i, mask=row_ok)
    tl.store(l_ptr + out, l_i, mask=row_ok)
    tl.store(acc_ptr + out[:, None] * HEAD_DIM + dd[None, :], acc, mask=row_ok[:, None])


@triton.jit
def remat_kernel(kc, ks, kz, kw, vc, vs, vz, wk, wv, k_out, v_out, log2_theta, context, nq_k, win_k,
                 TAIL: tl.constexpr, K_TOKENS: tl.constexpr, KV_HEADS: tl.constexpr, HEAD_DIM: tl.constexpr,
                 LAT: tl.constexpr, BLOCK_N: tl.constexpr, R: tl.constexpr, BITS_A: tl.constexpr,
                 BITS_B: tl.constexpr, G: tl.constexpr, UPCAST: tl.constexpr):
    h = tl.program_id(0)
    b = tl.program_id(2).to(tl.int64)
    kc, ks, kz, kw, vc, vs, vz = _slabs(kc, ks, kz, kw, vc, vs, vz, b, nq_k, win_k, context, LAT, BITS_A + BITS_B, G)
    HALF: tl.constexpr = HEAD_DIM // 2
    j0 = tl.program_id(1) * BLOCK_N
    end = nq_k
    if TAIL:
        j0 += nq_k
        end = context
    toks = j0 + tl.arange(0, BLOCK_N)
    ok = toks < end
    col0 = h * HEAD_DIM
    kl, kh = _keys(kc, ks, kz, kw, wk, toks, ok, j0, nq_k, log2_theta, col0, TAIL, K_TOKENS, LAT,
                   KV_HEADS * HEAD_DIM, HALF, BLOCK_N, R, BITS_A, BITS_B, G, UPCAST)
    v = _values(vc, vs, vz, wv, toks, ok, col0, LAT, KV_HEADS * HEAD_DIM, HEAD_DIM, BLOCK_N, R, BITS_A, BITS_B, G,
                UPCAST)
    rows = (b * KV_HEADS + h) * context + toks.to(tl.int64)  # [BLOCK_N] rows of K, V [B * H_kv * L, HEAD_DIM]
    ii = tl.arange(0, HALF)
    kt = k_out + rows[:, None] * HEAD_DIM + ii[None, :]  # [BLOCK_N, HALF]
    tl.store(kt, kl.to(k_out.dtype.element_ty), mask=ok[:, None])
    tl.store(kt + HALF, kh.to(k_out.dtype.element_ty), mask=ok[:, None])
    dd = tl.arange(0, HEAD_DIM)
    tl.store(v_out + rows[:, None] * HEAD_DIM + dd[None, :], v.to(v_out.dtype.element_ty), mask=ok[:, None])


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
            x = _operand(_x_channels(dc, ds, dz, toks, ok, c0, DW, R, BITS_A, BITS_B, G), UPCAST)
            w = tl.load(u_ptr + (c0 + rr)[:, None].to(tl.int64) * D + cols[None, :])  # [R, BLOCK_D]
            delta += tl.dot(x, _operand(w, UPCAST))
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
        u = _unpack(tl.load(ptr, mask=ok[:, None], other=0).to(tl.int32), 4)  # [BLOCK_T, BLOCK_D]
        x = step * (_float(u) - 8.0) + delta
        code = tl.minimum(tl.maximum(tl.floor(x * inv_step + 8.5), 0.0), 15.0).to(tl.int32)
        lo, hi = tl.split(tl.reshape(code, [BLOCK_T, BLOCK_D // 2, 2]))
        tl.store(ptr, (lo | (hi << 4)).to(tl.uint8), mask=ok[:, None])


@dataclass
class XLayer:
    """One layer's XQuant storage for a batch (packing.QuantTensor, heads dimension 1) and its remat weights."""

    xk: QuantTensor  # X U_k (GQA) or X (MHA)
    xv: QuantTensor | None  # X U_v (GQA); None: V from xk (MHA)
    wk: torch.Tensor  # [r, H_kv d_h] bf16
    wv: torch.Tensor
    kv_heads: int
    context: int
    theta: float = ROPE_THETA
    dequantized: tuple | None = None  # (x^K, x^V) [B, L, r] fp32, as the kernels see them

    @property
    def v_latent(self) -> QuantTensor:
        return self.xk if self.xv is None else self.xv


def recipes(bits: float, group: int, mha: bool) -> tuple[TensorRecipe, TensorRecipe | None]:
    """The roofline XQuant storage (roofline.methods.xquant's per-tensor TensorQuant): X per token; XK per
    channel with a block window of G tokens; XV per token."""
    from roofline.methods import parse_method

    config = parse_method(f"xquant:bits={bits:g},group_size={group}")
    if mha:
        return TensorRecipe(config.quant_for(bits, "channels")), None
    return TensorRecipe(config.quant_for(bits, "tokens")), TensorRecipe(config.quant_for(bits, "channels"))


def build_layer(xk: torch.Tensor, xv: torch.Tensor | None, wk: torch.Tensor, wv: torch.Tensor, kv_heads: int,
                bits: float = 2, group: int = 128, keep_dequantized: bool = True) -> XLayer:
    """Quantize latents [B, L, r] (xv None: MHA, one X) as roofline counts them."""
    rk, rv = recipes(bits, group, xv is None)
    qk, fk = quantize(xk[:, None], rk)
    qv, fv = quantize(xv[:, None], rv) if xv is not None else (None, fk)
    deq = (fk[:, 0], fv[:, 0]) if keep_dequantized else None
    return XLayer(qk, qv, wk.to(torch.bfloat16).contiguous(), wv.to(torch.bfloat16).contiguous(), kv_heads,
                  xk.shape[1], dequantized=deq)


def remat_reference(layer: XLayer) -> tuple[torch.Tensor, torch.Tensor]:
    """K, V [B, H_kv, L, d_h] in float32 from the dequantized latents: (x W)[:, h], RoPE on K."""
    xk, xv = layer.dequantized
    batch, context, _ = xk.shape
    dim = layer.wk.shape[1] // layer.kv_heads
    k = (xk @ layer.wk.float()).view(batch, context, layer.kv_heads, dim).transpose(1, 2)
    v = (xv @ layer.wv.float()).view(batch, context, layer.kv_heads, dim).transpose(1, 2)
    half = dim // 2
    inv = torch.exp2(-(torch.arange(half, dtype=torch.float32) / half) * math.log2(layer.theta))
    ang = inv.to(k.device)[None, :] * torch.arange(context, device=k.device, dtype=torch.float32)[:, None]
    cos, sin = ang.cos(), ang.sin()  # [L, half]
    k1, k2 = k[..., :half], k[..., half:]
    return torch.cat([k1 * cos - k2 * sin, k2 * cos + k1 * sin], -1), v


def reference(q: torch.Tensor, layer: XLayer) -> torch.Tensor:
    """dequant -> remat -> RoPE -> softmax(q k^T / sqrt(d_h)) v, all float32; q [B, H, d_h]."""
    k, v = remat_reference(layer)
    return attend(q, k, v)


def _args(layer: XLayer, fallback: torch.Tensor) -> list:
    """kc, ks, kz, kw, vc, vs, vz: empty tensors point at `fallback` (never read)."""
    k, v = layer.xk.tensors, layer.v_latent.tensors
    ts = [k["codes"], k["scale"], k["zero"], k["window"], v["codes"], v["scale"], v["zero"]]
    return [t if t.numel() else fallback for t in ts]


def constexprs(rec: TensorRecipe, latent: int, kv_heads: int, head_dim: int, block_n: int, r_block: int,
               upcast: bool | None = None) -> dict:
    """Compile-time parameters of fused_kernel / remat_kernel (launchers and sm_90 specs share them);
    `rec` is the K latent's recipe (along tokens: GQA's XK; along channels: MHA's X)."""
    k_tokens = rec.along == "tokens"
    if k_tokens and rec.group % block_n:
        raise ValueError(f"block_n: {block_n} must divide the K latent's token groups of {rec.group}")
    if latent % r_block or (r_block % rec.group and rec.group % r_block):
        raise ValueError(f"r_block: {r_block} must divide the latent {latent} and nest with groups of {rec.group}")
    upcast = os.environ.get("TRITON_INTERPRET", "0") == "1" if upcast is None else upcast
    return {"K_TOKENS": k_tokens, "KV_HEADS": kv_heads, "HEAD_DIM": head_dim, "LAT": latent, "BLOCK_N": block_n,
            "R": r_block, "BITS_A": rec.planes[0], "BITS_B": rec.planes[1], "G": rec.group, "UPCAST": upcast}


def acc_constexprs(rec: TensorRecipe, d: int, dw: int, up: bool, acc_bits: int, block_t: int, block_d: int,
                   r_block: int, upcast: bool | None = None) -> dict:
    """Compile-time parameters of acc_update_kernel."""
    if acc_bits not in (4, 16) or d % block_d or (up and dw % r_block):
        raise ValueError(f"accumulator: bits {acc_bits} (4 or 16), d {d} / block_d {block_d}, width {dw} / {r_block}")
    upcast = os.environ.get("TRITON_INTERPRET", "0") == "1" if upcast is None else upcast
    return {"D": d, "DW": dw, "BLOCK_T": block_t, "BLOCK_D": block_d, "R": r_block, "UP": up, "ACC_BITS": acc_bits,
            "BITS_A": rec.planes[0], "BITS_B": rec.planes[1], "G": rec.group, "UPCAST": upcast}


def _layer_constexprs(layer: XLayer, block_n: int, r_block: int) -> dict:
    latent, kv_dim = layer.wk.shape
    return constexprs(layer.xk.recipe, latent, layer.kv_heads, kv_dim // layer.kv_heads, block_n, r_block)


def fused_splits(nq_k: int, block_n: int) -> int:
    """Splits per (sequence, KV head): MAX_SPLITS, down to one block each. The remat makes the kernel
    compute-bound, and more, shorter programs even out the SMs' last wave (H200, batch 8, 16K tokens:
    132 TFLOP/s at attention_fp16's 2 programs per SM, 213 at 64 splits; batch 1 and 32 gain 1-6%)."""
    return max(1, min(MAX_SPLITS, triton.cdiv(nq_k, block_n)))


def decode(q, layer: XLayer, num_splits: int | None = None, out=None, work: dict | None = None,
           block_n: int = BLOCK_N, r_block: int = R_BLOCK, num_warps: int = NUM_WARPS, num_stages: int = NUM_STAGES):
    """Fused XQuant decode attention; q [B, H, d_h] bf16 contiguous (RoPE applied) -> out [B, H, d_h].
    `work` (a dict) keeps the partials between calls."""
    batch, heads, dim = q.shape
    ce = _layer_constexprs(layer, block_n, r_block)
    group = heads // layer.kv_heads
    nq_k, win_k = layer.xk.nq, layer.xk.recent
    num_splits = fused_splits(nq_k, block_n) if num_splits is None else num_splits
    chunk = triton.cdiv(triton.cdiv(max(nq_k, 1), num_splits), block_n) * block_n
    num_mid = triton.cdiv(nq_k, chunk)
    num_tail = triton.cdiv(win_k, block_n)
    num_parts = num_mid + num_tail
    work = {} if work is None else work
    if work.get("key") != (batch, heads, num_parts, dim, q.device):
        m = torch.empty(batch, heads, num_parts, dtype=torch.float32, device=q.device)
        work.update(key=(batch, heads, num_parts, dim, q.device), m=m, l=torch.empty_like(m),
                    acc=torch.empty(*m.shape, dim, dtype=torch.float32, device=q.device))
    out = torch.empty_like(q) if out is None else out
    assert q.is_contiguous() and heads % layer.kv_heads == 0 and dim == ce["HEAD_DIM"]
    args = (q, *_args(layer, q), layer.wk, layer.wv, work["m"], work["l"], work["acc"], dim ** -0.5 * LOG2E,
            math.log2(layer.theta), layer.context, nq_k, win_k, chunk, num_mid, num_parts)
    ce.update(GROUP=group, GROUP_PAD=max(16, triton.next_power_of_2(group)))
    if num_mid:
        # one program: the GROUP query heads of KV head h of one sequence, over `chunk` tokens whose K latent
        # is quantized; KV head fastest, so the heads of one chunk share its latent rows in L2
        fused_kernel[(layer.kv_heads, num_mid, batch)](*args, TAIL=False, **ce, num_warps=num_warps,
                                                       num_stages=num_stages)
    if num_tail:
        # one program: the GROUP query heads of KV head h of one sequence, over BLOCK_N tokens of K's fp16 window
        fused_kernel[(layer.kv_heads, num_tail, batch)](*args, TAIL=True, **ce, num_warps=num_warps,
                                                        num_stages=num_stages)
    # one program: one query head of one sequence, merging its parts
    grid = (batch * heads,)
    reduce_kernel[grid](work["m"], work["l"], work["acc"], out, num_parts, out.stride(0), out.stride(1),
                        HEADS=heads, HEAD_DIM=dim, SPLITS_PAD=max(2, triton.next_power_of_2(num_parts)), num_warps=4)
    return out


def materialize(layer: XLayer, kv: tuple | None = None, block_n: int = BLOCK_N, r_block: int = REMAT_R_BLOCK,
                num_warps: int = NUM_WARPS, num_stages: int = REMAT_STAGES) -> tuple[torch.Tensor, torch.Tensor]:
    """K (RoPE applied) and V [B, H_kv, L, d_h] bf16 written to memory from the latents."""
    ce = _layer_constexprs(layer, block_n, r_block)
    codes = layer.xk.tensors["codes"]
    batch, dim = codes.shape[0], ce["HEAD_DIM"]
    shape = (batch, layer.kv_heads, layer.context, dim)
    k, v = kv or (torch.empty(shape, dtype=torch.bfloat16, device=codes.device),
                  torch.empty(shape, dtype=torch.bfloat16, device=codes.device))
    nq_k, win_k = layer.xk.nq, layer.xk.recent
    args = (*_args(layer, k), layer.wk, layer.wv, k, v, math.log2(layer.theta), layer.context,
            nq_k, win_k)
    for tail, tokens in ((False, nq_k), (True, win_k)):
        if tokens:
            # one program: K and V of KV head h of one sequence at BLOCK_N tokens
            grid = (layer.kv_heads, triton.cdiv(tokens, block_n), batch)
            remat_kernel[grid](*args, TAIL=tail, **ce, num_warps=num_warps, num_stages=num_stages)
    return k, v


def materialized_decode(q, layer: XLayer, num_splits: int = 1, out=None, kv: tuple | None = None, **kwargs):
    """materialize() then attention_fp16.decode_attention over the bf16 K, V it wrote."""
    k, v = materialize(layer, kv, **kwargs)
    return decode_attention(q, k, v, num_splits, out=out)


def acc_update(delta: QuantTensor, acc: torch.Tensor, u_t: torch.Tensor | None = None, step: float = 1.0,
               block_t: int = BLOCK_T, block_d: int = BLOCK_D, r_block: int = R_BLOCK, num_warps: int = NUM_WARPS):
    """XQuant-CL: acc[b, t] += dequant(delta)[b, t] (@ U_kv^T when u_t [2r, d] is given), in place.
    acc is bf16 [B, L, d] or 4-bit codes uint8 [B, L, d/2] with x = step (u - 8): roofline counts the
    accumulator as e_b/8 L d bytes with no metadata (methods/xquant.py), so the 4-bit one has a single
    layer-wide step, a scalar argument, and is re-rounded after each add."""
    codes = delta.tensors["codes"]
    batch, tokens = codes.shape[0], delta.nq
    four = acc.dtype == torch.uint8
    d = acc.shape[-1] * (2 if four else 1)
    dw = u_t.shape[0] if u_t is not None else d
    if delta.recent or delta.sinks or delta.recipe.along != "channels":
        raise ValueError("delta: per-token groups with no fp16 tokens (roofline's dX)")
    ce = acc_constexprs(delta.recipe, d, dw, u_t is not None, 4 if four else 16, block_t, block_d, r_block)
    # one program: BLOCK_T tokens x BLOCK_D channels of one sequence's accumulator
    grid = (triton.cdiv(tokens, block_t), d // block_d, batch)
    acc_update_kernel[grid](codes, delta.tensors["scale"], delta.tensors["zero"], acc if u_t is None else u_t, acc,
                            step, 1.0 / step, tokens, **ce, num_warps=num_warps)
    return acc


def acc_reference(delta_deq: torch.Tensor, acc: torch.Tensor, u_t: torch.Tensor | None = None,
                  step: float = 1.0) -> torch.Tensor:
    """The update in float32 torch: bf16 acc + delta (@ U^T), or 4-bit codes clamp(floor((x + delta)/step + 8.5))."""
    delta = delta_deq.float() if u_t is None else delta_deq.float() @ u_t.float()
    if acc.dtype != torch.uint8:
        return (acc.float() + delta).to(acc.dtype)
    a = acc.to(torch.int32)
    u = torch.stack([a & 15, a >> 4], -1).flatten(-2).float()
    x = step * (u - 8.0) + delta
    code = (x * (1.0 / step) + 8.5).floor().clamp(0, 15).to(torch.int32)
    return (code[..., 0::2] | (code[..., 1::2] << 4)).to(torch.uint8)
