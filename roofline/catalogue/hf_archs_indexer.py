"""Hugging Face import handlers for sparse-attention indexers: DeepSeek Sparse Attention's lightning indexer
(DeepSeek-V3.2 technical report, §2.1) and its kin, read into Model.sparse_attention.

The indexer of every layer that runs one keeps its own key cache, one index_head_dim vector per token (transformers
cache_utils.DynamicIndexedLayer.indexer_keys, [batch, tokens, index_head_dim] at the model dtype; engines keep it
in fp8 with one fp32 scale per 128: vLLM vllm/model_executor/models/deepseek_v2.py DeepseekV32IndexerCache, an
MLAAttentionSpec of one head of head_dim + head_dim // 128 x 4 uint8 bytes; accounting.indexer_bytes_per_token_layer),
scores every cached token and hands the top index_topk to MLA attention, which then reads only those (the cost
model's kv.hybrid caps attention's reads at the top-k).

Keys, defaults and modules from huggingface/transformers v5.24.0 (src/transformers/models/<type>/):
GlmMoeDsaConfig / GlmMoeDsaAttention / GlmMoeDsaIndexer (glm_moe_dsa/: DeepseekV32Indexer's weights wq_b, wk,
k_norm (LayerNorm), weights_proj; AXK1Attention's MLA projections, always with a q LoRA), HYV4Config /
HYV4Attention / HYV4HyperConnection / HYV4HyperHead (hy_v4/; hy_v4_vl/'s text decoder is the same), AXK2Config /
AXK2Attention / AXK2GatedRMSNorm (axk2/).

The other indexer types of transformers 5.24 carry mechanisms the spec has no field for; each is refused with the
mechanism named (REFUSED, raised by refuse_known), never approximated.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import partial
from typing import Any

from roofline.catalogue.hf_archs import _text
from roofline.catalogue.hfconfig import _Config

Reader = Callable[[_Config], dict[str, Any]]
DefaultTypes = Callable[[_Config, int], list[str]]

# Per model type: what its decoder has that Model cannot carry (transformers v5.24.0 modeling_<type>.py).
REFUSED = {
    "DeepseekV4ForCausalLM": "DeepSeek-V4's compressed attention (DeepseekV4CSACompressor / HCACompressor: "
                             "compressed KV entries beside a sliding window, an indexer over compressed keys) "
                             "and hyper-connections (hc_mult residual streams) are not modelled",
    "Glm5NextForConditionalGeneration": "GLM-5-Next's pooled indexer keys (index_kpool tokens per key) and "
                                        "hyper-connections (hc_mult residual streams) are not modelled",
    "MiniMaxM3SparseForConditionalGeneration": "MiniMax-M3's block-sparse indexer on GQA attention "
                                               "(index_block_size token blocks, index_topk_blocks of them) is not "
                                               "modelled: the indexer is modelled on MLA with token top-k only",
    "MiniMaxM3VLForCausalLM": "MiniMax-M3's block-sparse indexer on GQA attention (index_block_size token "
                              "blocks, index_topk_blocks of them) is not modelled: the indexer is modelled on MLA "
                              "with token top-k only",
    "MistralLarge4ForConditionalGeneration": "Mistral-Large-4's NoPE layers (no_rope_layers: a latent without the "
                                             "RoPE key), its per-head softmax scaling and kv_source_layers are not "
                                             "modelled",
}


def glm_indexer_default(cfg: _Config, layers: int) -> list[str]:
    """GlmMoeDsaConfig.__post_init__ without indexer_types: layer i 'full' when max(i - index_skip_topk_offset + 1,
    0) % index_topk_freq == 0 (defaults 2 and 1: every layer full)."""
    freq = max(cfg.integer("index_topk_freq", 1), 1)
    offset = cfg.integer("index_skip_topk_offset", 2, minimum=0)
    return ["full" if max(i - offset + 1, 0) % freq == 0 else "shared" for i in range(layers)]


def hy_v4_indexer_default(cfg: _Config, layers: int) -> list[str]:
    """HYV4Config.__post_init__ without indexer_types: layer i 'full' when i == 0 or (i - 1) % 4 == 0."""
    return ["full" if i == 0 or (i - 1) % 4 == 0 else "shared" for i in range(layers)]


def _indexer_types(cfg: _Config, layers: int, default: DefaultTypes = glm_indexer_default) -> list[str]:
    """The per-layer indexer modes: indexer_types as saved, else index_topk_pattern ('F' full, 'S' shared), else the
    config class's default rule (`default`)."""
    types = cfg.data.get("indexer_types")
    if types is None and cfg.data.get("index_topk_pattern") is not None:
        pattern = cfg.data["index_topk_pattern"]
        modes = {"F": "full", "S": "shared"}
        if not isinstance(pattern, str) or set(pattern) - set(modes):
            raise cfg.error("index_topk_pattern", f"expected a string of F and S, got {pattern!r}")
        types = [modes[c] for c in pattern]
    if types is None:
        types = default(cfg, layers)
    if not isinstance(types, list) or len(types) != layers or set(types) - {"full", "shared"}:
        raise cfg.error("indexer_types", f"expected {layers} entries of 'full' or 'shared', got {types!r}")
    return types


