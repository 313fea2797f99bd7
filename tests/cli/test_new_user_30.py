"""Trying the tool as a new user (session 30, validate/notes/2026-11-30-new-user-30.md): real 2025-2026 configs not
tried before (tests/data/hf/<name>/SOURCE.md), counted by hand here.

HuggingFaceTB/SmolLM3-3B (smollm3, verbatim, no tie_word_embeddings key; SmolLM3Config ties by default): d 2,048,
36 layers, 16 query / 4 KV heads of 128, gated MLP of 11,008, vocabulary 128,256.
  layer: q 2,048^2 + k, v 2 x 2,048 x 512 + o 2,048^2 + MLP 3 x 2,048 x 11,008 + 2 norms of 2,048 = 78,123,008
  total: 36 layers + one embedding of 128,256 x 2,048 (the head tied to it) + final norm 2,048 = 3,075,098,624
  (the model card's 3.08 B). KV: 36 x 2 x 4 x 128 x 2 B = 73,728 B a token.
EXAONE-4.0-1.2B W4A16 (exaone4, verbatim): d 2,048, 30 layers, 32 query / 8 KV heads of 64 with QK norms of 64,
gated MLP of 4,096, two norms a layer, tied vocabulary 102,400.
  layer: q 2,048^2 + k, v 2 x 2,048 x 512 + o 2,048^2 + 128 + 3 x 2,048 x 4,096 + 4,096 = 35,655,808
  total: 30 layers + 102,400 x 2,048 + 2,048 = 1,279,391,488
  stored (compressed-tensors int4, group 128, bf16 scales, a 16-byte weight_shape per packed matrix; actorder
  static keeps no g_idx): linear weights 30 x 35,651,584 = 1,069,547,520 at half a byte = 534,773,760, scales
  1,069,547,520 / 128 x 2 = 16,711,680 + 210 x 16 = 16,715,040, the embedding and norms at bf16 419,687,936.
poolside/Laguna-S-2.1-FP8 (laguna, verbatim): d 3,072, 48 layers in fours of one full (48 query heads) and three
sliding (72), 8 KV heads of 128, q / k norms of 128, `gating` "per-head" (g_proj d x heads); layer 0 dense 12,288;
layers 1-47 256 experts of 1,024, a shared expert of 1,024, a router 256 x d and its bias of 256; vocab 100,352 untied.
  full: 2 x 3,072 x 6,144 + 2 x 3,072 x 1,024 + 3,072 x 48 + 256 = 44,187,904
  sliding: 2 x 3,072 x 9,216 + 2 x 3,072 x 1,024 + 3,072 x 72 + 256 = 63,136,000
  MoE layer: 257 x 3 x 3,072 x 1,024 + 256 x 3,072 + 256 = 2,426,142,976
  total: 12 full + 36 sliding + 3 x 3,072 x 12,288 + 47 MoE + 48 x 2 x 3,072 + 2 x 100,352 x 3,072 + 3,072
  = 117,561,977,600.
Qwen/Qwen3.5-397B-A17B (qwen3_5_moe, verbatim): d 4,096, 60 layers: 15 gated full attention (32 query heads x 2 for
the gate, 2 KV heads of 256, QK norms of 256), 45 Gated DeltaNet (16 key / 64 value heads of 128: qkvz 4,096 x
20,480, ba 4,096 x 128, conv 12,288 x 4, A_log and dt_bias 64 each, norm 128, out 8,192 x 4,096); on every layer 512
experts of 1,024, a shared expert of 1,024 with its gate (d), a router 512 x d; vocabulary 248,320 untied.
  full: 4,096 x 16,384 + 2 x 4,096 x 512 + 8,192 x 4,096 + 512 = 104,858,112
  GDN: 83,886,080 + 524,288 + 49,152 + 128 + 128 + 33,554,432 = 118,014,208
  MoE: 513 x 3 x 4,096 x 1,024 + 4,096 + 4,096 x 512 = 6,457,135,104
  total (MTP layer and vision tower apart): 15 full + 45 GDN + 60 MoE + 60 x 2 x 4,096 + 2 x 248,320 x 4,096 + 4,096
  = 396,346,350,336; full-attention KV 15 x 2 x 2 x 256 x 2 B = 30,720 B a token.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from cli_run import run

from roofline.accounting import kv_bytes_per_token, parameter_count
from roofline.catalogue import load_model
from roofline.errors import SpecError
from roofline.stored_bytes import stored_bytes

DATA = Path(__file__).resolve().parents[1] / "data" / "hf"
SMOL, EXAONE = DATA / "SmolLM3-3B" / "config.json", DATA / "EXAONE-4.0-1.2B-W4A16" / "config.json"
LAGUNA_S, QWEN35 = DATA / "Laguna-S-2.1-FP8" / "config.json", DATA / "Qwen3.5-397B-A17B" / "config.json"


def _json(capsys, *argv) -> dict:
    rc, out, err = run(capsys, *argv, "--json")
    assert rc == 0, err
    return json.loads(out)


def _write(tmp_path: Path, data: dict) -> str:
    path = tmp_path / "m" / "config.json"
    path.parent.mkdir(exist_ok=True)
    path.write_text(json.dumps(data))
    return str(path)


def test_smollm3_without_a_tie_key_ties_its_head_as_its_config_class_does():
    layer = 2048 * 2048 + 2 * 2048 * 512 + 2048 * 2048 + 3 * 2048 * 11008 + 2 * 2048
    assert layer == 78_123_008
    model = load_model(str(SMOL))
    assert model.tie_word_embeddings
    assert parameter_count(model).total == 36 * layer + 128256 * 2048 + 2048 == 3_075_098_624
    assert kv_bytes_per_token(model, "bf16") == 36 * 2 * 4 * 128 * 2 == 73_728


def test_gemma_config_json_without_a_tie_key_ties_its_head(tmp_path):
    """google/gemma-7b's config.json has no tie_word_embeddings key (GemmaConfig defaults it to True): d 3,072, 28
    layers, 16 heads of 256 (MHA), gated MLP of 24,576, vocabulary 256,000 -> 8,537,680,896 (the card's 8.54 B)."""
    data = {"architectures": ["GemmaForCausalLM"], "model_type": "gemma", "hidden_size": 3072, "head_dim": 256,
            "intermediate_size": 24576, "num_attention_heads": 16, "num_key_value_heads": 16,
            "num_hidden_layers": 28, "vocab_size": 256000, "max_position_embeddings": 8192, "hidden_act": "gelu"}
    layer = 4 * 3072 * 4096 + 3 * 3072 * 24576 + 2 * 3072
    total = parameter_count(load_model(_write(tmp_path, data))).total
    assert total == 28 * layer + 256000 * 3072 + 3072 == 8_537_680_896
    data["tie_word_embeddings"] = False  # the key, when written, still wins
    assert parameter_count(load_model(_write(tmp_path, data))).total == total + 256000 * 3072


def test_exaone4_w4a16_counts_and_stored_bytes_by_hand():
    layer = 2048 * 2048 + 2 * 2048 * 512 + 2048 * 2048 + 128 + 3 * 2048 * 4096 + 2 * 2048
    assert layer == 35_655_808
    model = load_model(str(EXAONE))
    assert parameter_count(model).total == 30 * layer + 102400 * 2048 + 2048 == 1_279_391_488
    linear = 30 * (2 * 2048 * 2048 + 2 * 2048 * 512 + 3 * 2048 * 4096)
    got = stored_bytes(model)
    assert (got.codes, got.scales) == (linear // 2, linear // 128 * 2 + 30 * 7 * 16) == (534_773_760, 16_715_040)
    assert got.kept == 2 * (102400 * 2048 + 30 * (128 + 2 * 2048) + 2048) == 419_687_936


@pytest.mark.parametrize("engine", ["ideal", "vllm"])
def test_simulate_sizes_its_pool_at_the_checkpoint_stored_widths(capsys, tmp_path, engine):
    """simulate used to plan every checkpoint at bf16 (its Workload never read the quantization_config), so the
    FP8 Laguna-S (117.6 B parameters) was refused on one H200 that plan and capacity fill, and a checkpoint that fit
    got a pool smaller by its bf16 excess. The same config with and without its W4A16 quantization_config must now
    differ by the bytes the quantization saves: 2 x 1,279,391,488 - (534,773,760 + 16,715,040 + 419,687,936)."""
    plain = json.loads(EXAONE.read_text())
    del plain["quantization_config"]
    argv = ("simulate", "--hardware", "H200", "--engine", engine, "--method", "bf16", "--rate", "2",
            "--prompt-tokens", "512", "--output-tokens", "16", "--requests", "4", "--no-search")
    quantized = _json(capsys, *argv, "--model", str(EXAONE))["kv_pool"]["capacity_bytes"]
    bf16 = _json(capsys, *argv, "--model", _write(tmp_path, plain))["kv_pool"]["capacity_bytes"]
    assert quantized - bf16 == 2 * 1_279_391_488 - 971_176_736 == 1_587_606_240


def test_simulate_pool_equals_capacity_pool_for_an_fp8_checkpoint(capsys):
    cap = _json(capsys, "capacity", "--model", str(LAGUNA_S), "--hardware", "H200", "--engine", "vllm")
    sim = _json(capsys, "simulate", "--model", str(LAGUNA_S), "--hardware", "H200", "--engine", "vllm",
                "--method", "fp8", "--rate", "1", "--prompt-tokens", "1024", "--output-tokens", "8",
                "--requests", "3", "--no-search")
    assert sim["kv_pool"]["capacity_bytes"] == pytest.approx(cap["kv_pool_bytes"], rel=1e-12)


def test_laguna_s_per_head_gating_string_is_counted():
    full = 2 * 3072 * 6144 + 2 * 3072 * 1024 + 3072 * 48 + 256
    sliding = 2 * 3072 * 9216 + 2 * 3072 * 1024 + 3072 * 72 + 256
    moe = 257 * 3 * 3072 * 1024 + 256 * 3072 + 256
    assert (full, sliding, moe) == (44_187_904, 63_136_000, 2_426_142_976)
    total = 12 * full + 36 * sliding + 3 * 3072 * 12288 + 47 * moe + 48 * 2 * 3072 + 2 * 100352 * 3072 + 3072
    model = load_model(str(LAGUNA_S))
    assert parameter_count(model).total == total == 117_561_977_600
    got = stored_bytes(model)  # fp8 blocks on the routed experts only (the rest is ignored): fp32 scale a block
    assert got.codes == 47 * 256 * 3 * 3072 * 1024 == 113_548_197_888
    assert got.scales == 47 * 256 * 3 * (3072 // 128) * (1024 // 128) * 4 == 27_721_728
    # past the 512-token window only the 12 full layers keep every token
    assert kv_bytes_per_token(model, "bf16") == 12 * 2 * 8 * 128 * 2 == 49_152


def test_laguna_per_element_gating_counts_a_gate_per_channel(tmp_path):
    """gating "per-element": g_proj is d x (heads x head_dim) (vllm/model_executor/models/laguna.py)."""
    data = json.loads(LAGUNA_S.read_text()) | {"gating": "per-element"}
    extra = 3072 * 127 * (12 * 48 + 36 * 72)
    assert parameter_count(load_model(_write(tmp_path, data))).total == 117_561_977_600 + extra == 118_797_953_792


@pytest.mark.parametrize("value", ["per-token", 1, ["per_head"]])
def test_laguna_unknown_gating_is_refused_naming_the_field(tmp_path, value):
    data = json.loads(LAGUNA_S.read_text()) | {"gating": value}
    with pytest.raises(SpecError, match="gating: expected true, false, 'per-head' or 'per-element'") as err:
        load_model(_write(tmp_path, data))
    assert "\n" not in str(err.value)


def test_qwen3_5_397b_counts_by_hand():
    full = 4096 * 16384 + 2 * 4096 * 512 + 8192 * 4096 + 512
    gdn = 4096 * 20480 + 4096 * 128 + 12288 * 4 + 64 + 64 + 128 + 8192 * 4096
    moe = 513 * 3 * 4096 * 1024 + 4096 + 4096 * 512
    assert (full, gdn, moe) == (104_858_112, 118_014_208, 6_457_135_104)
    model = load_model(str(QWEN35))
    total = 15 * full + 45 * gdn + 60 * moe + 60 * 2 * 4096 + 2 * 248320 * 4096 + 4096
    assert parameter_count(model).total == total == 396_346_350_336
    assert kv_bytes_per_token(model, "bf16") == 15 * 2 * 2 * 256 * 2 == 30_720


@pytest.mark.parametrize("rate", ["1e400", "abc"])
def test_a_rate_past_the_float_range_is_not_read_as_all_at_once(capsys, rate):
    """`--rate 1e400` overflowed to inf and ran every request at time 0 (offered inf req/s); inf is asked for by
    name only."""
    rc, out, err = run(capsys, "simulate", "--model", "Llama-3.2-1B", "--hardware", "H100-SXM", "--method", "bf16",
                       "--rate", rate, "--requests", "3", "--no-search")
    assert (rc, out) == (2, "") and err.count("\n") == 1 and "argument --rate:" in err and rate in err


def test_rate_inf_by_name_still_sends_everything_at_once(capsys):
    got = _json(capsys, "simulate", "--model", "Llama-3.2-1B", "--hardware", "H100-SXM", "--method", "bf16",
                "--rate", "inf", "--requests", "3", "--prompt-tokens", "64", "--output-tokens", "4", "--no-search")
    assert got["offered_rate_per_s"] is None  # inf, which strict JSON writes as null


def test_seed_oss_without_attention_bias_keeps_the_qkv_biases(tmp_path):
    """ByteDance-Seed/Seed-OSS-36B's widths as an mlx Swift port's test writes its config.json (index id
    55089675296: no attention_bias key; SeedOssConfig defaults attention_bias true, attention_out_bias false): d 5,120,
    64 layers, 80 query / 8 KV heads of 128, MLP 27,648, vocabulary 155,136 untied.
      layer: q 5,120 x 10,240 + k, v 2 x 5,120 x 1,024 + o 10,240 x 5,120 + q/k/v biases 12,288 + MLP 3 x 5,120 x
      27,648 + 2 norms of 5,120 = 540,039,168
      total: 64 layers + 2 x 155,136 x 5,120 + 5,120 = 36,151,104,512 (the card's 36.15 B); the biases were lost."""
    data = {"architectures": ["SeedOssForCausalLM"], "model_type": "seed_oss", "hidden_size": 5120,
            "num_hidden_layers": 64, "intermediate_size": 27648, "num_attention_heads": 80, "num_key_value_heads": 8,
            "head_dim": 128, "rms_norm_eps": 1e-6, "vocab_size": 155136, "rope_theta": 10000000.0,
            "rope_scaling": {"rope_type": "default"}, "max_position_embeddings": 524288, "tie_word_embeddings": False}
    layer = 5120 * 10240 + 2 * 5120 * 1024 + 10240 * 5120 + 12288 + 3 * 5120 * 27648 + 2 * 5120
    assert layer == 540_039_168
    total = parameter_count(load_model(_write(tmp_path, data))).total
    assert total == 64 * layer + 2 * 155136 * 5120 + 5120 == 36_151_104_512


def test_simulate_says_the_stored_widths_it_planned(capsys):
    rc, out, err = run(capsys, "simulate", "--model", str(LAGUNA_S), "--hardware", "H200", "--engine", "vllm",
                       "--method", "fp8", "--rate", "1", "--prompt-tokens", "1024", "--output-tokens", "8",
                       "--requests", "3", "--no-search")
    assert rc == 0, err
    assert out.startswith("Laguna-S-2.1-FP8 on H200 (tp 1, pp 1; weights fp8): 3 requests")
    got = _json(capsys, "simulate", "--model", str(LAGUNA_S), "--hardware", "H200", "--engine", "vllm",
                "--method", "fp8", "--rate", "1", "--prompt-tokens", "1024", "--output-tokens", "8",
                "--requests", "3", "--no-search")
    assert (got["weight_dtype"], got["expert_weight_dtype"]) == ("fp8", None)


def test_weights_past_one_gpu_say_how_to_find_enough(capsys):
    """`best` / `plan` on a model whose weights alone exceed the GPU: one line that also names the way out."""
    rc, out, err = run(capsys, "best", "--model", str(LAGUNA_S), "--hardware", "H100-SXM")
    assert (rc, out) == (2, "") and err.count("\n") == 1
    assert "not even context 1" in err and "--fewest-gpus" in err


@pytest.mark.parametrize("argv", [["plan", "--model", "", "--method", "bf16"],
                                  ["plan", "--hardware", " ", "--method", "bf16"],
                                  ["show", "model", ""]])
def test_an_empty_name_is_refused_not_read_as_the_default(capsys, argv):
    """`plan --model ''` planned the default Llama-3.1-8B (`args.model or DEFAULT`)."""
    rc, out, err = run(capsys, *argv)
    assert (rc, out) == (2, "") and err.count("\n") == 1 and "is empty; give a catalogue name" in err


def test_a_bare_name_on_disk_is_read_as_a_path(capsys, tmp_path, monkeypatch):
    """A folder without config.json, or a FIFO, named bare in the current folder said "unknown name"; its reading
    now says what it is."""
    import os

    monkeypatch.chdir(tmp_path)
    (tmp_path / "ckpt").mkdir()
    os.mkfifo(tmp_path / "pipe")
    rc, out, err = run(capsys, "show", "model", "ckpt")
    assert (rc, out) == (2, "") and "ckpt: (folder): holds no config.json" in err and err.count("\n") == 1
    rc, out, err = run(capsys, "show", "model", "pipe")
    assert (rc, out) == (2, "") and "pipe: (file): not a regular file" in err and err.count("\n") == 1
