"""Hugging Face import handlers for the hybrid recurrent architectures: attention layers interleaved with Mamba-2
mixers (Bamba, Granite-4.0 hybrids, Nemotron-H's one-block layers), Falcon-Mamba (Mamba-1), and LFM2 / LFM3's
short-convolution layers; the linear-attention ones (MiniMax, Kimi Linear, OLMo Hybrid, RecurrentGemma) are in
hf_archs_linear and registered here too.

Keys, defaults and module layouts from huggingface/transformers v5.24.0 (src/transformers/models/<type>/):
BambaConfig / BambaMixer / BambaDecoderLayer (bamba/), GraniteMoeHybridConfig / GraniteMoeHybridMambaLayer /
GraniteMoeHybridDecoderLayer (granitemoehybrid/), FalconMambaConfig / FalconMambaMixer (falcon_mamba/: MambaMixer
with weightless RMSNorms on dt, B and C, so Mamba-1's parameters), Lfm2Config / Lfm2ShortConv / Lfm2DecoderLayer
(lfm2/), Lfm2MoeConfig / Lfm2MoeSparseMoeBlock (lfm2_moe/), Lfm3Config / Lfm3Attention (lfm3/), NemotronHConfig /
NemotronHBlock / NemotronHMoE (nemotron_h/: one block per layer, Model.mlp_layers).

A mixer variant the spec does not carry (a bias on the Mamba-2 projections, no bias on its convolution) is refused
with the key named, never approximated.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from roofline.catalogue.hf_archs_linear import ARCHITECTURES_LINEAR, _hybrid_layers, _only
from roofline.catalogue.hf_archs_ssm import MAMBA1_BLOCK, _mamba
from roofline.catalogue.hfconfig import LEGACY_LAYER_TYPES, _Config, _core, _full, _shortest_cycle


def _mamba2_mixer(cfg: _Config, hidden: int) -> dict[str, Any]:
    """The Mamba-2 mixer of BambaMixer / GraniteMoeHybridMambaLayer: mamba_n_heads heads of mamba_d_head ('auto':
    mamba_expand x hidden / heads), mamba_n_groups of B and C of mamba_d_state, conv mamba_d_conv over x, B, C with a
    bias (mamba_conv_bias), projections without (mamba_proj_bias); the gated RMSNorm's weight spans d_inner."""
    heads, inner = cfg.integer("mamba_n_heads"), cfg.integer("mamba_expand", 2) * hidden
    head_dim = inner // heads if cfg.data.get("mamba_d_head", "auto") == "auto" else cfg.integer("mamba_d_head")
    if heads * head_dim != inner:
        raise cfg.error("mamba_d_head", f"{head_dim} x mamba_n_heads {heads} != mamba_expand x hidden_size {inner}")
    groups = cfg.integer("mamba_n_groups", 1)
    if heads % groups:
        raise cfg.error("mamba_n_groups", f"{groups} does not divide mamba_n_heads {heads}")
    _only(cfg, "mamba_conv_bias", True)
    _only(cfg, "mamba_proj_bias", False)
    return {"kind": "mamba2", "key_heads": groups, "value_heads": heads, "key_head_dim": cfg.integer("mamba_d_state"),
            "value_head_dim": head_dim, "conv_kernel": cfg.integer("mamba_d_conv", 4)}


def _with_mixer(attention: list[dict[str, Any]], cfg: _Config, hidden: int) -> dict[str, Any]:
    """attention and, when some layer is a Mamba-2 mixer, its shape (linear_attention)."""
    if all(layer["kind"] != "linear" for layer in attention):
        return {"attention": attention}
    return {"attention": attention, "linear_attention": _mamba2_mixer(cfg, hidden)}


