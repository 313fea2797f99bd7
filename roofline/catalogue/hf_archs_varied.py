"""Readers of transformers' configs whose layers vary beyond one Family row: LongCat-Flash, ERNIE-4.5-VL MoE, Muse
Spark, RWKV-4, xLSTM, Phi-4-multimodal.

Each reader reads the shared keys through hf_families.read with a Family row (of a multimodal wrapper's
text_config where the config has one) or builds the fields of a recurrence, then sets what a row has no key for.
Layouts are read from huggingface/transformers v5.24.0 src/transformers/models/<type>/modeling_<type>.py; every
type here is checked against a tiny random-initialised transformers model (tests/catalogue/test_hf_exactness.py and
test_hf_varied.py): parameters and cache bytes exact, or differing by an amount counted by hand for a stated
reason (LongCat-Flash's unused zero-expert rows, xLSTMCache's position counter).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from roofline.catalogue.hf_archs_ssm import MAMBA1_BLOCK, NO_POSITION_LIMIT
from roofline.catalogue.hf_families import read
from roofline.catalogue.hf_layout import Family
from roofline.catalogue.hfconfig import _Config, _core, _uniform_window
from roofline.catalogue.hfconfig import text_of as _text

# LongcatFlashDecoderLayer (one of num_layers): two sublayers, each an MLA attention (LongcatFlashMLA: DeepSeek-V3's
# q_a / q_b, kv_a_proj_with_mqa / kv_b, o, with the two latent RMSNorms; biases by attention_bias) and a dense
# LongcatFlashMLP of ffn_hidden_size, with their input / post-attention RMSNorms; plus one LongcatFlashMoE whose
# output joins the second sublayer's residual. No attention bias is modelled (attention_bias true is refused).
LONGCAT_FLASH = Family(modelled_only=(("attention_bias", False),))
LONGCAT_MOE_KEYS = ("n_routed_experts", "num_local_experts", "moe_topk", "num_experts_per_tok", "zero_expert_num",
                    "expert_ffn_hidden_size", "moe_intermediate_size")


def _longcat_flash(cfg: _Config) -> dict[str, Any]:
    """LongCat-Flash (LongcatFlashForCausalLM, meituan-longcat/LongCat-Flash-Chat) as 2 x num_layers layers
    (LongcatFlashConfig.num_hidden_layers; each sublayer caches its own MLA latent under layer index 2i or 2i + 1):
    every layer an MLA attention and a dense MLP of ffn_hidden_size; the even layers (the first sublayer of each
    LongcatFlashDecoderLayer, whose input the MoE reads) also carry the MoE (layer_period 2, offset 0), their dense
    MLP counted as its always-active shared expert of ffn_hidden_size (same weights, same FLOPs: the block's MoE
    output is added to the residual beside it).

    Zero-computation experts (LongcatFlashExperts.identity_expert; arXiv 2509.01322 section 2.1): the router
    (LongcatFlashTopkRouter.classifier, no bias) scores n_routed_experts + zero_expert_num experts and top-k
    moe_topk of them; a pick of a zero expert costs nothing. The router's zero-expert rows (d each) are
    model_extra_params; the routed FLOPs count moe_topk real experts (an upper bound: the paper's dynamic
    computation activates fewer on average). transformers' LongcatFlashExperts also allocates gate_up_proj rows for
    the zero experts (total_experts x 2 x expert_ffn_hidden_size x d), which its forward never reads and the
    checkpoint does not hold; they are not counted (tests/catalogue/test_hf_varied.py checks the difference)."""
    layers = 2 * cfg.integer("num_layers")
    data = {k: v for k, v in cfg.data.items() if k not in LONGCAT_MOE_KEYS}
    data |= {"num_hidden_layers": layers, "intermediate_size": cfg.integer("ffn_hidden_size")}
    fields = read(_Config(data, cfg.where, cfg.arch), LONGCAT_FLASH)
    experts, top_k = cfg.integer("n_routed_experts"), cfg.integer("moe_topk")
    zero = cfg.integer("zero_expert_num", 0, minimum=0)
    if top_k > experts + zero:
        raise cfg.error("moe_topk", f"{top_k} exceeds n_routed_experts + zero_expert_num {experts + zero}")
    moe = {"num_experts": experts, "experts_per_token": min(top_k, experts),
           "expert_intermediate_size": cfg.integer("expert_ffn_hidden_size"),
           "num_shared_experts": 1, "shared_expert_intermediate_size": fields["intermediate_size"],
           "layer_period": 2, "layer_offset": 0}
    router_zero_rows = cfg.integer("num_layers") * zero * fields["hidden_size"]
    extra = fields.get("model_extra_params", 0) + router_zero_rows
    return fields | {"moe": moe} | ({"model_extra_params": extra} if extra else {})


# Ernie4_5_VLMoeDecoderLayer: Llama attention (bias by use_bias), two RMSNorms, a dense Ernie4_5_VLMoeMLP on the
# 'dense' layers of mlp_layer_types and an Ernie4_5_VLMoeMoeBlock on the 'sparse' ones: text_moe and vision_moe
# (each a router weight E x d, its moe_statics.e_score_correction_bias of E, a parameter; E experts without bias of
# moe_intermediate_size[0] and [1]) and shared experts as one MLP of moe_num_shared_experts x
# moe_intermediate_size[0]. use_bias true is refused (not modelled on the experts).
ERNIE_VL_TEXT = Family(router_bias=True, tie_default=True, qkv_bias=False, o_bias=False, mlp_bias=False,
                       modelled_only=(("use_bias", False),))


def _ernie_pair(text: _Config, key: str) -> tuple[int, int] | None:
    """A [text, vision] pair of positive integers (baidu's remote-code config of ERNIE-4.5-VL lists
    moe_num_experts, moe_layer_start_index and moe_layer_end_index so; vLLM's ernie45_vl_moe.py reads [0] for the
    text experts and [1] for the vision ones), None for one integer (transformers' Ernie4_5_VLMoeTextConfig)."""
    value = text.data.get(key)
    if not isinstance(value, list):
        return None
    if not (len(value) == 2 and all(isinstance(v, int) and not isinstance(v, bool) and v >= 0 for v in value)):
        raise text.error(key, f"expected one integer or a [text, vision] pair of integers, got {value!r}")
    return value[0], value[1]


def _ernie_remote_layers(text: _Config) -> dict[str, Any]:
    """baidu's remote-code form as transformers' keys: the [text, vision] expert counts read as the text entry
    (the vision count returned apart), the [text, vision] MoE layer ranges as the text range. vLLM's
    Ernie4_5_VLMoeDecoderLayer makes layer i sparse when (i + 1) % moe_layer_interval == 0 and
    min(start) <= i <= max(end), and holds text experts on it only inside the text range (ernie45_vl_moe.py):
    ranges whose sparse layers differ between text and vision are refused (one MoE block per layer modelled)."""
    data = dict(text.data)
    experts = _ernie_pair(text, "moe_num_experts")
    if experts:
        data["moe_num_experts"] = experts[0]
    starts, ends = _ernie_pair(text, "moe_layer_start_index"), _ernie_pair(text, "moe_layer_end_index")
    if starts or ends:
        n, every = text.integer("num_hidden_layers"), text.integer("moe_layer_interval", 1)
        last = n - 1  # an end past the last layer (the 28B-A3B's [29, 28]) stops at it
        starts = starts or (text.integer("moe_layer_start_index", minimum=0),) * 2
        ends = ends or (text.integer("moe_layer_end_index", last, minimum=0),) * 2
        text_layers, vision_layers = ({i for i in range(n) if (i + 1) % every == 0 and lo <= i <= hi}
                                      for lo, hi in zip(starts, ends, strict=True))
        if text_layers != vision_layers:
            raise text.error("moe_layer_start_index", f"text range {starts[0]}..{ends[0]} and vision range "
                                                      f"{starts[1]}..{ends[1]} give different MoE layers: not "
                                                      f"modelled")
        data |= {"moe_layer_start_index": starts[0], "moe_layer_end_index": min(ends[0], last)}
    return {"text": _Config(data, text.where, text.arch), "vision_experts": experts[1] if experts else None}


def _ernie4_5_vl_moe(cfg: _Config) -> dict[str, Any]:
    """ERNIE-4.5-VL MoE (Ernie4_5_VLMoeForConditionalGeneration, baidu/ERNIE-4.5-VL-28B-A3B): the text decoder with
    modality-isolated experts (Ernie4_5_VLMoeMoeBlock; ERNIE 4.5 technical report section 2.1). A text token runs
    the text experts (the Model's moe: text router, top-moe_k of E experts of moe_intermediate_size[0], the shared
    experts); the vision experts (E, or moe_num_experts[1] in baidu's remote-code form, of moe_intermediate_size[1]),
    their router and its correction bias are stored in every sparse layer and run only on image / video tokens:
    model_extra_params (weights, no FLOPs: decode generates text tokens)."""
    remote = _ernie_remote_layers(_text(cfg))
    text = remote["text"]
    widths = text.data.get("moe_intermediate_size")
    if not (isinstance(widths, list) and len(widths) == 2
            and all(isinstance(w, int) and not isinstance(w, bool) and w > 0 for w in widths)):
        raise text.error("moe_intermediate_size", f"expected [text width, vision width] of positive integers, "
                                                  f"got {widths!r}")
    fields = read(_Config(text.data | {"moe_intermediate_size": widths[0]}, text.where, text.arch), ERNIE_VL_TEXT)
    moe = fields.get("moe")
    if moe is None:
        return fields
    d, experts = fields["hidden_size"], remote["vision_experts"] or moe["num_experts"]
    period, offset = moe.get("layer_period", 1), moe.get("layer_offset", 0)
    sparse = sum(1 for i in range(moe["first_dense_layers"], fields["num_layers"]) if i % period == offset)
    vision = sparse * (experts * 3 * d * widths[1] + d * experts + experts)
    return fields | {"model_extra_params": fields.get("model_extra_params", 0) + vision}


# MuseSparkTextDecoderLayer: Llama q / k / v / o (bias by attention_bias) with a sigmoid output gate gate_proj
# (d x heads x head_dim) and weight-less QK / output RMSNorms; three weighted norms (input_layernorm,
# pre_feedforward_layernorm, post_feedforward_layernorm; post_attention_layernorm has no weight) and two
# MuseSparkResidualGate vectors of hidden_size. The embedding's norm has no weight; the final norm has.
MUSE_SPARK_TEXT = Family(attn_output_gate=True, norms_per_layer=3)


def _muse_spark(cfg: _Config) -> dict[str, Any]:
    """Muse Spark (MuseSparkForConditionalGeneration): the text decoder of MUSE_SPARK_TEXT with MuseSparkMoE on
    every layer. The MoE projects the layer input into moe_hidden_size m (pre_expert_proj d x m, then
    pre_expert_norm of m weights), runs top-k of num_local_experts gated experts of moe_intermediate_size I at width
    m (gate_up 2 I x m, down m x I), normalises their weighted sum (post_expert_norm, m weights) and projects back
    (post_expert_proj m x d); the router (E x d, no bias) reads
    the layer input. An expert of m x I matrices holds and multiplies as many weights as the Model's expert of
    d x I' with I' = m I / d (3 m I each), so the Model's expert width is I' (a config where d does not divide m I is
    refused); the two projections and the two norms (2 d m + 2 m, read every step) are layer_extra_params, with the two
    residual gates (2 d). A dense layer in mlp_layer_types is refused (the extras are per layer)."""
    text = _text(cfg)
    fields = read(text, MUSE_SPARK_TEXT)
    moe, d = fields.get("moe"), fields["hidden_size"]
    if moe is None or moe["first_dense_layers"] or moe.get("layer_period", 1) != 1:
        raise text.error("mlp_layer_types", "only 'sparse' on every layer is modelled (MuseSparkMoE's projections "
                                            "are counted per layer)")
    m, width = text.integer("moe_hidden_size"), moe["expert_intermediate_size"]
    if m * width % d:
        raise text.error("moe_hidden_size", f"{m} x moe_intermediate_size {width} is not a multiple of hidden_size "
                                            f"{d} (the experts are counted at hidden_size)")
    moe = moe | {"expert_intermediate_size": m * width // d}
    extra = fields.get("layer_extra_params", 0) + 2 * d * m + 2 * m + 2 * d
    return fields | {"moe": moe, "layer_extra_params": extra}


def _rwkv(cfg: _Config) -> dict[str, Any]:
    """RWKV-4 (RwkvForCausalLM, e.g. RWKV/rwkv-4-169m-pile): every layer a time mixing (LinearAttention kind
    'rwkv4', width hidden_size) and a channel mixing (RwkvFeedForward: key d x intermediate_size (null: 4 d),
    squared ReLU, value back, no biases: the Model's plain MLP; its receptance d x d and time_mix vectors are
    counted with the mixer), LayerNorms with bias (ln1, ln2, ln_out, and pre_ln on layer 0: model_extra_params),
    an untied head by default; no positions (a recurrence: no context limit).

    The state (RwkvModel.forward's five d x layers tensors per sequence): the two token shifts at the model dtype
    and the WKV numerator, denominator and running maximum in fp32, in both conventions. transformers keeps it
    outside any Cache object (RwkvCausalLMOutput.state); no serving engine roofline models runs RWKV (vLLM's and
    SGLang's model registries have no RWKV architecture), so the 'engine' convention counts the same state as the
    reference implementation keeps, with the WKV elements in fp32 (they overflow half precision). A config whose
    attention_hidden_size differs from hidden_size is refused (the state tensors are hidden_size wide)."""
    hidden = cfg.integer("hidden_size")
    if cfg.integer("attention_hidden_size", hidden) != hidden:
        raise cfg.error("attention_hidden_size", f"{cfg.data['attention_hidden_size']} differs from hidden_size "
                                                 f"{hidden} (RwkvModel's state is hidden_size wide)")
    block = MAMBA1_BLOCK if hidden % MAMBA1_BLOCK == 0 else 1
    rwkv = {"kind": "rwkv4", "key_heads": 1, "value_heads": hidden // block, "key_head_dim": 3,
            "value_head_dim": block, "conv_kernel": 2, "recurrent_dtype": "fp32"}
    return {
        "num_layers": cfg.integer("num_hidden_layers"), "hidden_size": hidden,
        "num_heads": rwkv["value_heads"], "num_kv_heads": rwkv["value_heads"], "head_dim": block,
        "intermediate_size": cfg.integer("intermediate_size", 4 * hidden), "vocab_size": cfg.integer("vocab_size"),
        "tie_word_embeddings": cfg.flag("tie_word_embeddings", False), "mlp": "plain", "norm": "layernorm",
        "max_position_embeddings": NO_POSITION_LIMIT, "attention": [{"kind": "linear"}],
        "linear_attention": rwkv, "model_extra_params": 2 * hidden,
    }


def _round_up(x: float, multiple: int) -> int:
    """configuration_xlstm.round_up_to_next_multiple_of, on the same float arithmetic."""
    return int(((x + multiple - 1) // multiple) * multiple)


def _factor(cfg: _Config, key: str, default: float) -> float:
    """A positive number (int or float) under `key`, else `default` where the key is absent or null."""
    value = default if cfg.data.get(key) is None else cfg.data[key]
    if isinstance(value, bool) or not isinstance(value, (int, float)) or value <= 0:
        raise cfg.error(key, f"expected a positive number, got {value!r}")
    return value


def _xlstm(cfg: _Config) -> dict[str, Any]:
    """xLSTM (xLSTMForCausalLM, NX-AI/xLSTM-7b): num_hidden_layers (or num_blocks) blocks of an RMSNorm, an mLSTM
    layer (LinearAttention kind 'mlstm': num_heads heads, q / k of hidden_size x qk_dim_factor, v of x
    v_dim_factor), an RMSNorm and a SwiGLU feed-forward of hidden_size x ffn_proj_factor rounded up to
    ffn_round_up_to_multiple_of (xLSTMFeedForward; weight_mode 'single' or 'fused' hold the same weights); an
    RMSNorm out_norm; untied head by default; no positions. use_bias true is refused (not modelled).

    The state (xLSTMCache.rnn_state, outside any transformers Cache class): per layer and head the d_k x d_v matrix
    memory C, the d_k normalizer n and the scalar m. transformers keeps it at the model dtype (xLSTMModel.forward
    builds xLSTMCache at inputs_embeds.dtype); no serving engine roofline models runs xLSTM (vLLM's and SGLang's
    model registries have none), so the 'engine' convention follows the reference kernels' inference_state_dtype
    (xLSTMConfig default float32). A config whose q / k / v width is not a multiple of 64 and of num_heads is
    refused: xLSTMCache sizes the state by those widths rounded up to 64, xLSTMLayer by the unrounded ones."""
    hidden = cfg.integer("hidden_size") if cfg.has("hidden_size") else cfg.integer("embedding_dim")
    layers = cfg.integer("num_hidden_layers") if cfg.has("num_hidden_layers") else cfg.integer("num_blocks")
    heads = cfg.integer("num_heads")
    if cfg.flag("use_bias", False):
        raise cfg.error("use_bias", "true not modelled (only false)")
    widths = {}
    for key, default in (("qk_dim_factor", 0.5), ("v_dim_factor", 1.0)):
        raw = hidden * _factor(cfg, key, default)
        widths[key] = int(raw)
        if widths[key] != _round_up(raw, 64) or widths[key] % heads:
            raise cfg.error(key, f"hidden_size x {key} = {raw:g} must be a multiple of 64 and of num_heads {heads}")
    state_dtype = cfg.data.get("inference_state_dtype") or "float32"
    dtypes = {"float32": "fp32", "bfloat16": "bf16", "float16": "fp16"}
    if state_dtype not in dtypes:
        raise cfg.error("inference_state_dtype", f"{state_dtype!r} not one of {', '.join(dtypes)}")
    dk, dv = widths["qk_dim_factor"] // heads, widths["v_dim_factor"] // heads
    mlstm = {"kind": "mlstm", "key_heads": heads, "value_heads": heads, "key_head_dim": dk, "value_head_dim": dv,
             "conv_kernel": 1, "recurrent_dtype": dtypes[state_dtype]}
    ffn = _round_up(hidden * _factor(cfg, "ffn_proj_factor", 2.667), cfg.integer("ffn_round_up_to_multiple_of", 64))
    return {
        "num_layers": layers, "hidden_size": hidden, "num_heads": heads, "num_kv_heads": heads, "head_dim": dv,
        "intermediate_size": ffn, "vocab_size": cfg.integer("vocab_size"),
        "tie_word_embeddings": cfg.flag("tie_word_embeddings", False),
        "max_position_embeddings": NO_POSITION_LIMIT, "attention": [{"kind": "linear"}], "linear_attention": mlstm,
    }


def _phi4_multimodal(cfg: _Config) -> dict[str, Any]:
    """Phi-4-multimodal (Phi4MultimodalForCausalLM, microsoft/Phi-4-multimodal-instruct): Phi-3's decoder
    (Phi4MultimodalAttention's fused qkv_proj and Phi4MultimodalMLP's fused gate_up_proj hold the split Llama
    layout's weights, no biases, two RMSNorms) with sliding_window (null: full) on every layer. The image and audio
    towers sit inside the model (Phi4MultimodalModel.embed_tokens_extend) and are named in `encoders`
    (hf_vision), apart from the decoder."""
    fields = _core(cfg, kv_default_heads=True)
    return fields | {"attention": _uniform_window(cfg, fields["num_layers"], key_required=False)}


ARCHITECTURES_VARIED: dict[str, Callable[[_Config], dict[str, Any]]] = {
    "LongcatFlashForCausalLM": _longcat_flash,
    "Ernie4_5_VLMoeForConditionalGeneration": _ernie4_5_vl_moe,
    "MuseSparkForConditionalGeneration": _muse_spark,
    "RwkvForCausalLM": _rwkv,
    "xLSTMForCausalLM": _xlstm,
    "Phi4MultimodalForCausalLM": _phi4_multimodal,
}
