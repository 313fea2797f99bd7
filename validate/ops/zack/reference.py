"""ZACK's reference: the same attention in fp32 torch, one KV head at a time."""

from __future__ import annotations


def split_heads(flat, dims: list[int], rows: int) -> list:
    """Per KV head h, the [B, rows, d^h] view of a flat [B, rows * sum d] tensor (q: rows = GROUP, k: L)."""
    batch = flat.shape[0]
    flat = flat.reshape(batch, -1)
    offs = [rows * sum(dims[:h]) for h in range(len(dims) + 1)]
    return [flat[:, offs[h]:offs[h + 1]].view(batch, rows, d) for h, d in enumerate(dims)]


def reference(q, k, v, qk_dims: list[int], v_dims: list[int], context: int, sm_scale: float):
    """The same attention in fp32 torch, one KV head at a time."""
    import torch

    group = q.shape[1] // sum(qk_dims)
    parts = []
    for qh, kh, vh in zip(split_heads(q, qk_dims, group), split_heads(k, qk_dims, context),
                          split_heads(v, v_dims, context), strict=True):
        scores = torch.einsum("bgd,btd->bgt", qh.float(), kh.float()) * sm_scale
        parts.append(torch.einsum("bgt,btd->bgd", scores.softmax(-1), vh.float()).flatten(1))
    return torch.cat(parts, dim=1)  # [B, GROUP * sum d_v], head after head
