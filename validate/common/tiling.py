"""Tiled layouts of the quantized codes and metadata (`Tiling`, what quant_attention's fast kernel reads;
quant_attention's cache builder picks them where the kernel can): the same tensors and bytes as the plain
layout, codes placed so that one 16-bit word of a tile holds two bytes of 8/a codes each that a dot reads
as independent sub-tiles (see `code_positions`), and, for per-token groups read by p.v, metadata rows
ordered token-fastest within a chunk of tokens (`meta_positions`).
"""

from __future__ import annotations

import functools
from dataclasses import dataclass

import torch

from validate.common.recipes import TensorRecipe

TILE_TOKENS = 32  # R: tokens per sub-tile of a tiled layout (one dot of the fast kernel's middle loop)


@dataclass(frozen=True)
class Tiling:
    """A tiled layout. `kind`: "TK"/"TV" groups along tokens read by q.k / p.v, "CK" groups along channels
    read by q.k, "CVT"/"CVC" groups along channels read by p.v, the two bytes of a word being two token
    sub-tiles (T) or two channel sub-tiles (C); `rows` = R tokens per sub-tile."""

    kind: str
    rows: int = TILE_TOKENS


def tiling_for(t: TensorRecipe, role: str, dim: int, rows: int = TILE_TOKENS) -> Tiling | None:
    """The tiled layout of tensor `t` read by the q.k (role "k") or p.v ("v") dot, or None where
    the fast kernel has none: plane A of 2 or 4 bits (+ a 1-bit plane B for 3 bits, "CK" and "TV" only), each
    sub-tile inside one group, and dots at least 16 wide."""
    a, c = t.planes
    if a not in (2, 4) or (c and (a, c) != (2, 1)) or dim % 32:
        return None
    if t.along == "tokens":  # (a 3-bit plane B only where the scale applies after the dot: V)
        return Tiling("TK" if role == "k" else "TV", rows) if t.group % rows == 0 and not (c and role == "k") else None
    if role == "k":
        w = dim * a // 16  # channels of one sub-tile
        return Tiling("CK", rows) if w >= 16 and t.group % w == 0 else None
    if c:
        return None
    if dim * a // 8 >= 16 and t.group % (dim * a // 8) == 0:
        return Tiling("CVT", rows)
    if dim * a // 16 >= 16 and t.group % (dim * a // 16) == 0:
        return Tiling("CVC", rows)
    return None


