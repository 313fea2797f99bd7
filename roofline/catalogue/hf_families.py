"""Declarative import of transformers' decoder families: one Family row per model type, one generic reader.

transformers' decoder configs share their structure keys (configuration_llama.py is the template most families
copy): num_hidden_layers, hidden_size, num_attention_heads, num_key_value_heads (absent: = heads), head_dim
(absent: hidden_size // num_attention_heads, as LlamaAttention derives it with `getattr(config, "head_dim", None)
or hidden_size // num_attention_heads`), intermediate_size, vocab_size, max_position_embeddings,
tie_word_embeddings, layer_types (full_attention / sliding_attention / chunked_attention / linear_attention), and
the MoE keys num_experts | num_local_experts | n_routed_experts, num_experts_per_tok, moe_intermediate_size,
n_shared_experts | shared_expert_intermediate_size, first_k_dense_replace | num_dense_layers, mlp_layer_types,
leading mlp_only_layers, moe_layer_start_index / end / interval; MLA's q_lora_rank / kv_lora_rank where present.
What differs between families is not the keys but the parameters around them (biases, norm kind, norms per layer,
QK-norm width, an MLP with or without gate, groups the Model's fields do not name: hf_layout.EXTRAS); a Family row
(hf_layout.Family; rows here and in hf_family_rows) says which, and `read` builds the Model fields. A family is
listed only once tests/catalogue/test_hf_exactness.py matches a tiny random-initialised transformers model of that
type: parameter count and cache bytes exact.

Keys and module layouts from huggingface/transformers v5.24.0 (src/transformers/models/<type>/modeling_<type>.py).
"""

from __future__ import annotations

from typing import Any

from roofline.catalogue.hf_family_rows import MOE_FAMILIES, OLDER_FAMILIES
from roofline.catalogue.hf_layout import LLAMA, QK_FULL, QK_HEAD, Family, _mla, add_extras
from roofline.catalogue.hfconfig import _Config, _from_layer_types, _full, _shortest_cycle, _sliding

EXPERT_KEYS = ("num_experts", "num_local_experts", "n_routed_experts", "moe_num_experts")
TOPK_KEYS = ("num_experts_per_tok", "moe_k", "moe_topk", "top_k")
SHARED_KEYS = ("n_shared_experts", "num_shared_experts", "moe_num_shared_experts")


def _renamed(cfg: _Config, family: Family) -> _Config:
    """The config with the family's keys under the shared names (an alias fills a shared key that is absent)."""
    data = dict(cfg.data)
    for shared, own in family.aliases:
        if data.get(shared) is None and own in data:
            data[shared] = data[own]
    factor = family.intermediate_factor
    if isinstance(factor, str):
        factor = _Config(data, cfg.where, cfg.arch).integer(factor) if factor in data else 0
    if factor and data.get("intermediate_size") is None and isinstance(data.get("hidden_size"), int):
        data["intermediate_size"] = factor * data["hidden_size"]
    if family.context_default and data.get("max_position_embeddings") is None:
        data["max_position_embeddings"] = family.context_default
    if family.kv_heads_key and data.get(family.kv_heads_key):
        data["num_key_value_heads"] = 1
    return _Config(data, cfg.where, cfg.arch)


# Qwen3.5's text_config names the dtype of its Gated DeltaNet recurrent state (the published Qwen3.5 configs:
# "mamba_ssm_dtype": "float32"). vLLM serves Qwen3.5 only as Qwen3_5(Moe)ForConditionalGeneration, whose
# Qwen3_5ForConditionalGenerationConfig.verify_and_update_config sets cache_config.mamba_ssm_cache_dtype to it when
# the flag is 'auto' (vllm-project/vllm v0.24.0 vllm/model_executor/models/config.py); the temporal (recurrent)
# state is then stored at that dtype, the conv state at the model dtype
# (model_executor/layers/mamba/mamba_utils.py MambaStateDtypeCalculator._mamba_state_dtype). Values: vLLM's
# MambaDType (config/cache.py); 'auto' keeps the model dtype.
MAMBA_SSM_DTYPES = {"float32": "fp32", "bfloat16": "bf16", "float16": "fp16", "auto": None}


