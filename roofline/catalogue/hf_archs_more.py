"""Readers of transformers' GPT-Neo and GPT-1 (OpenAI GPT) configs: Family rows plus what a row cannot say.

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


ARCHITECTURES_MORE: dict[str, Callable[[_Config], dict[str, Any]]] = {
    "GPTNeoForCausalLM": _gpt_neo,
    "OpenAIGPTLMHeadModel": _openai_gpt,
}
