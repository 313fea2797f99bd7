"""Hugging Face config.json import: real configs map to the catalogue shapes; bad input is one SpecError."""

from __future__ import annotations

import copy
import json
from pathlib import Path

import pytest

from roofline.catalogue import load_model, model_names
from roofline.catalogue.hf import HANDLERS, model_from_hf_config
from roofline.errors import SpecError

DATA = Path(__file__).resolve().parents[1] / "data" / "hf"
FIXTURES = sorted(p.name for p in DATA.iterdir() if (p / "config.json").is_file())
# fixtures named after a catalogue entry must import to exactly that entry; the others (architectures without a
# catalogue model yet) are checked by hand in tests/catalogue/test_hf_architectures.py
CATALOGUED = [name for name in FIXTURES if name in model_names()]


def _config(name: str) -> dict:
    return json.loads((DATA / name / "config.json").read_text())


def test_every_supported_architecture_has_a_fixture():
    # aliases (Gemma3ForCausalLM / Gemma3ForConditionalGeneration) share one handler: one fixture covers both
    # (wrappers read through a hf_families row, Kimi-K2.5's KimiK25ForConditionalGeneration, have no handler)
    archs = [_config(name)["architectures"][0] for name in FIXTURES]
    covered = {HANDLERS[arch] for arch in archs if arch in HANDLERS}
    assert covered == set(HANDLERS.values())


@pytest.mark.parametrize("name", CATALOGUED)
def test_fixture_matches_catalogue(name):
    imported = model_from_hf_config(_config(name), where=f"{name}/config.json", name=name)
    # Each fixture folder is named after its catalogue entry. The catalogue plans the bf16 text decoder (no
    # quantization field, no encoders): a quantized checkpoint's stored widths and a multimodal wrapper's vision
    # tower come with the config.json (test_hf_quantized_checkpoints.py, test_hf_vision_towers.py).
    expected = load_model(name)
    skip = {"source", "quantization", "encoders"}
    assert imported.model_dump(exclude=skip) == expected.model_dump(exclude=skip)
    assert imported.source == f"{name}/config.json"


@pytest.mark.parametrize("name", FIXTURES)
def test_load_model_reads_a_config_file(name):
    path = DATA / name / "config.json"
    model = load_model(str(path))
    assert model.source == str(path)
    config = _config(name)
    config = config.get("text_config", config)
    # GPT-Neo saves its layer count as num_layers, GPT-1 as n_layer; the config counts stored layers (Inkling-2-Loop
    # runs its loop layers again: Model.reused_layers); LongCat-Flash's num_layers counts blocks of two attention
    # sublayers each (LongcatFlashConfig.num_hidden_layers = 2 x num_layers)
    stored = next(config[k] for k in ("num_hidden_layers", "num_layers", "n_layer") if k in config)
    stored *= 2 if config.get("model_type") == "longcat_flash" else 1
    if "mlp" in (config.get("layer_types") or []):  # Dory's released layout counts attention and MLP blocks apart
        stored //= 2
    # HRM-Text's num_hidden_layers counts its cache slots (every pass of its two stacks), the Model's num_layers
    assert (model.num_layers if "num_layers_per_stack" in config else model.num_layers - model.reused_layers) == stored


def test_name_defaults_to_parent_folder_then_name_or_path():
    assert model_from_hf_config(_config("Qwen3-8B"), where="x/Qwen3-8B/config.json").name == "Qwen3-8B"
    phi = model_from_hf_config(_config("Phi-3-mini"), where="x/phi/config.json")
    assert phi.name == "Phi-3-mini-4k-instruct"


def test_name_missing_everywhere_is_an_error():
    with pytest.raises(SpecError, match=r"config\.json: name: "):
        model_from_hf_config(_config("Qwen3-8B"))


def test_gemma2_alternates_sliding_first():
    model = model_from_hf_config(_config("Gemma-2-9B"), name="g")
    assert model.layer_attention(0).kind == "sliding"
    assert model.layer_attention(1).kind == "full"
    assert {k.kind: n for k, n in model.attention_groups().items()} == {"sliding": 21, "full": 21}