def _deltanet(cfg: _Config) -> dict[str, Any]:
    """Gated DeltaNet shapes from the linear_* keys (Qwen3NextConfig / Qwen3_5TextConfig), the recurrent state at
    mamba_ssm_dtype where the config names one (MAMBA_SSM_DTYPES)."""
    fields = {"kind": "gated_deltanet", "key_heads": cfg.integer("linear_num_key_heads"),
              "value_heads": cfg.integer("linear_num_value_heads"),
              "key_head_dim": cfg.integer("linear_key_head_dim"),
              "value_head_dim": cfg.integer("linear_value_head_dim"),
              "conv_kernel": cfg.integer("linear_conv_kernel_dim")}
    ssm = cfg.data.get("mamba_ssm_dtype")
    if ssm is None:
        return fields
    if not isinstance(ssm, str) or ssm not in MAMBA_SSM_DTYPES:
        raise cfg.error("mamba_ssm_dtype", f"{ssm!r} is not one of {', '.join(MAMBA_SSM_DTYPES)} (vLLM's "
                                           "mamba_ssm_cache_dtype: the Gated DeltaNet recurrent state's dtype)")
    return fields | {"recurrent_dtype": MAMBA_SSM_DTYPES[ssm]}


def _switch(cfg: _Config, value: str | bool | tuple[str, bool]) -> bool:
    """A Family switch: fixed (bool), the named key (absent: off), or (key, the config class's default)."""
    if isinstance(value, tuple):
        return cfg.flag(*value)
    return cfg.flag(value, False) if isinstance(value, str) else value


def _first(cfg: _Config, keys: tuple[str, ...]) -> str | None:
    return next((k for k in keys if cfg.has(k)), None)


def _attention(cfg: _Config, family: Family, num_layers: int) -> list[dict[str, Any]]:
    """layer_types when the config lists them; else one window for every layer (uniform_window); else, when the
    config sets a window, the layer_types its transformers config class derives from it (_derived_layer_types);
    else full."""
    if cfg.has("layer_types"):
        return _from_layer_types(cfg, num_layers, sinks=family.sinks)
    if family.uniform_window and cfg.has("sliding_window") and cfg.flag("use_sliding_window", True):
        return [_sliding(cfg.integer("sliding_window"))]
    if cfg.has("sliding_window") and cfg.flag("use_sliding_window", True) and not family.window_ignored:
        derived = _derived_layer_types(cfg)
        return _from_layer_types(_Config(cfg.data | {"layer_types": derived}, cfg.where, cfg.arch), num_layers,
                                 sinks=family.sinks)
    return [_full()]


def _derived_layer_types(cfg: _Config) -> list[str]:
    """The layer_types transformers' config class of this model_type derives in __post_init__ when a config.json
    sets sliding_window but lists no layer_types (older saves and hand-written configs): each family has its own
    rule (Exaone4Config: layer i full when (i + 1) % sliding_window_pattern == 0; Qwen3Config: by
    use_sliding_window and max_window_layers; ...), so the class itself is asked
    (transformers.AutoConfig.for_model, https://github.com/huggingface/transformers v5.24.0). Without transformers,
    or when the class derives none, one line naming layer_types: reading every layer as full would price a
    windowed model's cache as if nothing slid (EXAONE-4.0-32B at 32K: 8 GiB instead of 2.75)."""
    model_type = cfg.data.get("model_type")
    window = cfg.integer("sliding_window")
    need = (f"missing while sliding_window is {window}: which layers slide is derived by transformers' "
            f"{model_type} config class")
    try:
        import transformers
    except ImportError:
        raise cfg.error("layer_types", f"{need}; install transformers, or list layer_types in the config") from None
    verbosity = transformers.logging.get_verbosity()  # the caller's logging is left as it was
    try:
        transformers.logging.set_verbosity_error()
        derived = getattr(transformers.AutoConfig.for_model(
            model_type, **{k: v for k, v in cfg.data.items() if k != "model_type"}), "layer_types", None)
    except (ValueError, TypeError, KeyError, AttributeError) as exc:
        raise cfg.error("layer_types", f"{need}, which refused this config ({type(exc).__name__}: "
                                       f"{str(exc).splitlines()[0][:120]}); list layer_types in the config") from None
    finally:
        transformers.logging.set_verbosity(verbosity)
    if not isinstance(derived, list) or not derived:
        raise cfg.error("layer_types", f"{need}, which derives none; list layer_types in the config")
    return derived


