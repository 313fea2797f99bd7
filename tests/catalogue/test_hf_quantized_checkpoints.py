"""quantization_config: a quantized checkpoint is planned at the widths it stores, and the plan says what it read."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from cli_run import run

from roofline.catalogue.hf import model_from_hf_config
from roofline.errors import SpecError

DATA = Path(__file__).parents[1] / "data" / "hf"


def _config(name: str) -> dict:
    return json.loads((DATA / name / "config.json").read_text())


def _quant(name: str, q: dict | None = None):
    data = _config(name)
    if q is not None:
        data["quantization_config"] = q
    return model_from_hf_config(data, where="cfg.json", name="m").quantization


def test_deepseek_v3_fp8_blocks_read_with_one_fp32_scale_per_128x128():
    q = _quant("DeepSeek-V3")
    assert (q.method, q.weight_dtype, q.experts_only) == ("fp8", "fp8", False)
    assert q.scale_bytes_per_weight == "1/4096"  # 4 bytes / (128 x 128) weights


def test_gpt_oss_mxfp4_converts_only_the_experts():
    # its modules_to_not_convert keep self_attn, the router, embeddings and lm_head
    q = _quant("gpt-oss-20b")
    assert (q.method, q.weight_dtype, q.experts_only) == ("mxfp4", "mxfp4", True)
    assert "lm_head" in q.modules_not_converted


@pytest.mark.parametrize(("q", "dtype", "scale"), [
    ({"quant_method": "awq", "bits": 4, "group_size": 128, "modules_to_not_convert": ["lm_head"]}, "int4", "5/256"),
    ({"quant_method": "gptq", "bits": 8, "group_size": 64}, "int8", "3/64"),
    ({"quant_method": "bitsandbytes", "load_in_4bit": True}, "int4", "1/16"),
    ({"quant_method": "modelopt", "quant_algo": "NVFP4", "kv_cache_quant_algo": "FP8"}, "nvfp4", "0/1"),  # in dtype
    ({"quant_method": "compressed-tensors", "ignore": ["lm_head"],
      "kv_cache_scheme": {"num_bits": 8, "type": "float"},
      "config_groups": {"group_0": {"weights": {"num_bits": 8, "type": "float", "strategy": "channel"}}}},
     "fp8", "0/1"),
])
def test_each_quantizer_gives_its_stored_width(q, dtype, scale):
    # AWQ int4 g128: fp16 scale (2 B) + 4-bit zero (0.5 B) per 128 = 5/256; GPTQ int8 g64: (2 + 1) / 64;
    # bitsandbytes 4-bit: fp32 absmax per 64 weights = 4/64
    got = _quant("Llama-3.1-8B", q)
    assert (got.weight_dtype, got.scale_bytes_per_weight) == (dtype, scale)


def test_kv_cache_dtype_is_read_where_declared():
    q = _quant("Llama-3.1-8B", {"quant_method": "modelopt", "quant_algo": "FP8", "kv_cache_quant_algo": "FP8"})
    assert q.kv_cache_dtype == "fp8"


@pytest.mark.parametrize("q, key", [
    ({"quant_method": "hqq"}, "quantization_config.quant_method"),
    ({"quant_method": "awq", "bits": 3}, "quantization_config.bits"),
    ("fp8", "quantization_config"),
])
def test_unsupported_quantization_is_one_line(q, key):
    with pytest.raises(SpecError) as info:
        _quant("Llama-3.1-8B", q)
    assert f"cfg.json: {key}:" in str(info.value) and "\n" not in str(info.value)


def _plan(capsys, *argv):
    rc, out, err = run(capsys, "plan", "--json", "--method", "bf16", *argv)
    assert rc == 0, err
    return json.loads(out)


def test_plan_of_an_fp8_config_adds_its_scales_and_bf16_modules_to_the_fp8_plan(capsys, tmp_path):
    data = _config("Llama-3.1-8B") | {"quantization_config": {"quant_method": "fp8", "weight_block_size": [128, 128]}}
    path = tmp_path / "Llama-fp8" / "config.json"
    path.parent.mkdir()
    path.write_text(json.dumps(data))
    read = _plan(capsys, "--model", str(path))
    named = _plan(capsys, "--model", "Llama-3.1-8B", "--weight-dtype", "fp8")
    assert read["quantization"]["weight_dtype"] == "fp8"
    assert read["workload"] == named["workload"]
    # fp8 stores 1 byte a parameter; the checkpoint keeps embed_tokens, lm_head (2 x 128,256 x 4096) and the 65
    # norms of 4096 at 2 bytes, and adds 13,312 fp32 block scales per layer over 32 layers
    extra = 2 * 128256 * 4096 + 65 * 4096 + 32 * 13312 * 4
    assert read["quantization"]["stored_bytes"]["added_to_the_dtype_estimate"] == extra == 1_052_643_328
    # the what-if --weight-dtype fp8 keeps the same modules at bf16 (vLLM online fp8) with one fp32 scale per
    # matrix (7 a layer) in place of the blocks' 13,312
    weights = [r["memory"]["weights_bytes"] for r in (read["results"][0], named["results"][0])]
    assert weights[0] - weights[1] == 32 * (13312 - 7) * 4 == 1_703_040


def test_plan_of_gpt_oss_config_stores_experts_in_mxfp4(capsys):
    read = _plan(capsys, "--model", str(DATA / "gpt-oss-20b" / "config.json"))
    named = _plan(capsys, "--model", "gpt-oss-20b", "--expert-weight-dtype", "mxfp4")
    assert read["quantization"]["expert_weight_dtype"] == "mxfp4"
    assert (read["workload"], read["results"]) == (named["workload"], named["results"])
    published = json.loads((DATA / "gpt-oss-20b" / "index-metadata.json").read_text())["metadata"]["total_size"]
    assert read["results"][0]["memory"]["weights_bytes"] == published


def test_the_checkpoints_kv_dtype_is_stated_and_vllm_capacity_applies_it(capsys, tmp_path):
    data = _config("Llama-3.1-8B") | {"quantization_config": {
        "quant_method": "compressed-tensors", "kv_cache_scheme": {"num_bits": 8, "type": "float"},
        "config_groups": {"g": {"weights": {"num_bits": 8, "type": "float", "strategy": "channel"}}}}}
    path = tmp_path / "Llama-fp8-kv" / "config.json"
    path.parent.mkdir()
    path.write_text(json.dumps(data))
    plan = _plan(capsys, "--model", str(path))
    assert plan["quantization"]["kv_cache_dtype"] == "fp8" and "kv_cache_scheme" in plan["quantization"]["kv_cache"]
    rc, out, err = run(capsys, "capacity", "--json", "--engine", "vllm", "--model", str(path))
    assert rc == 0, err
    auto = json.loads(out)
    rc, out, err = run(capsys, "capacity", "--json", "--engine", "vllm", "--model", str(path),
                       "--kv-cache-dtype", "bfloat16")
    named = json.loads(out)
    # 2 x 8 KV heads x 128 x 1 B (fp8) against 2 B per element when overridden
    assert (auto["bytes_per_token"], named["bytes_per_token"]) == (2 * 8 * 128 * 1 * 32, 2 * 8 * 128 * 2 * 32)
    assert auto["checkpoint_read"]["kv_cache_dtype"] == "fp8" and "kv_cache_dtype" not in named["checkpoint_read"]


def test_a_dtype_given_on_the_command_line_is_planned_as_given_and_the_checkpoint_still_stated(capsys, tmp_path):
    data = _config("Llama-3.1-8B") | {"quantization_config": {"quant_method": "fp8", "weight_block_size": [128, 128]}}
    path = tmp_path / "Llama-fp8" / "config.json"
    path.parent.mkdir()
    path.write_text(json.dumps(data))
    read = _plan(capsys, "--model", str(path), "--weight-dtype", "int4")
    # every one of Llama-3.1-8B's 8,030,261,248 parameters at half a byte (the unquantized model's what-if int4
    # would keep the embedding and the head at bf16: roofline.planned_weights)
    assert read["results"][0]["memory"]["weights_bytes"] == 8_030_261_248 // 2
    assert read["quantization"]["planned_at"] == "the dtypes given on the command line"
    assert read["quantization"]["stored_bytes"]["added_to_the_dtype_estimate"] == 0


def test_kv_warns_when_the_method_differs_from_the_checkpoints_kv_dtype(capsys, tmp_path):
    data = _config("Llama-3.1-8B") | {"quantization_config": {
        "quant_method": "modelopt", "quant_algo": "FP8", "kv_cache_quant_algo": "FP8"}}
    path = tmp_path / "Llama-fp8-kv" / "config.json"
    path.parent.mkdir()
    path.write_text(json.dumps(data))
    for method, warned in (("bf16", True), ("fp8", False)):
        rc, out, err = run(capsys, "kv", "--json", "--model", str(path), "--context", "4096", "--method", method)
        assert rc == 0, err
        warnings = json.loads(out).get("warnings", [])
        assert any("declares an fp8 KV cache" in w for w in warnings) == warned
