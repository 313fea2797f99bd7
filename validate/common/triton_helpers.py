"""Triton helpers every family uses: dot operands under the interpreter, the online softmax, the split count."""

from __future__ import annotations

import os

import triton
import triton.language as tl

LOG2E = 1.4426950408889634  # scores scaled by log2(e) live in the log2 domain: exp2 instead of exp


def interpreting() -> bool:
    """True under TRITON_INTERPRET=1 (kernels run on the CPU, where tl.dot has no bf16/fp16 operands)."""
    return os.environ.get("TRITON_INTERPRET", "0") == "1"


@triton.jit
def operand(x, UPCAST: tl.constexpr):
    """A tl.dot operand: fp32 under the interpreter (no bf16 dot there), bf16 on the GPU."""
    if UPCAST:
        return x.to(tl.float32)
    return x.to(tl.bfloat16)


@triton.jit
def softmax_step(s, m_i, l_i):
    """One step of the online softmax, log2 domain, one state per row of s [rows, N]: m' = max(m, max_t s_t),
    p_t = 2^(s_t - m'), l' = l alpha + sum p with alpha = 2^(m - m') (the factor of the running accumulators)."""
    m_new = tl.maximum(m_i, tl.max(s, axis=1))
    alpha = tl.exp2(m_i - m_new)
    p = tl.exp2(s - m_new[:, None])
    return p, alpha, m_new, l_i * alpha + tl.sum(p, axis=1)


@triton.jit
def online(s, ok, m_i, l_i, acc):
    """softmax_step over the columns `ok` of s (others -inf): (p, m', l', acc alpha)."""
    s = tl.where(ok[None, :], s, float("-inf"))
    p, alpha, m_new, l_new = softmax_step(s, m_i, l_i)
    return p, m_new, l_new, acc * alpha[:, None]


def choose_splits(programs: int, tokens: int, sm_count: int, per_sm: int, min_tokens: int, max_splits: int = 64,
                  whole_waves: bool = False) -> int:
    """Context splits per (sequence, KV head): programs x splits ~ per_sm programs per SM (rounded up, or down
    with `whole_waves`: a partial extra wave runs at a fraction of the GPU), each split >= min_tokens tokens,
    between 1 and max_splits."""
    want = per_sm * sm_count // programs if whole_waves else triton.cdiv(per_sm * sm_count, programs)
    return max(1, min(want, tokens // min_tokens, max_splits))
