"""Hugging Face import of Gemma-3n (gemma3n_text, and the gemma3n wrapper's text_config).

Keys, defaults and parameter shapes are read from transformers 5.24.0,
src/transformers/models/gemma3n/configuration_gemma3n.py (Gemma3nTextConfig) and modeling_gemma3n.py
(Gemma3nTextModel, Gemma3nTextDecoderLayer, Gemma3nTextAttention, Gemma3nTextAltUp, Gemma3nTextLaurelBlock).

A Gemma-3n decoder layer is Gemma-3's (q/k/v/o with head-wide q and k RMSNorms, a GeGLU MLP, 4 norms, sliding
and full layers from layer_types) plus three mechanisms the spec carries as follows:

- AltUp (Gemma3nTextAltUp, n = altup_num_inputs copies of the residual stream): correct_output_scale (d),
  correction_coefs (n x n), prediction_coefs (n x n^2), modality_router (d x n), router_norm (d) per layer; the
  model's altup_projections and altup_unembed_projections (2 (n - 1) d x d).
- LAuReL (Gemma3nTextLaurelBlock, rank r = laurel_rank): linear_left (d x r), linear_right (r x d),
  post_laurel_norm (d) per layer.
- Per-layer inputs (p = hidden_size_per_layer_input, L layers): per_layer_input_gate (d x p),
  per_layer_projection (p x d), post_per_layer_input_norm (d) per layer; the model's embed_tokens_per_layer
  (vocab_size_per_layer_input x L p), per_layer_model_projection (d x L p) and per_layer_projection_norm (p).

Those groups are counted exactly in layer_extra_params and model_extra_params (stored with the layer's weights and
with the embedding); their FLOPs (about 2 (2 (n - 1) d^2 / L + 2 d r + 2 d p + 2 n d + 2 n^3) per token and layer,
under 2 % of a layer's at E4B's shapes) are not modelled, nor is the activation sparsity of the first layers'
MLPs (activation_sparsity_pattern: a Gaussian top-k mask, the matmuls stay dense in transformers).
KV sharing: the last num_kv_shared_layers layers have no k_proj / v_proj / k_norm and read the cache of the last
earlier layer of their kind (Gemma3nTextConfig.kv_sharing_modes): Model.kv_shared_layers. vLLM 0.24 allocates no
cache for them either (vllm/model_executor/models/gemma3n.py, Gemma3nAttention: kv_sharing_target_layer_name), so
the engine convention follows the same rule; so does Gemma-4's (vllm/model_executor/models/gemma4.py,
Gemma4Attention: the last num_kv_shared_layers layers take kv_sharing_target_layer_name).

Gemma-4 (transformers 5.24 models/gemma4 and gemma4_unified; _gemma4) adds a per-layer head_dim: its
per_layer_config gives the full layers global_head_dim (512 by default, against head_dim 256), carried as
AttentionLayer.head_dim. The serving engines' page rules and the compression methods are not modelled for layers
of different head_dim and refuse such a model (the ideal engine and the baseline caches are exact).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from roofline.catalogue.hfconfig import _Config, _from_layer_types, _full, _shortest_cycle, _sliding
from roofline.catalogue.hfconfig import text_of as _text


def _uniform_intermediate(cfg: _Config, num_layers: int) -> int:
    """intermediate_size: one width, or a per-layer list that must hold one width (the spec has one MLP width)."""
    value = cfg.data.get("intermediate_size")
    if isinstance(value, list):
        if len(value) != num_layers or len(set(map(repr, value))) != 1:
            raise cfg.error("intermediate_size", f"per-layer widths {value!r} are not supported (only one width "
                                                 f"for all {num_layers} layers)")
        cfg = _Config({"intermediate_size": value[0]}, cfg.where, cfg.arch)
    return cfg.integer("intermediate_size")


def _gemma3n_attention(cfg: _Config, num_layers: int) -> list[dict[str, Any]]:
    """layer_types, else Gemma3nTextConfig's default: layer i is full when (i + 1) % 5 == 0, else sliding."""
    if cfg.has("layer_types"):
        return _from_layer_types(cfg, num_layers)
    window = cfg.integer("sliding_window", 512)
    return _shortest_cycle([_full() if (i + 1) % 5 == 0 else _sliding(window) for i in range(num_layers)])