def _mlp_layers(cfg: _Config, fields: dict[str, Any]) -> dict[str, Any]:
    """mlp_layer_types ('dense' / 'sparse' per layer, DeepseekV32Config; it overrides first_k_dense_replace) where
    saved: the MoE's first_dense_layers when it is dense layers then MoE ones only, else Model.mlp_layers."""
    n, moe = fields["num_layers"], fields["moe"]
    types = cfg.data.get("mlp_layer_types")
    if types is None:
        return fields
    if not isinstance(types, list) or len(types) != n or set(types) - {"dense", "sparse"}:
        raise cfg.error("mlp_layer_types", f"expected {n} entries of 'dense' or 'sparse', got {types!r}")
    dense = next((i for i, t in enumerate(types) if t == "sparse"), n)
    if "sparse" in types and set(types[dense:]) == {"sparse"}:
        return fields | {"moe": moe | {"first_dense_layers": dense}}
    layers = ["moe" if t == "sparse" else "dense" for t in types]
    return fields | {"moe": moe | {"first_dense_layers": 0}, "mlp_layers": layers}


def _glm_moe_dsa(cfg: _Config, base: Reader, default: DefaultTypes = glm_indexer_default) -> dict[str, Any]:
    """GLM-5 (GlmMoeDsaConfig): DeepSeek-V3.2's MLA, DSA indexer and MoE keys. GlmMoeDsaAttention builds an indexer
    only on its indexer_types 'full' layers; a 'shared' layer reuses the last full layer's top-k and keeps no index
    keys (SparseAttention.indexer_layers). AXK1Attention's attention_bias (q_a, kv_a, o biases) is refused."""
    if cfg.flag("attention_bias", False):
        raise cfg.error("attention_bias", "true not modelled (biases on the MLA q_a, kv_a and o projections)")
    fields = base(cfg)
    return _mlp_layers(cfg, fields | {"sparse_attention": _sparse(cfg, fields, default)})


def _sparse(cfg: _Config, fields: dict[str, Any], default: DefaultTypes) -> dict[str, Any]:
    """The DSA fields read by the DeepSeek-V3.2 reader, with indexer_layers where some layer is 'shared'
    (`default`: the config class's rule when the config saves neither indexer_types nor index_topk_pattern)."""
    types = _indexer_types(cfg, fields["num_layers"], default)
    if types[0] != "full":
        raise cfg.error("indexer_types", "the first layer must be 'full' (a 'shared' layer reuses an earlier "
                                         "layer's top-k)")
    if "shared" not in types:
        return fields["sparse_attention"]
    return fields["sparse_attention"] | {"indexer_layers": [t == "full" for t in types]}


def hyper_connection_params(hidden: int, streams: int) -> tuple[int, int]:
    """(per decoder layer, final head) parameters of HY-V4's independent hyper-connections (transformers
    HYV4HyperConnection, one before attention and one before the MLP: fn (2N x N d), base (2N), scale (2);
    HYV4HyperHead: hc_fn (N x N d), hc_base (N), hc_scale (1); N = hc_mult streams of width d; their
    DeepseekV4UnweightedRMSNorm has no weight)."""
    n, d = streams, hidden
    return 2 * (2 * n * n * d + 2 * n + 2), n * n * d + n + 1


