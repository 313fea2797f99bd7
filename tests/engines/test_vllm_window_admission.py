"""How many requests vLLM v0.24.0 runs at once on a sliding-window model, against the 'Maximum concurrency' it logs.

vllm/v1/core/kv_cache_manager.py allocate_slots (full_sequence_must_fit = scheduler_reserve_full_isl, default True)
admits a request when the blocks of its whole prompt are free, each sliding group capped at
SlidingWindowSpec.max_admission_blocks_per_request = cdiv(min(W - 1 + max_num_batched_tokens, L), block) + 1; a
running request then holds, per sliding group, only the blocks from its window on (single_type_kv_cache_manager.py
remove_skipped_blocks: num_computed - W + 1 tokens skipped). kv_cache_utils.get_max_concurrency_for_kv_cache_config
divides the pool by the capped figure for every request.

Trinity-Nano-Preview (tests/data/hf/Trinity-Nano-Preview/SOURCE.md): 56 layers, 14 full and 42 sliding of 2,048
(vLLM: 4 KV groups of 14), 2 KV heads x 128, bf16: a page of 2 x 2 x 128 x 2 = 1,024 B per token per layer.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

from cli_run import run

MODEL = str(Path(__file__).parents[1] / "data" / "hf" / "Trinity-Nano-Preview" / "config.json")
POOL_GIB = 100  # a given pool: num_blocks = floor(100 x 2^30 / (16 tokens x 1,024 B x 14 layers)) = 468,114


def _capacity(capsys, *argv) -> dict:
    rc, out, err = run(capsys, "capacity", "--json", "--engine", "vllm", "--kv-memory-gib", str(POOL_GIB), *argv)
    assert rc == 0, err
    return json.loads(out)


def test_running_requests_hold_their_window_so_more_run_than_the_log_says(capsys):
    got = _capacity(capsys, "--model", MODEL, "--max-model-len", "32768")
    assert got["num_blocks"] == 100 * 2**30 // (16 * 1024 * 14) == 468_114
    # at 32,768 tokens: full 2,048 blocks; sliding, running: 2,048 - (32,768 - 2,048) // 16 = 128 blocks;
    # admission: min(2,048, cdiv(2,047 + 8,192, 16) + 1 = 641)
    held, admit = 2048 + 3 * 128, 2048 + 3 * 641
    assert got["sequences_at_once"] == (468_114 - admit) // held + 1 == 191
    assert got["max_concurrency"] == 468_114 / admit  # 117.88x, the start-up log's figure


def test_without_a_window_the_two_figures_agree(capsys):
    got = _capacity(capsys, "--model", "Llama-3.1-8B", "--max-model-len", "32768")
    assert got["sequences_at_once"] == math.floor(got["max_concurrency"])
    rc, out, _ = run(capsys, "capacity", "--engine", "vllm", "--kv-memory-gib", "100", "--model", "Llama-3.1-8B")
    assert "running at once" not in out and "max concurrency at" in out


def test_plan_under_vllm_answers_what_capacity_answers(capsys):
    cap = _capacity(capsys, "--model", MODEL, "--max-model-len", "32768")
    rc, out, err = run(capsys, "plan", "--json", "--engine", "vllm", "--model", MODEL, "--hardware", "H200",
                       "--method", "bf16", "--context", "32768", "--kv-cache-memory-bytes", str(POOL_GIB * 2**30))
    assert rc == 0, err
    row = json.loads(out)["results"][0]
    assert row["max_batch"] == cap["sequences_at_once"] == 191
    assert row["engine_sequences"]["logged_max_concurrency"] == cap["max_concurrency"]
    rc, out, err = run(capsys, "plan", "--engine", "vllm", "--model", MODEL, "--hardware", "H200", "--method", "bf16",
                       "--context", "32768", "--kv-cache-memory-bytes", str(POOL_GIB * 2**30))
    assert "requests of 32,768 tokens it runs at once: 191 (bf16)" in out and "117.88x (bf16)" in out
    rc, text, _ = run(capsys, "capacity", "--engine", "vllm", "--kv-memory-gib", "100", "--model", MODEL,
                      "--max-model-len", "32768")
    assert "running at once" in text and "191" in text and "117.88x" in text


def test_the_simulated_server_runs_as_many_as_capacity_says_not_the_logged_figure(capsys):
    """The serving simulator's own pool (serving.pool, vLLM's block allocator and full-prompt admission, written
    apart from engines.vllm) holds Trinity's 31,744 + 1,024-token requests sent at once: its most requests running
    is capacity's figure within a few (decode grows the full group's blocks), far above the 133.67x vLLM logs."""
    cap = _capacity(capsys, "--model", MODEL, "--max-model-len", "32768")
    rc, out, err = run(capsys, "simulate", "--json", "--model", MODEL, "--hardware", "H200", "--method", "bf16",
                       "--engine", "vllm", "--rate", "inf", "--prompt-tokens", "31744", "--output-tokens", "1024",
                       "--requests", "300", "--kv-cache-memory-bytes", str(POOL_GIB * 2**30))
    assert rc == 0, err
    got = json.loads(out)
    sim = got["results"][0] if "results" in got else got
    assert abs(sim["max_running"] - cap["sequences_at_once"]) <= 5 and sim["max_running"] > 1.5 * cap["max_concurrency"]