def _moe_layers(cfg: _Config, num_layers: int, first_default: int = 0) -> dict[str, int]:
    """first_dense_layers / layer_period / layer_offset from first_k_dense_replace (absent: `first_default`, the
    family's config class default), mlp_layer_types (a list of 'dense' / 'sparse'), is_moe_layer (a list of
    booleans: vLLM's exaone_moe.py reads the layer kinds from it), or decoder_sparse_step + mlp_only_layers
    (Qwen-MoE); other patterns are refused."""
    if not cfg.has("mlp_layer_types") and cfg.has("is_moe_layer"):
        flags = cfg.data["is_moe_layer"]
        if not (isinstance(flags, list) and len(flags) == num_layers and all(isinstance(f, bool) for f in flags)):
            raise cfg.error("is_moe_layer", f"expected {num_layers} of true / false, got {flags!r}")
        first = flags.index(True) if True in flags else num_layers
        if not all(flags[first:]):
            raise cfg.error("is_moe_layer", "only leading dense layers then MoE ones are modelled")
        return {"first_dense_layers": first}
    if cfg.has("mlp_layer_types"):
        kinds = cfg.data["mlp_layer_types"]
        if not isinstance(kinds, list) or len(kinds) != num_layers or not set(kinds) <= {"dense", "sparse"}:
            raise cfg.error("mlp_layer_types", f"expected {num_layers} of 'dense' / 'sparse', got {kinds!r}")
        first = kinds.index("sparse") if "sparse" in kinds else num_layers
        if any(k != "sparse" for k in kinds[first:]):
            raise cfg.error("mlp_layer_types", "only leading dense layers then sparse ones are modelled")
        return {"first_dense_layers": first}
    if cfg.has("moe_layer_start_index"):
        return _moe_range(cfg, num_layers)
    dense = cfg.data.get("mlp_only_layers") or []
    if dense != list(range(len(dense))):
        raise cfg.error("mlp_only_layers", f"{dense!r} not supported (only leading layers [0, 1, ...])")
    if dense:  # Qwen2MoeDecoderLayer: a layer of mlp_only_layers keeps the dense MLP
        if cfg.integer("decoder_sparse_step", 1) != 1 or cfg.integer("first_k_dense_replace", 0, minimum=0):
            raise cfg.error("mlp_only_layers", "with decoder_sparse_step or first_k_dense_replace not supported")
        return {"first_dense_layers": len(dense)}
    step = cfg.integer("decoder_sparse_step", 1)
    first = cfg.integer("first_k_dense_replace", cfg.integer("num_dense_layers", first_default, minimum=0),
                        minimum=0)
    if step != 1 and first:
        raise cfg.error("decoder_sparse_step", "with first_k_dense_replace not supported")
    return {"first_dense_layers": first, "layer_period": step, "layer_offset": step - 1}


def _moe_range(cfg: _Config, num_layers: int) -> dict[str, int]:
    """ERNIE 4.5's keys (Ernie4_5_MoeDecoderLayer): layer i is sparse when (i + 1) % moe_layer_interval == 0 and
    moe_layer_start_index <= i <= moe_layer_end_index; an end before the last layer is refused (dense tail)."""
    start, every = cfg.integer("moe_layer_start_index", minimum=0), cfg.integer("moe_layer_interval", 1)
    end = cfg.integer("moe_layer_end_index", num_layers - 1, minimum=0)
    if end < num_layers - 1:
        raise cfg.error("moe_layer_end_index", f"{end} before the last layer {num_layers - 1} not modelled")
    return {"first_dense_layers": start, "layer_period": every, "layer_offset": every - 1}


def _moe(cfg: _Config, family: Family, num_layers: int, dense_width: int) -> dict[str, Any] | None:
    """The MoE block from the shared keys, or None for a dense model (no expert count, or one expert)."""
    experts_key = _first(cfg, EXPERT_KEYS)
    if family.moe_switch and not cfg.flag(family.moe_switch, False):
        return None
    if experts_key is None or cfg.layer_integer(experts_key) < (1 if family.moe_always else 2):
        return None
    topk_key = _first(cfg, TOPK_KEYS)
    if topk_key is None:
        raise cfg.error(TOPK_KEYS[0], f"missing (required with {experts_key})")
    width_key = _first(cfg, ("moe_intermediate_size", "expert_intermediate_size"))
    moe = {"num_experts": cfg.layer_integer(experts_key), "experts_per_token": cfg.layer_integer(topk_key),
           "expert_intermediate_size": cfg.layer_integer(width_key) if width_key else dense_width,
           "router_bias": family.router_bias, **_moe_layers(cfg, num_layers, family.first_dense_default)}
    shared_key = _first(cfg, SHARED_KEYS)
    shared = cfg.layer_integer(shared_key, minimum=0) if shared_key else family.shared_experts
    if cfg.has("shared_expert_intermediate_size") and cfg.integer("shared_expert_intermediate_size"):
        moe |= {"num_shared_experts": max(shared, 1),
                "shared_expert_intermediate_size": cfg.integer("shared_expert_intermediate_size")}
    elif shared:
        moe["num_shared_experts"] = shared
    if moe.get("num_shared_experts"):
        moe["shared_expert_gate"] = family.shared_expert_gate
    return moe


