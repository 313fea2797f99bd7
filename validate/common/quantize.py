"""The quantizer and the plain packing of codes, as roofline's TensorQuant counts them (recipes.py).

Codes are bit planes: b = a + c with a the largest power of two <= b; plane A holds the low a bits
(8/a codes per byte, code k at bits k*a), plane B (after plane A along the packed axis) the high c bits,
so 3-bit codes cost exactly 3 bits.
Dequantization: x = s*(u - 2^(b-1)) symmetric, s*u + z asymmetric, |s|*u + (s<0 ? z : -|s|*2^(b-1))
hybrid (InnerQ §4.1.2: the scale's sign bit flags an asymmetric group; the zero matrix is dense).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from validate.common.recipes import META_DTYPES, TensorRecipe
from validate.common.tiling import Tiling, meta_positions, pack_tiled


def pack(u: torch.Tensor, t: TensorRecipe, dim: int) -> torch.Tensor:
    """Codes u (0 <= u < 2^b) packed along `dim` into bytes (P -> P*b/8 along dim), plane A first."""
    a, c = t.planes
    planes = [_pack_plane(u & ((1 << a) - 1), a, dim)]
    if c:
        planes.append(_pack_plane(u >> a, c, dim))
    return torch.cat(planes, dim=dim).contiguous()


def _pack_plane(u: torch.Tensor, width: int, dim: int) -> torch.Tensor:
    """byte[w] = sum_k u[w*n + k] << (k*width) along `dim`, n = 8/width codes per byte."""
    n = 8 // width
    u = u.movedim(dim, -1).to(torch.int64)
    shifts = torch.arange(n, device=u.device, dtype=torch.int64) * width
    byte = (u.reshape(*u.shape[:-1], u.shape[-1] // n, n) << shifts).sum(dim=-1)  # < 256
    return byte.to(torch.uint8).movedim(-1, dim)


def quantize_groups(g: torch.Tensor, dim: int, t: TensorRecipe):
    """Groups along `dim` of g -> (codes u, scale, zero or None, dequantized), metadata as stored.

    asym: s = clip*(max - min)/(levels - 1), z = clip*min, u = clamp(round((x - z)/s), 0, levels - 1);
    sym: s = absmax/(2^(b-1) - 1), u = clamp(round(x/s), -(2^(b-1) - 1), 2^(b-1) - 1) + 2^(b-1);
    hybrid: per group the one with the lower squared error; asymmetric groups store -s. Codes use the
    scale and zero after rounding to their storage dtype, so dequantization is exact to what is stored.
    """
    meta = META_DTYPES[t.meta]
    tiny = torch.finfo(meta).tiny

    def stored(x):
        return x.to(meta).float()

    if t.mode != "symmetric":
        lo, hi = g.amin(dim, keepdim=True) * t.clip, g.amax(dim, keepdim=True) * t.clip
        sa, za = stored(((hi - lo) / (t.levels - 1)).clamp_min(tiny)), stored(lo)
        ua = ((g - za) / sa).round().clamp(0, t.levels - 1)
        if t.mode == "asymmetric":
            return ua, sa, za, ua * sa + za
    off = t.levels // 2
    ss = stored((g.abs().amax(dim, keepdim=True) / (off - 1)).clamp_min(tiny))
    qs = (g / ss).round().clamp(1 - off, off - 1)
    if t.mode == "symmetric":
        return qs + off, ss, None, qs * ss
    deq_a, deq_s = ua * sa + za, qs * ss
    asym = ((deq_a - g) ** 2).sum(dim, keepdim=True) < ((deq_s - g) ** 2).sum(dim, keepdim=True)
    return (torch.where(asym, ua, qs + off), torch.where(asym, -sa, ss), torch.where(asym, za, 0.0),
            torch.where(asym, deq_a, deq_s))


@dataclass
class QuantTensor:
    """One stored tensor: its parts (tensors named as in `tensor_shapes`) and its token split."""

    recipe: TensorRecipe
    tensors: dict[str, torch.Tensor]
    sinks: int
    nq: int
    recent: int
    tiling: Tiling | None = None  # None: the plain layout


def quantize(x: torch.Tensor, t: TensorRecipe, tiling: Tiling | None = None) -> tuple[QuantTensor, torch.Tensor]:
    """x [B, H, L, D] -> (stored tensor, its dequantized values [B, H, L, D] fp32), packed plain or `tiling`."""
    batch, heads, context, dim = x.shape
    sinks, nq, recent = t.split(context)
    x = x.float()
    mid = x[:, :, sinks:sinks + nq]
    if t.along == "tokens":
        u, s, z, deq = quantize_groups(mid.reshape(batch, heads, nq // t.group, t.group, dim), 3, t)
        codes, packed_dim, meta = u.reshape(batch, heads, nq, dim), 2, lambda m: m.squeeze(3)  # [B, H, nq/G, D]
    else:
        u, s, z, deq = quantize_groups(mid.reshape(batch, heads, nq, dim // t.group, t.group), 4, t)
        codes, packed_dim, meta = u.reshape(batch, heads, nq, dim), 3, lambda m: m.squeeze(4)  # [B, H, nq, D/G]
    meta_dtype = META_DTYPES[t.meta]
    tensors = {"codes": pack(codes.to(torch.int64), t, packed_dim), "scale": meta(s).to(meta_dtype).contiguous()}
    if z is not None:
        tensors["zero"] = meta(z).to(meta_dtype).contiguous()
    if tiling is not None:
        tensors["codes"] = pack_tiled(codes.to(torch.int64), t, tiling, tuple(tensors["codes"].shape))
        where = meta_positions(tiling, t, nq, dim, str(x.device)).reshape(-1)
        for name in ("scale", "zero"):
            if name in tensors:
                kept = tensors[name]
                plain = kept.reshape(batch * heads, -1).view(torch.uint8 if kept.element_size() == 1 else torch.int16)
                moved = torch.empty_like(plain).index_copy_(1, where, plain)
                tensors[name] = moved.view(kept.dtype).view(kept.shape)
    tensors["sinks"] = x[:, :, :sinks].to(torch.float16).contiguous()
    tensors["window"] = x[:, :, sinks + nq:].to(torch.float16).contiguous()
    full = torch.cat([tensors["sinks"].float(), deq.reshape(batch, heads, nq, dim), tensors["window"].float()], 2)
    return QuantTensor(t, tensors, sinks, nq, recent, tiling), full
