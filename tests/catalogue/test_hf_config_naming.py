"""A Hugging Face config.json's model name when the config gives none (`_name_or_path` absent): the file's own name
for a saved `SmolLM3-3B.json`, the folder for the Hub layout `SmolLM3-3B/config.json` (store.load_model)."""

from __future__ import annotations

import json

from roofline.catalogue.store import load_model

SMOLLM3 = {  # HuggingFaceTB/SmolLM3-3B's config.json, the fields the planner reads
    "architectures": ["SmolLM3ForCausalLM"], "model_type": "smollm3", "hidden_size": 2048, "num_hidden_layers": 36,
    "num_attention_heads": 16, "num_key_value_heads": 4, "head_dim": 128, "intermediate_size": 11008,
    "vocab_size": 128256, "max_position_embeddings": 65536, "rope_theta": 5000000.0, "rms_norm_eps": 1e-6,
    "tie_word_embeddings": True, "hidden_act": "silu", "torch_dtype": "bfloat16",
    "no_rope_layers": [1, 1, 1, 0] * 9,
}


def test_a_saved_config_is_named_by_its_file(tmp_path):
    (tmp_path / "SmolLM3-3B.json").write_text(json.dumps(SMOLLM3))
    assert load_model(str(tmp_path / "SmolLM3-3B.json")).name == "SmolLM3-3B"


def test_a_hub_layout_config_is_named_by_its_folder(tmp_path):
    (tmp_path / "SmolLM3-3B").mkdir()
    (tmp_path / "SmolLM3-3B" / "config.json").write_text(json.dumps(SMOLLM3))
    assert load_model(str(tmp_path / "SmolLM3-3B" / "config.json")).name == "SmolLM3-3B"


def test_a_bare_saved_config_in_the_current_folder_is_named_by_its_file(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "smollm3.json").write_text(json.dumps(SMOLLM3))
    assert load_model("smollm3.json").name == "smollm3"


def test_smollm3_caches_every_layer_by_hand(tmp_path):
    """36 layers x 4 KV heads x 128 x (K, V) x 2 bytes = 73,728 bytes a token (its no-RoPE layers cache too)."""
    from roofline.accounting import kv_bytes

    (tmp_path / "SmolLM3-3B.json").write_text(json.dumps(SMOLLM3))
    model = load_model(str(tmp_path / "SmolLM3-3B.json"))
    assert kv_bytes(model, "bf16", 1000) == 73_728 * 1000
