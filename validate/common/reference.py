"""Attention in float32 torch: the core of every family's reference."""

from __future__ import annotations

import torch


def attend(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, sm_scale: float | None = None) -> torch.Tensor:
    """softmax(q k^T * sm_scale) v in fp32, GQA: q [B, HQ, D], k, v [B, H, L, D] -> [B, HQ, D]."""
    batch, heads, dim = q.shape
    kv_heads = k.shape[1]
    sm_scale = dim ** -0.5 if sm_scale is None else sm_scale
    qf = q.float().view(batch, kv_heads, heads // kv_heads, dim)
    scores = torch.einsum("bhgd,bhtd->bhgt", qf, k.float()) * sm_scale
    return torch.einsum("bhgt,bhtd->bhgd", scores.softmax(-1), v.float()).reshape(batch, heads, dim)
