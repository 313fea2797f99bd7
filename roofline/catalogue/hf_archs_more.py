"""Readers of transformers' GPT-Neo, GPT-1 (OpenAI GPT) and JetMoE configs: Family rows plus what a row cannot say.

Each reader reads the shared keys through hf_families.read with a Family row, then sets the fields the row has no
key for; every layout is read from huggingface/transformers v5.24.0
src/transformers/models/<type>/modeling_<type>.py and matches a tiny transformers model in
tests/catalogue/test_hf_more.py (parameters and cache bytes exact).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from roofline.catalogue.hf_families import read
from roofline.catalogue.hf_layout import Family
from roofline.catalogue.hfconfig import _Config, _full, _shortest_cycle, _sliding

# GPTNeoBlock: ln_1 / ln_2 LayerNorms with bias, q / k / v_proj without bias, out_proj with bias, GPTNeoMLP c_fc /
# c_proj with bias (intermediate_size, null: 4 x hidden_size), wpe of max_position_embeddings, ln_f, tied lm_head
GPT_NEO = Family(norm="layernorm", qkv_bias=False, o_bias=True, mlp_bias=True, mlp="plain", tie_default=True,
                 learned_positions="max_position_embeddings", intermediate_factor=4,
                 aliases=(("num_hidden_layers", "num_layers"), ("num_attention_heads", "num_heads")))

# OpenAIGPTModel: tokens_embed and positions_embed (n_positions), Block = Attention (c_attn 3 x d and c_proj, Conv1D
# with bias) then ln_1, MLP (c_fc 4 x d, c_proj, with bias) then ln_2 (post-norm, LayerNorm with bias), no final
# norm; lm_head tied to tokens_embed
OPENAI_GPT = Family(norm="layernorm", qkv_bias=True, o_bias=True, mlp_bias=True, mlp="plain", tie_default=True,
                    learned_positions="n_positions", intermediate_factor=4,
                    aliases=(("hidden_size", "n_embd"), ("num_hidden_layers", "n_layer"),
                             ("num_attention_heads", "n_head"), ("max_position_embeddings", "n_positions")),
                    modelled_only=(("n_inner", None),))


# JetMoeDecoderLayer: two RMSNorms, a final norm, tied lm_head; JetMoeMoE (every layer): num_local_experts gated
# experts of intermediate_size (input_linear 2 x I, output_linear), a router d x E without bias, a bias of d
JETMOE = Family(tie_default=True, qkv_bias=False, o_bias=False, mlp_bias=False)


def _gpt_neo_layers(cfg: _Config, num_layers: int) -> list[dict[str, Any]]:
    """attention_types ([[kinds, repeats], ...], GPTNeoConfig.expand_attention_types_params) expanded to one kind
    per layer: 'global' full, 'local' a sliding window of window_size (GPTNeoSelfAttention masks all but the last
    window_size positions, the query's own included)."""
    spec = cfg.data.get("attention_types")
    kinds: list[Any] = []
    if isinstance(spec, list):
        for item in spec:
            if not (isinstance(item, list) and len(item) == 2 and isinstance(item[0], list)
                    and isinstance(item[1], int) and not isinstance(item[1], bool) and item[1] >= 0):
                kinds = []
                break
            kinds += item[0] * item[1]
    if len(kinds) != num_layers or not set(kinds) <= {"global", "local"}:
        raise cfg.error("attention_types", f"expected [[kinds, repeats], ...] of 'global' / 'local' expanding to "
                                           f"{num_layers} layers, got {spec!r}")
    window = cfg.integer("window_size") if "local" in kinds else 0
    return [_full() if kind == "global" else _sliding(window) for kind in kinds]


def _gpt_neo(cfg: _Config) -> dict[str, Any]:
    """GPT-Neo (GPTNeoForCausalLM, e.g. EleutherAI/gpt-neo-1.3B): GPT_NEO's layout, global and local layers by
    attention_types; transformers' DynamicCache keeps every token of the local layers too (GPTNeoModel builds
    DynamicCache(config) and GPTNeoConfig has no sliding_window key), so the transformers convention counts them
    in full (Model.transformers_cache)."""
    fields = read(cfg, GPT_NEO)
    layers = _gpt_neo_layers(cfg, fields["num_layers"])
    return fields | {"attention": _shortest_cycle(layers),
                     "transformers_cache": "full_windows"}


def _openai_gpt(cfg: _Config) -> dict[str, Any]:
    """GPT-1 (OpenAIGPTLMHeadModel, openai-community/openai-gpt): OPENAI_GPT's layout and no final norm. Its
    transformers model takes no cache (OpenAIGPTModel.forward has no past_key_values: every step recomputes the
    prefix), so the transformers convention holds none; an engine's K/V is the engine convention's."""
    return read(cfg, OPENAI_GPT) | {"final_norm": False, "transformers_cache": "none"}


def _jetmoe(cfg: _Config) -> dict[str, Any]:
    """JetMoE (JetMoeForCausalLM, jetmoe/jetmoe-8b). JetMoeAttention is a mixture of attention heads: kv_proj (d x
    2 x KV heads x kv_channels, no bias) is shared, the query and output projections are num_local_experts experts
    (JetMoeMoA: input_linear d -> KV x kv_channels, output_linear back) of which num_experts_per_tok run per token,
    each giving KV query heads: num_attention_heads = KV x top_k (JetMoeConfig.__post_init__), GQA groups of top_k,
    head_dim kv_channels. The Model's q / o count the top_k active experts; the other E - top_k experts' q / o, the
    MoA router (d x E) and the MoA and MoE output biases (d each) are layer_extra_params (stored, no FLOPs)."""
    kv_heads, top_k = cfg.integer("num_key_value_heads"), cfg.integer("num_experts_per_tok")
    experts, head_dim = cfg.integer("num_local_experts"), cfg.integer("kv_channels")
    if top_k > experts:
        raise cfg.error("num_experts_per_tok", f"{top_k} exceeds num_local_experts {experts}")
    data = cfg.data | {"num_attention_heads": kv_heads * top_k, "head_dim": head_dim}
    fields = read(_Config(data, cfg.where, cfg.arch), JETMOE)
    d = fields["hidden_size"]
    idle_experts = 2 * (experts - top_k) * d * kv_heads * head_dim
    return fields | {"layer_extra_params": idle_experts + d * experts + 2 * d}


ARCHITECTURES_MORE: dict[str, Callable[[_Config], dict[str, Any]]] = {
    "GPTNeoForCausalLM": _gpt_neo,
    "OpenAIGPTLMHeadModel": _openai_gpt,
    "JetMoeForCausalLM": _jetmoe,
}
