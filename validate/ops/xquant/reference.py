"""XQuant's references in float32 torch: dequant -> remat -> RoPE -> attention, and the accumulator update."""

from __future__ import annotations

import math

import torch

from validate.common.reference import attend
from validate.ops.xquant.launch import XLayer


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
