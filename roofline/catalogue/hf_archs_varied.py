"""Readers of transformers' configs whose layers vary beyond one Family row: LongCat-Flash.

Each reader reads the shared keys through hf_families.read with a Family row (of a multimodal wrapper's
text_config where the config has one), then sets what a row has no key for. Layouts are read from
huggingface/transformers v5.24.0 src/transformers/models/<type>/modeling_<type>.py; every type here matches a tiny
random-initialised transformers model in tests/catalogue/test_hf_exactness.py (parameters and cache bytes exact).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from roofline.catalogue.hf_families import read
from roofline.catalogue.hf_layout import Family
from roofline.catalogue.hfconfig import _Config


def _text(cfg: _Config) -> _Config:
    """A multimodal wrapper's text_config (the decoder's keys), else the config itself."""
    text = cfg.data.get("text_config")
    if text is None:
        return cfg
    if not isinstance(text, dict):
        raise cfg.error("text_config", f"expected a JSON object, got {type(text).__name__}")
    return _Config(text, f"{cfg.where}: text_config", cfg.arch)


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


ARCHITECTURES_VARIED: dict[str, Callable[[_Config], dict[str, Any]]] = {
    "LongcatFlashForCausalLM": _longcat_flash,
}
