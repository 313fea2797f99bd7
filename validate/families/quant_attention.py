"""Family "quant_attention": GQA decode attention over a quantized KV cache, dequantization fused.

The cache is stored exactly as roofline's TensorQuant counts it (packing.py: codes, scales, zeros, fp16
sinks and window, bytes by part = `layout_bytes`). `decode` runs quant_kernels' fast kernel on caches
stored in a tiled layout (packing.cache_tilings: every bench preset at head_dim 128; same bytes, bits
placed for it; QUANT_NOTES.md) and the kernel below on the plain layout (any other recipe or shape).

Plain-layout kernel: one program covers one KV head of one sequence (its
GROUP query heads, padded to >= 16 rows for tl.dot) over one part of the context; two launches of
quant_decode_kernel cover the parts: TAIL=False the chunks of the middle, where both K and V are
quantized (packed bytes unpacked in registers with tl.interleave, scales loaded once per group), TAIL=True
the "tail" (the sinks, the fp16 windows and the tokens where only one of K, V is quantized, dequantized
element by element). Each part writes the flash-decoding partials m, l, acc (log2 domain, as
attention_fp16) and attention_fp16.reduce_kernel merges them.

Per group of G elements with dequantization x = a*u + c (packing.py), the middle applies (a, c):
  outer groups (the group runs across the reduction: KIVI's K over tokens, per-token V over channels):
      per element, x = a*u + c, then the dot product  (2 FLOPs per element);
  inner groups (along the reduction, InnerQ §4.4; SKVQ's K): once per group and query row,
      s_t = sum_g a_gt (q_g . u_gt) + c_gt sum(q_g),   o_d = a_d (p . u_d) + c_d sum(p)   (2/G per element
      and row), the V block being exactly one group of G tokens.
SKVQ's channel reorder is folded into W_q and W_o: the kernel attends in the stored (permuted) order.
"""

from __future__ import annotations

import os

import triton
import triton.language as tl

from roofline.validation.families import quant_attention as predicted
from validate.families import quant_kernels
from validate.families.attention_fp16 import reduce_kernel, relative_rms
from validate.families.packing import (
    MODES,
    QuantCache,
    Recipe,
    cache_tilings,
    layout_bytes,
    random_cache,
    recipe,
    reference,
)
from validate.families.quant_kernels import affine_masked as _affine  # noqa: F401  (aquakv imports it here too)
from validate.families.quant_kernels import fast_decode
from validate.registry import Case, register

__all__ = ["QuantAttention", "decode", "layout_bytes", "quant_decode_kernel", "sm90_spec"]

LOG2E = 1.4426950408889634
HEADS, KV_HEADS, HEAD_DIM = 32, 8, 128  # Llama-3.1-8B
METHODS = ("kivi-2", "kivi-4", "innerq-base", "innerq-hybrid", "skvq-k2v2")
BATCHES = (1, 8, 32)
CONTEXTS = (4096, 16384, 65536, 131072)
QUICK = (("kivi-2", 1, 16384), ("kivi-4", 8, 65536), ("innerq-base", 32, 4096), ("innerq-hybrid", 1, 131072),
         ("skvq-k2v2", 8, 16384))
BLOCK_N = 128  # tokens per loop step unless a V block must be one group of G tokens
TAIL_TOKENS = 64  # tokens per tail part
# Measured on an H200 (batch 1-8, context 64K-128K): dequantization makes each program ALU-heavy, so
# ~8 programs per SM (not 2 as for fp16) hide latency best; 4 warps; 2 stages, 1 when V is inner.
PROGRAMS_PER_SM = 8
MIN_SPLIT_TOKENS = 256
MAX_SPLITS = 64
CHECK_TOKENS = 4096


@triton.jit
def _unpack(x, BITS: tl.constexpr):
    """Bytes [R, C] (int32) -> BITS-bit codes [R, C*8/BITS]: code k of byte c (bits k*BITS..) to column
    c*8/BITS + k, by halving the field width with tl.interleave (no gathers, no shared memory)."""
    if BITS <= 4:
        x = tl.interleave(x & 15, x >> 4)
    if BITS <= 2:
        x = tl.interleave(x & 3, x >> 2)
    if BITS == 1:
        x = tl.interleave(x & 1, x >> 1)
    return x