def _layer_heads(cfg: _Config, family: Family, attention: list[dict[str, Any]], n: int, heads: int,
                 kv_heads: int) -> list[dict[str, Any]]:
    """The attention layers with their own query heads where the family's per-layer list differs from
    num_attention_heads (Laguna-XS: vLLM's LagunaDecoderLayer builds LagunaAttention with
    num_attention_heads_per_layer[layer_idx] heads beside the shared num_key_value_heads and head_dim); as read
    otherwise."""
    key = family.per_layer_heads
    if not key or not cfg.has(key):
        return attention
    per_layer = cfg.data[key]
    if not (isinstance(per_layer, list) and len(per_layer) == n
            and all(isinstance(h, int) and not isinstance(h, bool) and h > 0 for h in per_layer)):
        raise cfg.error(key, f"expected {n} positive head counts, one a layer, got {per_layer!r}")
    if bad := next((h for h in per_layer if h % kv_heads), None):
        raise cfg.error(key, f"{bad} heads is not a multiple of num_key_value_heads {kv_heads}")
    layers = [dict(attention[i % len(attention)]) for i in range(n)]
    for layer, h in zip(layers, per_layer, strict=True):
        if h != heads:
            layer["num_heads"] = h
    return layers


def _dense_width(cfg: _Config) -> int:
    """intermediate_size; a config without it (Qwen3_5MoeTextConfig: every layer MoE) gives the expert width,
    which then sizes no layer (no dense layer is allowed)."""
    if cfg.has("intermediate_size") or not (_first(cfg, EXPERT_KEYS) and cfg.has("moe_intermediate_size")):
        return cfg.integer("intermediate_size")
    if cfg.integer("first_k_dense_replace", 0, minimum=0) or cfg.integer("decoder_sparse_step", 1) != 1:
        raise cfg.error("intermediate_size", "missing, and some layers have a dense MLP")
    return cfg.integer("moe_intermediate_size")


def read(cfg: _Config, family: Family) -> dict[str, Any]:
    """The Model fields of a config of `family`: shared keys, then the family's parameter layout."""
    cfg = _renamed(cfg, family)
    for key in family.one_integer:
        if isinstance(cfg.data.get(key), list):
            raise cfg.error(key, f"{cfg.data[key]!r}: {cfg.arch} takes one integer here, not a list "
                                 f"{family.one_integer_hint}".rstrip())
    for key, value in family.modelled_only:
        expected = cfg.data.get(value) if value in ("hidden_size", "num_attention_heads") else value
        if key in cfg.data and cfg.data[key] != expected:
            raise cfg.error(key, f"{cfg.data[key]!r} not modelled (only {value})")
    hidden, heads = cfg.integer("hidden_size"), cfg.integer("num_attention_heads")
    kv_heads = cfg.integer("num_key_value_heads", heads)
    if heads % kv_heads:
        raise cfg.error("num_key_value_heads", f"{kv_heads} does not divide num_attention_heads {heads}")
    if not cfg.has("head_dim") and hidden % heads and not family.head_dim_floor and not cfg.has("kv_lora_rank"):
        raise cfg.error("head_dim", f"missing, and hidden_size {hidden} is not divisible by num_attention_heads "
                                    f"{heads}")
    n = cfg.integer("num_hidden_layers")
    dense = _dense_width(cfg)
    fields = {
        "num_layers": n, "hidden_size": hidden, "num_heads": heads, "num_kv_heads": kv_heads,
        "head_dim": cfg.integer("head_dim") if cfg.has("head_dim") else hidden // heads,
        "intermediate_size": dense, "vocab_size": cfg.integer("vocab_size"),
        "tie_word_embeddings": cfg.flag("tie_word_embeddings", family.tie_default),
        "max_position_embeddings": cfg.integer("max_position_embeddings"),
        "qkv_bias": _switch(cfg, family.qkv_bias), "attn_out_bias": _switch(cfg, family.o_bias),
        "mlp_bias": _switch(cfg, family.mlp_bias), "mlp": family.mlp, "norms_per_layer": family.norms_per_layer,
        "norm": family.norm, "qk_norm": _switch(cfg, family.qk_norm), "qk_norm_width": family.qk_norm_width,
        "attention": _shortest_cycle(_layer_heads(cfg, family, _attention(cfg, family, n), n, heads, kv_heads)),
    }
    if family.attn_output_gate:
        fields["attn_output_gate"] = True
    if _switch(cfg, family.lm_head_bias):
        fields["lm_head_bias"] = True
    if cfg.has("kv_lora_rank"):
        fields |= _mla(cfg)
    norm_params = {"rms": 1, "layernorm": 2, "nonparametric": 0}[family.norm] * hidden
    add_extras(cfg, family.extras, norm_params if family.embedding_norm else 0, fields)
    if family.learned_positions:
        fields["position_embeddings"] = cfg.integer(family.learned_positions) + family.position_offset
    if any(layer["kind"] == "linear" for layer in fields["attention"]):
        if not family.gated_deltanet:
            raise cfg.error("layer_types", f"'linear_attention' layers of {cfg.arch} are not modelled")
        fields["linear_attention"] = _deltanet(cfg)
    moe = _moe(cfg, family, n, dense)
    return fields if moe is None else fields | {"moe": moe}


