"""Hugging Face import handlers for the 2025 architectures: MoE variants, sliding windows with sinks,
interleaved local/global layers, chunked local attention and hybrid linear attention.

Each handler names the transformers config class whose defaults it relies on for absent keys.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from roofline.catalogue.hfconfig import (
    _Config,
    _core,
    _from_layer_types,
    _full,
    _qwen_windows,
    _shortest_cycle,
    _sliding,
)
from roofline.catalogue.hfconfig import (
    text_of as _text,
)


def _every_layer_moe(cfg: _Config) -> None:
    """Qwen2/3-MoE: decoder_sparse_step 1 and no mlp_only_layers (every layer MoE) is what is modelled."""
    step = cfg.integer("decoder_sparse_step", 1)
    if step != 1:
        raise cfg.error("decoder_sparse_step", f"{step} not supported (only 1: every layer is MoE)")
    dense = cfg.data.get("mlp_only_layers") or []
    if dense:
        raise cfg.error("mlp_only_layers", f"{dense!r} not supported (only []: every layer is MoE)")


def _qwen3_moe(cfg: _Config) -> dict[str, Any]:
    _every_layer_moe(cfg)
    fields = _core(cfg)
    # transformers 5.x saves Qwen3MoeConfig's expert count as num_local_experts (4.x: num_experts)
    experts = "num_experts" if cfg.has("num_experts") or not cfg.has("num_local_experts") else "num_local_experts"
    moe = {"num_experts": cfg.integer(experts), "experts_per_token": cfg.integer("num_experts_per_tok"),
           "expert_intermediate_size": cfg.integer("moe_intermediate_size")}
    return fields | {"qkv_bias": cfg.flag("attention_bias", False), "qk_norm": True, "moe": moe,
                     "attention": _qwen_windows(cfg, fields["num_layers"])}


def _qwen3_next(cfg: _Config) -> dict[str, Any]:
    """Qwen3-Next: Gated DeltaNet layers with a gated full-attention layer every full_attention_interval
    (transformers Qwen3NextConfig: layer i is full when (i + 1) % interval == 0), QK norm, MoE + a shared expert
    behind a d x 1 sigmoid gate (Qwen3NextSparseMoeBlock.shared_expert_gate)."""
    _every_layer_moe(cfg)
    fields = _core(cfg, head_dim_required=True)
    n = fields["num_layers"]
    if cfg.has("layer_types"):
        attention = _from_layer_types(cfg, n)
    else:
        every = cfg.integer("full_attention_interval")
        attention = _shortest_cycle([_full() if (i + 1) % every == 0 else {"kind": "linear"} for i in range(n)])
    linear = {"kind": "gated_deltanet", "key_heads": cfg.integer("linear_num_key_heads"),
              "value_heads": cfg.integer("linear_num_value_heads"),
              "key_head_dim": cfg.integer("linear_key_head_dim"),
              "value_head_dim": cfg.integer("linear_value_head_dim"),
              "conv_kernel": cfg.integer("linear_conv_kernel_dim")}
    moe = {"num_experts": cfg.integer("num_experts"), "experts_per_token": cfg.integer("num_experts_per_tok"),
           "expert_intermediate_size": cfg.integer("moe_intermediate_size"), "num_shared_experts": 1,
           "shared_expert_intermediate_size": cfg.integer("shared_expert_intermediate_size"),
           "shared_expert_gate": True}
    return fields | {"qkv_bias": cfg.flag("attention_bias", False), "qk_norm": True, "attn_output_gate": True,
                     "attention": attention, "linear_attention": linear, "moe": moe}


def _gpt_oss(cfg: _Config) -> dict[str, Any]:
    """gpt-oss: alternating sliding (128) / full layers, every one with learned sink logits; all-MoE MLP
    (transformers GptOssConfig; experts of width intermediate_size, no shared expert). GptOssAttention's q/k/v/o
    carry attention_bias; GptOssExperts' gate_up and down projections and GptOssTopKRouter carry biases."""
    fields = _core(cfg, head_dim_required=True)
    if cfg.has("layer_types"):
        attention = _from_layer_types(cfg, fields["num_layers"], sinks=True)
    else:  # GptOssConfig default: layer i sliding when i is even
        attention = [_sliding(cfg.integer("sliding_window")) | {"sinks": True}, _full() | {"sinks": True}]
    moe = {"num_experts": cfg.integer("num_local_experts"), "experts_per_token": cfg.integer("num_experts_per_tok"),
           "expert_intermediate_size": fields["intermediate_size"], "router_bias": True}
    bias = cfg.flag("attention_bias", True)
    return fields | {"qkv_bias": bias, "attn_out_bias": bias, "mlp_bias": True, "attention": attention, "moe": moe}


