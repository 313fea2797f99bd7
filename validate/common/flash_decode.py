"""Split-K flash-decoding over a bf16 KV cache: the fp16_attention family's kernel, the kernel xquant's
materialized path runs on the K and V it wrote, and the merge every split-K family's partials go through.

One new query token per sequence attends over `context` cached tokens. `split_kernel` gives each program one
KV head of one sequence (all GROUP = H / H_kv query heads at once, padded to >= 16 rows for tl.dot) and
one context split, and writes the split's partial softmax state in the log2 domain:
    m_s = max_t s_t,   l_s = sum_t 2^(s_t - m_s),   acc_s = sum_t 2^(s_t - m_s) v_t,
    s_t = (q . k_t) * sm_scale * log2(e).
`reduce_kernel` merges the splits:  M = max_s m_s,  o = sum_s 2^(m_s - M) acc_s / sum_s 2^(m_s - M) l_s.
Layouts: q [B, H, D], k and v [B, H_kv, L, D] (each head's context contiguous), out [B, H, D].
"""

from __future__ import annotations

import triton
import triton.language as tl

from validate.common.triton_helpers import choose_splits, interpreting, online

MAX_SPLITS = 64
BLOCK_N = 128  # context tokens per loop step (64 and 128 within noise on H200; 128 ahead at batch >= 32)
MIN_SPLIT_TOKENS = 128
# programs per SM: the best of 2, 4 and 8 on an H200 over batch 1..64, context 4K..128K, within run-to-run noise
PROGRAMS_PER_SM = 2


