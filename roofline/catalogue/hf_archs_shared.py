"""Importers for decoders whose layers differ in head shapes and keep conv states beside attention (Inkling,
Inkling-2), or run stored layers more than once with a cache per pass (Inkling-2-Loop, Dory, HRM-Text:
Model.reused_layers; each reader's docstring cites its transformers module and the engine that serves it).

Inkling (thinkingmachines, 2026; transformers v5.24.0 src/transformers/models/inkling/configuration_inkling.py and
modeling_inkling.py, the default config sized as the released checkpoint, thinkingmachines/Inkling) is a MoE
decoder whose layers, listed by `layer_types`, are 'hybrid' (full attention of num_attention_heads /
num_key_value_heads / head_dim) or 'hybrid_sliding' (a sliding window of sliding_window_size with its own
swa_num_attention_heads / swa_num_key_value_heads / swa_head_dim). Every layer (InklingDecoderLayer) also holds:

- four depthwise causal convolutions of conv_kernel_size taps, no bias (InklingShortConvolution), on the k and v
  projections (kv_dim channels each) and on the attention and MLP outputs (hidden_size each), each keeping a conv
  state: Model.attention_convs;
- q_norm / k_norm of head_dim (Model.qk_norm, width 'head');
- a relative position bias (InklingRelativeLogits): r_proj hidden x heads d_rel and a bank d_rel x rel_extent, the
  extent being sliding_window_size on the sliding layers (InklingAttention.rel_extent); counted as extras;
- a dense gated MLP (mlp_layer_types 'dense') with one learned global_scale, or a MoE (InklingMoE): routed experts
  of moe_intermediate_size, n_shared_experts shared experts of the same width, a router over the routed and the
  shared experts (InklingTopkRouter.weight (n_routed + n_shared) x hidden, one global_scale).

The token embedding carries an RMSNorm (InklingNormedEmbedding.embed_norm); the LM head is never tied
(InklingForCausalLM._tied_weights_keys is empty) and the multi-token-prediction layers are not loaded
(`_keys_to_ignore_on_load_unexpected` model.mtp.*), as roofline leaves MTP heads out everywhere. The multimodal
wrapper (inkling_mm_model) reads its text_config; its vision and audio towers are catalogue.hf_vision's.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from roofline.catalogue.hf_families import _moe_layers
from roofline.catalogue.hfconfig import _Config, _from_layer_types, _shortest_cycle
from roofline.catalogue.hfconfig import text_of as _text

LAYER_KINDS = ("hybrid", "hybrid_sliding")


def _layer_types(cfg: _Config, num_layers: int, default_full_every: int = 6) -> list[str]:
    """`layer_types`, else InklingTextConfig.__post_init__'s rule (Inkling2TextConfig's likewise): local_layer_ids
    sliding, or every layer whose index + 1 is not a multiple of 6."""
    if cfg.has("layer_types"):
        kinds = cfg.data["layer_types"]
        if not isinstance(kinds, list) or len(kinds) != num_layers or not set(kinds) <= set(LAYER_KINDS):
            raise cfg.error("layer_types", f"expected {num_layers} of {' / '.join(LAYER_KINDS)}, got {kinds!r}")
        return kinds
    local = cfg.data.get("local_layer_ids")
    if local is None:
        local = [i for i in range(num_layers) if (i + 1) % default_full_every]
    if not isinstance(local, list) or not all(isinstance(i, int) for i in local):
        raise cfg.error("local_layer_ids", f"expected a list of layer indices, got {local!r}")
    return ["hybrid_sliding" if i in local else "hybrid" for i in range(num_layers)]


def _sliding_layer(cfg: _Config, heads: int, kv_heads: int, head_dim: int) -> dict[str, Any]:
    """A 'hybrid_sliding' layer: the window and the swa_* head shapes where they differ from the full layers'."""
    shapes = {"num_heads": (cfg.integer("swa_num_attention_heads", heads), heads),
              "num_kv_heads": (cfg.integer("swa_num_key_value_heads", kv_heads), kv_heads),
              "head_dim": (cfg.integer("swa_head_dim", head_dim), head_dim)}
    own, full = shapes["num_heads"][0], shapes["num_kv_heads"][0]
    if own % full:
        raise cfg.error("swa_num_key_value_heads", f"{full} does not divide swa_num_attention_heads {own}")
    layer = {"kind": "sliding", "window": cfg.integer("sliding_window_size")}
    return layer | {name: value for name, (value, model) in shapes.items() if value != model}


