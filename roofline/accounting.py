"""Exact accounting from the specs: parameter counts, weight bytes, baseline KV-cache bytes.

All counts are integers; anything that depends on the workload is a sympy expression in the shared
symbols (roofline.units), e.g. KV bytes as a function of the context L.
"""

from __future__ import annotations

from dataclasses import dataclass

import sympy as sp

from roofline.specs import Model
from roofline.units import L

# Bytes per element of the storage dtypes (fp4/int4 pack two to a byte).
DTYPE_BYTES: dict[str, sp.Rational] = {
    "fp32": sp.Integer(4),
    "tf32": sp.Integer(4),
    "bf16": sp.Integer(2),
    "fp16": sp.Integer(2),
    "fp8": sp.Integer(1),
    "int8": sp.Integer(1),
    "int4": sp.Rational(1, 2),
    "fp4": sp.Rational(1, 2),
}


def dtype_bytes(dtype: str) -> sp.Rational:
    """Bytes per element of a storage dtype (exact: int4/fp4 are 1/2). Raises ValueError naming the valid
    dtypes if `dtype` is unknown."""
    try:
        return DTYPE_BYTES[dtype]
    except KeyError:
        raise ValueError(f"dtype: unknown {dtype!r}; valid: {sorted(DTYPE_BYTES)}") from None


@dataclass(frozen=True)
class ParameterCount:
    """Parameters by part; `active` counts the experts one token uses (= total for dense models)."""

    embedding: int
    lm_head: int
    attention: int
    mlp_dense: int
    mlp_experts_total: int
    mlp_experts_active: int
    router: int
    norms: int

    @property
    def total(self) -> int:
        """Every parameter stored, all experts included."""
        return (self.embedding + self.lm_head + self.attention + self.mlp_dense
                + self.mlp_experts_total + self.router + self.norms)

    @property
    def active(self) -> int:
        """Weights one token touches, the input-embedding row included (Mixtral's 12.9 B convention)."""
        return self.active_compute + self.embedding

    @property
    def active_compute(self) -> int:
        """Weights one token multiplies by: active less the input embedding, a lookup (DeepSeek's convention:
        36.6 B activated for V3, README_WEIGHTS.md)."""
        return (self.lm_head + self.attention + self.mlp_dense
                + self.mlp_experts_active + self.router + self.norms)


def attention_params_per_layer(model: Model) -> int:
    """Q, K, V, O projections (+QKV bias, +QK norms); for MLA the low-rank factors and their norms.

    MLA (DeepSeek-V3 modeling code): q_a (d x r_q) + q_a_norm (r_q) + q_b (r_q x H(d_nope + d_rope)),
    kv_a (d x (r_kv + d_rope)) + kv_a_norm (r_kv) + kv_b (r_kv x H(d_nope + d_v)) + o (H d_v x d).
    """
    d, h = model.hidden_size, model.num_heads
    if model.mla is not None:
        m = model.mla
        qk = m.qk_nope_head_dim + m.qk_rope_head_dim
        if m.q_lora_rank is None:
            q = d * h * qk
        else:
            q = d * m.q_lora_rank + m.q_lora_rank + m.q_lora_rank * h * qk
        kv = d * (m.kv_lora_rank + m.qk_rope_head_dim) + m.kv_lora_rank
        kv += m.kv_lora_rank * h * (m.qk_nope_head_dim + m.v_head_dim)
        return q + kv + h * m.v_head_dim * d
    q, kv = model.q_dim, model.kv_dim
    params = d * q + 2 * d * kv + q * d
    if model.qkv_bias:
        params += q + 2 * kv
    if model.qk_norm:
        params += 2 * model.head_dim
    return params


def mlp_params(model: Model, intermediate: int) -> int:
    """Parameters of one MLP of width `intermediate`: 3·d·intermediate if gated (gate, up, down), else 2·d·i."""
    matrices = 3 if model.mlp == "gated" else 2
    return matrices * model.hidden_size * intermediate


def moe_layer_count(model: Model) -> int:
    """Layers with a mixture-of-experts MLP: num_layers - first_dense_layers, 0 for a dense model."""
    return 0 if model.moe is None else model.num_layers - model.moe.first_dense_layers


def parameter_count(model: Model) -> ParameterCount:
    """Exact parameter count from the architecture (no MTP / draft heads)."""
    d = model.hidden_size
    n_moe = moe_layer_count(model)
    n_dense = model.num_layers - n_moe
    experts_total = experts_active = router = 0
    if model.moe is not None:
        moe = model.moe
        per_expert = mlp_params(model, moe.expert_intermediate_size)
        shared = moe.num_shared_experts * per_expert
        experts_total = n_moe * (moe.num_experts * per_expert + shared)
        experts_active = n_moe * (moe.experts_per_token * per_expert + shared)
        router = n_moe * d * moe.num_experts
    embedding = model.vocab_size * d
    return ParameterCount(
        embedding=embedding,
        lm_head=0 if model.tie_word_embeddings else model.vocab_size * d,
        attention=model.num_layers * attention_params_per_layer(model),
        mlp_dense=n_dense * mlp_params(model, model.intermediate_size),
        mlp_experts_total=experts_total,
        mlp_experts_active=experts_active,
        router=router,
        norms=model.num_layers * model.norms_per_layer * d + d,
    )


def weight_bytes(model: Model, dtype: str = "bf16") -> int:
    """Bytes of all weights stored in `dtype` (norms and router included at that dtype)."""
    return int(parameter_count(model).total * dtype_bytes(dtype))


def kv_elements_per_token_layer(model: Model) -> int:
    """Cached elements per token in one attending layer: 2·H_kv·d_h, or the MLA latent r_kv + d_rope."""
    if model.mla is not None:
        return model.mla.kv_lora_rank + model.mla.qk_rope_head_dim
    return 2 * model.kv_dim


def cached_tokens(layer_kind, context=L):
    """Tokens a layer holds at context L: all of them, at most W for a sliding window, none for 'none'."""
    if layer_kind.kind == "none":
        return sp.Integer(0)
    if layer_kind.kind == "sliding":
        return sp.Min(context, layer_kind.window)
    return context


def kv_bytes_per_token(model: Model, dtype: str = "bf16") -> sp.Expr:
    """Bytes per cached token summed over the layers that attend to the full context.

    Sliding-window layers are excluded once the context passes their window; use kv_bytes(L) for totals.
    For Llama-3.1-8B in bf16: 2 (K,V) x 8 heads x 128 x 32 layers x 2 bytes = 131,072.
    """
    per_layer = kv_elements_per_token_layer(model) * dtype_bytes(dtype)
    full_layers = sum(n for kind, n in model.attention_groups().items() if kind.kind == "full")
    return per_layer * full_layers


def kv_bytes(model: Model, dtype: str = "bf16", context=L, batch=1) -> sp.Expr:
    """Total KV-cache bytes for `batch` sequences at `context` tokens (sliding layers capped at W)."""
    per_layer = kv_elements_per_token_layer(model) * dtype_bytes(dtype)
    tokens = sum(n * cached_tokens(kind, context) for kind, n in model.attention_groups().items())
    return sp.sympify(batch * per_layer * tokens)
