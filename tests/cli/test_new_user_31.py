"""Trying the tool as a new user (session 31, validate/notes/2026-11-30-new-user-31.md).

RoPE-extended positions. Qwen3's model cards (https://huggingface.co/Qwen/Qwen3-8B, "Processing Long Texts") tell
users to add `"rope_scaling": {"rope_type": "yarn", "factor": 4.0, "original_max_position_embeddings": 32768}` to
config.json to serve 131,072 tokens; max_position_embeddings stays 40,960. vLLM derives the model's length as
original_max_position_embeddings x factor = 32,768 x 4 = 131,072 (vllm/config/model.py _get_and_verify_max_len:
YaRN's base is its original length; linear / dynamic scale max_position_embeddings by their factor; su, longrope
and llama3 are not scaled; Gemma 3 is left alone) and refuses a --max-model-len past it.

microsoft/Phi-4-mini-instruct (phi3, LongRoPE; tests/data/hf/Phi-4-mini-instruct/SOURCE.md): d 3,072, 32 layers, 24
query / 8 KV heads of 128, gated MLP of 8,192, tied vocabulary 200,064.
  layer: qkv 3,072 x (24 + 2 x 8) x 128 = 15,728,640, o 3,072^2 = 9,437,184, gate_up 3,072 x 16,384 = 50,331,648,
  down 8,192 x 3,072 = 25,165,824, 2 norms of 3,072: 100,669,440
  total: 32 layers + 200,064 x 3,072 (the head tied) + 3,072 = 3,836,021,760 (the checkpoint's safetensors count);
  KV: 32 x 2 x 8 x 128 x 2 B = 131,072 B a token.
vLLM serves a LongRoPE model at its original_max_position_embeddings (4,096) unless --max-model-len says otherwise
("For LongRoPE, default to original_max_position_embeddings to avoid performance degradation for shorter
sequences", _get_and_verify_max_len).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from cli_run import run

from roofline.accounting import parameter_count
from roofline.catalogue import load_model

DATA = Path(__file__).resolve().parents[1] / "data" / "hf"
YARN = {"rope_type": "yarn", "factor": 4.0, "original_max_position_embeddings": 32768}


def _config(tmp_path: Path, name: str, **changes) -> str:
    data = json.loads((DATA / name / "config.json").read_text()) | changes
    path = tmp_path / name / "config.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(data))
    return str(path)


@pytest.mark.parametrize("rope, positions", [
    (YARN, 32_768 * 4),                                           # Qwen3's card: 131,072
    ({"type": "yarn", "factor": 4.0, "original_max_position_embeddings": 32768}, 131_072),  # the older key name
    ({"rope_type": "yarn", "factor": 2.0}, 40_960 * 2),          # no original length: transformers uses max positions
    ({"rope_type": "linear", "factor": 2.0}, 40_960 * 2),
    ({"rope_type": "dynamic", "factor": 2.0}, 40_960 * 2),
    ({"rope_type": "llama3", "factor": 8.0, "original_max_position_embeddings": 8192}, 40_960),  # not scaled
    ({"rope_type": "longrope", "factor": 4.0}, 40_960),
    ({"rope_type": "default"}, 40_960),
])
def test_rope_scaling_extends_the_positions_as_vllm_derives_them(tmp_path, rope, positions):
    assert load_model(_config(tmp_path, "Qwen3-8B", rope_scaling=rope)).max_position_embeddings == positions


def test_transformers_v5_rope_parameters_per_layer_type_scale_too(tmp_path):
    rope = {"full_attention": {"rope_theta": 1e6, **YARN}, "sliding_attention": {"rope_theta": 1e4,
                                                                                 "rope_type": "default"}}
    assert load_model(_config(tmp_path, "Qwen3-8B", rope_parameters=rope)).max_position_embeddings == 131_072


def test_shipped_configs_keep_their_positions():
    # DeepSeek-V3: yarn 4,096 x 40 = its 163,840; Llama-3.1 (llama3) and Gemma 3 (linear 8, already scaled): unchanged
    assert load_model(str(DATA / "DeepSeek-V3" / "config.json")).max_position_embeddings == 163_840
    assert load_model(str(DATA / "Llama-3.1-8B" / "config.json")).max_position_embeddings == 131_072
    assert load_model(str(DATA / "Gemma-3-27B" / "config.json")).max_position_embeddings == 131_072
    # AFM-4.5B-Base: yarn factor 20 on 4,096 original positions = 81,920 (vLLM's default --max-model-len), past its
    # max_position_embeddings of 65,536
    assert load_model(str(DATA / "AFM-4.5B-Base" / "config.json")).max_position_embeddings == 81_920


def test_a_yarn_extended_qwen3_plans_and_sizes_at_its_extended_length(tmp_path, capsys):
    path = _config(tmp_path, "Qwen3-8B", rope_scaling=YARN)
    rc, out, err = run(capsys, "plan", "--model", path, "--hardware", "H200", "--method", "bf16",
                       "--context", "131072", "--batch", "1", "--json")
    assert rc == 0, err
    assert json.loads(out)["results"][0]["fits"] is True
    rc, out, err = run(capsys, "capacity", "--model", path, "--hardware", "H200", "--engine", "vllm", "--json")
    assert rc == 0, err
    got = json.loads(out)
    assert got["max_model_len"] == 131_072  # vLLM's default: the derived length, not 40,960
    assert got["max_concurrency"] == pytest.approx(got["num_blocks"] / (131_072 // 16), abs=1e-5)


@pytest.mark.parametrize("engine", ["vllm", "sglang"])
def test_a_max_model_len_past_the_positions_is_refused_as_the_engine_refuses_it(capsys, engine):
    # vLLM's _get_and_verify_max_len and SGLang's ModelConfig raise ValueError at start-up past the derived length
    # (Llama-3.1-8B: 131,072, llama3 scaling is not applied again); llama.cpp only warns, so it is not refused
    rc, out, err = run(capsys, "capacity", "--model", "Llama-3.1-8B", "--engine", engine, "--max-model-len", "200000")
    assert rc == 2 and out == ""
    assert err.count("\n") == 1 and "--max-model-len: 200,000 is past Llama-3.1-8B's 131,072 positions" in err
    rc, _, err = run(capsys, "capacity", "--model", "Llama-3.1-8B", "--engine", engine, "--max-model-len", "131072")
    assert rc == 0, err


def test_capacity_with_dp_labels_the_concurrency_as_the_sum_over_replicas(capsys):
    # vLLM --dp 2: two engine cores, each with its own pool, each logging its own 'Maximum concurrency'; the row
    # is their sum, and the per-replica figure is the one-replica run's (the same pool on every GPU)
    one = json.loads(run(capsys, "capacity", "--model", "Qwen3-30B-A3B", "--engine", "vllm", "--hardware", "H200",
                         "--json")[1])
    two = json.loads(run(capsys, "capacity", "--model", "Qwen3-30B-A3B", "--engine", "vllm", "--hardware", "H200",
                         "--dp", "2", "--json")[1])
    assert two["dp"] == 2 and two["num_blocks"] == one["num_blocks"]
    assert two["max_concurrency"] == pytest.approx(2 * one["max_concurrency"])
    rc, out, err = run(capsys, "capacity", "--model", "Qwen3-30B-A3B", "--engine", "vllm", "--hardware", "H200",
                       "--dp", "2")
    assert rc == 0, err
    each = f"{one['max_concurrency']:,.2f}x"
    assert f"max concurrency at 40,960 tokens, over 2 data-parallel replicas (each {each})" in out


PHI4_MINI = str(DATA / "Phi-4-mini-instruct" / "config.json")


def test_phi4_mini_counts_by_hand(capsys):
    model = load_model(PHI4_MINI)
    assert parameter_count(model).total == 32 * 100_669_440 + 200_064 * 3_072 + 3_072 == 3_836_021_760
    rc, out, err = run(capsys, "kv", "--model", PHI4_MINI, "--context", "100000", "--json")
    assert rc == 0, err
    assert json.loads(out)["bytes_per_token"] == 32 * 2 * 8 * 128 * 2  # its 262,144 window never closes here
    assert model.max_position_embeddings == 131_072 and model.longrope_original_positions == 4_096


def test_vllm_serves_a_longrope_model_at_its_original_length_by_default(capsys):
    got = json.loads(run(capsys, "capacity", "--model", PHI4_MINI, "--engine", "vllm", "--hardware", "H200",
                         "--json")[1])
    assert got["max_model_len"] == 4_096
    assert any("LongRoPE's original_max_position_embeddings 4,096" in rule for rule in got["rules"])
    given = json.loads(run(capsys, "capacity", "--model", PHI4_MINI, "--engine", "vllm", "--hardware", "H200",
                           "--max-model-len", "131072", "--json")[1])
    assert given["max_model_len"] == 131_072
    sglang = json.loads(run(capsys, "capacity", "--model", PHI4_MINI, "--engine", "sglang", "--hardware", "H200",
                            "--json")[1])
    assert sglang["max_model_len"] == 131_072  # SGLang's context length: max_position_embeddings (no factor key)


def test_nemotron_h_56b_reads_the_remote_code_attention_head_dim():
    """nvidia/Nemotron-H-56B-Base-8K writes attention_head_dim (the remote-code NemotronHConfig's name), no head_dim;
    it was refused ("head_dim: missing"). 118 blocks: 54 Mamba-2, 10 attention, 54 relu2 MLPs, d 8,192.
      Mamba-2: in_proj 8,192 x (2 x 16,384 + 2 x 8 x 256 + 256) = 304,087,040, conv (16,384 + 4,096) x 4 + bias
      20,480 = 102,400, dt_bias / A_log / D 3 x 256, gated norm 16,384, out_proj 16,384 x 8,192: 438,424,320
      attention: 2 x 8,192^2 + 2 x 8,192 x 1,024 = 150,994,944; MLP: 2 x 8,192 x 32,768 = 536,870,912
      total: + 118 block norms of 8,192 + 2 x 131,072 x 8,192 (untied) + 8,192 = 56,324,350,464
      KV: 10 x 2 x 8 x 128 x 2 B = 40,960 B a token."""
    model = load_model(str(DATA / "Nemotron-H-56B-Base-8K" / "config.json"))
    assert model.head_dim == 128
    total = 54 * 438_424_320 + 10 * 150_994_944 + 54 * 536_870_912 + 118 * 8_192 + 2 * 131_072 * 8_192 + 8_192
    assert parameter_count(model).total == total == 56_324_350_464
    attention = [i for i in range(model.num_layers) if model.layer_attention(i).kind == "full"]
    assert len(attention) == 10


def test_list_models_kv_per_token_of_a_hybrid_is_its_attention_layers_not_its_state(capsys):
    """`list models` printed a hybrid's fixed recurrent state as bytes a token adds (Qwen3-Next-80B-A3B 39,542,784,
    Falcon-H1-7B 70,197,248): kv_bytes at context 1 counts the state. A token adds K and V on the attending layers
    only: Qwen3-Next 12 full layers (every 4th of 48) x 2 x 2 KV heads x 256 x 2 B = 24,576; Falcon-H1-7B 44
    layers (attention beside the Mamba mixer on each) x 2 x 2 x 128 x 2 B = 45,056."""
    rc, out, err = run(capsys, "list", "models", "--json")
    assert rc == 0, err
    rows = {r["name"]: r for r in json.loads(out)}
    assert rows["Qwen3-Next-80B-A3B"]["bf16_kv_bytes_per_token"] == 12 * 2 * 2 * 256 * 2 == 24_576
    assert rows["Falcon-H1-7B"]["bf16_kv_bytes_per_token"] == 44 * 2 * 2 * 128 * 2 == 45_056
    assert rows["Llama-3.1-8B"]["bf16_kv_bytes_per_token"] == 32 * 2 * 8 * 128 * 2
    # the sequence at the model's positions still holds the state: 262,144 x 24,576 B plus it
    assert rows["Qwen3-Next-80B-A3B"]["bf16_kv_bytes_at_max_context"] > 262_144 * 24_576