def _extras(cfg: _Config, kinds: list[str], mlp_kinds: list[str], d: int, heads: dict[str, int]) -> tuple[int, int]:
    """(per-layer, model-level) parameters outside the Model's named groups: each layer's r_proj (d x heads d_rel)
    and bias bank (d_rel x extent), each dense MLP's global_scale (1), each MoE router's shared-expert rows
    (n_shared x d) and global_scale (1), the embedding's RMSNorm (d). What every layer has goes per layer, the rest
    (layers differing in heads or extent, dense vs MoE) to the model."""
    d_rel, shared = cfg.integer("d_rel"), cfg.integer("n_shared_experts", 0, minimum=0)
    extent = {"hybrid": cfg.integer("rel_extent"), "hybrid_sliding": cfg.integer("sliding_window_size")}
    per_layer = [d * heads[k] * d_rel + d_rel * extent[k] + (1 if m == "dense" else shared * d + 1)
                 for k, m in zip(kinds, mlp_kinds, strict=True)]
    common = min(per_layer)
    return common, sum(per_layer) - common * len(per_layer) + d


def _checkpoint_keys(cfg: _Config) -> _Config:
    """The config with a released checkpoint's keys under InklingTextConfig's names, as its __post_init__ and
    attribute_map read them: sconv_kernel_size -> conv_kernel_size, sliding_window -> sliding_window_size,
    num_local_experts -> n_routed_experts, dense_mlp_idx -> mlp_layer_types (leading dense layers), and
    dense_intermediate_size (then intermediate_size is the routed experts' width, #49416)."""
    data = dict(cfg.data)
    for own, alias in (("conv_kernel_size", "sconv_kernel_size"), ("sliding_window_size", "sliding_window"),
                       ("n_routed_experts", "num_local_experts")):
        if data.get(own) is None and alias in data:
            data[own] = data[alias]
    if data.get("mlp_layer_types") is None:
        dense = _Config(data, cfg.where, cfg.arch).integer("dense_mlp_idx", 0, minimum=0)
        layers = _Config(data, cfg.where, cfg.arch).integer("num_hidden_layers")
        data["mlp_layer_types"] = ["dense" if i < dense else "sparse" for i in range(layers)]
    if data.get("dense_intermediate_size") is not None:
        data["moe_intermediate_size"] = data.get("intermediate_size")
        data["intermediate_size"] = data["dense_intermediate_size"]
    return _Config(data, cfg.where, cfg.arch)


def _mlp_kinds(cfg: _Config, num_layers: int) -> list[str]:
    """mlp_layer_types ('dense' / 'sparse', checked by hf_families._moe_layers)."""
    return cfg.data["mlp_layer_types"]


def _decoder_shape(cfg: _Config) -> tuple[_Config, int, int, int, int, int]:
    """(the text config with the checkpoints' key names, layers, hidden size, heads, KV heads, head_dim) of an
    Inkling-family decoder; the KV heads must divide the heads."""
    cfg = _checkpoint_keys(_text(cfg))
    n, d = cfg.integer("num_hidden_layers"), cfg.integer("hidden_size")
    heads, kv_heads, head_dim = (cfg.integer("num_attention_heads"), cfg.integer("num_key_value_heads"),
                                 cfg.integer("head_dim"))
    if heads % kv_heads:
        raise cfg.error("num_key_value_heads", f"{kv_heads} does not divide num_attention_heads {heads}")
    return cfg, n, d, heads, kv_heads, head_dim


