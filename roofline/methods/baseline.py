"""Uncompressed caches: fp16 / bf16 (2 bytes per element) and fp8 (1 byte, per-tensor scale)."""

from __future__ import annotations

from typing import ClassVar, Literal

from pydantic import Field

from roofline.kv.builder import QuantPlan
from roofline.kv.quant import TensorQuant
from roofline.methods.base import MethodConfig, preset
from roofline.specs import Model


class Baseline(MethodConfig):
    """K and V stored as they are computed, in `dtype` (fp8: e4m3 with one per-tensor scale, negligible)."""

    method: ClassVar[str] = "baseline"
    family: ClassVar[str] = "baseline"
    summary: ClassVar[str] = "uncompressed KV cache in fp16/bf16 or fp8"

    dtype: Literal["fp16", "bf16", "fp8"] = Field("bf16", description="Storage dtype of K and V.")

    def kv_quant(self, model: Model) -> QuantPlan:
        """K and V unquantized in `dtype` (16 bits, no metadata), or fp8 floats (8 bits; the per-tensor
        scale is not counted)."""
        if self.dtype == "fp8":
            q = TensorQuant(bits=8, number_format="float", group_size=None, scale_dtype="none", zero_dtype="none")
        else:
            q = TensorQuant(bits=16, window_dtype=self.dtype, scale_dtype="none", zero_dtype="none")
        return QuantPlan(q, q)


PRESETS = (
    preset("bf16", "baseline", "bf16 KV cache (the usual default)", dtype="bf16"),
    preset("fp16", "baseline", "fp16 KV cache", dtype="fp16"),
    preset("fp8", "baseline", "fp8 (e4m3) KV cache with a per-tensor scale", dtype="fp8"),
)
