"""Parameter groups of transformers' decoder families that the Model's named fields do not carry, and the MLA keys.

A Family row (hf_families) names the groups its modeling code adds in `extras`; each entry of EXTRAS maps the
config (and the fields read so far) to (parameters per decoder layer, parameters outside the layers), which land in
Model.layer_extra_params / model_extra_params. Every group cites the module that holds it, from
huggingface/transformers v5.24.0 src/transformers/models/<type>/modeling_<type>.py.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from roofline.catalogue.hfconfig import _Config

Fields = dict[str, Any]


def _mla(cfg: _Config) -> Fields:
    """Multi-head latent attention from the DeepSeek-V2 keys (q_lora_rank null: a full q_proj); every head reads
    the one cached latent, so num_kv_heads = heads and head_dim = qk_nope + qk_rope (DeepseekV2Attention)."""
    mla = {"q_lora_rank": cfg.optional_integer("q_lora_rank"), "kv_lora_rank": cfg.integer("kv_lora_rank"),
           "qk_nope_head_dim": cfg.integer("qk_nope_head_dim"), "qk_rope_head_dim": cfg.integer("qk_rope_head_dim"),
           "v_head_dim": cfg.integer("v_head_dim")}
    return {"mla": mla, "num_kv_heads": cfg.integer("num_attention_heads"),
            "head_dim": mla["qk_nope_head_dim"] + mla["qk_rope_head_dim"]}


def _xielu(cfg: _Config, fields: Fields) -> tuple[int, int]:
    """ApertusMLP's XIELUActivation: two learned scalars (alpha_p, alpha_n) per layer."""
    return 2, 0


def _bitnet_sub_norms(cfg: _Config, fields: Fields) -> tuple[int, int]:
    """BitNetAttention.attn_sub_norm (RMSNorm of hidden_size) and BitNetMLP.ffn_sub_norm (of intermediate_size)."""
    return fields["hidden_size"] + fields["intermediate_size"], 0


def _diff_lambdas(cfg: _Config, fields: Fields) -> tuple[int, int]:
    """DiffLlamaAttention's lambda_q1, lambda_k1, lambda_q2, lambda_k2: head_dim each."""
    return 4 * fields["head_dim"], 0


def _qk_layernorm_bias(cfg: _Config, fields: Fields) -> tuple[int, int]:
    """Per-head q / k LayerNorms with bias (PersimmonAttention q_layernorm, k_layernorm of head_dim): the two
    biases beside the weights qk_norm counts; none without qk_norm)."""
    return (2 * fields["head_dim"] if fields["qk_norm"] else 0), 0


def _last_layer_dense_bias(cfg: _Config, fields: Fields) -> tuple[int, int]:
    """GPTNeoXJapaneseAttention.dense_bias: hidden_size, in the last layer only (use_bias = layer_number ==
    num_hidden_layers - 1)."""
    return 0, fields["hidden_size"]


def _head_gate(cfg: _Config, fields: Fields) -> tuple[int, int]:
    """A per-head sigmoid gate on the attention output from the layer input (LagunaAttention.g_proj: hidden_size x
    num_attention_heads, no bias, when `gating`)."""
    return (fields["hidden_size"] * fields["num_heads"] if cfg.flag("gating", False) else 0), 0


def _moe_post_norm(cfg: _Config, fields: Fields) -> tuple[int, int]:
    """AXK1MoE.post_mlp_layernorm: an RMSNorm of hidden_size in each sparse layer (mlp_layer_types 'sparse', else
    the layers from first_k_dense_replace on), counted outside the per-layer groups."""
    kinds = cfg.data.get("mlp_layer_types")
    sparse = kinds.count("sparse") if isinstance(kinds, list) else \
        fields["num_layers"] - cfg.integer("first_k_dense_replace", 0, minimum=0)
    return 0, sparse * fields["hidden_size"]


def _additional_vocab(cfg: _Config, fields: Fields) -> tuple[int, int]:
    """Molmo2TextModel.embed_tokens covers vocab_size + additional_vocab_size rows; the LM head only vocab_size."""
    return 0, cfg.integer("additional_vocab_size", 0, minimum=0) * fields["hidden_size"]


def _gate_bias(cfg: _Config, fields: Fields) -> tuple[int, int]:
    """BeamAttention.gate_bias: one learned bias per query head on the output gate."""
    return fields["num_heads"], 0


EXTRAS: dict[str, Callable[[_Config, Fields], tuple[int, int]]] = {
    "xielu": _xielu, "bitnet_sub_norms": _bitnet_sub_norms, "diff_lambdas": _diff_lambdas,
    "qk_layernorm_bias": _qk_layernorm_bias, "last_layer_dense_bias": _last_layer_dense_bias,
    "head_gate": _head_gate, "moe_post_norm": _moe_post_norm,
    "additional_vocab": _additional_vocab, "gate_bias": _gate_bias,
}


def add_extras(cfg: _Config, names: tuple[str, ...], embedding_norm_params: int, fields: Fields) -> None:
    """Sum the named EXTRAS (and an embedding norm of `embedding_norm_params`) into fields' layer_extra_params
    and model_extra_params; a field left at 0 is not written (the Model's default)."""
    per_layer, outside = 0, embedding_norm_params
    for name in names:
        layer, model = EXTRAS[name](cfg, fields)
        per_layer, outside = per_layer + layer, outside + model
    if per_layer:
        fields["layer_extra_params"] = per_layer
    if outside:
        fields["model_extra_params"] = outside
