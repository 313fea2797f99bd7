"""AQUA-KV's residual storage for a SPEC (roofline's AquaKV.residual_quant), its linear predictors and random
stored layers (the timing inputs)."""

from __future__ import annotations

from dataclasses import dataclass

from validate.common.quantize import QuantTensor
from validate.common.recipes import TensorRecipe, tensor_shapes


def storage(spec: str, kv_dim: int) -> TensorRecipe:
    """The residual's storage for an AQUA-KV SPEC: roofline's AquaKV.residual_quant(d_kv) (HIGGS b bits + one
    fp16 norm per min(hadamard_group, d_kv) channels, stored here as a symmetric uniform grid of the same bytes;
    or uniform b bits + fp16 scale and zero per group_size channels; sinks and a block buffer in fp16)."""
    from roofline.methods import parse_method

    config = parse_method(spec)
    if config.method != "aquakv":
        raise ValueError(f"method: {spec!r} is not aquakv")
    if config.predictor != "linear" or config.decode != "reference":
        raise ValueError(f"method {spec!r}: the kernel runs linear predictors in the reference decode only")
    if float(config.bits) != int(config.bits):
        raise ValueError(f"bits: {config.bits} is not a whole number of bits per packed value")
    return TensorRecipe(config.residual_quant(kv_dim))


@dataclass
class Predictors:
    """One layer's linear predictors, x @ W + b: w_k [d_kv, d_kv], w_v [2 d_kv, d_kv] (rows: V^_prev, then
    K^), biases [d_kv]; all bf16."""

    w_k: object
    b_k: object
    w_v: object
    b_v: object

    @classmethod
    def random(cls, kv_dim: int, device="cpu", generator=None) -> Predictors:
        import torch

        def randn(*shape, scale=1.0):
            return (torch.randn(*shape, device=device, generator=generator) * scale).to(torch.bfloat16)

        return cls(randn(kv_dim, kv_dim, scale=kv_dim ** -0.5), randn(kv_dim, scale=0.1),
                   randn(2 * kv_dim, kv_dim, scale=(2 * kv_dim) ** -0.5), randn(kv_dim, scale=0.1))


def random_layer(t: TensorRecipe, batch: int, context: int, kv_dim: int, device="cpu", generator=None):
    """Random stored residuals k, v (codes and positive metadata, never zeros; no sinks or buffer: the
    kernel never reads them) and bf16 K^_prev, V^_prev [B, l_q, d_kv]."""
    import torch

    _, nq, _ = t.split(context)
    out = []
    for _ in range(2):
        tensors = {}
        for name, (part, shape, dtype) in tensor_shapes(t, batch, 1, context, kv_dim).items():
            if part == "data":
                tensors[name] = torch.randint(0, 256, shape, dtype=torch.uint8, device=device, generator=generator)
            elif part == "metadata":
                tensors[name] = (0.05 + 0.1 * torch.rand(shape, device=device, generator=generator)).to(dtype)
        out.append(QuantTensor(t, tensors, min(context, t.sinks), nq, context - nq - min(context, t.sinks)))
    prev = [torch.randn(batch, nq, kv_dim, device=device, generator=generator).to(torch.bfloat16) for _ in range(2)]
    return out[0], out[1], prev[0], prev[1]