@triton.jit
def _float(u):
    """Codes (0 <= u < 2^23) to fp32 without the quarter-rate int->float unit: the bits of 2^23 + u, less 2^23."""
    return (u | 0x4B000000).to(tl.float32, bitcast=True) - 8388608.0


@triton.jit
def _repeat(x, N: tl.constexpr):
    """[R, C] -> [R, C*N], each column repeated N times (one group's scale over its G elements)."""
    return tl.reshape(tl.broadcast_to(x[:, :, None], [x.shape[0], x.shape[1], N]), [x.shape[0], x.shape[1] * N])


@triton.jit
def _token_codes(codes, j0, nq, D: tl.constexpr, BLOCK: tl.constexpr, BITS_A: tl.constexpr, BITS_B: tl.constexpr):
    """Codes [D, BLOCK] of tokens j0.. (j0 a multiple of 8) of a tensor packed along tokens: byte row r of
    plane A holds tokens 8r/A.. of every channel, plane B's rows follow plane A's nq*A/8 rows."""
    dd = tl.arange(0, D)
    ra = tl.arange(0, BLOCK * BITS_A // 8)
    wa = tl.load(codes + (j0 * BITS_A // 8 + ra[None, :]).to(tl.int64) * D + dd[:, None],
                 mask=(j0 + ra[None, :] * (8 // BITS_A)) < nq, other=0)  # [D, BLOCK*A/8]
    u = _unpack(wa.to(tl.int32), BITS_A)
    if BITS_B > 0:
        rb = tl.arange(0, BLOCK * BITS_B // 8)
        wb = tl.load(codes + (nq * BITS_A // 8 + j0 * BITS_B // 8 + rb[None, :]).to(tl.int64) * D + dd[:, None],
                     mask=(j0 + rb[None, :] * (8 // BITS_B)) < nq, other=0)
        u = u | (_unpack(wb.to(tl.int32), BITS_B) << BITS_A)
    return u


@triton.jit
def _channel_codes(codes, toks, ok, c0, C: tl.constexpr, D: tl.constexpr, BITS_A: tl.constexpr,
                   BITS_B: tl.constexpr):
    """Codes [BLOCK, C] of channels c0..c0+C of tokens `toks`, packed along channels in token-major rows
    of D*b/8 bytes (plane A's D*A/8 bytes, then plane B's)."""
    rows = codes + toks[:, None].to(tl.int64) * (D * (BITS_A + BITS_B) // 8)  # [BLOCK, 1]
    ja = tl.arange(0, C * BITS_A // 8)
    u = _unpack(tl.load(rows + c0 * BITS_A // 8 + ja[None, :], mask=ok[:, None], other=0).to(tl.int32), BITS_A)
    if BITS_B > 0:
        jb = tl.arange(0, C * BITS_B // 8)
        wb = tl.load(rows + D * BITS_A // 8 + c0 * BITS_B // 8 + jb[None, :], mask=ok[:, None], other=0)
        u = u | (_unpack(wb.to(tl.int32), BITS_B) << BITS_A)
    return u


@triton.jit
def _element(codes, scale, zero, tok, ch, nq, mask, D: tl.constexpr, G: tl.constexpr, TOKENS: tl.constexpr,
             BITS_A: tl.constexpr, BITS_B: tl.constexpr, MODE: tl.constexpr):
    """x[tok, ch] = a*u + c element by element at any quantized token indices (the tail's few tokens)."""
    if TOKENS:
        idx, stride = tok, D
        base_a, base_b = codes + ch, codes + nq * BITS_A // 8 * D + ch
        meta = (tok // G) * D + ch
    else:
        idx, stride = ch, 1
        base_a = codes + tok.to(tl.int64) * (D * (BITS_A + BITS_B) // 8)
        base_b = base_a + D * BITS_A // 8
        meta = tok * (D // G) + ch // G
    w = tl.load(base_a + (idx // (8 // BITS_A)) * stride, mask=mask, other=0).to(tl.int32)
    u = (w >> ((idx % (8 // BITS_A)) * BITS_A)) & ((1 << BITS_A) - 1)
    if BITS_B > 0:
        w = tl.load(base_b + (idx // (8 // BITS_B)) * stride, mask=mask, other=0).to(tl.int32)
        u = u | (((w >> ((idx % (8 // BITS_B)) * BITS_B)) & ((1 << BITS_B) - 1)) << BITS_A)
    a, c = _affine(scale, zero, meta, mask, MODE, 1 << (BITS_A + BITS_B - 1))
    return a * _float(u) + c


@triton.jit
def _tail(codes, scale, zero, sinks, window, tok, ch, ok, num_sinks, nq, D: tl.constexpr, G: tl.constexpr,
          TOKENS: tl.constexpr, BITS_A: tl.constexpr, BITS_B: tl.constexpr, MODE: tl.constexpr):
    """Values at context positions `tok`: sinks [0, S), quantized [S, S + nq), the fp16 window after."""
    j = tok - num_sinks
    in_q = (j >= 0) & (j < nq)
    x = tl.load(sinks + tok * D + ch, mask=ok & (j < 0), other=0.0).to(tl.float32)
    xq = _element(codes, scale, zero, j, ch, nq, ok & in_q, D, G, TOKENS, BITS_A, BITS_B, MODE)
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
def _scores_outer(q, codes, scale, zero, j0, nq, D: tl.constexpr, G: tl.constexpr, BITS_A: tl.constexpr,
                  BITS_B: tl.constexpr, MODE: tl.constexpr, UPCAST: tl.constexpr, BLOCK: tl.constexpr):
    """q . k_t with k dequantized per element, x = a*u + c, (a, c) per channel and group of G tokens."""
    dd = tl.arange(0, D)
    gi = tl.arange(0, BLOCK // G)
    a, c = _affine(scale, zero, (j0 // G + gi[None, :]) * D + dd[:, None], (j0 + gi[None, :] * G) < nq, MODE,
                   1 << (BITS_A + BITS_B - 1))  # [D, BLOCK/G]
    u = _token_codes(codes, j0, nq, D, BLOCK, BITS_A, BITS_B)  # [D, BLOCK]
    return tl.dot(q, _operand(_repeat(a, G) * _float(u) + _repeat(c, G), UPCAST))


@triton.jit
def _scores_inner(q_rows, row_ok, codes, scale, zero, toks, ok, D: tl.constexpr, G: tl.constexpr,
                  BITS_A: tl.constexpr, BITS_B: tl.constexpr, MODE: tl.constexpr, UPCAST: tl.constexpr,
                  ROWS: tl.constexpr, BLOCK: tl.constexpr):
    """s_t = sum over channel groups g of a_gt (q_g . u_gt) + c_gt sum(q_g): scale and zero once per group."""
    s = tl.zeros([ROWS, BLOCK], dtype=tl.float32)
    for g in tl.static_range(D // G):
        qg = tl.load(q_rows + g * G + tl.arange(0, G)[None, :], mask=row_ok[:, None], other=0.0)  # [ROWS, G]
        u = _channel_codes(codes, toks, ok, g * G, G, D, BITS_A, BITS_B)  # [BLOCK, G]
        a, c = _affine(scale, zero, toks * (D // G) + g, ok, MODE, 1 << (BITS_A + BITS_B - 1))  # [BLOCK]
        dot = tl.dot(_operand(qg, UPCAST), tl.trans(_operand(_float(u), UPCAST)))  # [ROWS, BLOCK]
        s += dot * a[None, :] + tl.sum(qg.to(tl.float32), axis=1)[:, None] * c[None, :]
    return s


@triton.jit
def _pv_outer(p, codes, scale, zero, toks, ok, D: tl.constexpr, G: tl.constexpr, BITS_A: tl.constexpr,
              BITS_B: tl.constexpr, MODE: tl.constexpr, UPCAST: tl.constexpr):
    """p . v with v dequantized per element, (a, c) per token and group of G channels."""
    gi = tl.arange(0, D // G)
    a, c = _affine(scale, zero, toks[:, None] * (D // G) + gi[None, :], ok[:, None], MODE,
                   1 << (BITS_A + BITS_B - 1))  # [BLOCK, D/G]
    u = _channel_codes(codes, toks, ok, 0, D, D, BITS_A, BITS_B)  # [BLOCK, D]
    return tl.dot(_operand(p, UPCAST), _operand(_repeat(a, G) * _float(u) + _repeat(c, G), UPCAST))


@triton.jit
def _pv_inner(p, codes, scale, zero, j0, nq, D: tl.constexpr, G: tl.constexpr, BITS_A: tl.constexpr,
              BITS_B: tl.constexpr, MODE: tl.constexpr, UPCAST: tl.constexpr):
    """o_d = a_d (p . u_d) + c_d sum(p) over one group of G tokens (the block): scale and zero once per group."""
    dd = tl.arange(0, D)
    u = _token_codes(codes, j0, nq, D, G, BITS_A, BITS_B)  # [D, G]
    a, c = _affine(scale, zero, (j0 // G) * D + dd, dd < D, MODE, 1 << (BITS_A + BITS_B - 1))  # [D]
    dot = tl.dot(_operand(p, UPCAST), tl.trans(_operand(_float(u), UPCAST)))  # [ROWS, D]
    return dot * a[None, :] + tl.sum(p, axis=1)[:, None] * c[None, :]


@triton.jit
def quant_decode_kernel(
        q_ptr, kc, ks, kz, k_sinks, k_win, vc, vs, vz, v_sinks, v_win, m_ptr, l_ptr, acc_ptr,
        qk_scale, num_sinks, nq_k, nq_v, win_k, win_v, nq_mid, chunk, num_mid, tail_len, num_parts,
        TAIL: tl.constexpr, KV_HEADS: tl.constexpr, GROUP: tl.constexpr, GROUP_PAD: tl.constexpr,
        HEAD_DIM: tl.constexpr, BLOCK_N: tl.constexpr, K_TOKENS: tl.constexpr, K_BITS_A: tl.constexpr,
        K_BITS_B: tl.constexpr, K_G: tl.constexpr, K_MODE: tl.constexpr, V_TOKENS: tl.constexpr,
        V_BITS_A: tl.constexpr, V_BITS_B: tl.constexpr, V_G: tl.constexpr, V_MODE: tl.constexpr,
        UPCAST: tl.constexpr):
    pid = tl.program_id(0)
    bh = (tl.program_id(2) * KV_HEADS + tl.program_id(1)).to(tl.int64)  # sequence b, KV head h
    # this (b, h)'s slab of every tensor: [B, H, ...] contiguous
    kc += bh * (nq_k * HEAD_DIM * (K_BITS_A + K_BITS_B) // 8)
    ks += bh * (nq_k * HEAD_DIM // K_G)
    kz += bh * (nq_k * HEAD_DIM // K_G)
    vc += bh * (nq_v * HEAD_DIM * (V_BITS_A + V_BITS_B) // 8)
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
    if not TAIL:
        lo = pid * chunk
        for j0 in range(lo, tl.minimum(lo + chunk, nq_mid), BLOCK_N):
            toks = j0 + tl.arange(0, BLOCK_N)  # quantized-token indices
            ok = toks < nq_mid
            if K_TOKENS:
                s = _scores_outer(q, kc, ks, kz, j0, nq_k, HEAD_DIM, K_G, K_BITS_A, K_BITS_B, K_MODE, UPCAST,
                                  BLOCK_N)
            else:
                s = _scores_inner(q_rows, row_ok, kc, ks, kz, toks, ok, HEAD_DIM, K_G, K_BITS_A, K_BITS_B, K_MODE,
                                  UPCAST, GROUP_PAD, BLOCK_N)
            p, m_i, l_i, acc = _online(s * qk_scale, ok, m_i, l_i, acc)
            if V_TOKENS:
                acc += _pv_inner(p, vc, vs, vz, j0, nq_v, HEAD_DIM, V_G, V_BITS_A, V_BITS_B, V_MODE, UPCAST)
            else:
                acc += _pv_outer(p, vc, vs, vz, toks, ok, HEAD_DIM, V_G, V_BITS_A, V_BITS_B, V_MODE, UPCAST)
        part = pid
    else:
        lo = pid * chunk
        for i0 in range(lo, tl.minimum(lo + chunk, tail_len), BLOCK_N):
            i = i0 + tl.arange(0, BLOCK_N)  # tail index -> context position: sinks, then past the middle
            ok = i < tail_len
            tok = tl.where(i < num_sinks, i, i + nq_mid)
            kt = _tail(kc, ks, kz, k_sinks, k_win, tok[None, :], dd[:, None], ok[None, :], num_sinks, nq_k,
                       HEAD_DIM, K_G, K_TOKENS, K_BITS_A, K_BITS_B, K_MODE)  # [D, BLOCK_N]
            p, m_i, l_i, acc = _online(tl.dot(q, _operand(kt, UPCAST)) * qk_scale, ok, m_i, l_i, acc)
            v = _tail(vc, vs, vz, v_sinks, v_win, tok[:, None], dd[None, :], ok[:, None], num_sinks, nq_v,
                      HEAD_DIM, V_G, V_TOKENS, V_BITS_A, V_BITS_B, V_MODE)  # [BLOCK_N, D]
            acc += tl.dot(_operand(p, UPCAST), _operand(v, UPCAST))
        part = num_mid + pid
    part = heads * num_parts + part  # [GROUP_PAD] row of (b, query head, part)
    tl.store(m_ptr + part, m_i, mask=row_ok)
    tl.store(l_ptr + part, l_i, mask=row_ok)
    tl.store(acc_ptr + part[:, None] * HEAD_DIM + dd[None, :], acc, mask=row_ok[:, None])


def choose_splits(programs: int, tokens: int, sm_count: int) -> int:
    """Splits of the quantized middle per (sequence, KV head): ~PROGRAMS_PER_SM programs per SM, each
    split >= MIN_SPLIT_TOKENS tokens, at most MAX_SPLITS."""
    want = triton.cdiv(PROGRAMS_PER_SM * sm_count, programs)
    return max(1, min(want, tokens // MIN_SPLIT_TOKENS, MAX_SPLITS))


def default_stages(r: Recipe) -> int:
    """Software-pipelining stages of the middle loop: 1 when V is inner (G-token blocks), else 2."""
    return 1 if r.v.along == "tokens" else 2


def block_n(r: Recipe) -> int:
    """Tokens per loop step: one V group when V groups run along tokens (inner V), else BLOCK_N, a
    multiple of K's token groups when K groups run along tokens."""
    if r.v.along == "tokens":
        if r.k.along == "tokens" and r.v.group % r.k.group:
            raise ValueError(f"group_size: V groups of {r.v.group} tokens must hold whole K groups of {r.k.group}")
        return r.v.group
    return max(BLOCK_N, r.k.group) if r.k.along == "tokens" else BLOCK_N


def constexprs(r: Recipe, heads: int, kv_heads: int, dim: int, upcast: bool | None = None) -> dict:
    """The kernel's compile-time parameters (the launcher and sm90_spec share them)."""
    for name, t in (("K", r.k), ("V", r.v)):
        if t.group < 16 or t.group & (t.group - 1) or dim % t.group:
            raise ValueError(f"group_size: {name} groups of {t.group} must be a power of two >= 16 dividing {dim}")
        if t.mode == "hybrid" and t.meta != "fp16":
            raise ValueError(f"meta_dtype: hybrid {name} flags groups in the sign bit of an fp16 scale")
    upcast = os.environ.get("TRITON_INTERPRET", "0") == "1" if upcast is None else upcast
    group = heads // kv_heads
    out = {"KV_HEADS": kv_heads, "GROUP": group, "GROUP_PAD": max(16, triton.next_power_of_2(group)), "HEAD_DIM": dim,
           "BLOCK_N": block_n(r)}
    for name, t in (("K", r.k), ("V", r.v)):
        out.update({f"{name}_TOKENS": t.along == "tokens", f"{name}_BITS_A": t.planes[0],
                    f"{name}_BITS_B": t.planes[1], f"{name}_G": t.group, f"{name}_MODE": MODES[t.mode]})
    return {**out, "UPCAST": upcast}


def _pointers(t, fallback) -> list:
    """codes, scale, zero, sinks, window of one tensor; absent or empty ones point at `fallback` (never read)."""
    ts = t.tensors
    names = ("codes", "scale", "zero" if "zero" in ts else "scale", "sinks", "window")
    return [ts[n] if ts[n].numel() else fallback for n in names]


def decode(q, cache: QuantCache, num_splits: int | None = None, out=None, work: dict | None = None,
           num_warps: int = 4, num_stages: int | None = None):
    """softmax(q k^T / sqrt(D)) v per query head over the quantized cache, in its stored channel order;
    q [B, HQ, D] bf16 (contiguous) -> out [B, HQ, D]. `work` (a dict) keeps the partials between calls."""
    import torch

    if cache.k.tiling is not None:  # stored tiled: quant_kernels' fast kernel, its launch defaults
        return fast_decode(q, cache, num_splits, out, work, None if num_warps == 4 else num_warps, num_stages)
    batch, heads, dim = q.shape
    k, v = cache.k, cache.v
    kv_heads = k.tensors["codes"].shape[1]
    ce = constexprs(cache.recipe, heads, kv_heads, dim)
    block = ce["BLOCK_N"]
    nq_mid = min(k.nq, v.nq)
    tail_len = cache.context - nq_mid
    if num_splits is None:
        sms = torch.cuda.get_device_properties(q.device).multi_processor_count if q.is_cuda else 4
        num_splits = choose_splits(batch * kv_heads, nq_mid, sms)
    num_stages = default_stages(cache.recipe) if num_stages is None else num_stages
    chunk = triton.cdiv(triton.cdiv(max(nq_mid, 1), num_splits), block) * block
    num_mid = triton.cdiv(nq_mid, chunk)
    tail_chunk = triton.cdiv(TAIL_TOKENS, block) * block
    num_parts = num_mid + triton.cdiv(tail_len, tail_chunk)
    work = {} if work is None else work
    key = (batch, heads, num_parts, dim, q.device)
    if work.get("key") != key:
        m = torch.empty(batch, heads, num_parts, dtype=torch.float32, device=q.device)
        work.update(key=key, m=m, l=torch.empty_like(m), acc=torch.empty(*m.shape, dim, dtype=torch.float32,
                                                                          device=q.device))
    out = torch.empty_like(q) if out is None else out
    assert q.is_contiguous() and heads % kv_heads == 0
    args = (q, *_pointers(k, q), *_pointers(v, q), work["m"], work["l"], work["acc"], dim ** -0.5 * LOG2E,
            k.sinks, k.nq, v.nq, k.recent, v.recent, nq_mid)
    if num_mid:
        # one program: the GROUP query heads of one KV head of one sequence, over `chunk` quantized tokens
        grid = (num_mid, kv_heads, batch)
        quant_decode_kernel[grid](*args, chunk, num_mid, tail_len, num_parts, TAIL=False, **ce,
                                  num_warps=num_warps, num_stages=num_stages)
    if num_parts > num_mid:
        # one program: the GROUP query heads of one KV head of one sequence, over `tail_chunk` tail tokens
        grid = (num_parts - num_mid, kv_heads, batch)
        quant_decode_kernel[grid](*args, tail_chunk, num_mid, tail_len, num_parts, TAIL=True, **ce,
                                  num_warps=num_warps, num_stages=1)
    # one program: one query head of one sequence, merging its parts
    grid = (batch * heads,)
    reduce_kernel[grid](work["m"], work["l"], work["acc"], out, num_parts, out.stride(0), out.stride(1),
                        HEADS=heads, HEAD_DIM=dim, SPLITS_PAD=max(2, triton.next_power_of_2(num_parts)), num_warps=4)
    return out


def attention(q, cache: QuantCache, **kwargs):
    """decode() for a query in the model's channel order: SKVQ's reorder, folded into W_q and W_o in a
    model, is applied here to q and undone on the output."""
    from validate.families.packing import permute_channels, unpermute_channels

    if cache.perm_k is None:
        return decode(q, cache, **kwargs)
    out = decode(permute_channels(q, cache.perm_k).contiguous(), cache, **kwargs)
    return unpermute_channels(out, cache.perm_v)


def sm90_spec(method: str, tail: bool = False, heads: int = HEADS, kv_heads: int = KV_HEADS, dim: int = HEAD_DIM,
              num_warps: int | None = None, num_stages: int | None = None) -> dict:
    """A validate.sm90 compile spec of the kernel that runs `method`'s storage (quant_kernels' fast kernel
    where the cache is stored tiled, else quant_decode_kernel), middle or tail part."""
    r = recipe(method)
    tk, tv = cache_tilings(r, dim)
    if tk is not None:
        ce = quant_kernels.plan(r, tk, tv, heads, kv_heads, dim, emu=False)
        warps, _, stages = quant_kernels.launch_defaults(tk, tv)
        warps = num_warps or warps
        return {"module": quant_kernels.__name__, "kernel": "fast_decode_kernel",
                "signature": quant_kernels.signature(r), "constexprs": {**ce, "TAIL": tail},
                "num_warps": 4 if tail else warps, "num_stages": 1 if tail else (num_stages or stages)}
    sig = {"q_ptr": "*bf16", "m_ptr": "*fp32", "l_ptr": "*fp32", "acc_ptr": "*fp32", "qk_scale": "fp32"}
    for x, t in (("k", r.k), ("v", r.v)):
        meta = "*fp16" if t.meta == "fp16" else "*fp8e4nv"
        sig.update({f"{x}c": "*i32", f"{x}s": meta, f"{x}z": meta, f"{x}_sinks": "*fp16", f"{x}_win": "*fp16"})
    for name in ("num_sinks", "nq_k", "nq_v", "win_k", "win_v", "nq_mid", "chunk", "num_mid", "tail_len",
                 "num_parts"):
        sig[name] = "i32"
    return {"module": __name__, "kernel": "quant_decode_kernel", "signature": sig,
            "constexprs": {**constexprs(r, heads, kv_heads, dim, upcast=False), "TAIL": tail},
            "num_warps": num_warps or 4, "num_stages": 1 if tail else (num_stages or default_stages(r))}


def _params(method: str, batch: int, context: int) -> dict:
    return {"method": method, "batch": batch, "context": context, "num_heads": HEADS, "num_kv_heads": KV_HEADS,
            "head_dim": HEAD_DIM}


def _check(r: Recipe, p: dict) -> float:
    """Relative RMS of the kernel against the torch reference at one sequence of <= CHECK_TOKENS tokens."""
    import torch

    cache = random_cache(r, 1, p["num_kv_heads"], min(p["context"], CHECK_TOKENS), p["head_dim"], "cuda", True)
    q = torch.randn(1, p["num_heads"], p["head_dim"], dtype=torch.bfloat16, device="cuda")
    error = relative_rms(attention(q, cache), reference(q, cache))
    if error > 2e-2:
        raise AssertionError(f"kernel differs from the torch reference: relative RMS {error:.3g}")
    return error


def _run(case: Case) -> dict:
    import torch

    from validate.harness import eager_ms, graph_ms, input_sets

    p = case.params
    r = recipe(p["method"])
    batch, heads, kv_heads, context, dim = p["batch"], p["num_heads"], p["num_kv_heads"], p["context"], p["head_dim"]
    error = _check(r, p)

    def make():
        # the query in the stored channel order: SKVQ's reorder lives in W_q
        q = torch.randn(batch, heads, dim, dtype=torch.bfloat16, device="cuda")
        return q, random_cache(r, batch, kv_heads, context, dim, "cuda")

    sets = input_sets(make, sum(layout_bytes(p).values()))
    cache = sets[0][1]
    sms = torch.cuda.get_device_properties(torch.cuda.current_device()).multi_processor_count
    # the fast kernel (tiled storage) picks its splits from its occupancy; the plain one here
    splits = None if cache.k.tiling else choose_splits(batch * kv_heads, min(cache.k.nq, cache.v.nq), sms)
    out, work = torch.empty_like(sets[0][0]), {}

    def kernel(q, cache):
        return decode(q, cache, splits, out, work)

    ms = graph_ms(kernel, sets)
    return {"ms": ms, **predicted.work(case.params), "eager_ms": eager_ms(kernel, sets),
            "num_splits": splits or work.get("num_splits"), "kernel": "tiled" if cache.k.tiling else "plain",
            "rotation": len(sets), "check_rel_rms": error}


@register
class QuantAttention:
    name = "quant_attention"

    def cases(self, quick: bool) -> list[Case]:
        grid = QUICK if quick else [(m, b, n) for m in METHODS for b in BATCHES for n in CONTEXTS]
        return [Case(self.name, f"{m}_b{b}_l{n}", _params(m, b, n)) for m, b, n in grid]

    def run(self, case: Case) -> dict:
        return _run(case)

    def predict(self, case: Case, hardware) -> dict:
        return predicted.predict(case, hardware)
