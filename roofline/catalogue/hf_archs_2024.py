"""Hugging Face import handlers for the attention-only architectures of 2023-2025 that map onto the existing
spec: Qwen2-MoE, Cohere (Command-R), Cohere2 (Command-R7B / Command-A), OLMo-2, Phi-MoE, GLM / GLM-4, Falcon
and Starcoder2.

Keys, defaults and semantics are read from huggingface/transformers @ 008e574391258935f3ecc3035c882e73bbcac419,
src/transformers/models/<name>/configuration_<name>.py and modeling_<name>.py (Falcon's config class at
055855363e97555535aa9d133f53d99ef75bfd9c, Phi-MoE's at 040e1a7e4bb4f48ff62dfbbb1f6f8eff23e894ac). Small
parameter groups the spec does not carry are left out and named in each docstring (LayerNorm biases, Cohere's
and OLMo-2's QK-norm widths beyond 2 x head_dim, o_proj / MLP biases, the shared-expert gate); none of them
touches the KV cache.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from roofline.catalogue.hfconfig import _Config, _core, _from_layer_types, _full, _shortest_cycle, _sliding


def _every_layer(cfg: _Config, fields: dict[str, Any]) -> list[dict[str, Any]]:
    """One sliding_window for every layer (Phi-MoE, Starcoder2), or layer_types; null means full attention, and
    so does a window that covers max_position_embeddings (configs that set both to one value): no allowed
    context ever slides out of it."""
    if cfg.has("layer_types"):
        return _from_layer_types(cfg, fields["num_layers"])
    if not cfg.has("sliding_window"):
        return [_full()]
    window = cfg.integer("sliding_window")
    return [_full()] if window >= fields["max_position_embeddings"] else [_sliding(window)]


def _qwen2_moe(cfg: _Config) -> dict[str, Any]:
    """Qwen2-MoE (Qwen1.5-MoE): q/k/v bias (qkv_bias, default true), routed experts of moe_intermediate_size
    and one shared expert of shared_expert_intermediate_size behind a sigmoid gate (d x 1: shared_expert_gate).
    A layer is sparse when it is not in mlp_only_layers and (i + 1) % decoder_sparse_step == 0
    (Qwen2MoeDecoderLayer); only 'every layer sparse' is modelled. Sliding windows follow Qwen2MoeConfig:
    layer i slides when use_sliding_window, (i + 1) % 2 and i < max_window_layers (or layer_types)."""
    step = cfg.integer("decoder_sparse_step", 1)
    if step != 1:
        raise cfg.error("decoder_sparse_step", f"{step} not supported (only 1: every layer is MoE)")
    if cfg.data.get("mlp_only_layers"):
        raise cfg.error("mlp_only_layers", f"{cfg.data['mlp_only_layers']!r} not supported (only []: every "
                                           "layer is MoE)")
    fields = _core(cfg, kv_default_heads=True)
    n = fields["num_layers"]
    if cfg.has("layer_types"):
        attention = _from_layer_types(cfg, n)
    elif cfg.flag("use_sliding_window", False):
        window, last = cfg.integer("sliding_window"), cfg.integer("max_window_layers", 28)
        attention = _shortest_cycle([_sliding(window) if (i + 1) % 2 and i < last else _full() for i in range(n)])
    else:
        attention = [_full()]
    moe = {"num_experts": cfg.integer("num_experts"), "experts_per_token": cfg.integer("num_experts_per_tok"),
           "expert_intermediate_size": cfg.integer("moe_intermediate_size"), "num_shared_experts": 1,
           "shared_expert_intermediate_size": cfg.integer("shared_expert_intermediate_size"),
           "shared_expert_gate": True}
    return fields | {"qkv_bias": cfg.flag("qkv_bias", True), "attention": attention, "moe": moe}


def _cohere(cfg: _Config) -> dict[str, Any]:
    """Cohere (Command-R): attention and MLP in parallel after one LayerNorm (CohereDecoderLayer:
    input_layernorm only), tied embeddings by default (CohereConfig), optional per-head QK LayerNorm
    (use_qk_norm; its weights are heads x head_dim, counted here as 2 x head_dim). head_dim =
    hidden_size / num_attention_heads."""
    fields = _core(cfg, kv_default_heads=True, tie_default=True)
    return fields | {"qkv_bias": cfg.flag("attention_bias", False), "qk_norm": cfg.flag("use_qk_norm", False),
                     "norms_per_layer": 1, "attention": [_full()]}


def _cohere2(cfg: _Config) -> dict[str, Any]:
    """Cohere2 (Command-R7B, Command-A): Cohere's parallel block with sliding-window layers; the full layers
    use no RoPE. Without layer_types, Cohere2Config derives them from sliding_window_pattern (default 4):
    layer i is full when (i + 1) % pattern == 0; sliding_window defaults to 4096."""
    fields = _core(cfg, kv_default_heads=True, tie_default=True)
    n = fields["num_layers"]
    if cfg.has("layer_types"):
        attention = _from_layer_types(cfg, n)
    else:
        window, every = cfg.integer("sliding_window", 4096), cfg.integer("sliding_window_pattern", 4)
        attention = _shortest_cycle([_full() if (i + 1) % every == 0 else _sliding(window) for i in range(n)])
    return fields | {"qkv_bias": cfg.flag("attention_bias", False), "norms_per_layer": 1, "attention": attention}


def _olmo2(cfg: _Config) -> dict[str, Any]:
    """OLMo-2: Llama shapes with norms after attention and after the MLP (2 per layer) and RMSNorm on the whole
    q and k projections (Olmo2Attention q_norm: heads x head_dim, k_norm: kv heads x head_dim: qk_norm_width
    'full'). num_key_value_heads defaults to num_attention_heads and max_position_embeddings to 2048 (Olmo2Config)."""
    cfg.data = {"max_position_embeddings": 2048, **cfg.data}  # Olmo2Config's default
    fields = _core(cfg, kv_default_heads=True)
    return fields | {"qkv_bias": cfg.flag("attention_bias", False), "qk_norm": True, "qk_norm_width": "full",
                     "attention": [_full()]}


def _phimoe(cfg: _Config) -> dict[str, Any]:
    """Phi-MoE (Phi-3.5-MoE): Mixtral-style top-k experts of width intermediate_size, LayerNorms with bias
    (PhimoeDecoderLayer), attention_bias on q/k/v/o (PhimoeConfig default false), lm_head bias (not counted);
    sliding_window null, or as long as max_position_embeddings, means full attention."""
    fields = _core(cfg, kv_default_heads=True)
    moe = {"num_experts": cfg.integer("num_local_experts"), "experts_per_token": cfg.integer("num_experts_per_tok"),
           "expert_intermediate_size": fields["intermediate_size"]}
    return fields | {"qkv_bias": cfg.flag("attention_bias", False), "moe": moe, "attention": _every_layer(cfg, fields),
                     "norm": "layernorm"}


def _glm(cfg: _Config) -> dict[str, Any]:
    """GLM (GlmForCausalLM, glm-4-9b-chat-hf): GQA with explicit head_dim, q/k/v bias (attention_bias, true in
    the checkpoints), partial RoPE (no effect on the cache), fused gate_up_proj (same weights as gated)."""
    fields = _core(cfg, head_dim_required=True)
    return fields | {"qkv_bias": cfg.flag("attention_bias", True), "attention": [_full()]}


def _glm4(cfg: _Config) -> dict[str, Any]:
    """GLM-4 (Glm4ForCausalLM, GLM-4-*-0414): GLM plus post_self_attn_layernorm and post_mlp_layernorm
    (4 norms per layer, Glm4DecoderLayer)."""
    return _glm(cfg) | {"norms_per_layer": 4}


def _falcon(cfg: _Config) -> dict[str, Any]:
    """Falcon: KV heads = num_kv_heads when new_decoder_architecture or not multi_query, else 1 (FalconAttention);
    num_kv_heads defaults to num_attention_heads. Plain GELU MLP of ffn_hidden_size (default 4 x hidden_size).
    parallel_attn runs attention and the MLP on one norm (new_decoder_architecture: two, ln_attn and ln_mlp, or
    num_ln_in_parallel_attn); sequential blocks have two, all LayerNorms with bias. Every linear has a bias
    when bias. Tied embeddings and
    max_position_embeddings 2048 by default (FalconConfig). ALiBi models (alibi true) cache the same K/V."""
    hidden, heads = cfg.integer("hidden_size"), cfg.integer("num_attention_heads")
    new_arch, multi_query = cfg.flag("new_decoder_architecture", False), cfg.flag("multi_query", True)
    kv_heads = cfg.integer("num_kv_heads", heads) if new_arch or not multi_query else 1
    if heads % kv_heads:
        raise cfg.error("num_kv_heads", f"{kv_heads} does not divide num_attention_heads {heads}")
    if hidden % heads:
        raise cfg.error("hidden_size", f"{hidden} is not divisible by num_attention_heads {heads}")
    bias = cfg.flag("bias", False)
    if new_arch:
        norms = cfg.integer("num_ln_in_parallel_attn", 2)
    else:
        norms = 1 if cfg.flag("parallel_attn", True) else 2
    return {
        "num_layers": cfg.integer("num_hidden_layers"), "hidden_size": hidden, "num_heads": heads,
        "num_kv_heads": kv_heads, "head_dim": hidden // heads,
        "intermediate_size": cfg.integer("ffn_hidden_size", 4 * hidden), "vocab_size": cfg.integer("vocab_size"),
        "tie_word_embeddings": cfg.flag("tie_word_embeddings", True),
        "max_position_embeddings": cfg.integer("max_position_embeddings", 2048),
        "qkv_bias": bias, "attn_out_bias": bias, "mlp_bias": bias, "mlp": "plain", "norms_per_layer": norms,
        "norm": "layernorm", "attention": [_full()],
    }


def _starcoder2(cfg: _Config) -> dict[str, Any]:
    """Starcoder2: GQA, plain GELU MLP (c_fc, c_proj), biases on every linear (use_bias, default true),
    LayerNorms with bias, tied embeddings by default (Starcoder2Config); sliding_window (4096 in
    the checkpoints) on every layer, null meaning full attention."""
    fields = _core(cfg)
    bias = cfg.flag("use_bias", True)
    return fields | {"tie_word_embeddings": cfg.flag("tie_word_embeddings", True), "mlp": "plain", "norm": "layernorm",
                     "qkv_bias": bias, "attn_out_bias": bias, "mlp_bias": bias, "attention": _every_layer(cfg, fields)}


ARCHITECTURES_2024: dict[str, Callable[[_Config], dict[str, Any]]] = {
    "Qwen2MoeForCausalLM": _qwen2_moe,
    "CohereForCausalLM": _cohere,
    "Cohere2ForCausalLM": _cohere2,
    "Olmo2ForCausalLM": _olmo2,
    "PhimoeForCausalLM": _phimoe,
    "GlmForCausalLM": _glm,
    "Glm4ForCausalLM": _glm4,
    "FalconForCausalLM": _falcon,
    "Starcoder2ForCausalLM": _starcoder2,
}
