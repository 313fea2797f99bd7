"""Hugging Face import handlers for hybrids of attention and linear-attention layers without Mamba: MiniMax's lightning
attention, Kimi Linear's Kimi Delta Attention, OLMo Hybrid's Gated DeltaNet, RecurrentGemma's RG-LRU (registered
through hf_archs_hybrid.ARCHITECTURES_HYBRID).

Keys, defaults and module layouts from huggingface/transformers v5.24.0 (src/transformers/models/<type>/):
MiniMaxConfig / MiniMaxLightningAttention / MiniMaxDecoderLayer (minimax/), KimiLinearConfig /
KimiLinearDeltaAttention / KimiLinearAttention / KimiLinearMoE (kimi_linear/), OlmoHybridConfig /
OlmoHybridGatedDeltaNet (olmo_hybrid/), RecurrentGemmaConfig / RecurrentGemmaRecurrentBlock / RecurrentGemmaRglru
(recurrent_gemma/).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from roofline.catalogue.hf_archs_ssm import NO_POSITION_LIMIT
from roofline.catalogue.hf_families import Family, _moe_layers, read
from roofline.catalogue.hfconfig import _Config, _core, _full, _shortest_cycle


def _only(cfg: _Config, key: str, value: bool) -> None:
    """Refuse a boolean key set away from the one value the spec models."""
    if cfg.flag(key, value) != value:
        raise cfg.error(key, f"{cfg.data[key]!r} not modelled (only {str(value).lower()})")


def _hybrid_layers(cfg: _Config, kinds: list[str], n: int, key: str) -> list[dict[str, Any]]:
    """'full_attention' / 'linear_attention' per layer (the names transformers' hybrid configs use) as the
    shortest attention cycle; any other kind is refused naming `key`."""
    if len(kinds) != n or not set(kinds) <= {"full_attention", "linear_attention"}:
        raise cfg.error(key, f"expected {n} of 'full_attention' / 'linear_attention', got {kinds!r}")
    return _shortest_cycle([_full() if k == "full_attention" else {"kind": "linear"} for k in kinds])


def _minimax(cfg: _Config) -> dict[str, Any]:
    """MiniMax-01 / MiniMax-Text (MiniMaxDecoderLayer): input_layernorm, GQA attention ('full_attention') or
    lightning attention ('linear_attention': num_attention_heads of head_dim, its own q/k/v, output gate and norm),
    post_attention_layernorm, a Mixtral MoE (num_local_experts of intermediate_size, top num_experts_per_tok, a
    bias-free router). layer_types absent: odd layers (1, 3, ...) linear (MiniMaxConfig). sliding_window is refused.
    An engine keeps the lightning state as transformers does, heads x head_dim x head_dim per layer, in the model
    dtype (vllm-project/vllm vllm/model_executor/layers/mamba/mamba_utils.py, MambaStateShapeCalculator.
    linear_attention_state_shape and MambaStateDtypeCalculator.linear_attention_state_dtype)."""
    fields = _core(cfg, kv_default_heads=True)
    n = fields["num_layers"]
    if cfg.has("sliding_window"):
        raise cfg.error("sliding_window", f"{cfg.data['sliding_window']!r} not modelled (only null)")
    kinds = cfg.data.get("layer_types") or ["full_attention" if (i + 1) % 2 else "linear_attention" for i in range(n)]
    attention = _hybrid_layers(cfg, kinds, n, "layer_types")
    moe = {"num_experts": cfg.integer("num_local_experts"), "experts_per_token": cfg.integer("num_experts_per_tok"),
           "expert_intermediate_size": fields["intermediate_size"]}
    out = fields | {"attention": attention, "moe": moe}
    if all(layer["kind"] != "linear" for layer in attention):
        return out
    heads, head_dim = fields["num_heads"], fields["head_dim"]
    lightning = {"kind": "lightning", "key_heads": heads, "value_heads": heads, "key_head_dim": head_dim,
                 "value_head_dim": head_dim, "conv_kernel": 1}
    return out | {"linear_attention": lightning}


def _kimi_layers(cfg: _Config, n: int) -> list[str]:
    """layer_types, else linear_attn_config's 1-based full_attn_layers / kda_layers (the Hub's configs), else
    KimiLinearConfig's default (attention at every fourth layer from 4)."""
    if cfg.has("layer_types"):
        return cfg.data["layer_types"]
    sub = cfg.data.get("linear_attn_config") or {}
    if "full_attn_layers" in sub and "kda_layers" in sub:
        full = sub["full_attn_layers"]
        if not isinstance(full, list) or not all(isinstance(i, int) for i in full):
            raise cfg.error("linear_attn_config", f"full_attn_layers: expected 1-based layer numbers, got {full!r}")
        return ["full_attention" if i + 1 in full else "linear_attention" for i in range(n)]
    return ["full_attention" if i and i % 4 == 0 else "linear_attention" for i in range(n)]


