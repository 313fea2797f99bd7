"""TurboQuant as InnerQ compares with it (seed 002 §5.1, Table 3): a random rotation, then a precomputed
non-uniform codebook per coordinate — keys 4-bit, values 3-bit — and one fp32 norm per head vector;
a 128-token fp16 window. At decode the query is rotated once per head (and the output rotated back):
2 x d_h^2 FLOPs each per head, with one d_h x d_h rotation matrix per layer.
"""

from __future__ import annotations

from typing import ClassVar

from pydantic import Field, NonNegativeInt

from roofline.accounting import dtype_bytes
from roofline.kv.builder import Extras, QuantPlan
from roofline.kv.layout import ExtraOp
from roofline.kv.quant import TensorQuant
from roofline.methods.base import MethodConfig, preset
from roofline.specs import Model


class TurboQuant(MethodConfig):
    """TurboQuant as InnerQ configures it (seed 002 §5.1, Table 3): a random rotation, per-coordinate
    codebooks (K 4-bit, V 3-bit), one fp32 norm per head vector, a 128-token fp16 window."""
    method: ClassVar[str] = "turboquant"
    summary: ClassVar[str] = "rotation + non-uniform codebook, one fp32 norm per head vector"

    k_bits: float = Field(4, gt=0, le=16, description="Key codebook bits.")
    v_bits: float = Field(3, gt=0, le=16, description="Value codebook bits.")
    window: NonNegativeInt = Field(128, description="Recent tokens in fp16.")

    def kv_quant(self, model: Model) -> QuantPlan:
        """K and V codebook codes with one fp32 norm per head vector (group = d_h): b + 32/d_h bits
        per element (Table 3: 4.25 and 3.25, 3.75 on average at d_h = 128). Raises ValueError on an MLA model."""
        if model.mla is not None:
            raise ValueError("method: turboquant rotates per-head K/V vectors; MLA latents are not modelled")
        common = dict(number_format="codebook", group_along="channels", group_size=model.head_dim,
                      mode="symmetric", scale_dtype="fp32", zero_dtype="none", window=self.window)
        return QuantPlan(TensorQuant(bits=self.k_bits, **common), TensorQuant(bits=self.v_bits, **common))

    def extras(self, model: Model) -> Extras:
        """Rotate each query head in and each output head back: 2 x (2 d_h^2) FLOPs per query head; one
        d_h x d_h bf16 rotation per layer. Per sequence, all heads (TP scales it by the KV-head share)."""
        d_h, h = model.head_dim, model.num_heads
        rotate = ExtraOp("rotate_q_o", matmul_flops=2 * 2 * h * d_h * d_h,
                         weight_bytes=d_h * d_h * dtype_bytes("bf16"),
                         act_read_bytes=2 * h * d_h * 2, act_write_bytes=2 * h * d_h * 2)
        return Extras(decode_ops=(rotate,))


PRESETS = (
    preset("turboquant", "turboquant", "TurboQuant K4/V3 codebooks, fp32 norms, window 128 (InnerQ §5.1)"),
)