def _bamba(cfg: _Config) -> dict[str, Any]:
    """Bamba (BambaDecoderLayer): input_layernorm, then attention (layers in attn_layer_indices; none by default)
    or the Mamba-2 mixer, pre_ff_layernorm, SwiGLU MLP (mlp_bias); GQA q/k/v/o with attention_bias."""
    fields = _core(cfg, kv_default_heads=True)
    n = fields["num_layers"]
    indices = cfg.data.get("attn_layer_indices") or []
    if not isinstance(indices, list) or not all(isinstance(i, int) and 0 <= i < n for i in indices):
        raise cfg.error("attn_layer_indices", f"expected layer indices in 0..{n - 1}, got {indices!r}")
    kinds = ["full_attention" if i in indices else "linear_attention" for i in range(n)]
    bias = cfg.flag("attention_bias", False)
    layers = _with_mixer(_hybrid_layers(cfg, kinds, n, "attn_layer_indices"), cfg, fields["hidden_size"])
    return fields | layers | {"qkv_bias": bias, "attn_out_bias": bias, "mlp_bias": cfg.flag("mlp_bias", False)}


def _granite_hybrid(cfg: _Config) -> dict[str, Any]:
    """Granite-4.0 hybrids (GraniteMoeHybridDecoderLayer): input_layernorm, attention or the Mamba-2 mixer per
    layer_types, post_attention_layernorm, then a shared SwiGLU MLP of shared_intermediate_size (shared_mlp,
    always) plus, with num_local_experts > 0, routed experts of intermediate_size (top num_experts_per_tok, a
    bias-free router). Without experts the shared MLP is the layer's dense MLP."""
    fields = _core(cfg, kv_default_heads=True)
    n, shared = fields["num_layers"], cfg.integer("shared_intermediate_size")
    # layers_block_type: the config's older key (GraniteMoeHybridConfig.attribute_map), names remapped as layer_types'
    blocks = cfg.data.get("layer_types") or cfg.data.get("layers_block_type")
    kinds = ([LEGACY_LAYER_TYPES.get(k, k) for k in blocks] if isinstance(blocks, list) else blocks) or \
        ["linear_attention"] * n
    if cfg.data.get("position_embedding_type") not in (None, "rope", "nope"):
        raise cfg.error("position_embedding_type", f"{cfg.data['position_embedding_type']!r} not modelled")
    bias = cfg.flag("attention_bias", False)
    layers = _with_mixer(_hybrid_layers(cfg, kinds, n, "layer_types"), cfg, fields["hidden_size"])
    out = fields | layers | {"qkv_bias": bias, "attn_out_bias": bias}
    experts = cfg.integer("num_local_experts", 0, minimum=0)
    if experts == 0:
        return out | {"intermediate_size": shared}
    moe = {"num_experts": experts, "experts_per_token": cfg.integer("num_experts_per_tok"),
           "expert_intermediate_size": fields["intermediate_size"], "num_shared_experts": 1,
           "shared_expert_intermediate_size": shared}
    return out | {"moe": moe}


def _short_conv(cfg: _Config, hidden: int) -> dict[str, Any]:
    """Lfm2ShortConv over the hidden_size channels with kernel conv_L_cache (its conv state keeps kernel - 1
    inputs per channel; transformers' LinearAttentionLayer keeps kernel), blocks of MAMBA1_BLOCK channels;
    conv_bias (biases on in_proj, conv and out_proj) is refused."""
    _only(cfg, "conv_bias", False)
    block = MAMBA1_BLOCK if hidden % MAMBA1_BLOCK == 0 else 1
    return {"kind": "short_conv", "key_heads": 1, "value_heads": hidden // block, "key_head_dim": 1,
            "value_head_dim": block, "conv_kernel": cfg.integer("conv_L_cache")}