def _kimi_linear(cfg: _Config) -> dict[str, Any]:
    """Kimi Linear (KimiLinearDecoderLayer): input_layernorm, MLA attention ('full_attention': q_proj or q_lora_rank
    factors, kv_a_proj_with_mqa, kv_a_layernorm, kv_b_proj, o_proj; the latent cached) or Kimi Delta Attention
    ('linear_attention': linear_num_heads of linear_head_dim, conv linear_conv_kernel_dim; linear_attn_config on the
    Hub), post_attention_layernorm, then a dense SwiGLU MLP (mlp_layer_types 'dense' / first_k_dense_replace) or the
    MoE: num_experts of moe_intermediate_size, top num_experts_per_token, a bias-free router (the
    e_score_correction_bias is a buffer), a shared SwiGLU MLP of moe_intermediate_size x num_shared_experts."""
    n, heads = cfg.integer("num_hidden_layers"), cfg.integer("num_attention_heads")
    sub = cfg.data.get("linear_attn_config") or {}
    mla = {"q_lora_rank": cfg.optional_integer("q_lora_rank"), "kv_lora_rank": cfg.integer("kv_lora_rank"),
           "qk_nope_head_dim": cfg.integer("qk_nope_head_dim"), "qk_rope_head_dim": cfg.integer("qk_rope_head_dim"),
           "v_head_dim": cfg.integer("v_head_dim")}
    attention = _hybrid_layers(cfg, _kimi_layers(cfg, n), n, "layer_types")
    topk = "num_experts_per_token" if cfg.has("num_experts_per_token") else "num_experts_per_tok"
    moe = {"num_experts": cfg.integer("num_experts"), "experts_per_token": cfg.integer(topk),
           "expert_intermediate_size": cfg.integer("moe_intermediate_size"),
           "num_shared_experts": cfg.integer("num_shared_experts", 1, minimum=0), **_moe_layers(cfg, n)}
    fields = {"num_layers": n, "hidden_size": cfg.integer("hidden_size"), "num_heads": heads, "num_kv_heads": heads,
              "head_dim": mla["qk_nope_head_dim"] + mla["qk_rope_head_dim"],
              "intermediate_size": cfg.integer("intermediate_size"), "vocab_size": cfg.integer("vocab_size"),
              "tie_word_embeddings": cfg.flag("tie_word_embeddings", False), "attention": attention,
              "max_position_embeddings": cfg.integer("model_max_length" if cfg.has("model_max_length")
                                                     else "max_position_embeddings"),
              "mla": mla, "moe": moe}
    if all(layer["kind"] != "linear" for layer in attention):
        return fields
    heads_l = sub.get("num_heads") or cfg.integer("linear_num_heads")
    head_dim = sub.get("head_dim") or cfg.integer("linear_head_dim")
    kernel = sub.get("short_conv_kernel_size") or cfg.integer("linear_conv_kernel_dim")
    kda = {"kind": "kda", "key_heads": heads_l, "value_heads": heads_l, "key_head_dim": head_dim,
           "value_head_dim": head_dim, "conv_kernel": kernel}
    return fields | {"linear_attention": kda}


