"""Quantized KV storage exactly as roofline's TensorQuant counts it: recipes, tensor shapes and bytes by part.

A recipe is one roofline method config's TensorQuant for K and V (`recipe("kivi-2")`: parse_method, then the
config's kv_quant); tests assert that `layout_bytes` equals roofline's `TensorLayout.resident` part by part.
Per cached tensor X (K or V) of one layer, batch B, KV heads H, head_dim D, context L, split by roofline's
`full_precision_tokens` into S sinks, nq quantized tokens and r recent fp16 tokens (nq = L - S - r):

    codes    uint8  [B, H, nq*b/8, D]  groups along tokens: byte row r holds tokens r*8/b.. of each channel
                    [B, H, nq, D*b/8]  groups along channels: a token's row of bytes (token-major)
    scale    fp16|fp8 [B, H, nq/G, D] or [B, H, nq, D/G];  zero likewise (asymmetric and hybrid only)
    sinks    fp16   [B, H, S, D];   window  fp16  [B, H, r, D]

so data = B*H*nq*D*b/8, metadata = B*H*nq*D/G*(scale + zero bytes), window = B*H*r*D*2, sinks = B*H*S*D*2.
The packing of the codes is quantize.py's (plain) and tiling.py's (tiled).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

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
    from validate.model.predict import decode_model

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
