"""Family "fp16_attention": GQA decode attention over a bf16 KV cache, split-K flash-decoding.

One new query token per sequence attends over `context` cached tokens. Kernel 1 gives each program one
KV head of one sequence (all GROUP = H / H_kv query heads at once, padded to >= 16 rows for tl.dot) and
one context split, and writes the split's partial softmax state in the log2 domain:
    m_s = max_t s_t,   l_s = sum_t 2^(s_t - m_s),   acc_s = sum_t 2^(s_t - m_s) v_t,
    s_t = (q . k_t) * sm_scale * log2(e).
Kernel 2 merges the splits:  M = max_s m_s,  o = sum_s 2^(m_s - M) acc_s / sum_s 2^(m_s - M) l_s.
Layouts: q [B, H, D], k and v [B, H_kv, L, D] (each head's context contiguous), out [B, H, D].
Bytes and FLOPs of a case are the roofline's own "attention" op (roofline.validation.predict), so the measured
bandwidth and the prediction count the same work.
"""

from __future__ import annotations

import os

import triton
import triton.language as tl

from roofline.validation.families import fp16_attention as predicted
from validate.registry import Case, register

HEADS, KV_HEADS, HEAD_DIM = 32, 8, 128  # Llama-3.1-8B
BENCH_BATCHES = (1, 8, 32, 64)
BENCH_CONTEXTS = (4096, 16384, 65536, 131072)
QUICK = ((1, 4096), (8, 16384), (32, 65536), (1, 131072))
MAX_SPLITS = 64
BLOCK_N = 128  # context tokens per loop step (64 and 128 within noise on H200; 128 ahead at batch >= 32)
MIN_SPLIT_TOKENS = 128


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
        s = tl.where(t_ok[None, :], s, float("-inf"))
        m_new = tl.maximum(m_i, tl.max(s, axis=1))
        alpha = tl.exp2(m_i - m_new)
        p = tl.exp2(s - m_new[:, None])
        l_i = l_i * alpha + tl.sum(p, axis=1)
        acc = acc * alpha[:, None] + tl.dot(p.to(v.dtype), v)  # [GROUP_PAD, HEAD_DIM]
        m_i = m_new
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


