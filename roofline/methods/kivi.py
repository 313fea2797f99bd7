"""KIVI (Liu et al. 2024), as the seeds configure it: asymmetric 2/4-bit, keys per-channel (groups of G
tokens along each channel), values per-token (groups of G channels), fp16 scale and zero per group.

Residual semantics (KIVI reference code): keys wait in a full-precision residual that fills to R tokens
and is then quantized at once (R a multiple of G); values slide: the oldest of the last R full-precision
values is quantized each step. InnerQ §5.1 adds KIVI_Sink (32 sinks + 96 recent); XQuant's KIVI* uses G=128.
"""

from __future__ import annotations

from typing import ClassVar

from pydantic import Field, NonNegativeInt, PositiveInt, model_validator

from roofline.kv.builder import LayerOverride, QuantPlan
from roofline.kv.quant import MetaDtype, TensorQuant
from roofline.methods.base import MethodConfig, preset
from roofline.specs import Model


class Kivi(MethodConfig):
    """KIVI (Liu et al. 2024): asymmetric 2/4-bit, keys per-channel (groups of G tokens) with a block fp16
    residual of R tokens, values per-token (groups of G channels) with a sliding one, scale and zero per group."""
    method: ClassVar[str] = "kivi"
    summary: ClassVar[str] = "asymmetric per-channel K / per-token V, fp16 residual window"

    bits: float = Field(2, gt=0, le=16, description="Bits of K and V codes (KIVI: 2 or 4).")
    v_bits: float | None = Field(None, gt=0, le=16, description="Value bits when they differ from `bits`.")
    group_size: PositiveInt = Field(32, description="G: tokens per key group, channels per value group.")
    residual: NonNegativeInt = Field(128, description="R: full-precision residual length (multiple of G).")
    sinks: NonNegativeInt = Field(0, description="First tokens kept in fp16 (KIVI_Sink: 32 with R = 96).")
    meta_dtype: MetaDtype = Field("fp16", description="Scale and zero-point dtype.")
    overrides: tuple[LayerOverride, ...] = Field((), description="Layer ranges at other bit-widths.")

    @model_validator(mode="after")
    def _residual_holds_whole_groups(self) -> Kivi:
        if self.residual % self.group_size:
            raise ValueError(f"residual: {self.residual} is not a multiple of group_size {self.group_size}")
        return self

    def kv_quant(self, model: Model) -> QuantPlan:
        """Keys grouped along tokens with a block residual, values along channels with a sliding residual,
        both asymmetric with `meta_dtype` scale and zero: b + 2·16/G bits per element with fp16 metadata (InnerQ
        Table 3: 3 bits at b = 2, G = 32); plus the layer `overrides`."""
        common = dict(group_size=self.group_size, mode="asymmetric", scale_dtype=self.meta_dtype,
                      zero_dtype=self.meta_dtype, sinks=self.sinks)
        k = TensorQuant(bits=self.bits, group_along="tokens", window=self.residual, window_mode="block", **common)
        v = TensorQuant(bits=self.v_bits or self.bits, group_along="channels", window=self.residual,
                        window_mode="sliding", **common)
        return QuantPlan(k, v, self.overrides)


PRESETS = (
    preset("kivi-2", "kivi", "KIVI 2-bit, G=32, residual 128", bits=2),
    preset("kivi-4", "kivi", "KIVI 4-bit, G=32, residual 128", bits=4),
    preset("kivi-sink-2", "kivi", "KIVI_Sink 2-bit (InnerQ §5.1): 32 sinks + 96 recent", bits=2, sinks=32, residual=96),
)
