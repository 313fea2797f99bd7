"""AQUA-KV's reference in fp32 torch: dequantized residuals, the predictors' reconstruction, the encoding."""

from __future__ import annotations

from validate.common.quantize import QuantTensor, quantize
from validate.common.recipes import TensorRecipe
from validate.ops.aquakv.storage import Predictors


def dequantize(q: QuantTensor):
    """Residuals [B, l_q, d_kv] fp32 from the stored codes and metadata: x = a*u + c (validate.common.quantize)."""
    import torch

    t = q.recipe
    codes = q.tensors["codes"][:, 0].to(torch.int64)  # [B, l_q, d_kv*b/8]
    a_bits, c_bits = t.planes
    dim = codes.shape[-1] * 8 // (a_bits + c_bits)
    split = dim * a_bits // 8
    u = _unpack(codes[..., :split], a_bits)
    if c_bits:
        u = u | (_unpack(codes[..., split:], c_bits) << a_bits)
    s = q.tensors["scale"][:, 0].float().repeat_interleave(t.group, dim=-1)
    if t.mode == "symmetric":
        return s * (u - 2 ** (t.storage_bits - 1))
    return s * u + q.tensors["zero"][:, 0].float().repeat_interleave(t.group, dim=-1)


def _unpack(byte, width: int):
    """Inverse of the plain packing of one bit plane (validate.common.quantize) along the last dim: code k of
    byte w (bits k*width..) -> w*8/width + k."""
    import torch

    shifts = torch.arange(8 // width, device=byte.device) * width
    return ((byte[..., None] >> shifts) & ((1 << width) - 1)).flatten(-2)


def reference(k: QuantTensor, v: QuantTensor, k_prev, v_prev, pred: Predictors, dtype=None):
    """The kernel's result in fp32 torch on the same inputs, K^ and V^ stored in `dtype` (bf16 by default);
    V's predictor reads K^ as stored."""
    import torch

    dtype = torch.bfloat16 if dtype is None else dtype
    k_hat = (k_prev.float() @ pred.w_k.float() + pred.b_k.float() + dequantize(k)).to(dtype)
    x = torch.cat([v_prev.float(), k_hat.float()], dim=-1)
    v_hat = (x @ pred.w_v.float() + pred.b_v.float() + dequantize(v)).to(dtype)
    return k_hat, v_hat


def encode(k, v, k_prev, v_prev, pred: Predictors, t: TensorRecipe) -> tuple[QuantTensor, QuantTensor]:
    """AQUA-KV's encoding (Alg. 2) of a layer's K, V [B, L, d_kv] given the previous layer's K^, V^ of the
    same tokens: the quantized tokens store K - f_K(K^_prev) and V - f_V([V^_prev; K^]); the sinks and
    the buffer store K, V themselves in fp16."""
    import torch

    sinks, nq, _ = t.split(k.shape[1])
    mid = slice(sinks, sinks + nq)
    pk = k_prev[:, mid].float() @ pred.w_k.float() + pred.b_k.float()
    xk = k.float().clone()
    xk[:, mid] -= pk
    qk, deq_k = quantize(xk[:, None], t)
    k_hat = (pk + deq_k[:, 0, mid]).to(torch.bfloat16)
    pv = torch.cat([v_prev[:, mid], k_hat], dim=-1).float() @ pred.w_v.float() + pred.b_v.float()
    xv = v.float().clone()
    xv[:, mid] -= pv
    qv, _ = quantize(xv[:, None], t)
    return qk, qv
