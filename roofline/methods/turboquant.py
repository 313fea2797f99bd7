"""TurboQuant as InnerQ compares with it (seed 002 §5.1, Table 3): a random rotation, then a precomputed
non-uniform codebook per coordinate — keys 4-bit, values 3-bit — and one fp32 norm per head vector;
a 128-token fp16 window. At decode the query is rotated once per head (and the output rotated back):
2 x d_h^2 FLOPs each per head, with one d_h x d_h rotation matrix per layer.
"""

from __future__ import annotations

from typing import ClassVar

import sympy as sp
from pydantic import Field, NonNegativeInt

from roofline.accounting import dtype_bytes
from roofline.methods.base import MethodConfig, preset, register
from roofline.methods.kvcache import standard_cache
from roofline.methods.layout import CacheModel, ExtraOp, LayerCache
from roofline.methods.quant import TensorQuant
from roofline.specs import Model


@register
class TurboQuant(MethodConfig):
    method: ClassVar[str] = "turboquant"
    summary: ClassVar[str] = "rotation + non-uniform codebook, one fp32 norm per head vector"

    k_bits: float = Field(4, gt=0, le=16, description="Key codebook bits.")
    v_bits: float = Field(3, gt=0, le=16, description="Value codebook bits.")
    window: NonNegativeInt = Field(128, description="Recent tokens in fp16.")

    def cache(self, model: Model, bits: sp.Expr | None = None) -> CacheModel:
        if model.mla is not None:
            raise ValueError("method: turboquant rotates per-head K/V vectors; MLA latents are not modelled")
        d_h = model.head_dim
        common = dict(number_format="codebook", group_along="channels", group_size=d_h, mode="symmetric",
                      scale_dtype="fp32", zero_dtype="none", window=self.window)
        k = TensorQuant(bits=self.k_bits, **common)
        v = TensorQuant(bits=self.v_bits, **common)
        base = standard_cache(self.method, model, k, v, bits=bits)
        g = model.gqa_group
        rotate = ExtraOp("rotate_q_o", matmul_flops=2 * 2 * g * d_h * d_h,
                         weight_bytes=sp.Rational(d_h * d_h, model.num_kv_heads) * dtype_bytes("bf16"),
                         act_read_bytes=2 * g * d_h * 2, act_write_bytes=2 * g * d_h * 2)
        # one rotation per head pair (Q in, O out); expressed per KV head so TP sharding scales it
        rotate = ExtraOp(rotate.name, matmul_flops=rotate.matmul_flops * model.num_kv_heads,
                         weight_bytes=rotate.weight_bytes * model.num_kv_heads,
                         act_read_bytes=rotate.act_read_bytes * model.num_kv_heads,
                         act_write_bytes=rotate.act_write_bytes * model.num_kv_heads)
        layers = tuple(LayerCache(**{**layer.__dict__, "decode_ops": layer.decode_ops + (rotate,)})
                       for layer in base.layers)
        return CacheModel(base.method, layers, base.fixed_bytes, base.baseline_elements)


preset("turboquant", "turboquant", "TurboQuant K4/V3 codebooks, fp32 norms, window 128 (InnerQ §5.1)")
