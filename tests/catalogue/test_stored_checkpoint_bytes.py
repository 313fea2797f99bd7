"""A quantized checkpoint's bytes as the loader stores them: codes, scales, zero points and the modules it keeps.

The published figure is the total_size of the checkpoint's model.safetensors.index.json (vendored under
tests/data/hf/<name>/ with its source); the others are derived by hand below from each loader's tensor shapes
(vLLM quantization/*.py create_weights), on Llama-3.1-8B's shapes: d = 4096, 32 layers, q 4096 x 4096,
k and v 1024 x 4096, o 4096 x 4096, gate and up 14336 x 4096, down 4096 x 14336; vocabulary 128,256 untied.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from roofline.catalogue.hf import model_from_hf_config
from roofline.errors import SpecError
from roofline.stored_bytes import stored_bytes

DATA = Path(__file__).parents[1] / "data" / "hf"

LAYERS = 32
MATRICES = [(4096, 4096), (1024, 4096), (1024, 4096), (4096, 4096), (14336, 4096), (14336, 4096), (4096, 14336)]
LINEAR = LAYERS * sum(o * i for o, i in MATRICES)  # 6,979,321,856 weights the quantizers convert
EMBED_HEAD = 2 * 128256 * 4096  # embed_tokens and lm_head, never converted
NORMS = LAYERS * 2 * 4096 + 4096
KEPT_BYTES = 2 * (EMBED_HEAD + NORMS)  # bf16


def _model(name: str, q: dict | None = None):
    data = json.loads((DATA / name / "config.json").read_text())
    if q is not None:
        data["quantization_config"] = q
    return model_from_hf_config(data, where="cfg.json", name="m")


@pytest.mark.parametrize(("name", "total"), [("gpt-oss-20b", 13_761_264_768), ("gpt-oss-120b", 65_248_815_744)])
def test_gpt_oss_mxfp4_matches_the_published_total_size(name, total):
    published = json.loads((DATA / name / "index-metadata.json").read_text())["metadata"]["total_size"]
    assert stored_bytes(_model(name)).decoder == published == total


def test_unquantized_is_two_bytes_a_parameter():
    assert LINEAR == 6_979_321_856
    assert stored_bytes(_model("Llama-3.1-8B")).total == 2 * (LINEAR + EMBED_HEAD + NORMS)


def test_fp8_blocks_add_one_fp32_scale_per_128x128_block():
    # blocks per layer: q, o 32 x 32; k, v 8 x 32; gate, up 112 x 32; down 32 x 112 -> 13,312 x 4 B
    got = stored_bytes(_model("Llama-3.1-8B", {"quant_method": "fp8", "weight_block_size": [128, 128]}))
    assert (got.codes, got.scales, got.kept) == (LINEAR, LAYERS * 13_312 * 4, KEPT_BYTES)
    assert got.decoder == 9_082_904_576


def test_awq_int4_g128_stores_fp16_scales_and_int4_zeros_per_group():
    # qweight int32 [in, out/8]; scales fp16 [in/128, out]; qzeros int32 [in/128, out/8]: 2.5 B per 128 weights
    q = {"quant_method": "awq", "bits": 4, "group_size": 128, "zero_point": True, "modules_to_not_convert": None}
    got = stored_bytes(_model("Llama-3.1-8B", q))
    assert (got.codes, got.scales, got.kept) == (LINEAR // 2, LINEAR * 5 // 256, KEPT_BYTES)


def test_gptq_adds_an_int32_g_idx_per_input_channel():
    q = {"quant_method": "gptq", "bits": 4, "group_size": 128, "desc_act": False}
    inputs = LAYERS * sum(i for _, i in MATRICES)  # g_idx int32 [in] per matrix
    assert stored_bytes(_model("Llama-3.1-8B", q)).scales == LINEAR * 5 // 256 + 4 * inputs


def test_nvfp4_stores_an_fp8_scale_per_16_and_two_fp32_per_matrix():
    q = {"quant_method": "modelopt", "quant_algo": "NVFP4", "group_size": 16, "kv_cache_quant_algo": "FP8",
         "exclude_modules": ["lm_head"]}
    got = stored_bytes(_model("Llama-3.1-8B", q))
    assert (got.codes, got.scales) == (LINEAR // 2, LINEAR // 16 + LAYERS * 7 * 8)


def test_compressed_tensors_w4a16_stores_bf16_group_scales_and_the_shape():
    q = {"quant_method": "compressed-tensors", "ignore": ["lm_head"], "config_groups": {"group_0": {
        "targets": ["Linear"], "weights": {"num_bits": 4, "type": "int", "symmetric": True, "strategy": "group",
                                           "group_size": 128}}}}
    got = stored_bytes(_model("Llama-3.1-8B", q))
    # weight_packed int32 [out, in/8]; weight_scale bf16 [out, in/128]; weight_shape int64 [2] per matrix
    assert (got.codes, got.scales) == (LINEAR // 2, LINEAR // 64 + LAYERS * 7 * 16)


def test_an_ignored_layer_stays_at_bf16():
    q = {"quant_method": "compressed-tensors", "ignore": ["lm_head", "re:model\\.layers\\.0\\..*"],
         "config_groups": {"group_0": {"weights": {"num_bits": 8, "type": "float", "strategy": "channel"}}}}
    got = stored_bytes(_model("Llama-3.1-8B", q))
    per_layer = LINEAR // LAYERS
    rows = sum(o for o, _ in MATRICES)  # one fp32 scale per output row
    assert got.codes == per_layer * (LAYERS - 1)
    assert got.scales == 4 * rows * (LAYERS - 1)
    assert got.kept == KEPT_BYTES + 2 * per_layer


def test_a_glob_in_modules_to_not_convert_names_parents():
    q = {"quant_method": "fp8", "weight_block_size": [128, 128], "modules_to_not_convert": ["model.layers.*.mlp"]}
    got = stored_bytes(_model("Llama-3.1-8B", q))
    attention = LAYERS * sum(o * i for o, i in MATRICES[:4])
    assert got.codes == attention


@pytest.mark.parametrize(("q", "key"), [
    ({"quant_method": "fp8", "weight_block_size": [128]}, "quantization_config.weight_block_size"),
    ({"quant_method": "awq", "bits": 4, "group_size": 0}, "quantization_config.group_size"),
    ({"quant_method": "compressed-tensors", "config_groups": {"g": {"weights": {
        "num_bits": 4, "type": "int", "strategy": "row"}}}}, "quantization_config.config_groups.g.weights.strategy"),
    ({"quant_method": "compressed-tensors", "config_groups": {"g": {"weights": {
        "num_bits": 8, "type": "float", "strategy": "block", "block_structure": "128x128"}}}},
     "quantization_config.config_groups.g.weights.block_structure"),
])
def test_a_malformed_layout_is_one_line(q, key):
    with pytest.raises(SpecError) as info:
        _model("Llama-3.1-8B", q)
    assert f"cfg.json: {key}:" in str(info.value) and "\n" not in str(info.value)
