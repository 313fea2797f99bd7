"""--kv-cache-memory-bytes (vLLM's flag; Workload.kv_cache_memory_bytes): the pool is the given bytes, whatever the
engine and the utilization; too many bytes for the GPU, or not a whole number, is one line and exit 2."""

from __future__ import annotations

import json

from tests.cli_run import run

# Llama-3.1-8B: 32 layers x (K + V) x 8 KV heads x 128 x 2 bytes = 131,072 bytes a token; a vLLM block of 16 tokens
# 2 MiB, so 8 GiB is 4,096 blocks, 65,536 tokens (vLLM: num_gpu_blocks = available bytes // page bytes of all layers)
GIB8 = str(8 * 2**30)
SIM = ["simulate", "--model", "Llama-3.1-8B", "--hardware", "H200", "--method", "bf16", "--rate", "2",
       "--requests", "20", "--prompt-tokens", "1024", "--output-tokens", "16", "--no-search", "--json"]


def test_simulate_pool_is_the_given_bytes_under_any_engine_and_utilization(capsys):
    for extra in (["--engine", "vllm"], ["--engine", "ideal", "--utilization", "0.3"], ["--engine", "sglang"]):
        code, out, err = run(capsys, *SIM, *extra, "--kv-cache-memory-bytes", GIB8)
        assert code == 0, err
        assert json.loads(out)["kv_pool"]["capacity_bytes"] == 8 * 2**30


def test_plan_fits_the_batch_the_given_pool_holds(capsys):
    # 65,536 tokens of pool hold 8 sequences of 8,192 tokens and not 9 (whole blocks of 16: 8,192 is 512 blocks)
    base = ["plan", "--model", "Llama-3.1-8B", "--hardware", "H200", "--method", "bf16", "--context", "8192",
            "--kv-cache-memory-bytes", GIB8, "--json"]
    for batch, fits in ((8, True), (9, False)):
        code, out, err = run(capsys, *base, "--batch", str(batch))
        assert code == 0, err
        row = json.loads(out)["results"][0]
        assert row["fits"] is fits
        assert row["memory"]["kv_pool_bytes"] == 8 * 2**30


def test_plan_text_names_the_given_pool(capsys):
    code, out, _ = run(capsys, "plan", "--model", "Llama-3.1-8B", "--hardware", "H200", "--method", "bf16",
                       "--context", "8192", "--batch", "4", "--kv-cache-memory-bytes", GIB8)
    assert code == 0
    assert "KV pool 8.00 GiB as given (--kv-cache-memory-bytes)" in out


def test_more_bytes_than_the_gpu_holds_is_one_line(capsys):
    code, out, err = run(capsys, *SIM, "--engine", "vllm", "--kv-cache-memory-bytes", str(140 * 10**9))
    assert code == 2 and out == ""
    assert err.count("\n") == 1 and "--kv-cache-memory-bytes" in err and "exceed" in err


def test_not_a_whole_number_is_one_line(capsys):
    for bad in ("8G", "-1", "0", "1.5"):
        code, _, err = run(capsys, *SIM, "--kv-cache-memory-bytes", bad)
        assert code == 2 and err.count("\n") == 1 and "--kv-cache-memory-bytes" in err
