"""quant_attention's kernel for the plain layout (any recipe or shape the tiled layouts do not cover) and its
launcher: packed bytes unpacked in registers, scales once per group (the family's docstring)."""

from __future__ import annotations

import triton
import triton.language as tl

from validate.common.flash_decode import reduce_kernel, split_state
from validate.common.quant_triton import affine_masked, channel_codes, code_float, repeat, unpack
from validate.common.recipes import MODES, Recipe
from validate.common.triton_helpers import LOG2E, interpreting, online, operand
from validate.common.triton_helpers import choose_splits as choose_splits_for
from validate.ops.quant_attention.cache import QuantCache

BLOCK_N = 128  # tokens per loop step unless a V block must be one group of G tokens
TAIL_TOKENS = 64  # tokens per tail part
# Measured on an H200 (batch 1-8, context 64K-128K): dequantization makes each program ALU-heavy, so
# ~8 programs per SM (not 2 as for fp16) hide latency best; 4 warps; 2 stages, 1 when V is inner.
PROGRAMS_PER_SM = 8
MIN_SPLIT_TOKENS = 256
MAX_SPLITS = 64


@triton.jit
def _token_codes(codes, j0, nq, D: tl.constexpr, BLOCK: tl.constexpr, BITS_A: tl.constexpr, BITS_B: tl.constexpr):
    """Codes [D, BLOCK] of tokens j0.. (j0 a multiple of 8) of a tensor packed along tokens: byte row r of
    plane A holds tokens 8r/A.. of every channel, plane B's rows follow plane A's nq*A/8 rows."""
    dd = tl.arange(0, D)
    ra = tl.arange(0, BLOCK * BITS_A // 8)
    wa = tl.load(codes + (j0 * BITS_A // 8 + ra[None, :]).to(tl.int64) * D + dd[:, None],
                 mask=(j0 + ra[None, :] * (8 // BITS_A)) < nq, other=0)  # [D, BLOCK*A/8]
    u = unpack(wa.to(tl.int32), BITS_A)
    if BITS_B > 0:
        rb = tl.arange(0, BLOCK * BITS_B // 8)
        wb = tl.load(codes + (nq * BITS_A // 8 + j0 * BITS_B // 8 + rb[None, :]).to(tl.int64) * D + dd[:, None],
                     mask=(j0 + rb[None, :] * (8 // BITS_B)) < nq, other=0)
        u = u | (unpack(wb.to(tl.int32), BITS_B) << BITS_A)
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
    a, c = affine_masked(scale, zero, meta, mask, MODE, 1 << (BITS_A + BITS_B - 1))
    return a * code_float(u) + c


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
def _scores_outer(q, codes, scale, zero, j0, nq, D: tl.constexpr, G: tl.constexpr, BITS_A: tl.constexpr,
                  BITS_B: tl.constexpr, MODE: tl.constexpr, UPCAST: tl.constexpr, BLOCK: tl.constexpr):
    """q . k_t with k dequantized per element, x = a*u + c, (a, c) per channel and group of G tokens."""
    dd = tl.arange(0, D)
    gi = tl.arange(0, BLOCK // G)
    a, c = affine_masked(scale, zero, (j0 // G + gi[None, :]) * D + dd[:, None], (j0 + gi[None, :] * G) < nq, MODE,
                   1 << (BITS_A + BITS_B - 1))  # [D, BLOCK/G]
    u = _token_codes(codes, j0, nq, D, BLOCK, BITS_A, BITS_B)  # [D, BLOCK]
    return tl.dot(q, operand(repeat(a, G) * code_float(u) + repeat(c, G), UPCAST))


@triton.jit
def _scores_inner(q_rows, row_ok, codes, scale, zero, toks, ok, D: tl.constexpr, G: tl.constexpr,
                  BITS_A: tl.constexpr, BITS_B: tl.constexpr, MODE: tl.constexpr, UPCAST: tl.constexpr,
                  ROWS: tl.constexpr, BLOCK: tl.constexpr):
    """s_t = sum over channel groups g of a_gt (q_g . u_gt) + c_gt sum(q_g): scale and zero once per group."""
    s = tl.zeros([ROWS, BLOCK], dtype=tl.float32)
    for g in tl.static_range(D // G):
        qg = tl.load(q_rows + g * G + tl.arange(0, G)[None, :], mask=row_ok[:, None], other=0.0)  # [ROWS, G]
        u = channel_codes(codes, toks, ok, g * G, G, D, BITS_A, BITS_B)  # [BLOCK, G]
        a, c = affine_masked(scale, zero, toks * (D // G) + g, ok, MODE, 1 << (BITS_A + BITS_B - 1))  # [BLOCK]
        dot = tl.dot(operand(qg, UPCAST), tl.trans(operand(code_float(u), UPCAST)))  # [ROWS, BLOCK]
        s += dot * a[None, :] + tl.sum(qg.to(tl.float32), axis=1)[:, None] * c[None, :]
    return s


@triton.jit
def _pv_outer(p, codes, scale, zero, toks, ok, D: tl.constexpr, G: tl.constexpr, BITS_A: tl.constexpr,
              BITS_B: tl.constexpr, MODE: tl.constexpr, UPCAST: tl.constexpr):
    """p . v with v dequantized per element, (a, c) per token and group of G channels."""
    gi = tl.arange(0, D // G)
    a, c = affine_masked(scale, zero, toks[:, None] * (D // G) + gi[None, :], ok[:, None], MODE,
                   1 << (BITS_A + BITS_B - 1))  # [BLOCK, D/G]
    u = channel_codes(codes, toks, ok, 0, D, D, BITS_A, BITS_B)  # [BLOCK, D]
    return tl.dot(operand(p, UPCAST), operand(repeat(a, G) * code_float(u) + repeat(c, G), UPCAST))


@triton.jit
def _pv_inner(p, codes, scale, zero, j0, nq, D: tl.constexpr, G: tl.constexpr, BITS_A: tl.constexpr,
              BITS_B: tl.constexpr, MODE: tl.constexpr, UPCAST: tl.constexpr):
    """o_d = a_d (p . u_d) + c_d sum(p) over one group of G tokens (the block): scale and zero once per group."""
    dd = tl.arange(0, D)
    u = _token_codes(codes, j0, nq, D, G, BITS_A, BITS_B)  # [D, G]
    a, c = affine_masked(scale, zero, (j0 // G) * D + dd, dd < D, MODE, 1 << (BITS_A + BITS_B - 1))  # [D]
    dot = tl.dot(operand(p, UPCAST), tl.trans(operand(code_float(u), UPCAST)))  # [ROWS, D]
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
    q = operand(tl.load(q_rows + dd[None, :], mask=row_ok[:, None], other=0.0), UPCAST)  # [GROUP_PAD, D]
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
            p, m_i, l_i, acc = online(s * qk_scale, ok, m_i, l_i, acc)
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
            p, m_i, l_i, acc = online(tl.dot(q, operand(kt, UPCAST)) * qk_scale, ok, m_i, l_i, acc)
            v = _tail(vc, vs, vz, v_sinks, v_win, tok[:, None], dd[None, :], ok[:, None], num_sinks, nq_v,
                      HEAD_DIM, V_G, V_TOKENS, V_BITS_A, V_BITS_B, V_MODE)  # [BLOCK_N, D]
            acc += tl.dot(operand(p, UPCAST), operand(v, UPCAST))
        part = num_mid + pid
    part = heads * num_parts + part  # [GROUP_PAD] row of (b, query head, part)
    tl.store(m_ptr + part, m_i, mask=row_ok)
    tl.store(l_ptr + part, l_i, mask=row_ok)
    tl.store(acc_ptr + part[:, None] * HEAD_DIM + dd[None, :], acc, mask=row_ok[:, None])


def choose_splits(programs: int, tokens: int, sm_count: int) -> int:
    """Splits of the quantized middle per (sequence, KV head): ~PROGRAMS_PER_SM programs per SM, each
    split >= MIN_SPLIT_TOKENS tokens, at most MAX_SPLITS."""
    return choose_splits_for(programs, tokens, sm_count, PROGRAMS_PER_SM, MIN_SPLIT_TOKENS, MAX_SPLITS)


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
    upcast = interpreting() if upcast is None else upcast
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


def decode_plain(q, cache: QuantCache, num_splits: int | None = None, out=None, work: dict | None = None,
                 num_warps: int = 4, num_stages: int | None = None):
    """softmax(q k^T / sqrt(D)) v per query head over the quantized cache, in its stored channel order;
    q [B, HQ, D] bf16 (contiguous) -> out [B, HQ, D]. `work` (a dict) keeps the partials between calls."""
    import torch

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
    work = split_state(work, batch, heads, num_parts, dim, q.device)
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
