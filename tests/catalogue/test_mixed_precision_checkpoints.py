"""Mixed-precision compressed-tensors checkpoints: each matrix stored in the config_group whose targets claim it.

Sources of the quantization_config (llm-compressor writes a recipe's config_groups, ignore list and targets into
config.json unchanged):
- vllm-project/llm-compressor @ 6af07785e15c597f3c1f2330ee41a2b6f5ea2ac2
  examples/quantization_non_uniform/quantization_nvfp4_fp8.py: Meta-Llama-3-8B-Instruct, down_proj fp8 per channel
  (group_0), q/k/v/o/gate/up NVFP4 (group_1), ignore lm_head.
- vllm-project/llm-compressor @ 80f11695a8040891fba39d2175072d1b8db6ed40
  examples/quantization_non_uniform/quantization_int4_int8.py: down_proj int8 group 128 symmetric (group_0), the
  rest int4 group 128 asymmetric (group_1), ignore lm_head.
- unsloth's NVFP4 releases (Qwen3.6 / Qwen3.8): attention and the LM head fp8 per channel, the experts NVFP4, the
  last layers' experts fp8, as two public third-party fixtures describe them (reconstructed, not a byte copy);
  applied here to Qwen3-30B-A3B's verbatim config (tests/data/hf/Qwen3-30B-A3B/SOURCE.md).

Meta-Llama-3-8B has Llama-3.1-8B's shapes (tests/data/hf/Llama-3.1-8B): d 4096, 32 layers, q and o 4096 x 4096, k and
v 1024 x 4096, gate and up 14336 x 4096, down 4096 x 14336, vocabulary 128,256 untied. Bytes per matrix from vLLM
v0.24.0's create_weights (compressed_tensors/schemes): W8A8Fp8 channel: 1 B a weight + one fp32 scale per output row;
W4A4Fp4: 1/2 B a weight + one fp8 scale per 16 + fp32 weight_global_scale and input_global_scale; WNA16: bits/8 a
weight + one bf16 scale per 128 (+ a 4-bit zero point when asymmetric) + an int64 weight_shape [2].
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from cli_run import run

from roofline.catalogue.hf import model_from_hf_config
from roofline.errors import SpecError
from roofline.stored_bytes import dominant_dtypes, stored_bytes

DATA = Path(__file__).parents[1] / "data" / "hf"
LLAMA_KEPT = 2 * (2 * 128256 * 4096 + 32 * 2 * 4096 + 4096)  # embed_tokens, lm_head and the 65 norms in bf16

NVFP4 = {"num_bits": 4, "type": "float", "strategy": "tensor_group", "dynamic": False, "symmetric": True,
         "group_size": 16}
NVFP4_FP8 = {"quant_method": "compressed-tensors", "format": "mixed-precision", "ignore": ["lm_head"],
             "config_groups": {
                 "group_0": {"weights": {"num_bits": 8, "type": "float", "strategy": "channel", "dynamic": False,
                                         "symmetric": True},
                             "input_activations": {"num_bits": 8, "type": "float", "strategy": "token",
                                                   "dynamic": True, "symmetric": True},
                             "targets": ["re:.*down_proj.*"]},
                 "group_1": {"weights": NVFP4, "input_activations": NVFP4 | {"dynamic": "local"},
                             "targets": ["re:.*self_attn.k_proj.*", "re:.*self_attn.o_proj.*",
                                         "re:.*self_attn.q_proj.*", "re:.*self_attn.v_proj.*",
                                         "re:.*gate_proj.*", "re:.*up_proj.*"]}}}
INT4_INT8 = {"quant_method": "compressed-tensors", "format": "pack-quantized", "ignore": ["lm_head"],
             "config_groups": {
                 "group_0": {"weights": {"num_bits": 8, "type": "int", "strategy": "group", "dynamic": False,
                                         "symmetric": True, "group_size": 128},
                             "targets": ["re:.*down_proj.*"]},
                 "group_1": {"weights": {"num_bits": 4, "type": "int", "strategy": "group", "dynamic": False,
                                         "symmetric": False, "group_size": 128},
                             "targets": NVFP4_FP8["config_groups"]["group_1"]["targets"]}}}
FP8_CHANNEL = {"num_bits": 8, "type": "float", "strategy": "channel", "symmetric": True}
UNSLOTH_STYLE = {"quant_method": "compressed-tensors", "format": "mixed-precision", "ignore": ["re:^mtp.*"],
                 "config_groups": {
                     "group_0": {"format": "float-quantized", "weights": FP8_CHANNEL,
                                 "targets": ["re:.*self_attn\\.(q|k|v|o)_proj$", "re:.*lm_head",
                                             "re:.*layers\\.(46|47)\\.mlp\\.experts\\.\\d+\\.(gate|up|down)_proj$"]},
                     "group_1": {"format": "nvfp4-pack-quantized", "weights": NVFP4,
                                 "targets": ["re:.*mlp\\.experts\\.\\d+\\.(gate|up|down)_proj$"]}}}


def _model(name: str, q: dict):
    data = json.loads((DATA / name / "config.json").read_text()) | {"quantization_config": q}
    return model_from_hf_config(data, where="cfg.json", name="m")


def test_nvfp4_with_fp8_down_proj_counts_each_group_on_its_matrices():
    # per layer: down fp8: 4096 x 14336 codes + 4096 fp32 row scales; q, k, v, o, gate, up NVFP4:
    # 159,383,552 weights at 1/2 B + one fp8 byte per 16 + 8 B per matrix (6 matrices)
    nvfp4 = 2 * 4096 * 4096 + 2 * 1024 * 4096 + 2 * 14336 * 4096
    assert nvfp4 == 159_383_552
    got = stored_bytes(_model("Llama-3.1-8B", NVFP4_FP8))
    assert got.codes == 32 * (4096 * 14336 + nvfp4 // 2) == 4_429_185_024
    assert got.scales == 32 * (4 * 4096 + nvfp4 // 16 + 6 * 8) == 319_292_928
    assert got.kept == LLAMA_KEPT == 2_101_878_784
    assert got.decoder == 6_850_356_736


def test_int4_with_int8_down_proj_stores_bf16_group_scales_and_int4_zeros_where_asymmetric():
    # down int8 g128 symmetric: 1 B a weight, 4096 x 112 bf16 scales, weight_shape 16 B;
    # the six int4 g128 asymmetric: 1/2 B a weight, per 128 weights a bf16 scale and a 4-bit zero, 16 B each
    int4 = 159_383_552
    got = stored_bytes(_model("Llama-3.1-8B", INT4_INT8))
    assert got.codes == 32 * (4096 * 14336 + int4 // 2) == 4_429_185_024
    per_layer = (2 * 4096 * 112 + 16) + (int4 // 128 * 2 + int4 // 128 // 2 + 6 * 16)
    assert per_layer == 4_030_576
    assert got.scales == 32 * per_layer and got.kept == LLAMA_KEPT
    assert got.decoder == 6_660_042_240


def test_moe_attention_and_head_fp8_experts_nvfp4_last_two_layers_fp8():
    # Qwen3-30B-A3B: d 2048, 48 layers, q 4096 x 2048, k and v 512 x 2048, o 2048 x 4096, 128 experts of
    # gate / up 768 x 2048 and down 2048 x 768, vocabulary 151,936 untied, router 128 x 2048 kept
    attention, attention_rows = 2 * 4096 * 2048 + 2 * 512 * 2048, 4096 + 512 + 512 + 2048
    experts = 128 * 3 * 768 * 2048
    head = 151936 * 2048
    got = stored_bytes(_model("Qwen3-30B-A3B", UNSLOTH_STYLE))
    assert got.codes == 48 * attention + 46 * experts // 2 + 2 * experts + head == 16_316_628_992
    assert got.scales == (48 * 4 * attention_rows + 46 * (experts // 16 + 128 * 3 * 8)
                          + 2 * 4 * 128 * (768 + 768 + 2048) + 4 * 151936) == 1_742_237_184
    # embed_tokens, routers, two norms a layer of 2048 and q / k norms of 128, the final norm
    assert got.kept == 2 * (151936 * 2048 + 48 * 128 * 2048 + 48 * (2 * 2048 + 2 * 128) + 2048)
    assert dominant_dtypes(_model("Qwen3-30B-A3B", UNSLOTH_STYLE)) == ("fp8", "nvfp4")


def test_plan_of_a_mixed_checkpoint_plans_its_stored_bytes(capsys, tmp_path):
    path = tmp_path / "Llama-nvfp4-fp8" / "config.json"
    path.parent.mkdir()
    path.write_text(json.dumps(json.loads((DATA / "Llama-3.1-8B" / "config.json").read_text())
                               | {"quantization_config": NVFP4_FP8}))
    rc, out, err = run(capsys, "plan", "--json", "--method", "bf16", "--model", str(path))
    assert rc == 0, err
    plan = json.loads(out)
    assert plan["workload"]["weight_dtype"] == "nvfp4"  # the group holding most weights
    assert plan["results"][0]["memory"]["weights_bytes"] == 6_850_356_736
    assert plan["quantization"]["groups"][0].startswith("group_0: fp8 <- re:.*down_proj")
    # read at nvfp4 in the decode step: down_proj (32 x 4096 x 14336, fp8) and the bf16 lm_head (128,256 x 4096) of
    # 32 x 218,103,808 + 525,336,576 = 7,504,658,432 linear weights: 25.0 % and 7.0 %
    assert "32% of the linear weights are read at another width than stored (fp8 25%, bf16 7%)" in \
        plan["quantization"]["decode_reads"]


def test_experts_split_over_two_groups_are_refused_as_vllm_refuses_them(capsys, tmp_path):
    q = json.loads(json.dumps(UNSLOTH_STYLE))
    q["config_groups"]["group_1"]["targets"] = ["re:.*mlp\\.experts\\.\\d+\\.(gate|up)_proj$"]
    with pytest.raises(SpecError) as info:
        _model("Qwen3-30B-A3B", q)
    assert "model.layers.0.mlp.experts match different groups (gate_proj: group_1, up_proj: group_1, " \
           "down_proj: none)" in str(info.value) and "\n" not in str(info.value)
    path = tmp_path / "split" / "config.json"
    path.parent.mkdir()
    path.write_text(json.dumps(json.loads((DATA / "Qwen3-30B-A3B" / "config.json").read_text())
                               | {"quantization_config": q}))
    rc, out, err = run(capsys, "plan", "--model", str(path))
    assert (rc, out) == (2, "") and err.count("\n") == 1 and "config_groups" in err


@pytest.mark.parametrize("targets", [[], "Linear", [""], [3]])
def test_malformed_targets_are_one_line(targets):
    q = json.loads(json.dumps(NVFP4_FP8))
    q["config_groups"]["group_1"]["targets"] = targets
    with pytest.raises(SpecError) as info:
        _model("Llama-3.1-8B", q)
    assert "cfg.json: quantization_config.config_groups.group_1.targets:" in str(info.value)


@pytest.mark.parametrize(("where", "pattern", "key"), [
    ("target", "re:(down", "quantization_config.config_groups.group_0.targets"),
    ("ignore", "re:[lm_head", "quantization_config.ignore"),
])
def test_a_pattern_that_is_no_regular_expression_is_one_line(where, pattern, key):
    q = json.loads(json.dumps(NVFP4_FP8))
    if where == "target":
        q["config_groups"]["group_0"]["targets"] = [pattern]
    else:
        q["ignore"] = [pattern]
    with pytest.raises(SpecError) as info:
        _model("Llama-3.1-8B", q)
    assert f"cfg.json: {key}: {pattern!r} is not a regular expression" in str(info.value)
    assert "\n" not in str(info.value)


QWEN35_UNSLOTH_STYLE = {
    "quant_method": "compressed-tensors", "format": "mixed-precision", "ignore": ["re:^mtp.*"],
    "config_groups": {
        "group_0": {"format": "float-quantized", "weights": FP8_CHANNEL,
                    "targets": ["re:.*self_attn\\.(q|k|v|o)_proj$",
                                "re:.*linear_attn\\.(in_proj_qkv|in_proj_z|out_proj)$", "re:.*lm_head"]},
        "group_1": {"format": "nvfp4-pack-quantized", "weights": NVFP4,
                    "targets": ["re:.*mlp\\.experts\\.\\d+\\.(gate|up|down)_proj$",
                                "re:.*shared_expert\\.(gate|up|down)_proj$"]}}}


def test_qwen3_5_gated_deltanet_projections_are_stored_in_their_group():
    """Qwen3.5-35B-A3B (verbatim, tests/data/hf): d 2,048, 30 Gated DeltaNet layers (16 key heads, 32 value heads of
    128: conv channels 8,192, inner 4,096) and 10 gated full-attention layers (16 heads of 256, q doubled for the
    gate; 2 KV heads), 256 experts of 512 and a shared expert of 512, vocabulary 248,320 untied. vLLM fuses
    in_proj_qkv + in_proj_z and in_proj_b + in_proj_a (qwen3_5.py packed_modules_mapping): both shards of the first
    match group_0, none of the second any group (bf16)."""
    gdn, gdn_rows = 8192 * 2048 + 4096 * 2048 + 2048 * 4096, 8192 + 4096 + 2048
    full, full_rows = 8192 * 2048 + 2 * 512 * 2048 + 2048 * 4096, 8192 + 512 + 512 + 2048
    experts, shared, head = 256 * 3 * 512 * 2048, 3 * 512 * 2048, 248320 * 2048
    got = stored_bytes(_model("Qwen3.5-35B-A3B", QWEN35_UNSLOTH_STYLE))
    assert got.codes == 30 * gdn + 10 * full + 40 * (experts + shared) // 2 + head == 17_956_864_000
    assert got.scales == (4 * (30 * gdn_rows + 10 * full_rows + 248320)
                          + 40 * ((experts + shared) // 16 + (256 + 1) * 3 * 8)) == 2_024_541_120
    assert dominant_dtypes(_model("Qwen3.5-35B-A3B", QWEN35_UNSLOTH_STYLE)) == ("fp8", "nvfp4")