def choose_splits(programs: int, context: int, sm_count: int, block_n: int) -> int:
    """Splits per (sequence, KV head) so that programs x splits reaches ~2 programs per SM, each split
    keeping >= MIN_SPLIT_TOKENS tokens and at most MAX_SPLITS splits (the best of 2, 4 and 8 per SM on
    an H200 over batch 1..64, context 4K..128K, within run-to-run noise)."""
    want = triton.cdiv(2 * sm_count, programs)
    most = max(1, context // max(MIN_SPLIT_TOKENS, block_n))
    return max(1, min(want, most, MAX_SPLITS))


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
    upcast = os.environ.get("TRITON_INTERPRET", "0") == "1"  # the interpreter has no bf16 tl.dot
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


def sm90_specs() -> list[dict]:
    """validate.sm90 compile specs of both kernels at the bench configuration (Llama-3.1-8B heads)."""
    ints = ("context", "split_len", "num_splits", "stride_qb", "stride_qh", "stride_kb", "stride_kh", "stride_kt",
            "stride_vb", "stride_vh", "stride_vt")
    split = {**{a: "*bf16" for a in ("q_ptr", "k_ptr", "v_ptr")}, **{a: "*fp32" for a in ("m_ptr", "l_ptr", "acc_ptr")},
             "sm_scale": "fp32", **{a: "i32" for a in ints}}
    group = HEADS // KV_HEADS
    return [
        {"module": __name__, "kernel": "split_kernel", "signature": split, "num_warps": 4, "num_stages": 2,
         "constexprs": {"KV_HEADS": KV_HEADS, "GROUP": group, "GROUP_PAD": max(16, triton.next_power_of_2(group)),
                        "HEAD_DIM": HEAD_DIM, "BLOCK_N": BLOCK_N, "UPCAST": False}},
        {"module": __name__, "kernel": "reduce_kernel", "num_warps": 4, "num_stages": 2,
         "signature": {"m_ptr": "*fp32", "l_ptr": "*fp32", "acc_ptr": "*fp32", "o_ptr": "*bf16",
                       "num_splits": "i32", "stride_ob": "i32", "stride_oh": "i32"},
         "constexprs": {"HEADS": HEADS, "HEAD_DIM": HEAD_DIM, "SPLITS_PAD": MAX_SPLITS}},
    ]


def reference(q, k, v, sm_scale: float | None = None):
    """The same attention in float32 torch: softmax over the context of (q . k) * sm_scale, times v."""
    import torch

    batch, heads, dim = q.shape
    kv_heads = k.shape[1]
    sm_scale = dim ** -0.5 if sm_scale is None else sm_scale
    qf = q.float().view(batch, kv_heads, heads // kv_heads, dim)
    scores = torch.einsum("bhgd,bhtd->bhgt", qf, k.float()) * sm_scale
    out = torch.einsum("bhgt,bhtd->bhgd", torch.softmax(scores, dim=-1), v.float())
    return out.reshape(batch, heads, dim)


def relative_rms(got, want) -> float:
    """sqrt(mean((got - want)^2) / mean(want^2))."""
    want = want.float()
    return float(((got.float() - want).pow(2).mean() / want.pow(2).mean()).sqrt())


def _run(case: Case) -> dict:
    import torch
    import torch.nn.functional as F

    from validate.harness import eager_ms, graph_ms, input_sets

    p = case.params
    batch, context, heads, kv_heads, dim = p["batch"], p["context"], p["num_heads"], p["num_kv_heads"], p["head_dim"]
    sms = torch.cuda.get_device_properties(torch.cuda.current_device()).multi_processor_count
    splits = choose_splits(batch * kv_heads, context, sms, p["block_n"])

    def make():
        q = torch.randn(batch, heads, dim, dtype=torch.bfloat16, device="cuda")
        k = torch.randn(batch, kv_heads, context, dim, dtype=torch.bfloat16, device="cuda")
        return q, k, torch.randn_like(k), torch.empty_like(q)

    def kernel(q, k, v, out):
        return decode_attention(q, k, v, splits, p["block_n"], out=out)

    def sdpa(q, k, v, out):
        # GQA without repeating K, V: the group's query heads become the query positions of their KV head
        return F.scaled_dot_product_attention(q.view(batch, kv_heads, heads // kv_heads, dim), k, v)

    sets = input_sets(make, 2 * batch * kv_heads * context * dim * 2)
    error = relative_rms(kernel(*sets[0]), sdpa(*sets[0]).view_as(sets[0][0]))
    if error > 2e-2:
        raise AssertionError(f"kernel differs from torch SDPA: relative RMS {error:.3g}")
    return {"ms": graph_ms(kernel, sets), **predicted.work(case.params), "eager_ms": eager_ms(kernel, sets),
            "sdpa_ms": graph_ms(sdpa, sets), "num_splits": splits, "rotation": len(sets), "check_rel_rms": error}


@register
class FP16Attention:
    name = "fp16_attention"

    def cases(self, quick: bool) -> list[Case]:
        grid = QUICK if quick else [(b, n) for b in BENCH_BATCHES for n in BENCH_CONTEXTS]
        return [Case(self.name, f"b{b}_l{n}", {"batch": b, "context": n, "num_heads": HEADS,
                                               "num_kv_heads": KV_HEADS, "head_dim": HEAD_DIM, "dtype": "bf16",
                                               "block_n": BLOCK_N}) for b, n in grid]

    def run(self, case: Case) -> dict:
        return _run(case)

    def predict(self, case: Case, hardware) -> dict:
        return predicted.predict(case, hardware)
