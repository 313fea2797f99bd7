"""The Family row type of the transformers import, the parameter groups its named fields do not carry, MLA keys.

A Family row (hf_families.FAMILIES, hf_family_rows) says how one model type lays out its parameters around the
shared config keys. It names in `extras` the groups its modeling code adds beyond the Model's named fields; each
entry of EXTRAS maps the config (and the fields read so far) to (parameters per decoder layer, parameters not in
every layer), which land in Model.layer_extra_params / model_extra_params. Every group cites the module that
holds it, from huggingface/transformers v5.24.0 src/transformers/models/<type>/modeling_<type>.py.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from roofline.catalogue.hfconfig import _Config

Fields = dict[str, Any]


Switch = str | bool | tuple[str, bool]


@dataclass(frozen=True)
class Family:
    """How one model type lays out its parameters around the shared keys. A str names the config key that
    switches the feature (absent: off); a (key, default) pair the same where the family's config class defaults it
    on (save_pretrained still writes such keys, but hand-written and trimmed config.json files omit them); a bool
    fixes it for the family."""

    qkv_bias: Switch = "attention_bias"
    o_bias: Switch = "attention_bias"
    mlp_bias: Switch = "mlp_bias"
    mlp: str = "gated"
    norms_per_layer: int = 2
    norm: str = "rms"
    qk_norm: Switch = False
    qk_norm_width: str = "head"
    tie_default: bool = False
    uniform_window: bool = False  # no layer_types: sliding_window (null: full) applies to every layer
    window_ignored: bool = False  # the attention never slides, whatever sliding_window says (its config class
    # keeps the key; e.g. Qwen3VLMoeTextAttention sets self.sliding_window = None)
    router_bias: bool = False
    shared_expert_gate: bool = False
    attn_output_gate: bool = False
    gated_deltanet: bool = False  # 'linear_attention' layers are Gated DeltaNet of the linear_* keys
    aliases: tuple[tuple[str, str], ...] = ()  # (shared key, this family's key), e.g. ("hidden_size", "n_embd")
    learned_positions: str | None = None  # key giving the rows of a learned absolute position embedding
    position_offset: int = 0  # extra rows of that embedding (OPTLearnedPositionalEmbedding: 2)
    intermediate_factor: int | str = 0  # intermediate_size absent or null: this (an int, or the key holding it)
    # x hidden_size (GPT-2's n_inner: 4; GPT-NeoX-Japanese's intermediate_multiple_size)
    context_default: int | None = None  # max_position_embeddings absent: this (a cited training length)
    kv_heads_key: str | None = None  # a flag that, when true, makes one KV head (GPTBigCode's multi_query)
    modelled_only: tuple[tuple[str, Any], ...] = ()  # (key, value): other values of the key are refused
    sinks: bool = False  # every attention layer has learned per-head sink logits
    lm_head_bias: Switch = False  # the LM head carries a bias (CodeGen, GPT-J, CTRL, Phi)
    embedding_norm: bool = False  # a norm of the family's kind right after the token embedding (Bloom)
    head_dim_floor: bool = False  # head_dim absent: hidden_size // heads even when it does not divide (Glm4Moe)
    extras: tuple[str, ...] = ()  # per-layer / model-level parameter groups of EXTRAS, by name
    moe_always: bool = False  # an expert count of 1 is still a routed MoE block (HunYuan-MoE's default)
    shared_experts: int = 0  # shared experts when no shared-expert key says (HunYuan-MoE's shared_mlp: 1)
    moe_switch: str | None = None  # a flag that must be true for the MoE keys to apply (Doge's is_moe)
    first_dense_default: int = 0  # dense layers first when no key says (ExaoneMoeConfig.first_k_dense_replace: 1)
    per_layer_heads: str | None = None  # key listing heads per layer: each must equal num_attention_heads
    one_integer: tuple[str, ...] = ()  # keys the family's config class types int: a list there is refused
    one_integer_hint: str = ""  # what such a list is, said in that refusal


LLAMA = Family()
QK_HEAD = Family(qk_norm=True)
QK_FULL = Family(qk_norm=True, qk_norm_width="full")


def _mla(cfg: _Config) -> Fields:
    """Multi-head latent attention from the DeepSeek-V2 keys (q_lora_rank null: a full q_proj); every head reads
    the one cached latent, so num_kv_heads = heads and head_dim = qk_nope + qk_rope (DeepseekV2Attention)."""
    mla = {"q_lora_rank": cfg.optional_integer("q_lora_rank"), "kv_lora_rank": cfg.integer("kv_lora_rank"),
           "qk_nope_head_dim": cfg.integer("qk_nope_head_dim"), "qk_rope_head_dim": cfg.integer("qk_rope_head_dim"),
           "v_head_dim": cfg.integer("v_head_dim")}
    return {"mla": mla, "num_kv_heads": cfg.integer("num_attention_heads"),
            "head_dim": mla["qk_nope_head_dim"] + mla["qk_rope_head_dim"]}


def _xielu(cfg: _Config, fields: Fields) -> tuple[int, int]:
    """ApertusMLP's act_fn = ACT2FN[hidden_act] (transformers v5 modeling_apertus.py; ApertusConfig's default
    "xielu"): XIELUActivation holds two learned scalars (alpha_p, alpha_n) per layer, any other activation none."""
    act = cfg.data.get("hidden_act", "xielu")
    if not isinstance(act, str):
        raise cfg.error("hidden_act", f"expected an activation name, got {type(act).__name__} {act!r}")
    return (2 if act == "xielu" else 0), 0


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


_GATE_WIDTH_PER_HEAD = {True: "one", "per-head": "one", "per-element": "head_dim"}


def _head_gate(cfg: _Config, fields: Fields) -> tuple[int, int]:
    """A gate on the attention output from the layer input (LagunaAttention.g_proj, no bias, when `gating`):
    hidden x (the layer's heads x w), w = 1 for `gating` true or "per-head" (Laguna-XS.2, Laguna-S-2.1) and
    head_dim for "per-element" (vllm/model_executor/models/laguna.py: `gate_per_head = gating is True or
    gating == "per-head"`, else num_heads x head_dim; vLLM and transformers read `gating`, not `gating_types`).
    An absent key is LagunaConfig's default, true. Counted as hidden x w x the fewest heads of a layer in every
    layer, and what layers of more heads (Model.attention's num_heads) hold beyond that at the model level."""
    gating = cfg.data.get("gating", True)  # LagunaConfig's default: true; null, as false, builds no g_proj
    if gating is None or gating is False:
        return 0, 0
    if not isinstance(gating, (bool, str)) or gating not in _GATE_WIDTH_PER_HEAD:
        raise cfg.error("gating", f"expected true, false, 'per-head' or 'per-element' (vLLM's LagunaAttention), "
                                  f"got {type(gating).__name__} {gating!r}")
    w = 1 if _GATE_WIDTH_PER_HEAD[gating] == "one" else fields["head_dim"]
    d, heads, n = fields["hidden_size"], fields["num_heads"], fields["num_layers"]
    kinds = fields["attention"]
    per_layer = [kinds[i % len(kinds)].get("num_heads") or heads for i in range(n)]
    least = min(per_layer)
    return d * w * least, d * w * sum(h - least for h in per_layer)


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


def _doge(cfg: _Config, fields: Fields) -> tuple[int, int]:
    """DogeAttention's dynamic mask: A (one per KV head) and dt_proj (kv heads x head_dim -> kv heads, bias by
    attention_bias); DogeDecoderLayer's input_residual and post_attention_residual (hidden_size each)."""
    kv_heads = fields["num_kv_heads"]
    dt_proj = kv_heads * fields["head_dim"] * kv_heads + (kv_heads if cfg.flag("attention_bias", False) else 0)
    return kv_heads + dt_proj + 2 * fields["hidden_size"], 0


def _step_head_gate(cfg: _Config, fields: Fields) -> tuple[int, int]:
    """Step3p7Attention.g_proj: a per-head output gate (hidden_size x num_attention_heads, no bias) when gating is
    true (Step3p5TextConfig's class default; the family row refuses other values)."""
    return fields["hidden_size"] * fields["num_heads"], 0


def _modernbert_decoder(cfg: _Config, fields: Fields) -> tuple[int, int]:
    """ModernBertDecoderLayer.attn_norm in every layer but the first (layer 0's is nn.Identity; the row counts
    one norm, mlp_norm, per layer) and ModernBertDecoderPredictionHead (dense hidden x hidden, bias by
    classifier_bias, then a LayerNorm), all norms without bias (norm_bias false)."""
    d = fields["hidden_size"]
    head = d * d + (d if cfg.flag("classifier_bias", False) else 0) + d
    return 0, (fields["num_layers"] - 1) * d + head


EXTRAS: dict[str, Callable[[_Config, Fields], tuple[int, int]]] = {
    "xielu": _xielu, "bitnet_sub_norms": _bitnet_sub_norms, "diff_lambdas": _diff_lambdas,
    "qk_layernorm_bias": _qk_layernorm_bias, "last_layer_dense_bias": _last_layer_dense_bias,
    "head_gate": _head_gate, "moe_post_norm": _moe_post_norm,
    "additional_vocab": _additional_vocab, "gate_bias": _gate_bias,
    "doge": _doge, "step_head_gate": _step_head_gate,
    "modernbert_decoder": _modernbert_decoder,
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