def _gemma3(cfg: _Config) -> dict[str, Any]:
    """Gemma-3 (text_config of Gemma3ForConditionalGeneration): 5 local layers per global one, QK norm,
    4 norms per layer. Absent keys take Gemma3TextConfig's defaults (transformers 4.50): vocab_size 262,208,
    max_position_embeddings 131,072, head_dim 256, 8 attention heads and 4 KV heads, tied embeddings,
    sliding_window_pattern 6 (layer i is global when (i + 1) % 6 == 0). Google's published text_configs omit the
    keys at their defaults (gemma-3-12b-it names no head_dim, gemma-3-4b-it no head counts either)."""
    text = _text(cfg)
    text.data = {"vocab_size": 262_208, "max_position_embeddings": 131_072, "head_dim": 256,
                 "num_attention_heads": 8, "num_key_value_heads": 4, **text.data}
    fields = _core(text, head_dim_required=True, tie_default=True)
    n = fields["num_layers"]
    if text.has("layer_types"):
        attention = _from_layer_types(text, n)
    else:
        window, every = text.integer("sliding_window"), text.integer("sliding_window_pattern", 6)
        attention = _shortest_cycle([_full() if (i + 1) % every == 0 else _sliding(window) for i in range(n)])
    return fields | {"qkv_bias": text.flag("attention_bias", False), "qk_norm": True, "norms_per_layer": 4,
                     "attention": attention}


def _llama4(cfg: _Config) -> dict[str, Any]:
    """Llama-4 (text_config): chunked local attention (attention_chunk_size) on RoPE layers, global NoPE
    layers where no_rope_layers is 0 (empty: Llama4TextConfig derives every 4th layer); MoE with one shared
    expert of the expert width; dense layers (none when interleave_moe_layer_step is 1) use
    intermediate_size_mlp. Its QK norm (use_qk_norm) is Llama4TextL2Norm, an L2 norm without weights
    (transformers models/llama4/modeling_llama4.py)."""
    text = _text(cfg)
    step = text.integer("interleave_moe_layer_step", 1)
    fields = _core(text, head_dim_required=True)
    n = fields["num_layers"]
    # Llama4TextConfig: moe_layers = range(step - 1, n, step) unless listed (Maverick: step 2, layers 1, 3, ...)
    listed = text.data.get("moe_layers")
    if listed is not None and listed != list(range(step - 1, n, step)):
        raise text.error("moe_layers", f"only every interleave_moe_layer_step-th layer from {step - 1} is modelled, "
                                       f"got {listed!r}")
    rope = text.data.get("no_rope_layers") or [int((i + 1) % 4 != 0) for i in range(n)]
    if not isinstance(rope, list) or len(rope) != n:
        raise text.error("no_rope_layers", f"expected a list of {n} 0/1 flags, got {rope!r}")
    chunk = text.integer("attention_chunk_size") if text.has("attention_chunk_size") else None
    attention = _shortest_cycle([{"kind": "chunked", "window": chunk} if chunk and r else _full() for r in rope])
    moe = {"num_experts": text.integer("num_local_experts"), "experts_per_token": text.integer("num_experts_per_tok"),
           "expert_intermediate_size": fields["intermediate_size"], "num_shared_experts": 1,
           "layer_period": step, "layer_offset": step - 1}
    return fields | {"intermediate_size": text.integer("intermediate_size_mlp"), "attention": attention,
                     "qkv_bias": text.flag("attention_bias", False), "qk_norm": text.flag("use_qk_norm", False),
                     "qk_norm_width": "weightless", "moe": moe}


def _glm4_moe(cfg: _Config) -> dict[str, Any]:
    """GLM-4.5 (Glm4MoeConfig): GQA with q/k/v bias, optional QK norm, DeepSeek-style MoE keys; the MTP
    layers (num_nextn_predict_layers) are not part of the decoder stack."""
    # head_dim absent: hidden // heads, floored as Glm4MoeAttention derives it (getattr(config, "head_dim",
    # hidden_size // num_attention_heads)); the default config's 4096 / 96 gives 42
    if not cfg.has("head_dim"):
        cfg.data = {**cfg.data, "head_dim": cfg.integer("hidden_size") // cfg.integer("num_attention_heads")}
    fields = _core(cfg)
    moe = {"num_experts": cfg.integer("n_routed_experts"), "experts_per_token": cfg.integer("num_experts_per_tok"),
           "num_shared_experts": cfg.integer("n_shared_experts", minimum=0),
           "expert_intermediate_size": cfg.integer("moe_intermediate_size"),
           "first_dense_layers": cfg.integer("first_k_dense_replace", minimum=0)}
    return fields | {"qkv_bias": cfg.flag("attention_bias", False), "qk_norm": cfg.flag("use_qk_norm", False),
                     "attention": [_full()], "moe": moe}


ARCHITECTURES_2025: dict[str, Callable[[_Config], dict[str, Any]]] = {
    "Qwen3MoeForCausalLM": _qwen3_moe,
    "Qwen3NextForCausalLM": _qwen3_next,
    "GptOssForCausalLM": _gpt_oss,
    "Gemma3ForCausalLM": _gemma3,
    "Gemma3ForConditionalGeneration": _gemma3,
    "Llama4ForCausalLM": _llama4,
    "Llama4ForConditionalGeneration": _llama4,
    "Glm4MoeForCausalLM": _glm4_moe,
}
