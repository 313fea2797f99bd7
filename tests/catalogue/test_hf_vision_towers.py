"""Multimodal wrappers' vision towers: counted from vision_config apart from the decoder, checked against tiny
transformers models, and added to the weights memory of the plan.

The expected count is every parameter of a tiny random-initialised wrapper (transformers, CPU) outside its
language model and LM head: the vision tower and its projector, as the torch modules hold them.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from cli_run import run

from roofline.catalogue.hf import model_from_hf_config
from roofline.catalogue.hf_vision import read_encoders

DATA = Path(__file__).parents[1] / "data" / "hf"


def _text(**extra):
    return dict(hidden_size=64, intermediate_size=128, num_hidden_layers=2, num_attention_heads=4,
                num_key_value_heads=2, vocab_size=256, head_dim=16, **extra)


MROPE = {"rope_parameters": {"rope_type": "default", "rope_theta": 10000.0, "mrope_section": [2, 3, 3]}}
SMALL_VIT = dict(hidden_size=32, intermediate_size=48, num_hidden_layers=2, num_attention_heads=2, image_size=64,
                 patch_size=16)

# wrapper type -> (config class, its arguments, model class), by name in transformers
TOYS = {
    "gemma3": ("Gemma3Config", dict(text_config=_text(), vision_config=SMALL_VIT | {"vision_use_head": False},
                                    mm_tokens_per_image=4), "Gemma3ForConditionalGeneration"),
    "llava-clip": ("LlavaConfig", dict(text_config=dict(model_type="llama", **_text()),
                                       vision_config=dict(model_type="clip_vision_model", projection_dim=16,
                                                          **SMALL_VIT)),
                   "LlavaForConditionalGeneration"),
    "llava-siglip-head": ("LlavaConfig", dict(text_config=dict(model_type="llama", **_text()),
                                              vision_config=dict(model_type="siglip_vision_model", **SMALL_VIT),
                                              vision_feature_layer=[-2, -1]),
                          "LlavaForConditionalGeneration"),
    "mistral3": ("Mistral3Config", dict(text_config=dict(model_type="mistral", **_text()), vision_config=dict(
        model_type="pixtral", hidden_size=32, intermediate_size=48, num_hidden_layers=2, num_attention_heads=2,
        image_size=64, patch_size=16, head_dim=16)), "Mistral3ForConditionalGeneration"),
    "qwen2_audio": ("Qwen2AudioConfig", dict(text_config=dict(model_type="qwen2", **_text()), audio_config=dict(
        d_model=32, encoder_layers=2, encoder_attention_heads=2, encoder_ffn_dim=48, num_mel_bins=16,
        max_source_positions=30)), "Qwen2AudioForConditionalGeneration"),
    "qwen2_5_vl": ("Qwen2_5_VLConfig", dict(text_config=_text(**MROPE), vision_config=dict(
        depth=2, hidden_size=32, intermediate_size=48, num_heads=2, out_hidden_size=64, fullatt_block_indexes=[1])),
                   "Qwen2_5_VLForConditionalGeneration"),
    "qwen3_vl": ("Qwen3VLConfig", dict(text_config=_text(**MROPE), vision_config=dict(
        depth=3, hidden_size=32, intermediate_size=48, num_heads=2, out_hidden_size=64, num_position_embeddings=16,
        deepstack_visual_indexes=[0, 2])), "Qwen3VLForConditionalGeneration"),
}


@pytest.mark.parametrize("toy", sorted(TOYS))
def test_tower_and_projector_parameters_match_transformers(toy):
    transformers = pytest.importorskip("transformers")
    config_class, kwargs, model_class = TOYS[toy]
    config = getattr(transformers, config_class)(**kwargs)
    model = getattr(transformers, model_class)(config)
    outside = sum(p.numel() for name, p in model.named_parameters()
                  if not name.startswith(("model.language_model.", "lm_head.")))
    encoders = read_encoders(config.to_dict(), "cfg.json", model_class)
    assert [e["parameters"] for e in encoders] == [outside]


def test_an_unknown_tower_is_listed_as_not_counted():
    data = {"model_type": "gemma3", "vision_config": {"model_type": "some_new_vit"},
            "audio_config": {"model_type": "whisper_encoder"}, "text_config": {"hidden_size": 8}}
    got = read_encoders(data, "cfg.json", "X")
    assert [(e["modality"], e["kind"], e.get("counted", True)) for e in got] == [
        ("vision", "some_new_vit", False), ("audio", "whisper_encoder", False)]


def test_gemma3_27b_siglip_tower_by_hand():
    # SigLIP so400m at 896 px, patch 14 (4,096 patches), 27 layers of d 1152, MLP 4304, no head; projector to 5376
    d, inner, layers = 1152, 4304, 27
    layer = 4 * d + 4 * (d * d + d) + 2 * d * inner + inner + d
    tower = 3 * 14 * 14 * d + d + 4096 * d + layers * layer + 2 * d
    model = model_from_hf_config(json.loads((DATA / "Gemma-3-27B" / "config.json").read_text()), "cfg.json", "g")
    assert [e.parameters for e in model.encoders] == [tower + d * 5376 + d]


def test_plan_adds_the_tower_to_the_weights(capsys, tmp_path):
    data = json.loads((DATA / "Gemma-3-27B" / "config.json").read_text())
    path = tmp_path / "with" / "config.json"
    path.parent.mkdir()
    path.write_text(json.dumps(data))
    text_only = tmp_path / "without" / "config.json"
    text_only.parent.mkdir()
    text_only.write_text(json.dumps({k: v for k, v in data.items() if k != "vision_config"}))
    plans = []
    for p in (path, text_only):
        rc, out, err = run(capsys, "plan", "--json", "--method", "bf16", "--model", str(p), "--name", "g")
        assert rc == 0, err
        plans.append(json.loads(out))
    tower_bytes = 2 * plans[0]["encoders"]["towers"][0]["parameters"]
    weights = [p["results"][0]["memory"]["weights_bytes"] for p in plans]
    assert weights[0] - weights[1] == tower_bytes == plans[0]["encoders"]["bytes"]
    assert "encoders" not in plans[1]
