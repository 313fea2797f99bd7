"""The family rows of hf_family_rows: a published parameter count derived by hand, transformers' head_dim rule, and
a one-line refusal (naming the key) for every layout the rows do not model."""

from __future__ import annotations

import pytest

from roofline.accounting import parameter_count
from roofline.catalogue.hf import model_from_hf_config
from roofline.errors import SpecError


def test_bloom_560m_counts_its_published_559_214_592_parameters():
    # bigscience/bloom-560m config.json keys; by hand: embedding 250880 x 1024 = 256,901,120 + its LayerNorm 2,048;
    # per layer LayerNorms 4,096 + query_key_value 1024 x 3072 + 3072 + dense 1024^2 + 1024 + MLP 1024 x 4096 + 4096
    # + 4096 x 1024 + 1024 = 12,596,224, x 24 = 302,309,376; ln_f 2,048; tied head: 559,214,592 (the model card's)
    config = {"architectures": ["BloomForCausalLM"], "model_type": "bloom", "n_embed": 1024, "n_layer": 24,
              "num_attention_heads": 16, "vocab_size": 250880, "_name_or_path": "bigscience/bloom-560m"}
    model = model_from_hf_config(config)
    assert parameter_count(model).total == 559_214_592
    assert model.max_position_embeddings == 2048  # BLOOM's training length; the config has no context key


def test_phi2_counts_its_2_779_683_840_parameters():
    # microsoft/phi-2 config.json keys; by hand: embedding 51200 x 2560 = 131,072,000; per layer q / k / v / dense
    # with bias 4 x (2560^2 + 2560) = 26,224,640, fc1 2560 x 10240 + 10240 = 26,224,640, fc2 10240 x 2560 + 2560 =
    # 26,216,960, one LayerNorm 5,120: 78,671,360, x 32 = 2,517,483,520; final LayerNorm 5,120; lm_head 131,072,000
    # + its bias 51,200: 2,779,683,840
    config = {"architectures": ["PhiForCausalLM"], "model_type": "phi", "hidden_size": 2560,
              "intermediate_size": 10240, "num_hidden_layers": 32, "num_attention_heads": 32,
              "num_key_value_heads": 32, "vocab_size": 51200, "max_position_embeddings": 2048,
              "tie_word_embeddings": False, "qk_layernorm": False, "partial_rotary_factor": 0.4}
    assert parameter_count(model_from_hf_config(config, name="phi-2")).total == 2_779_683_840


def test_glm45_default_head_dim_is_floored_as_transformers_derives_it():
    # Glm4MoeAttention: head_dim = getattr(config, "head_dim", hidden_size // num_attention_heads): 4096 // 96 = 42
    config = {"architectures": ["Glm4MoeForCausalLM"], "hidden_size": 4096, "num_attention_heads": 96,
              "num_key_value_heads": 8, "num_hidden_layers": 46, "intermediate_size": 10944, "vocab_size": 151552,
              "max_position_embeddings": 131072, "n_routed_experts": 128, "num_experts_per_tok": 8,
              "n_shared_experts": 1, "moe_intermediate_size": 1408, "first_k_dense_replace": 1}
    assert model_from_hf_config(config, name="glm").head_dim == 42


BASE = {"hidden_size": 64, "num_attention_heads": 4, "num_key_value_heads": 2, "num_hidden_layers": 4,
        "intermediate_size": 128, "vocab_size": 1000, "max_position_embeddings": 4096}


@pytest.mark.parametrize(("arch", "model_type", "extra", "key"), [
    ("MptForCausalLM", "mpt", {"d_model": 64, "n_heads": 4, "n_layers": 2, "max_seq_len": 2048,
                               "expansion_ratio": 8}, "expansion_ratio"),
    ("Ernie4_5_MoeForCausalLM", "ernie4_5_moe", {"moe_num_experts": 8, "moe_k": 2, "moe_intermediate_size": 32,
                                                 "moe_layer_start_index": 1, "moe_layer_end_index": 2},
     "moe_layer_end_index"),
    ("FlintForCausalLM", "flint", {"num_experts": 8, "num_experts_per_tok": 2, "moe_intermediate_size": 32,
                                   "mlp_only_layers": [1, 3]}, "mlp_only_layers"),
    ("LagunaForCausalLM", "laguna", {"num_attention_heads_per_layer": [4, 8, 4]}, "num_attention_heads_per_layer"),
    ("DogeForCausalLM", "doge", {"is_moe": True, "num_experts": 16, "num_experts_per_tok": 2}, "is_moe"),
    ("Step3p5ForCausalLM", "step3p5", {"gating": False}, "gating"),
    ("MiniCPM3ForCausalLM", "molmo2_text", {"qk_norm_type": "olmo"}, "qk_norm_type"),
])
def test_a_layout_the_row_does_not_model_is_refused_naming_its_key(arch, model_type, extra, key):
    with pytest.raises(SpecError) as info:
        model_from_hf_config({"architectures": [arch], "model_type": model_type, **BASE, **extra}, name="x")
    message = str(info.value)
    assert "\n" not in message and f": {key}: " in message


@pytest.mark.parametrize("key", ["moe_num_experts", "moe_intermediate_size", "moe_k", "moe_layer_start_index"])
def test_ernie45_moe_refuses_a_text_vision_pair_its_config_class_types_int(key):
    """ERNIE-4.5-VL's [text, vision] pairs (e.g. moe_num_experts [64, 64]) under architectures
    Ernie4_5_MoeForCausalLM: transformers' Ernie4_5_MoeConfig types each key int and its strict check refuses a list;
    vLLM's ernie45_moe.py compares moe_num_experts with 0 and the TP size (a TypeError on a list). The pair was read
    as one per-layer value (64), or refused as 'per-layer values differ' when the two differed."""
    ernie = {"architectures": ["Ernie4_5_MoeForCausalLM"], "model_type": "ernie4_5_moe", **BASE,
             "moe_num_experts": 8, "moe_k": 2, "moe_intermediate_size": 32, "moe_layer_start_index": 1}
    with pytest.raises(SpecError) as info:
        model_from_hf_config(ernie | {key: [ernie[key]] * 2}, name="x")
    message = str(info.value)
    assert "\n" not in message and f": {key}: " in message
    assert "takes one integer here, not a list" in message and "Ernie4_5_VLMoeForConditionalGeneration" in message