def _lfm2_layers(cfg: _Config, n: int, sliding: bool = False) -> list[dict[str, Any]]:
    """layer_types of 'full_attention' / 'conv' (+ 'sliding_attention' of sliding_window for LFM3; a layer attends
    when its type is not 'conv'); Lfm2Config's full_attn_idxs when layer_types is absent."""
    kinds = cfg.data.get("layer_types")
    if kinds is None and isinstance(cfg.data.get("full_attn_idxs"), list):
        kinds = ["full_attention" if i in cfg.data["full_attn_idxs"] else "conv" for i in range(n)]
    allowed = {"full_attention", "conv"} | ({"sliding_attention"} if sliding else set())
    if not isinstance(kinds, list) or len(kinds) != n or not set(kinds) <= allowed:
        raise cfg.error("layer_types", f"expected {n} of {' / '.join(sorted(allowed))}, got {kinds!r}")
    layers = {"full_attention": _full(), "conv": {"kind": "linear"}}
    if "sliding_attention" in kinds:
        layers["sliding_attention"] = {"kind": "sliding", "window": cfg.integer("sliding_window")}
    return _shortest_cycle([layers[k] for k in kinds])


def _lfm2_mixers(cfg: _Config, fields: dict[str, Any], sliding: bool = False) -> dict[str, Any]:
    """attention (the layer pattern) and, when some layer is a short convolution, linear_attention."""
    attention = _lfm2_layers(cfg, fields["num_layers"], sliding)
    if all(layer["kind"] != "linear" for layer in attention):
        return {"attention": attention}
    return {"attention": attention, "linear_attention": _short_conv(cfg, fields["hidden_size"])}


