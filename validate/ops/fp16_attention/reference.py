"""fp16_attention's reference: the same attention in float32 torch."""

from __future__ import annotations

from validate.common.reference import attend


def reference(q, k, v, sm_scale: float | None = None):
    """softmax over the context of (q . k) * sm_scale, times v: q [B, H, D], k, v [B, H_kv, L, D] -> [B, H, D]."""
    return attend(q, k, v, sm_scale)