def _inkling(cfg: _Config) -> dict[str, Any]:
    """Inkling's text decoder (see the module docstring) as Model fields."""
    cfg, n, d, heads, kv_heads, head_dim = _decoder_shape(cfg)
    kinds = _layer_types(cfg, n)
    sliding = _sliding_layer(cfg, heads, kv_heads, head_dim)
    layers = [sliding if k == "hybrid_sliding" else {"kind": "full"} for k in kinds]
    moe_layers = _moe_layers(cfg, n)  # validates mlp_layer_types: leading dense layers, then sparse
    mlp_kinds = _mlp_kinds(cfg, n)
    layer_extra, model_extra = _extras(cfg, kinds, mlp_kinds, d, {
        "hybrid": heads, "hybrid_sliding": sliding.get("num_heads", heads)})
    moe_width = cfg.integer("moe_intermediate_size")
    moe = {"num_experts": cfg.integer("n_routed_experts"), "experts_per_token": cfg.integer("num_experts_per_tok"),
           "expert_intermediate_size": moe_width, **moe_layers}
    shared = cfg.integer("n_shared_experts", 0, minimum=0)
    if shared:
        moe |= {"num_shared_experts": shared}
    fields = {
        "num_layers": n, "hidden_size": d, "num_heads": heads, "num_kv_heads": kv_heads, "head_dim": head_dim,
        "intermediate_size": cfg.integer("intermediate_size"), "vocab_size": cfg.integer("vocab_size"),
        "tie_word_embeddings": False, "max_position_embeddings": cfg.integer("max_position_embeddings"),
        "qk_norm": True, "attention": _shortest_cycle(layers),
        "attention_convs": {"kernel": cfg.integer("conv_kernel_size")},
        "layer_extra_params": layer_extra, "model_extra_params": model_extra,
    }
    if "sparse" in mlp_kinds:
        fields["moe"] = moe
    return fields


def _inkling2_layer_extras(cfg: _Config, i: int, kind: str, d: int, shapes: dict[str, Any]) -> int:
    """Inkling-2's parameters of layer `i` outside the Model's named groups (transformers v5.24.0
    modeling_inkling2.py): the query scale (Inkling2ScaledL2Clip, q width), sink_proj (d x heads), the relative
    bias (linear d x heads d_rel, its scale heads x d_rel, the bank d_rel x extent), the attention-residual queries
    (Inkling2BlockAttentionResidual: mlp_input d; attention_input d on a sliding layer, 3 d on a full one, none on
    layer 0); on a full layer the dynamic convs' weight_proj (d x kv heads x kernel, for k and v) and two more
    norms (q / k / v input norms and the post-attention norm against a sliding layer's input and post norms)."""
    heads, kv_heads, head_dim = shapes[kind]
    d_rel, kernel = cfg.integer("d_rel"), cfg.integer("conv_kernel_size")
    extent = cfg.integer("rel_extent") if kind == "hybrid" else cfg.integer("sliding_window_size")
    extras = heads * head_dim + d * heads + d * heads * d_rel + heads * d_rel + d_rel * extent + d
    if i > 0:
        extras += d if kind == "hybrid_sliding" else 3 * d
    if kind == "hybrid":
        extras += 2 * d * kv_heads * kernel + 2 * d
    return extras


