"""Sparse-attention indexers from transformers' configs: GLM-5's DSA (glm_moe_dsa), HY-V4's and A.X-K2's imported
with their bytes derived by hand, the index keys under both conventions, and every other indexer type refused with the
mechanism it lacks.

Expected numbers come from the configs (transformers v5.24.0 GlmMoeDsaConfig / HYV4Config / AXK2Config /
DeepseekV32Config defaults, the DeepSeek-V3.2 config.json under tests/data/hf) and the cache layouts the docstrings
cite, worked out in the comments.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from roofline.accounting import kv_bytes, kv_bytes_per_token, parameter_count
from roofline.catalogue.hf import model_from_hf_config
from roofline.costmodel import build_graph
from roofline.errors import SpecError
from roofline.methods import parse_method
from roofline.units import B, L

transformers = pytest.importorskip("transformers")

DATA = Path(__file__).parents[1] / "data" / "hf"


def _default(model_type: str, architecture: str, **overrides) -> dict:
    """transformers' default config of `model_type` as a config.json would be saved."""
    from transformers import CONFIG_MAPPING

    data = json.loads(json.dumps(CONFIG_MAPPING[model_type](**overrides).to_dict(), default=str))
    return data | {"architectures": [architecture]}


def _glm5(**overrides):
    return model_from_hf_config(_default("glm_moe_dsa", "GlmMoeDsaForCausalLM", **overrides), "glm5/config.json",
                                name="GLM-5")


def test_glm5_keeps_the_latent_and_one_index_key_per_token_per_layer():
    model = _glm5()
    # GlmMoeDsaConfig: 78 layers, latent kv_lora_rank 512 + qk_rope_head_dim 64 in bf16, index keys of 128:
    # engines keep them in fp8 plus one fp32 scale per 128 (132 B)
    assert kv_bytes_per_token(model) == 78 * (576 * 2 + 128 + 4)
    # transformers' DynamicIndexedLayer keeps the index keys at the model dtype: 128 x 2 B in bf16
    assert kv_bytes(model, "bf16", 1000, convention="transformers") == 1000 * 78 * (576 * 2 + 128 * 2)
    dsa = model.sparse_attention
    assert (dsa.index_heads, dsa.index_head_dim, dsa.index_topk) == (32, 128, 2048)


def test_deepseek_v32_index_keys_under_each_convention():
    data = json.loads((DATA / "DeepSeek-V3.2-Exp" / "config.json").read_text())
    model = model_from_hf_config(data, "v32/config.json", name="v32")
    # 61 layers; index_head_dim 128: fp8 + a 4-byte scale (vLLM DeepseekV32IndexerCache: 128 + 128 // 128 x 4)
    assert kv_bytes(model, "bf16", 10) == 10 * 61 * (576 * 2 + 132)
    assert kv_bytes(model, "fp32", 10, convention="transformers") == 10 * 61 * (576 + 128) * 4


def test_glm5_decode_attention_reads_the_top_k_and_the_indexer_scores_every_token():
    ops = build_graph(_glm5(), parse_method("bf16"), "decode").by_name()
    at = {B: 1, L: 100_000}
    assert ops["attention"][0].traffic["kv_read"].subs(at) == 2048 * 576 * 2
    assert ops["indexer"][0].traffic["kv_read"].subs(at) == 100_000 * 132
    # 32 index heads x 128 dims, one multiply-add per cached token
    assert ops["indexer"][0].matmul_flops.subs(at) == 2 * 32 * 128 * 100_000


def test_glm5_shared_indexer_layers_keep_no_index_keys_and_run_no_indexer():
    assert _glm5(index_topk_pattern="F" * 78).sparse_attention.indexer_layers is None
    # index_topk_freq 4, offset 2: layer i runs its indexer when max(i - 1, 0) % 4 == 0: layers 0, 1, 5, ..., 77
    model = _glm5(index_topk_freq=4)
    own = 2 + 76 // 4
    assert model.indexer_layer_count() == own == 21
    assert kv_bytes_per_token(model) == 78 * 576 * 2 + own * 132
    # GlmMoeDsaIndexer's weights on the indexer layers only: wq_b (q_lora_rank 2048 -> 32 x 128), wk (6144 -> 128),
    # k_norm (LayerNorm: 2 x 128), weights_proj (6144 -> 32)
    indexer = 2048 * 32 * 128 + 6144 * 128 + 2 * 128 + 6144 * 32
    assert parameter_count(_glm5()).total - parameter_count(model).total == (78 - own) * indexer
    ops = build_graph(model, parse_method("bf16"), "decode").by_name()
    assert ops["indexer"][0].count == own
    assert sum(op.count for op in ops["attention"]) == 78  # every layer still reads only the top-k
    with pytest.raises(SpecError, match=r"indexer_types: the first layer must be 'full'"):
        _glm5(index_topk_pattern="S" + "F" * 77)


def test_glm5_moe_pattern_beyond_dense_first_layers_becomes_per_layer_mlps():
    types = ["dense", "sparse"] * 39
    model = _glm5(mlp_layer_types=types)
    assert [model.layer_mlp(i) for i in range(4)] == ["dense", "moe", "dense", "moe"]
    assert model.moe.first_dense_layers == 0