# OLMo Hybrid (OlmoHybridGatedDeltaNet): separate q / k / v / a / b / g projections, the same parameters as Qwen3-Next's
# fused Gated DeltaNet; attention layers as OLMo-2 (post-norms, q / k RMSNorms over the whole projections)
OLMO_HYBRID = Family(qk_norm=True, qk_norm_width="full", gated_deltanet=True)


def _olmo_hybrid(cfg: _Config) -> dict[str, Any]:
    """OLMo Hybrid: Gated DeltaNet and OLMo-2 attention layers per layer_types (hf_families.read)."""
    return read(cfg, OLMO_HYBRID)


def _recurrent_gemma(cfg: _Config) -> dict[str, Any]:
    """RecurrentGemma / Griffin (RecurrentGemmaDecoderLayer): temporal_pre_norm, then the recurrent block (RG-LRU of
    lru_width in num_attention_heads blocks, conv1d_width) or local attention (window attention_window_size; q/k/v
    biases by attention_bias, o_proj always biased) per block_types repeated over the layers; channel_pre_norm, a
    GeGLU MLP of intermediate_size // 2 with biases; tied embeddings; head_dim (RecurrentGemmaConfig: hidden /
    heads). lru_width must equal hidden_size (RecurrentGemmaRecurrentBlock sizes its conv state by hidden_size).
    No engine in roofline's set serves it; the engine convention is roofline's rule (kernel - 1 conv inputs, the
    state in the state dtype). transformers keeps the RG-LRU state in fp32 whatever the model dtype."""
    n, hidden, heads = cfg.integer("num_hidden_layers"), cfg.integer("hidden_size"), cfg.integer("num_attention_heads")
    width = cfg.integer("lru_width", hidden)
    if width != hidden or width % heads:
        raise cfg.error("lru_width", f"{width} not modelled (only hidden_size {hidden}, divisible by the heads)")
    types = cfg.data.get("block_types")
    if not isinstance(types, list) or not types or not set(types) <= {"recurrent", "attention"}:
        raise cfg.error("block_types", f"expected a list of 'recurrent' / 'attention', got {types!r}")
    window = cfg.integer("attention_window_size")
    kinds = [{"kind": "linear"} if types[i % len(types)] == "recurrent" else {"kind": "sliding", "window": window}
             for i in range(n)]
    kv_heads = cfg.integer("num_key_value_heads", heads)
    if heads % kv_heads:
        raise cfg.error("num_key_value_heads", f"{kv_heads} does not divide num_attention_heads {heads}")
    fields = {"num_layers": n, "hidden_size": hidden, "num_heads": heads, "num_kv_heads": kv_heads,
              "head_dim": cfg.integer("head_dim", hidden // heads),
              "intermediate_size": cfg.integer("intermediate_size") // 2,
              "vocab_size": cfg.integer("vocab_size"), "tie_word_embeddings": cfg.flag("tie_word_embeddings", True),
              "max_position_embeddings": NO_POSITION_LIMIT, "qkv_bias": cfg.flag("attention_bias", False),
              "attn_out_bias": True, "mlp_bias": True, "attention": _shortest_cycle(kinds)}
    if all(layer["kind"] != "linear" for layer in fields["attention"]):
        return fields
    rglru = {"kind": "rglru", "key_heads": 1, "value_heads": heads, "key_head_dim": 1,
             "value_head_dim": width // heads, "conv_kernel": cfg.integer("conv1d_width", 4)}
    return fields | {"linear_attention": rglru}


ARCHITECTURES_LINEAR: dict[str, Callable[[_Config], dict[str, Any]]] = {
    "MiniMaxForCausalLM": _minimax,
    "KimiLinearForCausalLM": _kimi_linear,
    "OlmoHybridForCausalLM": _olmo_hybrid,
    "RecurrentGemmaForCausalLM": _recurrent_gemma,
}