def _inkling2(cfg: _Config) -> dict[str, Any]:
    """Inkling-2's text decoder (transformers v5.24.0 models/inkling2; Inkling2TextConfig): Inkling's layer kinds,
    per-layer heads and four conv states (the full layers' k / v convs dynamic: static taps of the same count plus
    a weight projection), a sigmoid gate on the attention output (Inkling2GatedOutputProjection: d x q, as
    Model.attn_output_gate), every layer MoE (moe_intermediate_size, no shared expert), block attention residuals,
    and an LM head of unpadded_vocab_size rows (the embedding keeps vocab_size: the extra rows are extras)."""
    cfg, n, d, heads, kv_heads, head_dim = _decoder_shape(cfg)
    vocab, head_rows = cfg.integer("vocab_size"), cfg.integer("unpadded_vocab_size", cfg.integer("vocab_size"))
    if head_rows > vocab:
        raise cfg.error("unpadded_vocab_size", f"{head_rows} exceeds vocab_size {vocab}")
    kinds = _layer_types(cfg, n, default_full_every=6)
    sliding = _sliding_layer(cfg, heads, kv_heads, head_dim)
    shapes = {"hybrid": (heads, kv_heads, head_dim),
              "hybrid_sliding": (sliding.get("num_heads", heads), sliding.get("num_kv_heads", kv_heads),
                                 sliding.get("head_dim", head_dim))}
    per_layer = [_inkling2_layer_extras(cfg, i, k, d, shapes) for i, k in enumerate(kinds)]
    width = cfg.integer("moe_intermediate_size" if cfg.has("moe_intermediate_size") else "intermediate_size")
    return {
        "num_layers": n, "hidden_size": d, "num_heads": heads, "num_kv_heads": kv_heads, "head_dim": head_dim,
        "intermediate_size": width, "vocab_size": head_rows, "tie_word_embeddings": False,
        "max_position_embeddings": cfg.integer("max_position_embeddings"), "attn_output_gate": True,
        "attention": _shortest_cycle([sliding if k == "hybrid_sliding" else {"kind": "full"} for k in kinds]),
        "attention_convs": {"kernel": cfg.integer("conv_kernel_size")},
        "moe": {"num_experts": cfg.integer("n_routed_experts"), "experts_per_token": cfg.integer("num_experts_per_tok"),
                "expert_intermediate_size": width},
        "layer_extra_params": min(per_layer),
        # embedding rows beyond the head's, the embedding's RMSNorm, the final attention-residual query
        "model_extra_params": sum(per_layer) - min(per_layer) * n + (vocab - head_rows) * d + 2 * d,
    }


def _loop(cfg: _Config, n: int) -> tuple[int, int, int]:
    """(first loop layer, end, passes) of Inkling2LoopTextConfig (its loop_config block's core_start / core_end /
    num_passes where a checkpoint keeps them there)."""
    block = cfg.data.get("loop_config") or {}
    names = (("loop_layer_index_start", "core_start"), ("loop_layer_index_end", "core_end"),
             ("loop_num_passes", "num_passes"))
    data = cfg.data | {own: block[alias] for own, alias in names if alias in block}
    loop = _Config(data, cfg.where, cfg.arch)
    start, end = loop.integer("loop_layer_index_start"), loop.integer("loop_layer_index_end")
    if not 0 < start < end <= n:
        raise cfg.error("loop_layer_index_end", f"loop layers {start}..{end - 1} outside layers 1..{n - 1}")
    return start, end, loop.integer("loop_num_passes")


def _inkling2_loop(cfg: _Config) -> dict[str, Any]:
    """Inkling-2-Loop (transformers v5.24.0 models/inkling2_loop; Inkling2LoopTextModel.forward): Inkling-2 whose
    layers loop_layer_index_start .. end - 1 run loop_num_passes times, each pass with its own cache layers (the
    forward appends deep copies of theirs) and the same weights (Model.reused_layers); each loop layer adds four
    message gates (Inkling2LoopMessageGate: down_proj 2 d x rank, forget and message gates rank x d), the model
    the message queries (Inkling2LoopMessageAttentionResidual: loop layers x 4 x d)."""
    fields = _inkling2(cfg)
    text = _checkpoint_keys(_text(cfg))
    n, d = fields["num_layers"], fields["hidden_size"]
    start, end, passes = _loop(text, n)
    kinds = _layer_types(text, n)
    runs = kinds[:start] + kinds[start:end] * passes + kinds[end:]
    pattern = _shortest_cycle(runs)
    reused = (passes - 1) * (end - start)
    if reused % len(pattern) or sorted(kinds) != sorted(runs[:n]):
        raise text.error("loop_layer_index_start", "loop layers whose kinds do not repeat the layer pattern are "
                                                   "not modelled")
    gates = (end - start) * 4 * 4 * d * text.integer("loop_gate_rank")
    sliding = _sliding_layer(text, fields["num_heads"], fields["num_kv_heads"], fields["head_dim"])
    return fields | {"num_layers": n + reused, "reused_layers": reused,
                     "attention": [sliding if k == "hybrid_sliding" else {"kind": "full"} for k in pattern],
                     "model_extra_params": fields["model_extra_params"] + gates + (end - start) * 4 * d}