def _gemma3n_extras(cfg: _Config, d: int, num_layers: int) -> tuple[int, int]:
    """(per-layer, model-wide) parameters of AltUp, LAuReL and the per-layer inputs (module docstring); the
    defaults are Gemma3nTextConfig's."""
    n = cfg.integer("altup_num_inputs", 4)
    r = cfg.integer("laurel_rank", 64)
    p = cfg.integer("hidden_size_per_layer_input", 256)
    per_layer_vocab = cfg.integer("vocab_size_per_layer_input", 262_144)
    altup = d + n * n + n * n * n + d * n + d
    laurel = 2 * d * r + d
    per_layer_input = 2 * d * p + d
    model_wide = per_layer_vocab * num_layers * p + d * num_layers * p + p + 2 * (n - 1) * d * d
    return altup + laurel + per_layer_input, model_wide


def _gemma3n(cfg: _Config) -> dict[str, Any]:
    """Gemma-3n (module docstring): tied embeddings by default (Gemma3nTextConfig), head_dim required."""
    cfg = _text(cfg)
    n, d = cfg.integer("num_hidden_layers"), cfg.integer("hidden_size")
    heads = cfg.integer("num_attention_heads")
    kv_heads = cfg.integer("num_key_value_heads")
    if heads % kv_heads:
        raise cfg.error("num_key_value_heads", f"{kv_heads} does not divide num_attention_heads {heads}")
    shared = cfg.integer("num_kv_shared_layers", 15, minimum=0)
    if shared >= n:
        raise cfg.error("num_kv_shared_layers", f"{shared} leaves none of the {n} layers keeping a cache")
    per_layer, model_wide = _gemma3n_extras(cfg, d, n)
    return {
        "num_layers": n, "hidden_size": d, "num_heads": heads, "num_kv_heads": kv_heads,
        "head_dim": cfg.integer("head_dim"), "intermediate_size": _uniform_intermediate(cfg, n),
        "vocab_size": cfg.integer("vocab_size"), "tie_word_embeddings": cfg.flag("tie_word_embeddings", True),
        "max_position_embeddings": cfg.integer("max_position_embeddings"),
        "qkv_bias": cfg.flag("attention_bias", False), "attn_out_bias": cfg.flag("attention_bias", False),
        "qk_norm": True, "norms_per_layer": 4, "attention": _gemma3n_attention(cfg, n),
        "kv_shared_layers": shared, "layer_extra_params": per_layer, "model_extra_params": model_wide,
    }


GEMMA4_REFUSED = {"attention_k_eq_v": "K = V on the full layers", "enable_moe_block": "the MoE block beside the MLP",
                  "use_double_wide_mlp": "the kv-shared layers' double-wide MLP"}


def _per_layer_head_dims(cfg: _Config, num_layers: int, head_dim: int, kv_heads: int) -> list[int]:
    """Each layer's head_dim from per_layer_config ({layer index: {head_dim, num_key_value_heads}}, which
    Gemma4TextConfig.__post_init__ writes for the full layers from global_head_dim); a per-layer KV head count
    other than num_key_value_heads is refused (not modelled)."""
    table = cfg.data.get("per_layer_config") or {}
    if not isinstance(table, dict):
        raise cfg.error("per_layer_config", f"expected an object of layer index -> overrides, got {table!r}")
    dims = [head_dim] * num_layers
    for key, override in table.items():
        if not str(key).isdigit() or int(key) >= num_layers or not isinstance(override, dict):
            raise cfg.error("per_layer_config", f"entry {key!r}: expected a layer index below {num_layers} "
                                                "mapping to an object")
        entry = _Config(override, f"{cfg.where}: per_layer_config.{key}", cfg.arch)
        unknown = set(override) - {"head_dim", "num_key_value_heads"}
        if unknown:
            raise entry.error(sorted(unknown)[0], "not supported (only head_dim and num_key_value_heads)")
        if entry.integer("num_key_value_heads", kv_heads) != kv_heads:
            raise entry.error("num_key_value_heads", f"{override['num_key_value_heads']} differs from the "
                                                     f"model's {kv_heads}: per-layer KV heads are not modelled")
        dims[int(key)] = entry.integer("head_dim", head_dim)
    return dims