def _hy_v4(cfg: _Config, base: Reader) -> dict[str, Any]:
    """HY-V4 (HYV4Config; the text_config of HYV4VLForConditionalGeneration): GLM-5's MLA + DSA (indexer_types
    'shared' by default on three layers of four, HYV4Config.__post_init__), plus per-head sink logits and a sigmoid
    output gate of its own projection (HYV4Attention.sinks, gate_proj d -> H v_head_dim: Model.attn_output_gate
    with MLA), and hc_mult hyper-connection streams around every block, counted as extras (parameters, no FLOPs:
    per token 8 N^2 d multiply-adds per layer, under 1 % of a layer's). HYV4Attention.scaling and the routed
    experts' swiglu_limit change no shapes."""
    text = _text(cfg)
    text.data = {"first_k_dense_replace": 0, **text.data}  # HYV4Config has none: mlp_layer_types says
    fields = _glm_moe_dsa(text, base, hy_v4_indexer_default)
    per_layer, head = hyper_connection_params(fields["hidden_size"], text.integer("hc_mult"))
    return fields | {"attention": [{"kind": "full", "sinks": True}], "attn_output_gate": True,
                     "layer_extra_params": per_layer, "model_extra_params": head}


def _axk2(cfg: _Config, base: Reader) -> dict[str, Any]:
    """A.X-K2 (AXK2Config): DeepSeek-V3.2's MLA + DSA + MoE, with AXK2Attention's fused q_gate_proj ([q_a_layernorm(
    c_q), c_q] -> per head the query and a sigmoid gate of v_head_dim on the attention output: MLA.q_gate) and
    AXK2GatedRMSNorm (the RMSNorm, then y x sigmoid(fc2(silu(fc1(y)))), fc1 d -> gated_norm_rank, fc2 back) as
    input_layernorm of every layer and post_attention_layernorm of the MoE layers: their gate MLPs are extras
    (per layer and, for the MoE layers' second one, model-wide; parameters, no FLOPs: 4 d r per token, r = 16 by
    default). The expert groups (n_group) change no shapes."""
    cfg.data = {"first_k_dense_replace": 0, **cfg.data}  # AXK2Config saves mlp_layer_types instead
    # AXK2Attention is DeepseekV32Attention's: an indexer on every layer, whatever indexer keys the config holds
    cfg.data = {k: v for k, v in cfg.data.items() if k not in ("indexer_types", "index_topk_pattern")}
    fields = _glm_moe_dsa(cfg, base, lambda _, layers: ["full"] * layers)
    gate_mlp = 2 * fields["hidden_size"] * cfg.integer("gated_norm_rank")
    n = fields["num_layers"]
    mlps = fields.get("mlp_layers") or ["dense"] * fields["moe"]["first_dense_layers"] + ["moe"] * n
    moe_layers = mlps[:n].count("moe")
    return fields | {"mla": fields["mla"] | {"q_gate": True}, "layer_extra_params": gate_mlp,
                     "model_extra_params": moe_layers * gate_mlp}


def refuse_known(cfg: _Config) -> None:
    """Raise the one-line refusal of REFUSED when `cfg`'s architecture is one of the indexer types not modelled
    (hf calls it before its generic 'no handler' refusal)."""
    if cfg.arch in REFUSED:
        raise cfg.error("model_type", f"{cfg.data.get('model_type')!r} ({cfg.arch}): {REFUSED[cfg.arch]}")


def indexer_architectures(deepseek_v32: Reader) -> dict[str, Reader]:
    """The handlers of this module by architecture, given hf's DeepSeek-V3.2 reader (its MLA, MoE and DSA keys; passed
    in because hf imports this module); the two HY-V4 architectures share one handler."""
    glm, hy, axk = (partial(handler, base=deepseek_v32) for handler in (_glm_moe_dsa, _hy_v4, _axk2))
    return {"GlmMoeDsaForCausalLM": glm, "HYV4ForCausalLM": hy, "HYV4VLForConditionalGeneration": hy,
            "AXK2ForCausalLM": axk}