def test_qwen_sliding_window_from_max_window_layers():
    windows = {"use_sliding_window": True, "sliding_window": 4096, "max_window_layers": 20}
    data = _config("Qwen2.5-7B") | windows
    model = model_from_hf_config(data, name="q")
    assert [model.layer_attention(i).kind for i in (0, 19, 20, 27)] == ["full", "full", "sliding", "sliding"]


def test_layer_types_list_is_compressed_to_its_cycle():
    types = ["sliding_attention", "full_attention"] * 21
    model = model_from_hf_config(_config("Gemma-2-9B") | {"layer_types": types}, name="g")
    assert len(model.attention) == 2


def test_head_dim_defaults_to_hidden_over_heads():
    data = _config("Llama-3.1-8B")
    assert "head_dim" not in data
    assert model_from_hf_config(data, name="l").head_dim == 128


def _fails(data: dict, *fragments: str) -> str:
    with pytest.raises(SpecError) as info:
        model_from_hf_config(data, where="cfg.json", name="m")
    message = str(info.value)
    assert "\n" not in message
    for fragment in fragments:
        assert fragment in message
    return message


def test_unknown_architecture_without_model_type_lists_supported():
    data = _config("Llama-3.1-8B") | {"architectures": ["GPT2LMHeadModel"]}
    data.pop("model_type", None)
    message = _fails(data, "cfg.json: architectures:", "GPT2LMHeadModel", "LlamaForCausalLM")
    assert all(arch in message for arch in HANDLERS)


def test_unknown_model_type_is_refused_naming_it():
    data = _config("Llama-3.1-8B") | {"architectures": ["NoSuchForCausalLM"], "model_type": "no_such"}
    _fails(data, "cfg.json: model_type: 'no_such' (NoSuchForCausalLM) is not supported", "FAMILIES")


def test_missing_architectures():
    data = _config("Llama-3.1-8B")
    del data["architectures"]
    _fails(data, "cfg.json: architectures: missing")


@pytest.mark.parametrize(
    ("fixture", "key"),
    [
        ("Llama-3.1-8B", "num_hidden_layers"),
        ("Qwen3-8B", "num_key_value_heads"),
        ("Mixtral-8x7B", "num_local_experts"),
        ("DeepSeek-V3", "kv_lora_rank"),
        ("DeepSeek-V3", "first_k_dense_replace"),
        ("Gemma-2-9B", "head_dim"),
        ("Gemma-2-9B", "sliding_window"),
        ("Mistral-7B-v0.3", "sliding_window"),
    ],
)
def test_missing_field_names_the_field(fixture, key):
    data = copy.deepcopy(_config(fixture))
    del data[key]
    arch = data["architectures"][0]
    _fails(data, f"cfg.json: {key}: missing (required for {arch})")


@pytest.mark.parametrize(
    ("key", "value"),
    [("hidden_size", "4096"), ("num_hidden_layers", 32.0), ("vocab_size", True), ("intermediate_size", -1)],
)
def test_bad_integer_names_the_field(key, value):
    _fails(_config("Llama-3.1-8B") | {key: value}, f"cfg.json: {key}: expected a positive integer")


def test_bad_bool_names_the_field():
    _fails(_config("Llama-3.1-8B") | {"tie_word_embeddings": "false"}, "cfg.json: tie_word_embeddings:")


def test_kv_heads_must_divide_heads():
    data = _config("Llama-3.1-8B") | {"num_key_value_heads": 5}
    _fails(data, "cfg.json: num_key_value_heads: 5 does not divide num_attention_heads 32")


def test_head_dim_must_divide_when_absent():
    _fails(_config("Llama-3.1-8B") | {"hidden_size": 4100}, "cfg.json: head_dim: missing", "4100")


