"""InnerQ (seed 002, §4): groups along the inner (reduction) dimension of each decode GEMV — keys per-token
(G channels), values per-channel (G tokens) — so a scale (and zero) is loaded once per G multiply-adds.
Keys: 3-bit symmetric in every variant. Values: Base 3-bit sym, Hybrid 2-bit hybrid (dense fp16 zero
matrix; the sym/asym flag lives in the scale's sign bit, §4.1.2), Small 2-bit sym. G = 32, fp16 scales,
32 sink + 96 recent fp16 tokens; values are quantized in blocks of G as tokens leave the window.
Key normalization is folded into W_Q and W_K at prefill (§4.3): no runtime or storage cost.
"""

from __future__ import annotations

from typing import ClassVar, Literal

from pydantic import Field, NonNegativeInt, PositiveInt

from roofline.kv.builder import QuantPlan
from roofline.kv.quant import TensorQuant
from roofline.methods.base import MethodConfig, preset
from roofline.specs import Model


class InnerQ(MethodConfig):
    """InnerQ (seed 002, §4): groups of G along each decode GEMV's reduction dimension (keys per-token,
    values per-channel), symmetric 3-bit keys, values Base / Hybrid / Small, fp16 sinks and recent window."""
    method: ClassVar[str] = "innerq"
    summary: ClassVar[str] = "inner-dimension groups (scale reuse), hybrid sym/asym values, sink + recent fp16"

    k_bits: float = Field(3, gt=0, le=16, description="Key bits (symmetric, per-token groups).")
    v_bits: float = Field(3, gt=0, le=16, description="Value bits (per-channel groups).")
    v_mode: Literal["symmetric", "asymmetric", "hybrid"] = Field("symmetric", description="Value quantizer mode.")
    group_size: PositiveInt = Field(32, description="G along the reduction dimension.")
    sinks: NonNegativeInt = Field(32, description="First tokens in fp16.")
    window: NonNegativeInt = Field(96, description="Recent tokens in fp16.")

    def kv_quant(self, model: Model) -> QuantPlan:
        """Keys: `k_bits` symmetric, one fp16 scale per G channels; values: `v_bits` in `v_mode`, groups
        of G tokens, fp16 scale (and fp16 zero unless symmetric); both with `sinks` + `window` fp16 tokens.
        Bits per element, windows aside (§5.2, Table 3): b + 16/G per scale + 16/G per zero (G = 32: Base 3.5)."""
        common = dict(group_size=self.group_size, scale_dtype="fp16", sinks=self.sinks, window=self.window)
        k = TensorQuant(bits=self.k_bits, group_along="channels", mode="symmetric", zero_dtype="none", **common)
        v = TensorQuant(bits=self.v_bits, group_along="tokens", mode=self.v_mode,
                        zero_dtype="none" if self.v_mode == "symmetric" else "fp16", **common)
        return QuantPlan(k, v)


PRESETS = (
    preset("innerq-base", "innerq", "InnerQ_Base: K3 sym, V3 sym, G=32, 32 sinks + 96 recent"),
    preset("innerq-hybrid", "innerq", "InnerQ_Hybrid: K3 sym, V2 hybrid sym/asym", v_bits=2, v_mode="hybrid"),
    preset("innerq-small", "innerq", "InnerQ_Small: K3 sym, V2 sym", v_bits=2),
)
