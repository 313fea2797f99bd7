"""GPT-Neo and GPT-1 from transformers' configs (roofline.catalogue.hf_archs_more), against tiny transformers models.

The harness numbers (tests/catalogue/hf_exactness.measure) come from the instantiated torch modules; the engine
convention's bytes are counted by hand from the layer pattern.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from roofline.accounting import kv_bytes
from roofline.catalogue.hf import model_from_hf_config
from roofline.errors import SpecError

pytest.importorskip("transformers")
sys.path.insert(0, str(Path(__file__).parent))

from hf_exactness import measure  # noqa: E402


@pytest.mark.parametrize(("model_type", "architecture", "context"), [
    ("gpt_neo", "GPTNeoForCausalLM", 6), ("gpt_neo", "GPTNeoForCausalLM", 24),
    ("openai-gpt", "OpenAIGPTLMHeadModel", 6), ("jetmoe", "JetMoeForCausalLM", 6),
])
def test_parameters_and_transformers_cache_match(model_type, architecture, context):
    # GPT-Neo at 24 tokens is past its toy's window_size 16: transformers still keeps all 24 in the local layers
    got = measure(model_type, architecture, context)
    assert got["roofline_params"] == got["hf_params"]
    assert got["roofline_cache_bytes"] == got["hf_cache_bytes"]


def _gpt_neo(**over):
    data = {"architectures": ["GPTNeoForCausalLM"], "model_type": "gpt_neo", "vocab_size": 50257,
            "max_position_embeddings": 2048, "hidden_size": 2048, "num_layers": 24, "num_heads": 16,
            "intermediate_size": None, "window_size": 256, "attention_types": [[["global", "local"], 12]],
            "tie_word_embeddings": True}
    return model_from_hf_config(data | over, where="gpt-neo-1.3B/config.json")


def test_gpt_neo_engine_convention_keeps_the_window_of_local_layers():
    # 12 global layers keep 1000 tokens, 12 local ones 256; K + V of 2048 channels at 2 bytes (bf16)
    per_token_layer = 2 * 2048 * 2
    assert kv_bytes(_gpt_neo(), "bf16", 1000) == (12 * 1000 + 12 * 256) * per_token_layer
    assert kv_bytes(_gpt_neo(), "bf16", 1000, convention="transformers") == 24 * 1000 * per_token_layer


def test_gpt_neo_1p3b_parameter_count_by_hand():
    from roofline.accounting import parameter_count

    d, v, n, p = 2048, 50257, 24, 2048
    layer = 3 * d * d + d * d + d + 2 * (4 * d * d) + 4 * d + d + 2 * 2 * d  # qkv, out+b, fc+b, proj+b, 2 LNs
    assert parameter_count(_gpt_neo()).total == v * d + p * d + n * layer + 2 * d


def test_gpt_neo_attention_types_not_covering_the_layers_is_refused():
    with pytest.raises(SpecError, match=r"attention_types: expected \[\[kinds, repeats\]"):
        _gpt_neo(attention_types=[[["global", "local"], 11]])


def test_openai_gpt_has_no_final_norm_and_engine_cache():
    data = {"architectures": ["OpenAIGPTLMHeadModel"], "model_type": "openai-gpt", "vocab_size": 40478,
            "n_positions": 512, "n_embd": 768, "n_layer": 12, "n_head": 12, "tie_word_embeddings": True}
    model = model_from_hf_config(data, where="openai-gpt/config.json")
    assert not model.final_norm
    assert kv_bytes(model, "bf16", 100) == 12 * 100 * 2 * 768 * 2
    assert kv_bytes(model, "bf16", 100, convention="transformers") == 0


def test_jetmoe_8b_parameters_by_hand():
    # jetmoe/jetmoe-8b config.json: hidden 2048, 24 layers, 16 KV heads of kv_channels 128, 8 experts top-2 of
    # 5632, vocab 32000, tied. Per layer: MoA q / o experts 8 x 2 x d x 2048, kv_proj d x 2 x 2048, router d x 8,
    # bias d; MoE 8 x 3 x d x 5632, router d x 8, bias d; two RMSNorms. 8.52 B, the model card's "8B parameters"
    from roofline.accounting import parameter_count

    data = {"architectures": ["JetMoeForCausalLM"], "model_type": "jetmoe", "vocab_size": 32000,
            "hidden_size": 2048, "num_hidden_layers": 24, "num_key_value_heads": 16, "kv_channels": 128,
            "intermediate_size": 5632, "max_position_embeddings": 4096, "num_local_experts": 8,
            "num_experts_per_tok": 2, "tie_word_embeddings": True}
    model = model_from_hf_config(data, where="jetmoe-8b/config.json")
    d, kv = 2048, 16 * 128
    layer = 8 * 2 * d * kv + 2 * d * kv + d * 8 + d + 8 * 3 * d * 5632 + d * 8 + d + 2 * d
    assert parameter_count(model).total == 32000 * d + 24 * layer + d == 8_522_237_952
    assert (model.num_heads, model.num_kv_heads, model.head_dim) == (32, 16, 128)
    assert kv_bytes(model, "bf16", 1000) == 24 * 1000 * 2 * kv * 2