def test_glm5_attention_bias_is_refused():
    with pytest.raises(SpecError, match=r"attention_bias: true not modelled"):
        _glm5(attention_bias=True)


def test_hy_v4_bytes_gate_sinks_and_hyper_connections():
    model = model_from_hf_config(_default("hy_v4", "HYV4ForCausalLM"), "hy/config.json", name="HY-V4")
    # HYV4Config: 34 layers; indexer_types 'full' at layer 0 and where (i - 1) % 4 == 0: 0, 1, 5, ..., 33 (10)
    assert model.indexer_layer_count() == 10
    assert kv_bytes_per_token(model) == 34 * 576 * 2 + 10 * 132
    # hyper-connections, N = 4 streams of d = 2816: per layer 2 x (fn 8 x 4d + base 8 + scale 2); head 4 x 4d + 5
    assert model.layer_extra_params == 2 * (8 * 4 * 2816 + 10)
    assert model.model_extra_params == 4 * 4 * 2816 + 5
    ops = build_graph(model, parse_method("bf16"), "decode").by_name()
    assert ops["gate_proj"][0].matmul_flops.subs(B, 1) == 2 * 2816 * 32 * 256  # d -> 32 heads x v_head_dim 256
    assert all(layer.sinks for layer in model.attention)
    # a config.json without indexer_types: HYV4Config's own rule, not GLM-5's (every layer full)
    data = _default("hy_v4", "HYV4ForCausalLM")
    del data["indexer_types"]
    assert model_from_hf_config(data, "hy/config.json", name="HY-V4").indexer_layer_count() == 10


def test_axk2_fused_query_gate_and_gated_norms():
    model = model_from_hf_config(_default("axk2", "AXK2ForCausalLM"), "axk2/config.json", name="A.X-K2")
    # AXK2Config: 48 layers, latent 128 + rope 32 in bf16, an indexer of 128 on every layer
    assert kv_bytes_per_token(model) == 48 * ((128 + 32) * 2 + 132)
    # gated norms: fc1 2048 -> 16 and fc2 back, on every input_layernorm and on the 47 MoE layers' second norm
    assert model.layer_extra_params == 2 * 2048 * 16 and model.model_extra_params == 47 * 2 * 2048 * 16
    ops = build_graph(model, parse_method("bf16"), "decode").by_name()
    # q_gate_proj: [norm(c_q), c_q] (2 x 384) -> 32 heads x (qk 96 + gate 64)
    assert ops["q_b_proj"][0].matmul_flops.subs(B, 1) == 2 * 768 * 32 * 160
    assert "attn_gate" in ops
    # AXK2Attention runs its indexer on every layer: GLM-5's index_topk_freq does not apply
    data = _default("axk2", "AXK2ForCausalLM") | {"index_topk_freq": 4}
    assert model_from_hf_config(data, "axk2/config.json", name="A.X-K2").sparse_attention.indexer_layers is None


@pytest.mark.parametrize(("model_type", "architecture", "mechanism"), [
    ("deepseek_v4", "DeepseekV4ForCausalLM", "compressed attention"),
    ("glm5_next", "Glm5NextForConditionalGeneration", "pooled indexer keys"),
    ("mistral_large4", "MistralLarge4ForConditionalGeneration", "NoPE layers"),
    ("minimax_m3_vl", "MiniMaxM3SparseForConditionalGeneration", "block-sparse indexer"),
    ("minimax_m3_vl_text", "MiniMaxM3VLForCausalLM", "block-sparse indexer"),
])
def test_other_indexer_types_are_refused_naming_the_mechanism(model_type, architecture, mechanism):
    with pytest.raises(SpecError, match=mechanism) as refused:
        model_from_hf_config(_default(model_type, architecture), f"{model_type}/config.json", name=model_type)
    assert "\n" not in str(refused.value) and "model_type" in str(refused.value)


def test_kv_cli_follows_each_convention_for_the_index_keys(capsys):
    from cli_run import run

    def kv(*extra):
        code, out, err = run(capsys, "kv", "--model", "DeepSeek-V3.2-Exp", "--context", "1000", "--json", *extra)
        assert code == 0, err
        return json.loads(out)

    # 61 layers x 1000 tokens: latent 576 x 2 B, index keys 132 B (fp8 + scale) or 128 x 2 B (transformers, bf16)
    assert kv()["kv_bytes"] == 1000 * 61 * (1152 + 132)
    assert kv("--convention", "transformers")["kv_bytes"] == 1000 * 61 * (1152 + 256)


def test_engines_refuse_layers_reusing_top_k(capsys, tmp_path):
    from cli_run import run

    path = tmp_path / "GLM-5" / "config.json"
    path.parent.mkdir()
    path.write_text(json.dumps(_default("glm_moe_dsa", "GlmMoeDsaForCausalLM", index_topk_freq=4)))
    for engine in ("vllm", "sglang"):
        code, _, err = run(capsys, "capacity", "--model", str(path), "--engine", engine)
        assert code == 2 and "--engine" in err and "top-k" in err and "Traceback" not in err