def test_unsupported_moe_layer_freq():
    _fails(_config("DeepSeek-V3") | {"moe_layer_freq": 2}, "cfg.json: moe_layer_freq:")


def test_model_validation_errors_are_one_line():
    # first_k_dense_replace beyond the layer count passes the importer and fails the Model check.
    _fails(_config("DeepSeek-V3") | {"first_k_dense_replace": 99}, "moe.first_dense_layers: 99 exceeds")


@pytest.mark.parametrize("name,expected", [
    ("DeepSeek-V3", 1),  # config.json "num_nextn_predict_layers": 1
    ("GLM-4.5-Air", 1),  # the same key (SOURCE.md: one MTP layer stored in the checkpoint)
    ("Qwen3.5-35B-A3B", 1),  # text_config "mtp_num_hidden_layers": 1
    ("MiniMax-M2.5", 3),  # "use_mtp": true, "num_mtp_modules": 3
    ("Qwen3-Next-80B-A3B", 1),  # no key; vLLM's Qwen3NextMTP: getattr(config, "num_nextn_predict_layers", 1)
    ("Kimi-K2", 0),  # "num_nextn_predict_layers": 0
    ("Llama-3.1-8B", 0),  # no MTP key, no MTP module
])
def test_mtp_modules_are_read_from_the_config(name, expected):
    assert model_from_hf_config(_config(name), where=f"{name}/config.json").mtp_layers == expected


def test_a_negative_mtp_count_is_refused_naming_the_key():
    data = _config("DeepSeek-V3") | {"num_nextn_predict_layers": -1}
    with pytest.raises(SpecError, match="num_nextn_predict_layers: expected an integer >= 0, got -1"):
        model_from_hf_config(data, where="x/config.json")


# google/gemma-3-12b-it's config.json (its architecture keys, as a public loader embeds them to build the model it
# then fills with the checkpoint's weights): the text_config omits what Gemma3TextConfig defaults (head_dim 256,
# vocab_size 262,208, max_position_embeddings 131,072, sliding_window_pattern 6; transformers 4.50
# models/gemma3/configuration_gemma3.py).
GEMMA3_12B = {
    "architectures": ["Gemma3ForConditionalGeneration"], "boi_token_index": 255999, "eoi_token_index": 256000,
    "eos_token_id": [1, 106], "image_token_index": 262144, "initializer_range": 0.02, "mm_tokens_per_image": 256,
    "model_type": "gemma3",
    "text_config": {"hidden_size": 3840, "intermediate_size": 15360, "model_type": "gemma3_text",
                    "num_attention_heads": 16, "num_hidden_layers": 48, "num_key_value_heads": 8,
                    "rope_scaling": {"factor": 8.0, "rope_type": "linear"}, "sliding_window": 1024},
    "torch_dtype": "bfloat16",
    "vision_config": {"hidden_size": 1152, "image_size": 896, "intermediate_size": 4304,
                      "model_type": "siglip_vision_model", "num_attention_heads": 16, "num_hidden_layers": 27,
                      "patch_size": 14, "vision_use_head": False}}


def test_gemma3_published_text_config_takes_the_class_defaults():
    """Gemma-3-12B: head_dim 256 (16 x 256 = 4,096 query width against hidden 3,840), 48 layers, 8 of them global
    (every 6th), 40 sliding over 1,024 tokens. bf16 KV per token and layer: 2 x 8 x 256 x 2 = 8,192 B; at 32,768
    tokens: 8 x 32,768 x 8,192 + 40 x 1,024 x 8,192 = 2,147,483,648 + 335,544,320 = 2,483,027,968 B."""
    from roofline.accounting import kv_bytes

    model = model_from_hf_config(GEMMA3_12B, where="gemma-3-12b-it/config.json")
    assert (model.head_dim, model.num_heads, model.num_kv_heads, model.num_layers) == (256, 16, 8, 48)
    assert (model.vocab_size, model.max_position_embeddings) == (262_208, 131_072)
    assert kv_bytes(model, "bf16", 32_768) == 2_483_027_968