def _gemma4(cfg: _Config) -> dict[str, Any]:
    """Gemma-4 text decoder (transformers 5.24 models/gemma4: Gemma4TextConfig, Gemma4TextAttention,
    Gemma4TextDecoderLayer): Gemma-3n's attention (head-wide q/k norms, 4 norms, KV sharing) without AltUp and
    LAuReL, its per-layer inputs when hidden_size_per_layer_input is set, and a per-layer head_dim
    (per_layer_config: global_head_dim on the full layers). Layer types default to 5 sliding : 1 full and the
    last layer is forced full (Gemma4TextConfig.__post_init__). K = V attention, the MoE block and the double-wide
    MLP are refused by key, and so are the assistants (Gemma4UnifiedAssistantConfig.__post_init__ shares every
    layer's cache with the target model: the drafter keeps none of its own)."""
    if cfg.arch.endswith("AssistantForCausalLM"):
        raise cfg.error("architectures", f"{cfg.arch} is a drafter that attends with its target model's cache "
                                         "(num_kv_shared_layers = every layer): plan the target model")
    cfg = _text(cfg)
    for key, what in GEMMA4_REFUSED.items():
        if cfg.data.get(key):
            raise cfg.error(key, f"{cfg.data[key]!r}: {what} is not modelled (only false)")
    if cfg.data.get("use_bidirectional_attention") == "all":
        raise cfg.error("use_bidirectional_attention", "'all' (a bidirectional encoder) is not a decoder cache")
    n, d = cfg.integer("num_hidden_layers"), cfg.integer("hidden_size")
    heads, kv_heads = cfg.integer("num_attention_heads"), cfg.integer("num_key_value_heads")
    if heads % kv_heads:
        raise cfg.error("num_key_value_heads", f"{kv_heads} does not divide num_attention_heads {heads}")
    head_dim = cfg.integer("head_dim")
    if not cfg.has("layer_types"):
        cfg.data = cfg.data | {"layer_types": ["full_attention" if (i + 1) % 6 == 0 or i == n - 1
                                               else "sliding_attention" for i in range(n)]}
    kinds = _from_layer_types_all(cfg, n)
    dims = _per_layer_head_dims(cfg, n, head_dim, kv_heads)
    own = [kind | ({"head_dim": h} if h != head_dim else {}) for kind, h in zip(kinds, dims, strict=True)]
    attention = _shortest_cycle(own)
    shared = cfg.integer("num_kv_shared_layers", 0, minimum=0)
    if shared >= n:
        raise cfg.error("num_kv_shared_layers", f"{shared} leaves none of the {n} layers keeping a cache")
    p = cfg.integer("hidden_size_per_layer_input", 0, minimum=0)
    per_layer = 2 * d * p + d if p else 0
    model_wide = cfg.integer("vocab_size_per_layer_input") * n * p + d * n * p + p if p else 0
    return {
        "num_layers": n, "hidden_size": d, "num_heads": heads, "num_kv_heads": kv_heads, "head_dim": head_dim,
        "intermediate_size": cfg.integer("intermediate_size"), "vocab_size": cfg.integer("vocab_size"),
        "tie_word_embeddings": cfg.flag("tie_word_embeddings", True),
        "max_position_embeddings": cfg.integer("max_position_embeddings"),
        "qkv_bias": cfg.flag("attention_bias", False), "attn_out_bias": cfg.flag("attention_bias", False),
        "qk_norm": True, "norms_per_layer": 4, "attention": attention, "kv_shared_layers": shared,
        "layer_extra_params": per_layer, "model_extra_params": model_wide,
    }


def _from_layer_types_all(cfg: _Config, num_layers: int) -> list[dict[str, Any]]:
    """One attention entry per layer from layer_types (not folded into a cycle: head_dim is added per layer)."""
    return [_from_layer_types(_Config(cfg.data | {"layer_types": [kind]}, cfg.where, cfg.arch), 1)[0]
            for kind in _layer_types(cfg, num_layers)]


def _layer_types(cfg: _Config, num_layers: int) -> list[Any]:
    types = cfg.data["layer_types"]
    if not isinstance(types, list) or len(types) != num_layers:
        raise cfg.error("layer_types", f"expected a list of {num_layers} layer kinds, got {types!r}")
    return types


ARCHITECTURES_GEMMA: dict[str, Callable[[_Config], dict[str, Any]]] = {
    "Gemma3nForCausalLM": _gemma3n,
    "Gemma3nForConditionalGeneration": _gemma3n,
    "Gemma4ForCausalLM": _gemma4,
    "Gemma4ForConditionalGeneration": _gemma4,
    "Gemma4UnifiedForCausalLM": _gemma4,  # Gemma4UnifiedTextConfig: Gemma-4's keys, no per-layer inputs
    "Gemma4UnifiedForConditionalGeneration": _gemma4,
    "Gemma4UnifiedAssistantForCausalLM": _gemma4,  # refused: see _gemma4
}
