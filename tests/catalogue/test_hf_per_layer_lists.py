"""Per-layer lists in a config.json where transformers allows them (HunYuanMoEV1Config: `moe_topk: int | list[int]`;
Hunyuan-A13B's config.json lists moe_topk, moe_intermediate_size and num_shared_expert once per layer): one value for
every layer imports as that value; lists that differ are refused by name (hfconfig._Config.layer_integer).

Found as a new user (session 17): the Hunyuan-A13B layout was refused ("moe_topk: expected a positive integer, got
list"). Expected figures by hand: an expert is gate, up and down of 4,096 x 3,072; 64 routed + 1 shared per layer,
8 routed active; 32 layers (Tencent's model card: 80 B total, 13 B active).
"""

from __future__ import annotations

import json

import pytest

from roofline.accounting import parameter_count
from roofline.catalogue.store import load_model
from roofline.errors import SpecError

HUNYUAN_A13B = {
    "architectures": ["HunYuanMoEV1ForCausalLM"], "model_type": "hunyuan_v1_moe", "hidden_size": 4096,
    "num_hidden_layers": 32, "num_attention_heads": 32, "num_key_value_heads": 8, "head_dim": 128,
    "intermediate_size": 3072, "vocab_size": 128167, "num_experts": 64, "moe_intermediate_size": [3072] * 32,
    "moe_topk": [8] * 32, "num_shared_expert": [1] * 32, "max_position_embeddings": 32768, "use_qk_norm": True,
    "use_mixed_mlp_moe": True, "tie_word_embeddings": True,
}
EXPERT = 3 * 4096 * 3072


def _load(tmp_path, config):
    (tmp_path / "Hunyuan-A13B.json").write_text(json.dumps(config))
    return load_model(str(tmp_path / "Hunyuan-A13B.json"))


def test_uniform_per_layer_lists_import_as_one_value(tmp_path):
    model = _load(tmp_path, HUNYUAN_A13B)
    assert (model.moe.num_experts, model.moe.experts_per_token, model.moe.expert_intermediate_size) == (64, 8, 3072)
    count = parameter_count(model)
    assert count.mlp_experts_total == 32 * (64 + 1) * EXPERT
    assert count.mlp_experts_active == 32 * (8 + 1) * EXPERT


def test_lists_that_differ_between_layers_are_refused_by_name(tmp_path):
    with pytest.raises(SpecError, match=r"moe_topk: per-layer values differ .*one value for every layer"):
        _load(tmp_path, HUNYUAN_A13B | {"moe_topk": [8] * 31 + [4]})
