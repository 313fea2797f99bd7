"""Engine profiles against what the engines logged in public threads (tests/data/engine_logs.yaml cites each
thread: model, GPU, flags, the logged numbers and a hand check); engine options they would refuse exit 2."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from roofline.cli import main

DATA = Path(__file__).resolve().parents[1] / "data"
LOGS = yaml.safe_load((DATA / "engine_logs.yaml").read_text())
ENTRIES = {e["id"]: e for e in LOGS["entries"] + LOGS["supplementary"]}
FLAGS = {"kv_memory_gib": "--kv-memory-gib", "max_model_len": "--max-model-len", "kv_cache_dtype": "--kv-cache-dtype",
         "tp": "--tp", "dp": "--dp", "pp": "--pp", "block_size": "--block-size", "parallel": "--parallel",
         "max_num_batched_tokens": "--max-num-batched-tokens"}


def _model_ref(name: str) -> str:
    return str(DATA / name) if name.startswith("engine_models/") else name


def capacity_json(capsys, model: str, engine: str, **options) -> dict:
    argv = ["capacity", "--model", _model_ref(model), "--engine", engine, "--json"]
    for key, value in options.items():
        if key == "swa_full":
            argv += ["--swa-full"] if value else []
        elif key == "kv_unified":
            argv += [] if value else ["--no-kv-unified"]
        else:
            argv += [FLAGS[key], str(value)]
    assert main(argv) == 0
    return json.loads(capsys.readouterr().out)


def _case_id(case: dict) -> str:
    return case["id"] + (f" [{case['variant']}]" if "variant" in case else "")


@pytest.mark.parametrize("case", LOGS["cases"], ids=_case_id)
def test_capacity_reproduces_the_logged_numbers(case, capsys):
    entry = ENTRIES[case["id"]]
    assert entry["engine"].replace("tensorrt-llm", "trtllm").replace("llama.cpp", "llamacpp").startswith(
        case["engine"]) or case["engine"] == "llamacpp"
    result = capacity_json(capsys, case["model"], case["engine"], **case["options"])
    for key, logged in case["expect"].items():
        if isinstance(logged, bool) or logged is None:
            assert result[key] == logged, f"{key}: {result[key]} vs logged {logged} ({entry['source']['url']})"
        else:
            assert result[key] == pytest.approx(logged, rel=0.01), f"{key} vs {entry['source']['url']}"


def test_every_logged_line_is_reproduced_or_explained():
    covered = {c["id"] for c in LOGS["cases"]} | set(LOGS["not_reproduced"])
    assert covered == set(ENTRIES)
    thread_ids = {e["id"] for e in LOGS["entries"]}
    lines_from_threads = [c for c in LOGS["cases"] if c["id"] in thread_ids]
    assert len(lines_from_threads) >= 15


def test_vllm_dense_rule_by_hand(capsys):
    # Llama-3.1-8B: 131,072 B/token, 16-token blocks of 2 MiB; 10 GiB -> 5120 blocks -> 81,920 tokens.
    r = capacity_json(capsys, "Llama-3.1-8B", "vllm", kv_memory_gib=10, max_model_len=8192)
    assert (r["bytes_per_token"], r["pool_tokens"], r["num_blocks"]) == (131072, 81920, 5120)
    assert r["max_concurrency"] == 10.0


def test_vllm_gemma3_groups_and_padding(capsys):
    # 52 sliding + 10 full layers: group size 10 -> 1 full + 6 sliding groups, 8 padding layers (RULES 1.6).
    r = capacity_json(capsys, "Gemma-3-27B", "vllm", kv_memory_gib=20, max_model_len=32768)
    assert r["kv_groups"] == 7
    assert any("8 padding layers" in rule for rule in r["rules"])
    # page = 16 x 8,192 B; blocks = 20 GiB // (131,072 x 10); tokens = blocks // 7 x 16
    assert r["pool_tokens"] == (20 * 2**30 // (131072 * 10)) // 7 * 16


def test_vllm_qwen3_next_block_size(capsys):
    # Gated DeltaNet state per layer: (32 x 128 x 128 + 3 x 8192) x 2 B = 1,097,728 B; attention page per token
    # 2 x 2 x 256 x 2 = 2,048 B -> block = 16 x ceil(1,097,728 / 32,768) = 544 tokens.
    r = capacity_json(capsys, "Qwen3-Next-80B-A3B", "vllm", kv_memory_gib=10, max_model_len=8192)
    assert r["block_size"] == 544
    assert r["kv_groups"] == 4


def test_sglang_mamba_split(capsys):
    r = capacity_json(capsys, "Qwen3-Next-80B-A3B", "sglang", kv_memory_gib=19)
    # 0.9/1.9 of 19 GiB for states of 36 x 1,097,728 B; the rest for 12 layers x 2,048 B per token
    assert r["max_mamba_cache_size"] == int(19 * 2**30 * 0.9 / 1.9 // (36 * 1097728))
    assert r["pool_tokens"] == int(19 * 2**30 / 1.9 // (12 * 2048))


@pytest.mark.parametrize(("argv", "flag"), [
    (["--engine", "vllm", "--block-size", "24"], "--block-size"),
    (["--engine", "vllm", "--kv-cache-dtype", "q8_0"], "--kv-cache-dtype"),
    (["--engine", "vllm", "--kv-cache-dtype", "fp8_ds_mla"], "--kv-cache-dtype"),
    (["--engine", "vllm", "--tp", "3"], "--tp"),
    (["--engine", "trtllm", "--block-size", "48"], "--block-size"),
    (["--engine", "llamacpp", "--block-size", "16"], "--block-size"),
    (["--engine", "llamacpp", "--kv-cache-dtype", "fp8"], "--kv-cache-dtype"),
    (["--engine", "sglang", "--kv-cache-dtype", "int4"], "--kv-cache-dtype"),
])
def test_options_the_engine_refuses_exit_2(argv, flag, capsys):
    assert main(["capacity", "--model", "Llama-3.1-8B", "--kv-memory-gib", "4", *argv]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and flag in err


def test_budget_estimate_without_a_log(capsys):
    # Llama-3.1-8B on an H100-SXM: vLLM budget = 0.9 x total - weights - activations - reserve > 0
    r = capacity_json(capsys, "Llama-3.1-8B", "vllm", max_model_len=8192)
    assert 40 * 2**30 < r["kv_pool_bytes"] < 70 * 2**30
    assert r["pool_tokens"] % 16 == 0


def test_sglang_pool_of_a_windowed_model_fits_only_what_it_holds():
    """mistralai/Ministral-8B-Instruct-2410's config.json: 36 layers, 8 KV heads x 128, sliding_window 32,768 (= its
    max_position_embeddings), so every layer is windowed. A cell is 36 x 2 x 8 x 128 x 2 = 147,456 B; 0.5 GiB hold
    floor(536,870,912 / 147,456) = 3,640 tokens, far fewer than one 32,768-token request keeps (min(L, window)
    tokens). SGLang's pool said fits=true with 0.0 concurrency; it must say no, and 3,640 tokens at most. SGLang runs
    MistralForCausalLM without its window (srt/models/llama.py:209-217), so a request keeps all its tokens: concurrency
    3,640 / 32,768."""
    from roofline.catalogue.hf import model_from_hf_config
    from roofline.engines import GIB, EngineOptions, capacity

    config = {"architectures": ["MistralForCausalLM"], "head_dim": 128, "hidden_size": 4096,
              "intermediate_size": 12288, "max_position_embeddings": 32768, "model_type": "mistral",
              "num_attention_heads": 32, "num_hidden_layers": 36, "num_key_value_heads": 8, "rms_norm_eps": 1e-05,
              "rope_theta": 100000000.0, "sliding_window": 32768, "tie_word_embeddings": False,
              "vocab_size": 131072}
    model = model_from_hf_config(config, where="Ministral-8B-Instruct-2410/config.json")
    r = capacity(model, "sglang", EngineOptions(kv_memory_bytes=0.5 * GIB))
    assert r.pool_tokens == 3640
    assert r.fits is False and r.max_model_len_that_fits == 3640 and r.max_concurrency == 3640 / 32768
    assert capacity(model, "sglang", EngineOptions(kv_memory_bytes=5 * GIB)).fits is True  # 36,408 tokens >= window