@functools.lru_cache(maxsize=2)  # (index tensors of a long context are large)
def code_positions(tiling: Tiling, t: TensorRecipe, nq: int, dim: int,
                   device: str = "cpu") -> list[tuple[torch.Tensor, torch.Tensor]]:
    """[(byte, shift)] per plane, each [nq, dim] int64: where code bits of quantized token j, channel d sit in
    one (b, h) slab of the codes tensor (plane A's nq*dim*a/8 bytes, then plane B's). Tokens past the last
    whole chunk (the kernel's tail reads them) keep the plain order. With F = 8/a codes a byte, R = rows:
      TK  chunk c of F*R tokens, int16 words [R, dim/2]: word (r, i) = bytes (channel i, channel i + dim/2),
          field f of each = token c*F*R + f*R + r;  TV the same words stored [dim/2, R] (r fastest)
      CK  token rows; word i of plane A = bytes for channels f*2W + i and f*2W + W + i (W = dim*a/16)
      CVT chunk c of 2R tokens, words [dim*a/8, R]: word (i, r) = byte i of tokens c*2R + r, c*2R + R + r,
          field f = channel f*dim*a/8 + i;  CVC chunk of R tokens, words [W, R] = bytes (i, W + i) of token
          c*R + r, field f = channels f*2W + i, f*2W + W + i
    Plane B (3-bit codes' high bits, TK/TV/CK): one byte per word of plane A, bit 2f + (second byte)."""
    a, c = t.planes
    kind, rows = tiling.kind, tiling.rows
    fields = 8 // a
    j = torch.arange(nq, device=device).view(nq, 1)
    d = torch.arange(dim, device=device).view(1, dim)
    out = []
    if kind in ("TK", "TV"):
        half = dim // 2
        chunk = fields * rows
        full = nq // chunk * chunk
        cid, i = j // chunk, j % chunk
        f, r = i // rows, i % rows
        second, col = d // half, d % half
        tail = j - full
        if kind == "TK":
            word = cid * rows * half + r * half + col
        else:
            word = cid * rows * half + col * rows + r
        byte = torch.where(j < full, 2 * word + second, full * dim // fields + tail // fields * dim + d)
        out.append((byte, torch.where(j < full, f * a, tail % fields * a).expand(nq, dim)))
        if c:
            base = nq * dim * a // 8
            byte = torch.where(j < full, base + word, base + full * half // fields + tail // 8 * dim + d)
            out.append((byte, torch.where(j < full, 2 * f + second, tail % 8).expand(nq, dim)))
        return out
    if kind == "CK":
        row = dim * (a + c) // 8
        w = dim * a // 16
        f, rem = d // (2 * w), d % (2 * w)
        second, col = rem // w, rem % w
        out.append((j * row + 2 * col + second, (f * a).expand(nq, dim)))
        if c:
            out.append((j * row + dim * a // 8 + col, (2 * f + second).expand(nq, dim)))
        return out
    if kind == "CVT":
        per = dim * a // 8  # bytes of one token
        chunk = 2 * rows
        full = nq // chunk * chunk
        cid, i = j // chunk, j % chunk
        f, col = d // per, d % per
        tiled = cid * chunk * per + col * chunk + 2 * (i % rows) + i // rows
        out.append((torch.where(j < full, tiled, j * per + col), (f * a).expand(nq, dim)))
        return out
    w = dim * a // 16  # CVC
    full = nq // rows * rows
    f, rem = d // (2 * w), d % (2 * w)
    second, col = rem // w, rem % w
    tiled = j // rows * rows * 2 * w + col * 2 * rows + 2 * (j % rows) + second
    out.append((torch.where(j < full, tiled, j * 2 * w + 2 * col + second), (f * a).expand(nq, dim)))
    return out


def meta_positions(tiling: Tiling, t: TensorRecipe, nq: int, dim: int, device: str = "cpu") -> torch.Tensor:
    """Flat position in one (b, h) slab of each metadata entry of the plain [rows, cols] order: the plain
    order itself for groups along tokens; per-token groups ("CK", "CVT", "CVC") lie token-fastest in chunks
    of R tokens (2R for "CVT"), [groups, tokens] per chunk, so a tile's scales are contiguous runs."""
    groups = dim // t.group
    rows_, cols = (nq // t.group, dim) if t.along == "tokens" else (nq, groups)
    plain = torch.arange(rows_ * cols, device=device).view(rows_, cols)
    if tiling.kind in ("TK", "TV"):
        return plain
    chunk = tiling.rows * (2 if tiling.kind == "CVT" else 1)
    full = nq // chunk * chunk
    j = torch.arange(nq, device=device).view(nq, 1)
    g = torch.arange(groups, device=device).view(1, groups)
    return torch.where(j < full, j // chunk * chunk * groups + g * chunk + j % chunk, plain)


def pack_tiled(u: torch.Tensor, t: TensorRecipe, tiling: Tiling, shape: tuple) -> torch.Tensor:
    """Codes u [B, H, nq, D] (0 <= u < 2^b) placed by `code_positions`, as a uint8 tensor of `shape`."""
    batch, heads, nq, dim = u.shape
    a, _ = t.planes
    slab = nq * dim * t.storage_bits // 8
    out = torch.zeros(batch * heads, slab, dtype=torch.int64, device=u.device)
    values = (u & ((1 << a) - 1), u >> a)
    for (byte, shift), value in zip(code_positions(tiling, t, nq, dim, str(u.device)), values, strict=False):
        bits = value.reshape(batch * heads, -1) << shift.reshape(1, -1)
        out.scatter_add_(1, byte.reshape(1, -1).expand(batch * heads, -1), bits)  # disjoint bits: sum = or
    return out.to(torch.uint8).view(shape)


def unpack_tiled(codes: torch.Tensor, t: TensorRecipe, tiling: Tiling, nq: int, dim: int) -> torch.Tensor:
    """Inverse of pack_tiled: codes u [B, H, nq, D] int64."""
    batch, heads = codes.shape[:2]
    a, _ = t.planes
    flat = codes.reshape(batch * heads, -1).to(torch.int64)
    u = torch.zeros(batch * heads, nq * dim, dtype=torch.int64, device=codes.device)
    for k, (byte, shift) in enumerate(code_positions(tiling, t, nq, dim, str(codes.device))):
        width = a if k == 0 else 1
        got = flat.gather(1, byte.reshape(1, -1).expand(batch * heads, -1))
        u |= ((got >> shift.reshape(1, -1)) & ((1 << width) - 1)) << (a * k)
    return u.view(batch, heads, nq, dim)
