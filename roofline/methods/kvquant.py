"""KVQuant (Hooper et al. 2024): non-uniform (nuq) 2/3/4-bit codes looked up in a per-channel table for
keys (pre-RoPE, per-channel) and a per-layer table for values (per-token), dense-and-sparse with a
fraction (1%) of outliers in fp16, stored CSR-style (value, int16 index, one int32 row pointer per
token), and the first token kept in fp16 (attention-sink-aware).

Assumptions (no seed gives KVQuant's layout byte by byte): per-channel key normalization is calibrated
offline (fixed bytes, counted with the codebooks), and per-token value scaling adds no stored metadata.
With these, 2-bit + 1% lands at 2.33 bits (d_kv = 4096) to 2.35 (d_kv = 1024): SKVQ Table 2 quotes
KVQuant at "2.32-2.35".
"""

from __future__ import annotations

from typing import ClassVar

from pydantic import Field, NonNegativeInt

from roofline.kv.builder import LayerOverride, QuantPlan
from roofline.kv.quant import TensorQuant
from roofline.methods.base import MethodConfig, preset
from roofline.specs import Model


class KVQuant(MethodConfig):
    """KVQuant (Hooper et al. 2024): nuq codebook codes (per-channel tables for keys, per-layer for values),
    a fraction of fp16 outliers stored CSR-style, and fp16 sink tokens."""
    method: ClassVar[str] = "kvquant"
    summary: ClassVar[str] = "non-uniform codes, per-channel K lookup tables, 1% fp16 outliers"

    bits: float = Field(2, ge=2, le=4, description="nuq code bits (2, 3 or 4).")
    outlier_fraction: float = Field(0.01, ge=0, lt=0.5, description="Fraction of elements kept in fp16 (1%).")
    outlier_index_bytes: NonNegativeInt = Field(2, description="Bytes of a column index per outlier (int16).")
    row_pointer_bytes: NonNegativeInt = Field(4, description="Bytes of the CSR row pointer per token (int32).")
    sinks: NonNegativeInt = Field(1, description="First tokens kept in fp16.")
    overrides: tuple[LayerOverride, ...] = Field((), description="Layer ranges at other bit-widths.")

    def kv_quant(self, model: Model) -> QuantPlan:
        """Codebook codes of `bits` with no scale or zero; keys grouped along tokens with a codebook per
        channel, values along channels with one per layer; each with `outlier_fraction` fp16 outliers (value +
        index bytes) and a `row_pointer_bytes` pointer per token: about 2.33-2.35 bits at 2 bits + 1 % (SKVQ Table 2
        quotes 2.32-2.35); plus the layer `overrides`."""
        common = dict(number_format="codebook", group_size=None, mode="symmetric", scale_dtype="none",
                      zero_dtype="none", sinks=self.sinks, outlier_fraction=self.outlier_fraction,
                      outlier_index_bytes=self.outlier_index_bytes,
                      outlier_row_pointer_bytes=self.row_pointer_bytes)
        k = TensorQuant(bits=self.bits, group_along="tokens", codebook_per_channel=True, **common)
        v = TensorQuant(bits=self.bits, group_along="channels", codebook_per_channel=False, **common)
        return QuantPlan(k, v, self.overrides)


PRESETS = (
    *(preset(f"kvquant-{_b}", "kvquant", f"KVQuant nuq{_b} with 1% fp16 outliers and an fp16 sink", bits=_b)
    for _b in (2, 3, 4)),
)
