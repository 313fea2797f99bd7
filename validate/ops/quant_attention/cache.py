"""A quantized K, V cache of one layer as quant_attention's kernels read it: quantized per the method's recipe
(plain or tiled layout), SKVQ's channel reorder, random caches for timing."""

from __future__ import annotations

from dataclasses import dataclass, field

import torch

from validate.common.quantize import QuantTensor, quantize
from validate.common.recipes import Recipe
from validate.common.tiling import TILE_TOKENS, Tiling, tiling_for


@dataclass
class QuantCache:
    """K and V of one layer as stored; perm_k, perm_v [H, D] (SKVQ) map stored channel c to c's source."""

    recipe: Recipe
    k: QuantTensor
    v: QuantTensor
    context: int
    perm_k: torch.Tensor | None = None
    perm_v: torch.Tensor | None = None
    dequantized: tuple[torch.Tensor, torch.Tensor] | None = field(default=None, repr=False)


def reorder_index(x: torch.Tensor) -> torch.Tensor:
    """Per KV head, channels sorted by absolute range over batch and tokens [H, D]: neighbours in the
    stored order have similar ranges, so a group of G of them shares a tight scale (SKVQ §3.1, whose
    KMeans clusters channels by range; sorting is its one-dimensional case)."""
    return x.abs().amax(dim=(0, 2)).argsort(dim=-1)


def permute_channels(x: torch.Tensor, perm: torch.Tensor) -> torch.Tensor:
    """y[b, h, ..., c] = x[b, h, ..., perm[h // group, c]], group = heads per KV head; x [B, heads, (L,) D]."""
    group = x.shape[1] // perm.shape[0]
    idx = perm.repeat_interleave(group, dim=0)  # [heads, D]
    idx = idx.view(1, idx.shape[0], *([1] * (x.dim() - 3)), idx.shape[1]).expand_as(x)
    return x.gather(-1, idx)


def unpermute_channels(y: torch.Tensor, perm: torch.Tensor) -> torch.Tensor:
    """Inverse of permute_channels for y [B, heads, D]: x[..., perm[c]] = y[..., c]."""
    group = y.shape[1] // perm.shape[0]
    idx = perm.repeat_interleave(group, dim=0).unsqueeze(0).expand_as(y)
    return torch.empty_like(y).scatter_(-1, idx, y)


def cache_tilings(r: Recipe, dim: int, rows: int = TILE_TOKENS) -> tuple[Tiling | None, Tiling | None]:
    """(K's, V's) tiled layouts when the fast kernel reads both, else (None, None): the plain layout."""
    tk, tv = tiling_for(r.k, "k", dim, rows), tiling_for(r.v, "v", dim, rows)
    return (tk, tv) if tk and tv else (None, None)


def build_cache(k: torch.Tensor, v: torch.Tensor, r: Recipe, keep_dequantized: bool = True,
                perms: tuple | None = None, tiled: bool | int = True) -> QuantCache:
    """Quantize K, V [B, H, L, D] per the recipe, reordering channels first when it permutes (by `perms`,
    one layer's (perm_k, perm_v), or else by these K and V's own ranges); tiled layouts where the fast
    kernel reads them (`tiled`: True, or the tokens of a sub-tile), else plain."""
    perm_k = perm_v = None
    if r.permute:
        perm_k, perm_v = perms or (reorder_index(k), reorder_index(v))
        k, v = permute_channels(k, perm_k), permute_channels(v, perm_v)
    rows = TILE_TOKENS if tiled is True else int(tiled)
    tk, tv = cache_tilings(r, k.shape[-1], rows) if tiled else (None, None)
    qk, kf = quantize(k, r.k, tk)
    qv, vf = quantize(v, r.v, tv)
    if qk.sinks != qv.sinks:
        raise ValueError("sinks: K and V must keep the same sink tokens")
    return QuantCache(r, qk, qv, k.shape[2], perm_k, perm_v, (kf, vf) if keep_dequantized else None)


def random_cache(r: Recipe, batch: int, heads: int, context: int, dim: int, device="cpu",
                 keep_dequantized: bool = False, generator: torch.Generator | None = None,
                 tiled: bool | int = True) -> QuantCache:
    """Fresh random K, V (never zeros; key channels with log-normal ranges, as real keys have), quantized
    one sequence at a time so that fp32 temporaries stay one sequence big; one reorder for the layer."""
    def randn(*shape):
        return torch.randn(*shape, device=device, generator=generator)

    spread = torch.exp(0.5 * randn(1, heads, 1, dim))
    caches: list[QuantCache] = []
    for _ in range(batch):
        perms = (caches[0].perm_k, caches[0].perm_v) if caches and r.permute else None
        caches.append(build_cache(randn(1, heads, context, dim) * spread, randn(1, heads, context, dim), r,
                                  keep_dequantized, perms, tiled))
    if batch == 1:
        return caches[0]
    first = caches[0]

    def cat(role: str) -> QuantTensor:
        parts = [getattr(c, role) for c in caches]
        tensors = {name: torch.cat([p.tensors[name] for p in parts]) for name in parts[0].tensors}
        return QuantTensor(parts[0].recipe, tensors, parts[0].sinks, parts[0].nq, parts[0].recent, parts[0].tiling)

    deq = None
    if keep_dequantized:
        deq = tuple(torch.cat([c.dequantized[i] for c in caches]) for i in range(2))
    return QuantCache(r, cat("k"), cat("v"), context, first.perm_k, first.perm_v, deq)
