"""Hybrid recurrent architectures (roofline.catalogue.hf_archs_hybrid): Mamba-2 hybrids (Bamba, Granite-4.0),
Falcon-Mamba and LFM2's short convolutions. Each type's toy transformers model against roofline (parameters and cache
bytes exact, tests/catalogue/hf_exactness.measure), the state bytes of hand-written configs by hand under both
conventions, the cost model's short-convolution ops, and refusals of what the spec does not carry."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from roofline.accounting import kv_bytes, kv_bytes_per_token, parameter_count, state_bytes_per_sequence
from roofline.catalogue.hf import model_from_hf_config
from roofline.costmodel import build_graph
from roofline.errors import SpecError
from roofline.methods import parse_method
from roofline.units import B, L, P

sys.path.insert(0, str(Path(__file__).parent))

# toy sizes of every type (tests/catalogue/hf_hybrid_tiny.py); lfm2_moe's default config has no layer_types and is
# refused, its toy sets them
HYBRID_TYPES = [("falcon_mamba", "FalconMambaForCausalLM"), ("bamba", "BambaForCausalLM"),
                ("granitemoehybrid", "GraniteMoeHybridForCausalLM"), ("lfm2", "Lfm2ForCausalLM"),
                ("lfm2_moe", "Lfm2MoeForCausalLM"), ("lfm2_vl", "Lfm2VlForConditionalGeneration"),
                ("nemotron_h", "NemotronHForCausalLM"), ("nemotron_h_omni", "NemotronH_Omni_Reasoning_V3"),
                ("lfm3", "Lfm3ForCausalLM"), ("lfm3_vl", "Lfm3VlForConditionalGeneration"),
                ("recurrent_gemma", "RecurrentGemmaForCausalLM")]


@pytest.mark.parametrize(("model_type", "architecture"), HYBRID_TYPES)
def test_toy_models_match_transformers_exactly(model_type, architecture):
    pytest.importorskip("transformers")
    from hf_exactness import measure

    got = measure(model_type, architecture)
    assert got["roofline_params"] == got["hf_params"]
    assert got["roofline_cache_bytes"] == got["hf_cache_bytes"]


# LFM2-1.2B-like (hand-written, the shapes of Lfm2Config's keys): 16 layers, 6 attending (8 KV heads of 2048 / 32),
# 10 short convolutions over 2048 channels, kernel 3
LFM2 = {"architectures": ["Lfm2ForCausalLM"], "model_type": "lfm2", "hidden_size": 2048, "num_hidden_layers": 16,
        "num_attention_heads": 32, "num_key_value_heads": 8, "intermediate_size": 12288, "vocab_size": 65536,
        "max_position_embeddings": 128000, "conv_L_cache": 3, "conv_bias": False, "block_multiple_of": 256,
        "block_ffn_dim_multiplier": 1.0, "block_auto_adjust_ff_dim": True,
        "layer_types": ["conv", "conv", "full_attention"] * 5 + ["conv"]}


def test_short_convolution_state_by_hand_under_both_conventions():
    model = model_from_hf_config(LFM2, "lfm2/config.json", "lfm2")
    # engine (vLLM MambaStateShapeCalculator.short_conv_state_shape: (kernel - 1, channels)): 11 conv layers x 2
    # columns x 2048 x 2 B; transformers' LinearAttentionLayer keeps kernel (3) columns
    assert state_bytes_per_sequence(model) == 11 * 2 * 2048 * 2
    assert kv_bytes_per_token(model) == 5 * 2 * 8 * 64 * 2
    assert kv_bytes(model, "bf16", 1000) == 1000 * 5 * 2 * 8 * 64 * 2 + 11 * 2 * 2048 * 2
    assert kv_bytes(model, "bf16", 1000, convention="transformers") == 1000 * 5 * 2 * 8 * 64 * 2 + 11 * 3 * 2048 * 2
    # Lfm2MLP: int(2 x 12288 / 3) = 8192, already a multiple of 256
    assert model.intermediate_size == 8192


def test_short_convolution_parameters_by_hand():
    model = model_from_hf_config(LFM2, "lfm2/config.json", "lfm2")
    d = 2048
    conv = 3 * d * d + 3 * d + d * d  # in_proj (B, C, x), depthwise kernel 3, out_proj
    attention = d * d + 2 * d * 512 + d * d + 2 * 64  # q, k, v, o and the per-head q / k norms
    mlp = 3 * d * 8192
    total = 65536 * d + 11 * conv + 5 * attention + 16 * (mlp + 2 * d) + d  # tied head; final norm
    assert parameter_count(model).total == total


def test_short_convolution_decode_ops():
    model = model_from_hf_config(LFM2, "lfm2/config.json", "lfm2")
    graph = build_graph(model, parse_method("bf16"), "decode")
    conv = [op for op in graph.ops if op.name == "conv1d"]
    assert len(conv) == 1 and conv[0].count == 11
    # reads and rewrites the 2 x 2048 bf16 columns per sequence; 2 x kernel FLOPs per channel per token
    assert conv[0].traffic["kv_read"] == B * 2 * 2048 * 2
    assert conv[0].vector_flops == 2 * 3 * 2048 * B
    assert not [op for op in graph.ops if op.name == "recurrence"]  # no recurrent state
    in_proj = next(op for op in graph.ops if op.name == "in_proj")
    assert in_proj.matmul_flops == 2 * B * 2048 * 3 * 2048
    prefill = build_graph(model, parse_method("bf16"), "prefill")
    conv = next(op for op in prefill.ops if op.name == "conv1d")
    assert conv.vector_flops == 2 * 3 * 2048 * B * P and L not in conv.traffic["kv_write"].free_symbols


# Granite-4.0-H-like (hand-written): 8 layers, attention at 3 and 7, Mamba-2 mixers of 48 heads of 64 (expand 2 x
# 1536), 1 group of d_state 128, conv 4; 32 experts of 512, top 4, a shared MLP of 1024
GRANITE = {"architectures": ["GraniteMoeHybridForCausalLM"], "model_type": "granitemoehybrid", "hidden_size": 1536,
           "num_hidden_layers": 8, "num_attention_heads": 12, "num_key_value_heads": 4, "intermediate_size": 512,
           "vocab_size": 100352, "max_position_embeddings": 131072, "num_local_experts": 32,
           "num_experts_per_tok": 4, "shared_intermediate_size": 1024, "mamba_n_heads": 48, "mamba_d_head": 64,
           "mamba_n_groups": 1, "mamba_d_state": 128, "mamba_d_conv": 4, "mamba_expand": 2,
           "layer_types": (["linear_attention"] * 3 + ["full_attention"]) * 2}


def test_mamba2_hybrid_state_by_hand():
    model = model_from_hf_config(GRANITE, "granite/config.json", "granite")
    # 6 mixers: 48 x 128 x 64 state + 3 x (3072 + 2 x 128) conv columns, bf16
    assert state_bytes_per_sequence(model) == 6 * (48 * 128 * 64 + 3 * (3072 + 2 * 128)) * 2
    assert kv_bytes_per_token(model) == 2 * 2 * 4 * 128 * 2
    assert model.moe.num_shared_experts == 1 and model.moe.shared_width == 1024


def test_dense_granite_hybrid_uses_the_shared_mlp():
    model = model_from_hf_config(GRANITE | {"num_local_experts": 0}, "granite/config.json", "granite")
    assert model.moe is None and model.intermediate_size == 1024


@pytest.mark.parametrize("legacy", [
    {"layer_types": (["mamba"] * 3 + ["attention"]) * 2},
    {"layers_block_type": (["mamba"] * 3 + ["attention"]) * 2}])
def test_granite_hybrids_published_layer_names_import_as_transformers_reads_them(legacy):
    """The Hub's Granite-4.0-H config.json files list 'mamba' / 'attention' (ibm-granite/granite-4.0-h-small), some
    under layers_block_type (GraniteMoeHybridConfig.attribute_map); transformers 5.24 reads them as 'linear_attention' /
    'full_attention' (configuration_utils.py _LEGACY_LAYER_TYPE_REMAP, remap_legacy_layer_types, applied to every
    config). The same model as the current names give: 6 Mamba-2 mixers, attention at layers 3 and 7."""
    config = {k: v for k, v in GRANITE.items() if k != "layer_types"} | legacy
    model = model_from_hf_config(config, "granite/config.json", "granite")
    assert state_bytes_per_sequence(model) == 6 * (48 * 128 * 64 + 3 * (3072 + 2 * 128)) * 2
    assert kv_bytes_per_token(model) == 2 * 2 * 4 * 128 * 2
    assert model == model_from_hf_config(GRANITE, "granite/config.json", "granite")


@pytest.mark.parametrize(("config", "key"), [
    (GRANITE | {"mamba_proj_bias": True}, "mamba_proj_bias"),
    (GRANITE | {"mamba_conv_bias": False}, "mamba_conv_bias"),
    (GRANITE | {"layer_types": ["conv"] * 8}, "layer_types"),
    (GRANITE | {"mamba_d_head": 60}, "mamba_d_head"),
    (LFM2 | {"conv_bias": True}, "conv_bias"),
    (LFM2 | {"layer_types": ["conv"] * 15}, "layer_types"),
    ({k: v for k, v in LFM2.items() if k != "layer_types"}, "layer_types"),
])
def test_unmodelled_variants_are_refused_naming_the_key(config, key):
    with pytest.raises(SpecError, match=f": {key}: "):
        model_from_hf_config(config, "x/config.json", "x")


# Nemotron-H-like (hand-written, hybrid_override_pattern as the Hub's configs write it): 12 blocks, 4 Mamba-2 mixers
# (64 heads of 64, 4 groups of d_state 128, conv 4), 2 attention (8 KV heads of 128), 4 MoE and 2 MLP layers
NEMOTRON = {"architectures": ["NemotronHForCausalLM"], "model_type": "nemotron_h", "hidden_size": 2048,
            "hybrid_override_pattern": "ME*-ME*-MEME", "num_attention_heads": 16, "num_key_value_heads": 8,
            "head_dim": 128, "intermediate_size": 4096, "vocab_size": 131072, "max_position_embeddings": 262144,
            "mamba_num_heads": 64, "mamba_head_dim": 64, "n_groups": 4, "ssm_state_size": 128, "conv_kernel": 4,
            "n_routed_experts": 16, "num_experts_per_tok": 2, "moe_intermediate_size": 512,
            "moe_shared_expert_intermediate_size": 1024}


def _nemotron():
    return model_from_hf_config(NEMOTRON, "nemotron/config.json", "nemotron")


def test_single_block_layers_state_and_kv_by_hand():
    model = _nemotron()
    # 4 mixers: a 64 x 128 x 64 SSM state in fp32 (vLLM's default for Nemotron-H: no mamba_ssm_cache_dtype in the
    # config) + 3 x (4096 + 2 x 4 x 128) bf16 conv columns; 2 attending layers
    assert state_bytes_per_sequence(model) == 4 * (64 * 128 * 64 * 4 + 3 * (4096 + 2 * 4 * 128) * 2)
    assert kv_bytes_per_token(model) == 2 * 2 * 8 * 128 * 2
    # transformers: the state at the model dtype, kernel (4) conv columns
    assert kv_bytes(model, "bf16", 100, convention="transformers") == \
        100 * 2 * 2 * 8 * 128 * 2 + 4 * (64 * 128 * 64 + 4 * (4096 + 2 * 4 * 128)) * 2
    bf16 = model_from_hf_config(NEMOTRON | {"mamba_ssm_cache_dtype": "bfloat16"}, "n/config.json", "n")
    assert state_bytes_per_sequence(bf16) == 4 * (64 * 128 * 64 + 3 * (4096 + 2 * 4 * 128)) * 2


def test_single_block_layers_parameters_by_hand():
    d, inner, conv_ch = 2048, 4096, 4096 + 2 * 4 * 128
    mixer = d * (conv_ch + inner + 64) + 4 * conv_ch + conv_ch + 3 * 64 + inner + inner * d
    attention = d * 2048 + 2 * d * 1024 + 2048 * d
    mlp = 2 * d * 4096  # relu2: up, down
    moe = 16 * 2 * d * 512 + 2 * d * 1024 + 16 * d  # experts, the shared MLP, the router
    total = 2 * 131072 * d + 4 * mixer + 2 * attention + 2 * mlp + 4 * moe + 12 * d + d  # untied head, 1 norm a layer
    assert parameter_count(_nemotron()).total == total


def test_single_block_layers_ops():
    model = _nemotron()
    ops = build_graph(model, parse_method("bf16"), "decode").by_name()
    assert sum(op.count for op in ops["attn_norm"]) == 6  # the 4 mixers and 2 attention layers
    assert sum(op.count for op in ops["mlp_norm"]) == 6  # the 2 MLP and 4 MoE layers
    assert sum(op.count for op in ops["o_proj"]) == 2 and sum(op.count for op in ops["out_proj"]) == 4
    assert sum(op.count for op in ops["mlp_residual"]) + sum(op.count for op in ops["attn_residual"]) == 12


def test_mlp_layers_must_agree_with_moe():
    model = _nemotron()
    with pytest.raises(ValueError, match="mlp_layers"):
        model.model_validate(model.model_dump() | {"moe": None})
    with pytest.raises(ValueError, match="mlp_layers"):
        model.model_validate(model.model_dump() | {"moe": None, "mlp": "none"})


@pytest.mark.parametrize(("change", "key"), [
    ({"hybrid_override_pattern": "MX*"}, "hybrid_override_pattern"),
    ({"moe_latent_size": 512}, "moe_latent_size"),
    ({"use_bias": True}, "use_bias"),
    ({"layers_block_type": ["mamba"]}, "layers_block_type"),
    ({"mamba_ssm_cache_dtype": "int8"}, "mamba_ssm_cache_dtype"),
])
def test_nemotron_variants_not_modelled_are_refused(change, key):
    with pytest.raises(SpecError, match=f": {key}: "):
        model_from_hf_config(NEMOTRON | change, "x/config.json", "x")


# LFM3-like (hand-written): 8 layers, conv / sliding (window 256) / conv / full, 16 heads of 128 (4 KV heads),
# conv kernel 7, sandwich norms and per-head gates
LFM3 = {"architectures": ["Lfm3ForCausalLM"], "model_type": "lfm3", "hidden_size": 2048, "num_hidden_layers": 8,
        "num_attention_heads": 16, "num_key_value_heads": 4, "head_dim": 128, "intermediate_size": 7680,
        "vocab_size": 128000, "max_position_embeddings": 128000, "conv_L_cache": 7, "sliding_window": 256,
        "use_sandwich_norm": True, "use_attention_gate": True,
        "layer_types": ["conv", "sliding_attention", "conv", "full_attention"] * 2}


def test_lfm3_cache_and_parameters_by_hand():
    model = model_from_hf_config(LFM3, "lfm3/config.json", "lfm3")
    per_token = 2 * 4 * 128 * 2
    # 1000 tokens: 2 full layers keep 1000, 2 sliding keep 256 (transformers 255); 4 conv layers 6 (7) columns
    assert kv_bytes(model, "bf16", 1000) == (2 * 1000 + 2 * 256) * per_token + 4 * 6 * 2048 * 2
    assert kv_bytes(model, "bf16", 1000, convention="transformers") == \
        (2 * 1000 + 2 * 255) * per_token + 4 * 7 * 2048 * 2
    d = 2048
    attention = d * 2048 + 2 * d * 512 + 2048 * d + 2 * 128 + d * 16  # q, k, v, o, q/k norms, the head gate
    conv = 3 * d * d + 7 * d + d * d
    total = 128000 * d + 4 * attention + 4 * conv + 8 * (3 * d * 7680 + 4 * d) + d
    assert parameter_count(model).total == total
    ops = build_graph(model, parse_method("bf16"), "decode").by_name()
    assert sum(op.count for op in ops["attn_gate"]) == 4


# RecurrentGemma-2B-like (hand-written, RecurrentGemmaConfig's keys): 26 layers of recurrent, recurrent, attention;
# lru_width 2560 in 10 blocks of 256, conv 4; local attention of window 2048, 10 heads of 256, 1 KV head
GRIFFIN = {"architectures": ["RecurrentGemmaForCausalLM"], "model_type": "recurrent_gemma", "hidden_size": 2560,
           "num_hidden_layers": 26, "num_attention_heads": 10, "num_key_value_heads": 1, "head_dim": 256,
           "intermediate_size": 15360, "vocab_size": 256000, "lru_width": 2560, "attention_window_size": 2048,
           "conv1d_width": 4, "block_types": ["recurrent", "recurrent", "attention"]}


def test_rglru_state_and_window_by_hand():
    model = model_from_hf_config(GRIFFIN, "griffin/config.json", "griffin")
    # 18 recurrent layers (26 = 8 x 3 + 2: the last two recurrent): 2560 state + 3 x 2560 conv, bf16; 8 local
    # attention layers of 1 KV head x 256, at most 2048 tokens (transformers: 2047), conv at kernel - 1 both ways
    state = 18 * (2560 + 3 * 2560) * 2
    assert state_bytes_per_sequence(model) == state
    assert kv_bytes(model, "bf16", 4096) == 8 * 2048 * 2 * 256 * 2 + state
    # transformers: the RG-LRU state in fp32 (RecurrentGemmaRglru), the conv at kernel - 1 in bf16
    assert kv_bytes(model, "bf16", 4096, convention="transformers") == \
        8 * 2047 * 2 * 256 * 2 + 18 * (2560 * 4 + 3 * 2560 * 2)


def test_rglru_parameters_and_ops_by_hand():
    model = model_from_hf_config(GRIFFIN, "griffin/config.json", "griffin")
    d = w = 2560
    recurrent = 2 * (d * w + w) + 4 * w + w + w + 2 * (10 * 256 * 256 + w) + w * d + d
    attention = d * 2560 + 2 * d * 256 + 2560 * d + d  # o_proj biased
    mlp = 3 * d * 7680 + 2 * 7680 + d  # GeGLU of 15360 // 2, biased
    total = 256000 * d + 18 * recurrent + 8 * attention + 26 * (mlp + 2 * d) + d
    assert parameter_count(model).total == total
    ops = build_graph(model, parse_method("bf16"), "decode").by_name()
    assert ops["recurrence"][0].vector_flops == 8 * B * 2560
    assert ops["gate_proj"][0].matmul_flops == 2 * 2 * B * 2560 * 256