def _dory_layers(cfg: _Config) -> tuple[int, list[Any], int, int]:
    """(stored layers, their layer_types, n_input_layers, n_recurrent_layers) as DoryConfig.__post_init__ reads a
    config.json: the released layout lists attention and MLP as separate blocks ('mlp' entries; every count doubled),
    halved back; n_recurrent_layers null: the layers between the input and output sections."""
    n, first, last = (cfg.integer("num_hidden_layers"), cfg.integer("n_input_layers", minimum=0),
                      cfg.integer("n_output_layers", minimum=0))
    kinds = cfg.data.get("layer_types")
    middle = cfg.data.get("n_recurrent_layers")
    if isinstance(kinds, list) and "mlp" in kinds:
        kinds, n, first, last = kinds[::2], n // 2, first // 2, last // 2
        middle = None if middle is None else cfg.integer("n_recurrent_layers") // 2
    if kinds is None:
        kinds = ["full_attention" if (i + 1) % 4 == 0 else "sliding_attention" for i in range(n)]
    middle = n - first - last if middle is None else middle
    if middle < 1 or first + middle + last != n:
        raise cfg.error("n_recurrent_layers", f"{middle} recurrent layers do not fill the {n} layers between "
                                              f"{first} input and {last} output layers")
    return n, kinds, first, middle


def _dory(cfg: _Config) -> dict[str, Any]:
    """Dory (transformers v5.24.0 models/dory; DoryModel.forward): an nGPT-style decoder whose recurrent section
    (layers n_input_layers .. + n_recurrent_layers) runs n_recurrent_loops times, each loop writing its own copies
    of those layers' cache ('per_loop', the default; 'last_loop', one shared cache, is refused) with the same
    weights (Model.reused_layers). Its norms are weightless L2 norms (DoryL2Norm: 'nonparametric'); DoryAttention
    adds a gate d x q (Model.attn_output_gate) and the scales sqk and s_gate (q each), DoryMLP suv_gate and suv_up
    (intermediate each), DoryDecoderLayer lambda_1 and lambda_2 (d each), DoryLMHead a logit_scale (vocab).
    The engine convention is vLLM's: vllm/model_executor/models/dory.py (commit 19ba7ec5) builds one Attention per
    loop for each recurrent layer ("independent loop caches"), a sliding window on the 'S' layers."""
    mode = cfg.data.get("recurrent_kv_cache_mode", "per_loop")
    if mode != "per_loop":
        raise cfg.error("recurrent_kv_cache_mode", f"{mode!r} not modelled (only 'per_loop': a cache per loop)")
    n, kinds, first, middle = _dory_layers(cfg)
    loops = cfg.integer("n_recurrent_loops")
    runs = kinds[:first] + kinds[first:first + middle] * loops + kinds[first + middle:]
    data = cfg.data | {"layer_types": runs}
    attention = _from_layer_types(_Config(data, cfg.where, cfg.arch), len(runs))
    reused = (loops - 1) * middle
    if reused % len(attention) or sorted(kinds) != sorted(runs[:n]):
        raise cfg.error("n_input_layers", "recurrent layers whose kinds do not repeat the layer pattern are not "
                                          "modelled")
    d, heads = cfg.integer("hidden_size"), cfg.integer("num_attention_heads")
    head_dim = cfg.integer("head_dim") if cfg.has("head_dim") else d // heads
    width, vocab = cfg.integer("intermediate_size"), cfg.integer("vocab_size")
    return {
        "num_layers": len(runs), "reused_layers": reused, "hidden_size": d, "num_heads": heads,
        "num_kv_heads": cfg.integer("num_key_value_heads", heads), "head_dim": head_dim, "intermediate_size": width,
        "vocab_size": vocab, "tie_word_embeddings": cfg.flag("tie_word_embeddings", False),
        "max_position_embeddings": cfg.integer("max_position_embeddings"), "norm": "nonparametric",
        "norms_per_layer": 4, "qkv_bias": cfg.flag("attention_bias", False),
        "attn_out_bias": cfg.flag("attention_bias", False), "mlp_bias": cfg.flag("mlp_bias", False),
        "attn_output_gate": True, "attention": attention,
        "layer_extra_params": 2 * heads * head_dim + 2 * width + 2 * d, "model_extra_params": vocab,
    }