FAMILIES: dict[str, Family] = {
    # the Llama layout: q/k/v/o and gate/up/down, RMSNorm before attention and MLP, attention_bias on q/k/v/o
    **dict.fromkeys(("llama", "aria_text", "cwm", "exaone", "granite", "granitemoe",
                     "granitemoeshared", "helium", "internlm3", "iquestcoder", "ministral",
                     "sarvam_moe", "glm"), LLAMA),
    # the same layout where the config class ties the LM head to the embedding unless the config.json says
    # otherwise (GemmaConfig, SmolLM3Config, Ernie4_5Config, VaultGemmaConfig: tie_word_embeddings=True; Gemma-7B's
    # and SmolLM3-3B's config.json carry no tie_word_embeddings key)
    **dict.fromkeys(("gemma", "smollm3", "ernie4_5", "vaultgemma"), Family(tie_default=True)),
    # the Llama layout whose attention takes config.sliding_window on every layer (MixtralAttention,
    # Phi3Attention, Ministral3Attention: `sliding_window=getattr(self.config, "sliding_window", None)`), their
    # config classes deriving no layer_types
    **dict.fromkeys(("mixtral", "phi3", "ministral3"), Family(uniform_window=True)),
    # Qwen2Attention: bias on q / k / v always, none on o
    "qwen2": Family(qkv_bias=True, o_bias=False),
    "qwen3": QK_HEAD,
    # Qwen3VLTextAttention / Qwen3VLMoeTextAttention: self.sliding_window = None (the config's key is never read)
    **dict.fromkeys(("qwen3_vl_text", "qwen3_vl_moe_text"), Family(qk_norm=True, window_ignored=True)),
    "qwen2_vl_text": Family(qkv_bias=True, o_bias=False), "qwen2_5_vl_text": Family(qkv_bias=True, o_bias=False),
    "glm4v_text": Family(norms_per_layer=4, qkv_bias=True, o_bias=False),
    "glm4v_moe_text": Family(qkv_bias=True, o_bias=False, head_dim_floor=True),
    "glm_ocr_text": Family(norms_per_layer=4),
    # HyperCLOVA X: post-norms after attention and MLP (use_post_norm), 4 per layer
    "hyperclovax": Family(norms_per_layer=4),
    # GPT-NeoX layout: LayerNorms with bias, biases on every linear, ungated MLP (GPTNeoXLayer, Jais2)
    "gpt_neox": Family(norm="layernorm", qkv_bias=True, o_bias=True, mlp_bias=True, mlp="plain"),
    "jais2": Family(norm="layernorm", qkv_bias=True, o_bias=True, mlp_bias=True, mlp="plain"),
    "cosmos3_edge_text": Family(mlp="plain"),
    "cohere2_moe": Family(norms_per_layer=1, tie_default=True),
    # GraniteSwaAttention: a learnable per-head sink on every layer (sigmoid(lse - sink) scaling = one more
    # softmax logit), sliding / full per layer_types
    "granite_swa": Family(sinks=True, tie_default=True), "granitemoe_swa": Family(sinks=True),
    # GPT-2 (GPT2Block): LayerNorms with bias, biases on c_attn / c_proj / c_fc, ungated MLP of n_inner (null:
    # 4 x n_embd), learned positions of n_positions, tied embeddings; GPTBigCode: the same with multi_query
    **dict.fromkeys(("gpt2", "gpt_bigcode"), Family(
        norm="layernorm", qkv_bias=True, o_bias=True, mlp_bias=True, mlp="plain", tie_default=True,
        aliases=(("hidden_size", "n_embd"), ("num_hidden_layers", "n_layer"), ("num_attention_heads", "n_head"),
                 ("max_position_embeddings", "n_positions"), ("intermediate_size", "n_inner")),
        learned_positions="n_positions", intermediate_factor=4, kv_heads_key="multi_query")),
    # OPT (OPTDecoderLayer): LayerNorms with bias, biases by enable_bias, ReLU MLP of ffn_dim, learned positions
    # of max_position_embeddings + 2 (OPTLearnedPositionalEmbedding's offset), tied embeddings
    "opt": Family(norm="layernorm", qkv_bias=("enable_bias", True), o_bias=("enable_bias", True),
                  mlp_bias=("enable_bias", True),
                  mlp="plain", tie_default=True, aliases=(("intermediate_size", "ffn_dim"),),
                  learned_positions="max_position_embeddings", position_offset=2,
                  modelled_only=(("word_embed_proj_dim", "hidden_size"), ("do_layer_norm_before", True))),
    # Qwen3.5: Gated DeltaNet layers and gated full attention with QK norm (as Qwen3-Next), dense or MoE with a
    # gated shared expert
    **dict.fromkeys(("qwen3_5_text", "qwen3_5_moe_text"),
                    Family(qk_norm=True, attn_output_gate=True, gated_deltanet=True, shared_expert_gate=True)),
    # CohereDecoderLayer: attention and MLP in parallel after one LayerNorm (weight only); tied embeddings
    "cohere": Family(norms_per_layer=1, tie_default=True), "cohere2": Family(norms_per_layer=1, tie_default=True),
    # Glm4DecoderLayer: post_self_attn_layernorm and post_mlp_layernorm besides the two pre-norms
    "glm4": Family(norms_per_layer=4),
    "mistral": Family(uniform_window=True),
    # RMSNorm per head on q and k (Qwen3Attention q_norm / k_norm of head_dim)
    "exaone4": QK_HEAD, "mellum": QK_HEAD, "hy_v3": QK_HEAD,
    # ExaoneMoeConfig (transformers v5.24): first_k_dense_replace defaults to 1 when mlp_layer_types is absent
    "exaone_moe": Family(qk_norm=True, first_dense_default=1),
    "hunyuan_v1_dense": QK_HEAD,
    # RMSNorm over the whole q and k projections (Olmo2Attention: heads x head_dim, kv heads x head_dim)
    "olmo3": QK_FULL, "olmoe": QK_FULL, "flex_olmo": QK_FULL, "minimax_m2": QK_FULL,
    # OlmoLayerNorm: LayerNorm without weight or bias
    "olmo": Family(norm="nonparametric"),
    # LayerNorm with bias (StableLmDecoderLayer; PhimoeDecoderLayer), q/k/v bias by use_qkv_bias
    "stablelm": Family(norm="layernorm", qkv_bias="use_qkv_bias", o_bias=False),
    "phimoe": Family(norm="layernorm", uniform_window=True),
    # SeedOssAttention: q/k/v bias by attention_bias, o bias by attention_out_bias
    "seed_oss": Family(qkv_bias=("attention_bias", True), o_bias="attention_out_bias"),
    # ungated up / down MLP (ArceeMLP, NemotronMLP); Nemotron's LayerNorm1P carries a bias
    "arcee": Family(mlp="plain"),
    "nemotron": Family(mlp="plain", norm="layernorm"),
    "nanochat": Family(mlp="plain", norm="nonparametric"),
    **OLDER_FAMILIES,
    **MOE_FAMILIES,
}
