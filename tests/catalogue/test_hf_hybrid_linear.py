"""Linear-attention layer kinds (roofline.catalogue.hf_archs_hybrid): MiniMax's lightning attention (no convolution)
and Kimi Delta Attention. State bytes, parameters and ops of hand-written configs derived by hand; the toy
transformers model against roofline (tests/catalogue/hf_exactness.measure)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from roofline.accounting import kv_bytes, kv_bytes_per_token, parameter_count, state_bytes_per_sequence
from roofline.catalogue.hf import model_from_hf_config
from roofline.costmodel import build_graph
from roofline.errors import SpecError
from roofline.methods import parse_method
from roofline.units import B

sys.path.insert(0, str(Path(__file__).parent))

LINEAR_TYPES = [("minimax", "MiniMaxForCausalLM"), ("kimi_linear", "KimiLinearForCausalLM"),
                ("olmo_hybrid", "OlmoHybridForCausalLM")]


@pytest.mark.parametrize(("model_type", "architecture"), LINEAR_TYPES)
def test_toy_models_match_transformers_exactly(model_type, architecture):
    pytest.importorskip("transformers")
    from hf_exactness import measure

    got = measure(model_type, architecture)
    assert got["roofline_params"] == got["hf_params"]
    assert got["roofline_cache_bytes"] == got["hf_cache_bytes"]


# MiniMax-Text-01-like (hand-written): 8 layers, softmax attention at 7 only (layer_types), 64 heads of 128 (8 KV
# heads), 32 experts of 9216, top 2
MINIMAX = {"architectures": ["MiniMaxForCausalLM"], "model_type": "minimax", "hidden_size": 6144,
           "num_hidden_layers": 8, "num_attention_heads": 64, "num_key_value_heads": 8, "head_dim": 128,
           "intermediate_size": 9216, "vocab_size": 200064, "max_position_embeddings": 10240000,
           "num_local_experts": 32, "num_experts_per_tok": 2,
           "layer_types": ["linear_attention"] * 7 + ["full_attention"]}


def _minimax():
    return model_from_hf_config(MINIMAX, "minimax/config.json", "minimax")


def test_lightning_state_by_hand_under_both_conventions():
    model = _minimax()
    # 7 lightning layers x 64 heads x 128 x 128, bf16; no conv, so both conventions agree
    state = 7 * 64 * 128 * 128 * 2
    assert state_bytes_per_sequence(model) == state
    assert kv_bytes_per_token(model) == 2 * 8 * 128 * 2
    assert kv_bytes(model, "bf16", 1000, convention="transformers") == kv_bytes(model, "bf16", 1000) \
        == 1000 * 2 * 8 * 128 * 2 + state


def test_lightning_parameters_by_hand():
    d, inner = 6144, 64 * 128
    lightning = 3 * d * inner + d * inner + inner + inner * d  # qkv, output gate, norm, out
    attention = d * inner + 2 * d * 1024 + inner * d
    moe = 32 * 3 * d * 9216 + 32 * d
    total = 2 * 200064 * d + 7 * lightning + attention + 8 * (moe + 2 * d) + d
    assert parameter_count(_minimax()).total == total


def test_lightning_decode_ops():
    ops = build_graph(_minimax(), parse_method("bf16"), "decode").by_name()
    assert "conv1d" not in ops
    recurrence = ops["recurrence"][0]
    assert recurrence.count == 7
    # 5 FLOPs per state element; the state read and rewritten once per sequence
    assert recurrence.matmul_flops == 5 * B * 64 * 128 * 128
    assert recurrence.traffic["kv_read"] == B * 64 * 128 * 128 * 2
    assert ops["in_proj"][0].matmul_flops == 2 * B * 6144 * 4 * 8192


def test_minimax_sliding_window_is_refused():
    with pytest.raises(SpecError, match=": sliding_window: "):
        model_from_hf_config(MINIMAX | {"sliding_window": 4096}, "x/config.json", "x")


# Kimi-Linear-like (hand-written, the Hub's linear_attn_config form): 8 layers, MLA at 4 and 8 (1-based), KDA in the
# other 6 (32 heads of 128, conv 4); MLA 32 heads, latent 512 + rope 64; 64 experts of 1024, top 8, 1 shared; the
# first layer dense (first_k_dense_replace)
KIMI = {"architectures": ["KimiLinearForCausalLM"], "model_type": "kimi_linear", "hidden_size": 2304,
        "num_hidden_layers": 8, "num_attention_heads": 32, "num_key_value_heads": 32, "intermediate_size": 9216,
        "vocab_size": 163840, "model_max_length": 1048576, "kv_lora_rank": 512, "q_lora_rank": None,
        "qk_nope_head_dim": 128, "qk_rope_head_dim": 64, "v_head_dim": 128, "num_experts": 64,
        "num_experts_per_token": 8, "moe_intermediate_size": 1024, "num_shared_experts": 1,
        "first_k_dense_replace": 1,
        "linear_attn_config": {"full_attn_layers": [4, 8], "kda_layers": [1, 2, 3, 5, 6, 7], "head_dim": 128,
                               "num_heads": 32, "short_conv_kernel_size": 4}}


def _kimi():
    return model_from_hf_config(KIMI, "kimi/config.json", "kimi")


def test_kda_state_by_hand_under_both_conventions():
    model = _kimi()
    inner = 32 * 128
    # 6 KDA layers: 32 x 128 x 128 state + 3 x 3 x 4096 conv columns (q, k, v), bf16; 2 MLA layers of 512 + 64
    state = 6 * (32 * 128 * 128 + 3 * 3 * inner) * 2
    assert state_bytes_per_sequence(model) == state
    assert kv_bytes_per_token(model) == 2 * (512 + 64) * 2
    # transformers: the KDA state in fp32 (KimiLinearDeltaAttention casts it), 4 conv columns in bf16
    assert kv_bytes(model, "bf16", 10, convention="transformers") == \
        10 * 2 * (512 + 64) * 2 + 6 * (32 * 128 * 128 * 4 + 4 * 3 * inner * 2)


def test_kda_parameters_by_hand():
    d, inner, r = 2304, 32 * 128, 128
    kda = 3 * d * inner + 4 * 3 * inner + (d * r + r * inner + inner + 32) + d * 32 + (d * r + r * inner) + r \
        + inner * d
    mla = d * 32 * 192 + d * (512 + 64) + 512 + 512 * 32 * (128 + 128) + 32 * 128 * d
    dense, moe = 3 * d * 9216, 64 * 3 * d * 1024 + 3 * d * 1024 + 64 * d
    total = 2 * 163840 * d + 6 * kda + 2 * mla + dense + 7 * moe + 8 * 2 * d + d
    assert parameter_count(_kimi()).total == total


def test_kda_decode_ops():
    ops = build_graph(_kimi(), parse_method("bf16"), "decode").by_name()
    recurrence = ops["recurrence"][0]
    assert recurrence.count == 6 and recurrence.matmul_flops == 7 * B * 32 * 128 * 128
    assert ops["conv1d"][0].traffic["kv_read"] == B * 3 * 3 * 4096 * 2
    assert ops["gate_b_proj"][0].matmul_flops == 2 * B * 128 * 2 * 4096