def _hrm_text(cfg: _Config) -> dict[str, Any]:
    """HRM-Text (transformers v5.24.0 models/hrm_text; HrmTextModel.forward): two stacks of num_layers_per_stack
    layers, L and H, run H_cycles x (L_cycles L passes + one H pass), each pass with its own cache slots
    (num_hidden_layers = num_layers_per_stack x H_cycles x (L_cycles + 1), as HrmTextConfig.__post_init__ inflates
    it; a config without num_layers_per_stack carries the per-stack count there) and the weights of its stack
    (Model.reused_layers: all but 2 x num_layers_per_stack). Full MHA attention with a gate d x q
    (HrmTextAttention.gate_proj, biased with attention_bias: an extra), weightless RMSNorms (HrmTextRMSNorm: eps
    only), a learned initial L state z_L_init (d, model-level). The engine convention is vLLM's:
    vllm/model_executor/models/hrm_text.py (commit 055e47c2) gives each recurrence step "its own KV cache slot"."""
    d, heads = cfg.integer("hidden_size"), cfg.integer("num_attention_heads")
    head_dim = cfg.integer("head_dim") if cfg.has("head_dim") else d // heads
    cycles_h, cycles_l = cfg.integer("H_cycles"), cfg.integer("L_cycles")
    per_stack = cfg.integer("num_layers_per_stack") if cfg.has("num_layers_per_stack") else (
        cfg.integer("num_hidden_layers"))
    runs = per_stack * cycles_h * (cycles_l + 1)
    if cfg.has("num_layers_per_stack") and cfg.integer("num_hidden_layers") != runs:
        raise cfg.error("num_hidden_layers", f"{cfg.integer('num_hidden_layers')} is not num_layers_per_stack x "
                                             f"H_cycles x (L_cycles + 1) = {runs}")
    bias = cfg.flag("attention_bias", False)
    return {
        "num_layers": runs, "reused_layers": runs - 2 * per_stack, "hidden_size": d, "num_heads": heads,
        "num_kv_heads": heads, "head_dim": head_dim, "intermediate_size": cfg.integer("intermediate_size"),
        "vocab_size": cfg.integer("vocab_size"), "tie_word_embeddings": cfg.flag("tie_word_embeddings", False),
        "max_position_embeddings": cfg.integer("max_position_embeddings"), "norm": "nonparametric",
        "qkv_bias": bias, "attn_out_bias": bias, "mlp_bias": cfg.flag("mlp_bias", False), "attn_output_gate": True,
        "attention": [{"kind": "full"}], "layer_extra_params": heads * head_dim if bias else 0,
        "model_extra_params": d,
    }


ARCHITECTURES_SHARED: dict[str, Callable[[_Config], dict[str, Any]]] = {
    "HrmTextForCausalLM": _hrm_text,
    "DoryForCausalLM": _dory,
    "Inkling2LoopForCausalLM": _inkling2_loop,
    "Inkling2LoopForConditionalGeneration": _inkling2_loop,
    "Inkling2ForCausalLM": _inkling2,
    "Inkling2ForConditionalGeneration": _inkling2,
    "InklingForCausalLM": _inkling,
    "InklingForConditionalGeneration": _inkling,
}
