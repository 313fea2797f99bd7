"""A config.json that sets sliding_window but lists no layer_types: which layers slide is the rule of the type's
transformers config class (hf_families._derived_layer_types), not "every layer full".

Found as a new user (session 17): EXAONE-4.0-32B's config as TensorRT-LLM's tests write it
(tests/unittest/_torch/modeling/test_modeling_exaone4.py: sliding_window, sliding_window_pattern 4, no layer_types)
priced its cache at 32K as 8 GiB, every layer full. Exaone4Config (transformers v5.24.0,
models/exaone4/configuration_exaone4.py) makes layer i full when (i + 1) % sliding_window_pattern == 0, else sliding.
"""

from __future__ import annotations

import json
import sys

import pytest

from roofline.accounting import kv_bytes
from roofline.catalogue.store import load_model
from roofline.errors import SpecError

EXAONE4_32B = {  # TensorRT-LLM's EXAONE4 test config with the model's own 64 layers and 4,096-token window
    "architectures": ["Exaone4ForCausalLM"], "model_type": "exaone4", "head_dim": 128, "hidden_act": "silu",
    "hidden_size": 5120, "intermediate_size": 27392, "max_position_embeddings": 131072, "num_attention_heads": 40,
    "num_hidden_layers": 64, "num_key_value_heads": 8, "rms_norm_eps": 1e-05, "rope_theta": 1000000,
    "sliding_window": 4096, "sliding_window_pattern": 4, "tie_word_embeddings": False, "vocab_size": 102400,
}
# a layer's K and V for one token in bf16: 2 x 8 KV heads x 128 x 2 bytes
LAYER_TOKEN_BYTES = 2 * 8 * 128 * 2


def _kv(tmp_path, config: dict, context: int, name: str = "EXAONE-4.0-32B") -> int:
    (tmp_path / f"{name}.json").write_text(json.dumps(config))
    return int(kv_bytes(load_model(str(tmp_path / f"{name}.json")), "bf16", context))


def test_exaone4_without_layer_types_slides_three_layers_in_four(tmp_path):
    """16 full layers hold 32,768 tokens, 48 sliding layers 4,096: 2,952,790,016 bytes (2.75 GiB), by hand."""
    assert _kv(tmp_path, EXAONE4_32B, 32768) == 16 * LAYER_TOKEN_BYTES * 32768 + 48 * LAYER_TOKEN_BYTES * 4096
    assert 16 * LAYER_TOKEN_BYTES * 32768 + 48 * LAYER_TOKEN_BYTES * 4096 == 2_952_790_016


def test_the_same_config_with_layer_types_written_out_agrees(tmp_path):
    """layer_types as the config class's docstring spells the pattern ("LLLG": three local, one global)."""
    listed = EXAONE4_32B | {"layer_types": (["sliding_attention"] * 3 + ["full_attention"]) * 16}
    assert _kv(tmp_path, listed, 32768, "listed") == _kv(tmp_path, EXAONE4_32B, 32768)


def test_without_transformers_the_config_is_refused_naming_layer_types(tmp_path, monkeypatch):
    monkeypatch.setitem(sys.modules, "transformers", None)  # import transformers -> ImportError
    with pytest.raises(SpecError, match=r"layer_types: missing while sliding_window is 4096.*install transformers"):
        _kv(tmp_path, EXAONE4_32B, 32768)


def test_mixtral_slides_every_layer_without_layer_types(tmp_path):
    """MixtralAttention passes config.sliding_window on every layer; its config class derives no layer_types:
    32 layers x 4,096 tokens at a 32K context."""
    mixtral = {"architectures": ["MixtralForCausalLM"], "model_type": "mixtral", "hidden_size": 4096,
               "intermediate_size": 14336, "num_attention_heads": 32, "num_key_value_heads": 8,
               "num_hidden_layers": 32, "num_local_experts": 8, "num_experts_per_tok": 2, "vocab_size": 32000,
               "max_position_embeddings": 32768, "sliding_window": 4096, "tie_word_embeddings": False}
    assert _kv(tmp_path, mixtral, 32768, "mixtral") == 32 * LAYER_TOKEN_BYTES * 4096


def test_a_window_the_attention_never_reads_stays_full(tmp_path):
    """Qwen3VLMoeTextAttention sets self.sliding_window = None: a text config's sliding_window changes nothing."""
    base = {"architectures": ["Qwen3VLMoeForConditionalGeneration"], "model_type": "qwen3_vl_moe",
            "text_config": {"model_type": "qwen3_vl_moe_text", "hidden_size": 2048, "intermediate_size": 6144,
                            "moe_intermediate_size": 768, "num_attention_heads": 32, "num_key_value_heads": 4,
                            "head_dim": 128, "num_hidden_layers": 48, "num_experts": 128, "num_experts_per_tok": 8,
                            "vocab_size": 151936, "max_position_embeddings": 262144, "tie_word_embeddings": False}}
    windowed = json.loads(json.dumps(base))
    windowed["text_config"]["sliding_window"] = 4096
    full = 48 * 2 * 4 * 128 * 2 * 32768
    assert _kv(tmp_path, base, 32768, "vl") == full
    assert _kv(tmp_path, windowed, 32768, "vlw") == full
