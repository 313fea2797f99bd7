"""Quantized KV storage exactly as roofline's TensorQuant counts it, in torch: recipes, quantizer, packing.

A recipe is one roofline method config's TensorQuant for K and V (`recipe("kivi-2")`: parse_method, then the
config's kv_quant); tests assert that `layout_bytes` equals roofline's `TensorLayout.resident` part by part.
Per cached tensor X (K or V) of one layer, batch B, KV heads H, head_dim D, context L, split by roofline's
`full_precision_tokens` into S sinks, nq quantized tokens and r recent fp16 tokens (nq = L - S - r):

    codes    uint8  [B, H, nq*b/8, D]  groups along tokens: byte row r holds tokens r*8/b.. of each channel
                    [B, H, nq, D*b/8]  groups along channels: a token's row of bytes (token-major)
    scale    fp16|fp8 [B, H, nq/G, D] or [B, H, nq, D/G];  zero likewise (asymmetric and hybrid only)
    sinks    fp16   [B, H, S, D];   window  fp16  [B, H, r, D]

so data = B*H*nq*D*b/8, metadata = B*H*nq*D/G*(scale + zero bytes), window = B*H*r*D*2, sinks = B*H*S*D*2.
Codes are bit planes: b = a + c with a the largest power of two <= b; plane A holds the low a bits
(8/a codes per byte, code k at bits k*a), plane B (after plane A along the packed axis) the high c bits,
so 3-bit codes cost exactly 3 bits.
Dequantization: x = s*(u - 2^(b-1)) symmetric, s*u + z asymmetric, |s|*u + (s<0 ? z : -|s|*2^(b-1))
hybrid (InnerQ §4.1.2: the scale's sign bit flags an asymmetric group; the zero matrix is dense).

Tiled layouts (`Tiling`, what quant_kernels reads; `build_cache` picks them where the kernel can): the
same tensors and bytes, codes placed so that one 16-bit word of a tile holds two bytes of 8/a codes each
that a dot reads as independent sub-tiles (see `code_positions`), and, for per-token groups read by p.v,
metadata rows ordered token-fastest within a chunk of tokens (`meta_positions`).
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass, field

import sympy as sp
import torch

from roofline.kv.quant import TensorQuant, full_precision_tokens

PARTS = ("data", "metadata", "window", "sinks", "outliers")
META_DTYPES = {"fp16": torch.float16, "fp8": torch.float8_e4m3fn}
META_BYTES = {"fp16": 2, "fp8": 1}
MODES = {"symmetric": 0, "asymmetric": 1, "hybrid": 2}


@dataclass(frozen=True)
class TensorRecipe:
    """How one cached tensor is stored: roofline's own TensorQuant (the method config's numbers: bits, group
    size and axis, mode, metadata dtype, sinks, window), seen through the fields the kernels read."""

    quant: TensorQuant
    clip: float = 1.0  # SKVQ's clipped range (Eq. 2): s = clip*(max - min)/(levels - 1), z = clip*min

    @classmethod
    def make(cls, bits: float, group: int, along: str, mode: str = "asymmetric", meta: str = "fp16", sinks: int = 0,
             window: int = 0, window_mode: str = "sliding") -> TensorRecipe:
        """A recipe for a storage no method names (tests, XQuant-CL's delta): the TensorQuant of these fields."""
        storage = math.ceil(bits) if bits != int(bits) else None
        return cls(TensorQuant(bits=bits, storage_bits=storage, group_size=group, group_along=along, mode=mode,
                               scale_dtype=meta, zero_dtype="none" if mode == "symmetric" else meta, sinks=sinks,
                               window=window, window_mode=window_mode))

    @property
    def bits(self) -> float:
        return self.quant.bits

    @property
    def group(self) -> int:
        return self.quant.group_size

    @property
    def along(self) -> str:
        """"tokens": a group is G tokens of one channel; "channels": G channels of one token."""
        return self.quant.group_along

    @property
    def mode(self) -> str:
        return self.quant.mode

    @property
    def meta(self) -> str:
        return self.quant.scale_dtype

    @property
    def sinks(self) -> int:
        return self.quant.sinks

    @property
    def window(self) -> int:
        return self.quant.window

    @property
    def window_mode(self) -> str:
        return self.quant.window_mode

    @property
    def storage_bits(self) -> int:
        return math.ceil(self.quant.storage_bits or self.quant.bits)

    @property
    def levels(self) -> int:
        return round(2 ** self.bits)

    @property
    def planes(self) -> tuple[int, int]:
        """(a, c): bits of plane A (a power of two) and plane B (0 or a power of two), a + c = storage bits."""
        a = 1 << (self.storage_bits.bit_length() - 1)
        c = self.storage_bits - a
        if c & (c - 1):
            raise ValueError(f"bits: {self.storage_bits} is not a sum of two powers of two")
        return a, c

    @property
    def meta_bytes(self) -> int:
        """Bytes of metadata per group: a scale, plus a zero-point unless symmetric."""
        return META_BYTES[self.meta] * (1 if self.mode == "symmetric" else 2)

    def split(self, tokens: int) -> tuple[int, int, int]:
        """(sinks, quantized, recent) of `tokens`: roofline.kv.quant's own split of the full-precision tokens."""
        sinks, recent = (int(x) for x in full_precision_tokens(self.quant, sp.Integer(tokens)))
        return sinks, tokens - sinks - recent, recent


@dataclass(frozen=True)
class Recipe:
    """A method's K and V storage; `permute`: channels reordered per KV head (SKVQ, folded into W_q/W_o)."""

    spec: str
    k: TensorRecipe
    v: TensorRecipe
    permute: bool = False


def recipe(spec: str, model=None) -> Recipe:
    """The K and V storage of a roofline method SPEC (roofline.methods.parse_method, then the config's
    kv_quant for `model`, default a one-layer Llama-3.1-8B-headed model); SKVQ reorders channels."""
    from roofline.methods import parse_method
    from roofline.validation.predict import decode_model

    config = parse_method(spec)
    if not hasattr(config, "kv_quant"):
        raise ValueError(f"method: {spec!r} stores no quantized K and V (kivi, innerq, skvq do)")
    plan = config.kv_quant(model or decode_model("recipe", 32, 8, 128))
    return Recipe(spec, TensorRecipe(plan.k), TensorRecipe(plan.v), permute=config.method == "skvq")


def tensor_shapes(t: TensorRecipe, batch: int, heads: int, context: int, dim: int) -> dict[str, tuple]:
    """{name: (part, shape, dtype)} of what one cached tensor allocates; raises where packing is inexact."""
    sinks, nq, recent = t.split(context)
    a, c = t.planes
    packed = nq if t.along == "tokens" else dim
    if packed * a % 8 or packed * c % 8 or dim % t.group:
        raise ValueError(f"group_size: {t.bits}-bit codes along {t.along} need {packed} to fill whole bytes "
                         f"and G = {t.group} dividing head_dim {dim}")
    row_bytes = packed * t.storage_bits // 8
    codes = (batch, heads, row_bytes, dim) if t.along == "tokens" else (batch, heads, nq, row_bytes)
    meta = (batch, heads, nq // t.group, dim) if t.along == "tokens" else (batch, heads, nq, dim // t.group)
    shapes = {"codes": ("data", codes, torch.uint8), "scale": ("metadata", meta, META_DTYPES[t.meta])}
    if t.mode != "symmetric":
        shapes["zero"] = ("metadata", meta, META_DTYPES[t.meta])
    shapes["sinks"] = ("sinks", (batch, heads, sinks, dim), torch.float16)
    shapes["window"] = ("window", (batch, heads, recent, dim), torch.float16)
    return shapes


def layout_bytes(params: dict) -> dict[str, int]:
    """Bytes by part of every cache tensor the kernel allocates and reads (K and V, one layer, the batch)."""
    r = recipe(params["method"])
    out = dict.fromkeys(PARTS, 0)
    for t in (r.k, r.v):
        shapes = tensor_shapes(t, params["batch"], params["num_kv_heads"], params["context"], params["head_dim"])
        for part, shape, dtype in shapes.values():
            out[part] += math.prod(shape) * torch.empty((), dtype=dtype).element_size()
    return out


TILE_TOKENS = 32  # R: tokens per sub-tile of a tiled layout (one dot of quant_kernels' middle loop)


@dataclass(frozen=True)
class Tiling:
    """A tiled layout. `kind`: "TK"/"TV" groups along tokens read by q.k / p.v, "CK" groups along channels
    read by q.k, "CVT"/"CVC" groups along channels read by p.v, the two bytes of a word being two token
    sub-tiles (T) or two channel sub-tiles (C); `rows` = R tokens per sub-tile."""

    kind: str
    rows: int = TILE_TOKENS


def tiling_for(t: TensorRecipe, role: str, dim: int, rows: int = TILE_TOKENS) -> Tiling | None:
    """The tiled layout of tensor `t` read by the q.k (role "k") or p.v ("v") dot, or None where
    quant_kernels has none: plane A of 2 or 4 bits (+ a 1-bit plane B for 3 bits, "CK" and "TV" only), each
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
    """(K's, V's) tiled layouts when quant_kernels reads both, else (None, None): the plain layout."""
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


def attend(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, sm_scale: float | None = None) -> torch.Tensor:
    """softmax(q k^T * sm_scale) v in fp32, GQA: q [B, HQ, D], k, v [B, H, L, D] -> [B, HQ, D]."""
    batch, heads, dim = q.shape
    kv_heads = k.shape[1]
    sm_scale = dim ** -0.5 if sm_scale is None else sm_scale
    qf = q.float().view(batch, kv_heads, heads // kv_heads, dim)
    scores = torch.einsum("bhgd,bhtd->bhgt", qf, k.float()) * sm_scale
    return torch.einsum("bhgt,bhtd->bhgd", scores.softmax(-1), v.float()).reshape(batch, heads, dim)


def reference(q: torch.Tensor, cache: QuantCache) -> torch.Tensor:
    """The kernel's result in torch on the same dequantized values: attention in the stored (permuted)
    channel order, the query permuted like K and the output un-permuted like V (SKVQ folds both into
    W_q and W_o)."""
    kf, vf = cache.dequantized
    if cache.perm_k is None:
        return attend(q, kf, vf)
    return unpermute_channels(attend(permute_channels(q, cache.perm_k), kf, vf), cache.perm_v)


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
