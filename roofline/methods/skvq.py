"""SKVQ (seed 004, §3): channels reordered so similar channels share a group (the permutation is folded
into W_k, W_v offline), clipped dynamic asymmetric per-token group quantization with fp16 or fp8 scale and
zero (fp16 by default; FP8 E4M3 is the last of SKVQ's components in Table 3), a sliding window of 128 fp16
tokens, 5 fp16 attention sinks.

K2V1.5: "1.5-bit" values are ternary codes which the released kernels store in 2-bit slots (docs/papers/
skvq.md §2), so `storage_bits` is 2 while the nominal bits are 1.5. Groups span the reordered channels of
a whole token (all KV heads). Fixed memory: per layer two int16 permutations of the KV width and two
int16 group-start arrays.
"""

from __future__ import annotations

import math
from typing import ClassVar, Literal

from pydantic import Field, NonNegativeInt, PositiveInt

from roofline.kv.builder import Extras, QuantPlan
from roofline.kv.quant import TensorQuant
from roofline.methods.base import MethodConfig, preset
from roofline.specs import Model

INDEX_BYTES = 2  # int16 permutation and group-start entries


class Skvq(MethodConfig):
    """SKVQ (seed 004, §3): reordered channels, clipped asymmetric per-token groups with fp16 or fp8 scale
    and zero, a 128-token fp16 sliding window and 5 fp16 sinks; 1.5-bit values stored in 2-bit slots."""
    method: ClassVar[str] = "skvq"
    summary: ClassVar[str] = "reordered channels, clipped per-token groups, fp16 window + sinks, fp16/fp8 metadata"

    k_bits: float = Field(2, gt=0, le=16, description="Key code bits.")
    v_bits: float = Field(2, gt=0, le=16, description="Value code bits (1.5 = ternary).")
    group_size: PositiveInt = Field(128, description="Average channels per group (reordered).")
    meta_dtype: Literal["fp16", "fp8"] = Field(
        "fp16", description="Scale and zero-point dtype. fp16 by default (Table 1's setting does not name it; the "
        "committed kernel measurements use it); Table 3 adds FP8 (E4M3) as SKVQ's last component, and Table 4's "
        "average bits are fp8's (preset skvq-k2v2-fp8).")
    window: NonNegativeInt = Field(128, description="Recent tokens kept in fp16.")
    sinks: NonNegativeInt = Field(5, description="First tokens kept in fp16.")

    def kv_quant(self, model: Model) -> QuantPlan:
        """K and V per-token groups of G reordered channels, asymmetric, `meta_dtype` scale and zero: b +
        2·b_meta/G bits per element (§4.3; Table 4: 2.125 / 2.25 / 2.5 at G = 128 / 64 / 32 with fp8); a
        fractional b occupies ceil(b) bits in memory."""
        def tensor(b: float) -> TensorQuant:
            return TensorQuant(bits=b, storage_bits=math.ceil(b) if b != int(b) else None, group_along="channels",
                               group_size=self.group_size, mode="asymmetric", scale_dtype=self.meta_dtype,
                               zero_dtype=self.meta_dtype, window=self.window, sinks=self.sinks)

        return QuantPlan(tensor(self.k_bits), tensor(self.v_bits))

    def extras(self, model: Model) -> Extras:
        """Fixed bytes of the reordering, per layer: two int16 permutations of the KV width w and two int16
        group-start arrays, 2·(w + w // G + 1)·2 B, times the layers (MLA: w = latent + RoPE width)."""
        width = model.kv_dim if model.mla is None else model.mla.kv_lora_rank + model.mla.qk_rope_head_dim
        groups = width // self.group_size
        per_layer = 2 * (width + groups + 1) * INDEX_BYTES
        return Extras(fixed_bytes={"reorder_indices": model.num_layers * per_layer})


PRESETS = (
    preset("skvq-k2v2", "skvq", "SKVQ K2V2, group 128, fp16 metadata, window 128, 5 sinks"),
    preset("skvq-k2v1.5", "skvq", "SKVQ K2V1.5 (ternary V stored in 2 bits), group 128", v_bits=1.5),
    preset("skvq-k2v2-fp8", "skvq", "SKVQ K2V2 with fp8 (E4M3) scale/zero (Table 3, §4.3)", meta_dtype="fp8"),
)