@triton.jit
def split_kernel(q_ptr, k_ptr, v_ptr, m_ptr, l_ptr, acc_ptr, sm_scale, context, split_len, num_splits,
                 stride_qb, stride_qh, stride_kb, stride_kh, stride_kt, stride_vb, stride_vh, stride_vt,
                 KV_HEADS: tl.constexpr, GROUP: tl.constexpr, GROUP_PAD: tl.constexpr,
                 HEAD_DIM: tl.constexpr, BLOCK_N: tl.constexpr, UPCAST: tl.constexpr):
    pid_bh = tl.program_id(0)
    pid_s = tl.program_id(1)
    b = (pid_bh // KV_HEADS).to(tl.int64)
    h = (pid_bh % KV_HEADS).to(tl.int64)
    rows = tl.arange(0, GROUP_PAD)  # [GROUP_PAD] query heads of KV head h (padded)
    row_ok = rows < GROUP
    heads = h * GROUP + rows.to(tl.int64)
    cols = tl.arange(0, HEAD_DIM).to(tl.int64)  # [HEAD_DIM]
    q = tl.load(q_ptr + b * stride_qb + heads[:, None] * stride_qh + cols[None, :],
                mask=row_ok[:, None], other=0.0)  # [GROUP_PAD, HEAD_DIM]
    if UPCAST:
        q = q.to(tl.float32)
    k_base = k_ptr + b * stride_kb + h * stride_kh
    v_base = v_ptr + b * stride_vb + h * stride_vh
    qk_scale = sm_scale * 1.4426950408889634  # log2(e): scores in the log2 domain, exp2 below
    start = pid_s * split_len
    end = tl.minimum(start + split_len, context)
    m_i = tl.full([GROUP_PAD], -1.0e30, dtype=tl.float32)
    l_i = tl.zeros([GROUP_PAD], dtype=tl.float32)
    acc = tl.zeros([GROUP_PAD, HEAD_DIM], dtype=tl.float32)
    for n0 in range(start, end, BLOCK_N):
        toks = n0 + tl.arange(0, BLOCK_N)  # [BLOCK_N]
        t_ok = toks < end
        t64 = toks.to(tl.int64)
        k = tl.load(k_base + t64[:, None] * stride_kt + cols[None, :], mask=t_ok[:, None], other=0.0)
        v = tl.load(v_base + t64[:, None] * stride_vt + cols[None, :], mask=t_ok[:, None], other=0.0)
        if UPCAST:
            k = k.to(tl.float32)
            v = v.to(tl.float32)
        s = tl.dot(q, tl.trans(k)) * qk_scale  # [GROUP_PAD, BLOCK_N] fp32
        p, m_i, l_i, acc = online(s, t_ok, m_i, l_i, acc)
        acc += tl.dot(p.to(v.dtype), v)  # [GROUP_PAD, HEAD_DIM]
    part = (b * KV_HEADS * GROUP + heads) * num_splits + pid_s  # [GROUP_PAD] row of (b, head, split)
    tl.store(m_ptr + part, m_i, mask=row_ok)
    tl.store(l_ptr + part, l_i, mask=row_ok)
    tl.store(acc_ptr + part[:, None] * HEAD_DIM + cols[None, :], acc, mask=row_ok[:, None])


@triton.jit
def reduce_kernel(m_ptr, l_ptr, acc_ptr, o_ptr, num_splits, stride_ob, stride_oh,
                  HEADS: tl.constexpr, HEAD_DIM: tl.constexpr, SPLITS_PAD: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)  # b * HEADS + head
    splits = tl.arange(0, SPLITS_PAD)
    s_ok = splits < num_splits
    cols = tl.arange(0, HEAD_DIM).to(tl.int64)
    part = row * num_splits + splits.to(tl.int64)  # [SPLITS_PAD]
    m = tl.load(m_ptr + part, mask=s_ok, other=float("-inf"))
    l_s = tl.load(l_ptr + part, mask=s_ok, other=0.0)
    acc = tl.load(acc_ptr + part[:, None] * HEAD_DIM + cols[None, :], mask=s_ok[:, None], other=0.0)
    w = tl.exp2(m - tl.max(m, axis=0))  # [SPLITS_PAD]; 0 for the padding
    out = tl.sum(acc * w[:, None], axis=0) / tl.sum(l_s * w, axis=0)  # [HEAD_DIM]
    b, head = row // HEADS, row % HEADS
    tl.store(o_ptr + b * stride_ob + head * stride_oh + cols, out.to(o_ptr.dtype.element_ty))


def decode_splits(programs: int, context: int, sm_count: int, block_n: int) -> int:
    """Splits per (sequence, KV head) so that programs x splits reaches ~PROGRAMS_PER_SM programs per SM, each
    split keeping >= MIN_SPLIT_TOKENS (and >= block_n) tokens, at most MAX_SPLITS."""
    return choose_splits(programs, context, sm_count, PROGRAMS_PER_SM, max(MIN_SPLIT_TOKENS, block_n), MAX_SPLITS)


def decode_attention(q, k, v, num_splits: int = 1, block_n: int = BLOCK_N, sm_scale: float | None = None,
                     out=None, num_warps: int = 4, num_stages: int = 2):
    """softmax(q k^T * sm_scale) v per query head against its KV head (GQA); q [B, H, D] and
    k, v [B, H_kv, L, D] in bf16/fp16, fp32 accumulation; returns out [B, H, D] in q's dtype."""
    import torch

    batch, heads, dim = q.shape
    _, kv_heads, context, _ = k.shape
    group = heads // kv_heads
    assert heads % kv_heads == 0 and k.shape == v.shape and q.stride(2) == k.stride(3) == v.stride(3) == 1
    sm_scale = dim ** -0.5 if sm_scale is None else sm_scale
    split_len = triton.cdiv(triton.cdiv(context, num_splits), block_n) * block_n
    num_splits = triton.cdiv(context, split_len)  # no split is empty
    m = torch.empty(batch, heads, num_splits, dtype=torch.float32, device=q.device)
    l_s = torch.empty_like(m)
    acc = torch.empty(batch, heads, num_splits, dim, dtype=torch.float32, device=q.device)
    out = torch.empty_like(q) if out is None else out
    upcast = interpreting()  # the interpreter has no bf16 tl.dot
    # one program: all `group` query heads of one KV head of one sequence, over one context split
    grid = (batch * kv_heads, num_splits)
    split_kernel[grid](q, k, v, m, l_s, acc, sm_scale, context, split_len, num_splits,
                       q.stride(0), q.stride(1), k.stride(0), k.stride(1), k.stride(2),
                       v.stride(0), v.stride(1), v.stride(2),
                       KV_HEADS=kv_heads, GROUP=group, GROUP_PAD=max(16, triton.next_power_of_2(group)),
                       HEAD_DIM=dim, BLOCK_N=block_n, UPCAST=upcast, num_warps=num_warps, num_stages=num_stages)
    # one program: one query head of one sequence, merging its splits
    grid = (batch * heads,)
    reduce_kernel[grid](m, l_s, acc, out, num_splits, out.stride(0), out.stride(1), HEADS=heads, HEAD_DIM=dim,
                        SPLITS_PAD=max(2, triton.next_power_of_2(num_splits)), num_warps=4)
    return out


def split_state(work: dict | None, batch: int, heads: int, num_parts: int, dim: int, device) -> dict:
    """fp32 partial softmax state of split-K decode (max m, sum l: [B, H, parts]; acc: [B, H, parts, D]) kept in
    `work` and reallocated only when the shape changes (graph replays reuse the same buffers)."""
    import torch

    work = {} if work is None else work
    key = (batch, heads, num_parts, dim, device)
    if work.get("key") != key:
        m = torch.empty(batch, heads, num_parts, dtype=torch.float32, device=device)
        work.update(key=key, m=m, l=torch.empty_like(m),
                    acc=torch.empty(*m.shape, dim, dtype=torch.float32, device=device))
    return work