def _lfm2_ffn_width(cfg: _Config) -> int:
    """Lfm2MLP's width: with block_auto_adjust_ff_dim, int(2 I / 3), times block_ffn_dim_multiplier (if set),
    rounded up to block_multiple_of; else intermediate_size."""
    width = cfg.integer("intermediate_size")
    if not cfg.flag("block_auto_adjust_ff_dim", True):
        return width
    width = int(2 * width / 3)
    multiplier = cfg.data.get("block_ffn_dim_multiplier")
    if multiplier is None:
        return width
    if isinstance(multiplier, bool) or not isinstance(multiplier, (int, float)) or multiplier <= 0:
        raise cfg.error("block_ffn_dim_multiplier", f"expected a positive number, got {multiplier!r}")
    step = cfg.integer("block_multiple_of", 256)
    return step * -(-int(multiplier * width) // step)


def _lfm2(cfg: _Config) -> dict[str, Any]:
    """LFM2 (Lfm2DecoderLayer): operator_norm, then GQA attention with per-head q/k RMSNorms (layer_types
    'full_attention') or the short convolution ('conv'), ffn_norm, SwiGLU MLP; embedding_norm at the end; tied
    embeddings by default."""
    fields = _core(cfg, tie_default=True)
    return fields | {"intermediate_size": _lfm2_ffn_width(cfg), "qk_norm": True} | _lfm2_mixers(cfg, fields)


def _lfm2_moe(cfg: _Config) -> dict[str, Any]:
    """LFM2-MoE (Lfm2MoeDecoderLayer): LFM2's layers, the first num_dense_layers with a SwiGLU MLP of
    intermediate_size (not adjusted), the rest num_experts experts of moe_intermediate_size, top
    num_experts_per_tok, a bias-free router (expert_bias is a buffer, not a parameter)."""
    fields = _core(cfg, tie_default=True)
    moe = {"num_experts": cfg.integer("num_experts"), "experts_per_token": cfg.integer("num_experts_per_tok"),
           "expert_intermediate_size": cfg.integer("moe_intermediate_size"),
           "first_dense_layers": cfg.integer("num_dense_layers", 0, minimum=0)}
    return fields | {"qk_norm": True, "moe": moe} | _lfm2_mixers(cfg, fields)


NEMOTRON_BLOCKS = {"M": "linear_attention", "E": "moe", "*": "full_attention", "-": "mlp"}
# (attention kind, MLP) of each Nemotron-H block: a mixer without MLP, or an MLP without mixer
NEMOTRON_LAYER = {"linear_attention": ("linear", "none"), "full_attention": ("full", "none"),
                  "mlp": ("none", "dense"), "moe": ("none", "moe")}


def _nemotron_blocks(cfg: _Config) -> list[str]:
    """layers_block_type, else hybrid_override_pattern (M Mamba-2, * attention, - MLP, E MoE; NemotronHConfig)."""
    if cfg.has("layers_block_type"):
        blocks = cfg.data["layers_block_type"]
    elif isinstance(cfg.data.get("hybrid_override_pattern"), str):
        pattern = cfg.data["hybrid_override_pattern"]
        if not pattern or not set(pattern) <= set(NEMOTRON_BLOCKS):
            raise cfg.error("hybrid_override_pattern", f"expected characters of {''.join(NEMOTRON_BLOCKS)}, "
                                                       f"got {pattern!r}")
        blocks = [NEMOTRON_BLOCKS[c] for c in pattern]
    else:
        raise cfg.error("layers_block_type", "missing (or hybrid_override_pattern), required for Nemotron-H")
    if not isinstance(blocks, list) or not blocks or not set(blocks) <= set(NEMOTRON_LAYER):
        raise cfg.error("layers_block_type", f"expected a list of {', '.join(NEMOTRON_LAYER)}, got {blocks!r}")
    return blocks


# vLLM keeps Nemotron-H's SSM state at the config's mamba_ssm_cache_dtype, float32 when the config has none
# (vllm-project/vllm vllm/model_executor/models/config.py, NemotronHForCausalLMConfig.update_mamba_ssm_cache_dtype,
# DEFAULT_MAMBA_SSM_CACHE_DTYPE = "float32"; the conv state stays at the model dtype); "auto": the model dtype
SSM_DTYPES = {"float32": "fp32", "bfloat16": "bf16", "float16": "fp16", "auto": None}


def _nemotron_mixer(cfg: _Config) -> dict[str, Any]:
    """NemotronHMamba2Mixer: mamba_num_heads of mamba_head_dim (d_inner is their product), n_groups of B and C of
    ssm_state_size, conv_kernel with a bias (use_conv_bias), projections without (use_bias); the SSM state at
    mamba_ssm_cache_dtype (SSM_DTYPES)."""
    heads, groups = cfg.integer("mamba_num_heads"), cfg.integer("n_groups", 1)
    if heads % groups:
        raise cfg.error("n_groups", f"{groups} does not divide mamba_num_heads {heads}")
    _only(cfg, "use_conv_bias", True)
    _only(cfg, "use_bias", False)
    ssm = cfg.data.get("mamba_ssm_cache_dtype", "float32")
    if ssm not in SSM_DTYPES:
        raise cfg.error("mamba_ssm_cache_dtype", f"{ssm!r} not one of {', '.join(SSM_DTYPES)}")
    return {"kind": "mamba2", "key_heads": groups, "value_heads": heads, "key_head_dim": cfg.integer("ssm_state_size"),
            "value_head_dim": cfg.integer("mamba_head_dim"), "conv_kernel": cfg.integer("conv_kernel", 4),
            "recurrent_dtype": SSM_DTYPES[ssm]}


def _nemotron_h(cfg: _Config) -> dict[str, Any]:
    """Nemotron-H (NemotronHBlock): every layer is one block after one RMSNorm: a Mamba-2 mixer, GQA attention
    (q/k/v/o without bias, explicit head_dim), an ungated relu2 MLP (up, down) of intermediate_size, or a MoE of
    n_routed_experts ungated experts of moe_intermediate_size (top num_experts_per_tok, a bias-free router; the
    e_score_correction_bias is a buffer) plus one shared MLP of moe_shared_expert_intermediate_size; norm_f at the
    end. moe_latent_size, mlp_bias and sliding_window are refused (not modelled). head_dim is the
    attention_head_dim of the checkpoints written for the remote-code NemotronHConfig (Nemotron-H-8B / 47B / 56B)."""
    blocks = _nemotron_blocks(cfg)
    for key in ("moe_latent_size", "sliding_window"):
        if cfg.has(key):
            raise cfg.error(key, f"{cfg.data[key]!r} not modelled (only null)")
    _only(cfg, "mlp_bias", False)
    hidden, heads = cfg.integer("hidden_size"), cfg.integer("num_attention_heads")
    kv_heads = cfg.integer("num_key_value_heads", heads)
    if heads % kv_heads:
        raise cfg.error("num_key_value_heads", f"{kv_heads} does not divide num_attention_heads {heads}")
    attention = [{"kind": NEMOTRON_LAYER[b][0]} for b in blocks]
    fields = {"num_layers": len(blocks), "hidden_size": hidden, "num_heads": heads, "num_kv_heads": kv_heads,
              "head_dim": cfg.integer("head_dim" if cfg.has("head_dim") or not cfg.has("attention_head_dim")
                                      else "attention_head_dim"),
              "intermediate_size": cfg.integer("intermediate_size"),
              "vocab_size": cfg.integer("vocab_size"), "tie_word_embeddings": cfg.flag("tie_word_embeddings", False),
              "max_position_embeddings": cfg.integer("max_position_embeddings"), "mlp": "plain",
              "norms_per_layer": 1, "attention": _shortest_cycle(attention),
              "mlp_layers": _shortest_cycle([NEMOTRON_LAYER[b][1] for b in blocks])}
    if "linear_attention" in blocks:
        fields["linear_attention"] = _nemotron_mixer(cfg)
    if "moe" in blocks:
        fields["moe"] = {"num_experts": cfg.integer("n_routed_experts"),
                         "experts_per_token": cfg.integer("num_experts_per_tok"),
                         "expert_intermediate_size": cfg.integer("moe_intermediate_size"), "num_shared_experts": 1,
                         "shared_expert_intermediate_size": cfg.integer("moe_shared_expert_intermediate_size")}
    return fields


def _lfm3(cfg: _Config) -> dict[str, Any]:
    """LFM3 (Lfm3DecoderLayer): LFM2's layers plus 'sliding_attention' ones (sliding_window), explicit head_dim,
    per-head q / k RMSNorms, a d x heads sigmoid gate per head (use_attention_gate: g_proj), q/k/v/o biases by
    attention_bias, post-operator and post-FFN norms (use_sandwich_norm: 4 per layer), an unadjusted SwiGLU MLP of
    intermediate_size; tied embeddings by default."""
    fields = _core(cfg, tie_default=True)
    bias = cfg.flag("attention_bias", False)
    return fields | {"qk_norm": True, "qkv_bias": bias, "attn_out_bias": bias,
                     "attn_head_gate": cfg.flag("use_attention_gate", True),  # Lfm3Config's defaults: on
                     "norms_per_layer": 4 if cfg.flag("use_sandwich_norm", True) else 2} \
        | _lfm2_mixers(cfg, fields, sliding=True)


def _text_config(handler: Callable[[_Config], dict[str, Any]]) -> Callable[[_Config], dict[str, Any]]:
    """A multimodal wrapper's handler: `handler` on its text_config (the vision tower is counted apart)."""
    def read(cfg: _Config) -> dict[str, Any]:
        text = cfg.data.get("text_config")
        if not isinstance(text, dict):
            raise cfg.error("text_config", "missing (required for a multimodal wrapper)")
        return handler(_Config(text, f"{cfg.where}: text_config", cfg.arch))
    return read


ARCHITECTURES_HYBRID: dict[str, Callable[[_Config], dict[str, Any]]] = {
    "FalconMambaForCausalLM": _mamba,
    "BambaForCausalLM": _bamba,
    "GraniteMoeHybridForCausalLM": _granite_hybrid,
    "Lfm2ForCausalLM": _lfm2,
    "Lfm2MoeForCausalLM": _lfm2_moe,
    "Lfm2VlForConditionalGeneration": _text_config(_lfm2),
    "NemotronHForCausalLM": _nemotron_h,
    "NemotronH_Omni_Reasoning_V3": _text_config(_nemotron_h),
    "Lfm3ForCausalLM": _lfm3,
    "Lfm3VlForConditionalGeneration": _text_config(_lfm3),
    **ARCHITECTURES_LINEAR,
}
