"""Trying the tool as a new user (session 32, validate/notes/2026-12-01-new-user-32.md).

Device memory as the engines see it. vLLM sizes its budget as total_gpu_memory x gpu_memory_utilization, the total
being what CUDA reports (torch.cuda.mem_get_info), not the datasheet's 48 GB. An L40 / L40S runs with ECC on by
default, and ECC on GDDR6 keeps 1/16 of the memory for its check bits: nvidia-smi shows 46,068 MiB, CUDA 44.39 GiB.
A vLLM 0.7.2 log on an L40 (nvidia-smi 46068MiB): "the current vLLM instance can use total_gpu_memory (44.39GiB) x
gpu_memory_utilization (0.85) = 37.73GiB", with 78,115 blocks of Qwen2.5-Math-1.5B (28 layers x 2 KV heads x 128 x
2 x 2 B = 28,672 B a token: 78,115 x 16 x 28,672 B = 33.37 GiB, as it logs). PyTorch's out-of-memory messages on
L40S machines say "GPU 0 has a total capacity of 44.39 GiB" (44.42 in stepfun-ai/Step-Video-T2V#8, 44.53 in
Wan-Video/Wan2.1#205, by driver). The L4 (24 GB GDDR6, ECC on) reports 22.05 GiB: vllm-project/vllm#20214.
"""

from __future__ import annotations

import json

import pytest
from cli_run import run

GIB = 2 ** 30


@pytest.mark.parametrize("gpu", ["L40", "L40S"])
def test_an_ecc_gddr6_card_is_planned_at_the_memory_cuda_reports(capsys, gpu):
    code, out, _ = run(capsys, "plan", "--model", "Llama-3.1-8B", "--hardware", gpu, "--method", "bf16",
                       "--utilization", "0.85", "--json")
    assert code == 0
    memory = json.loads(out)["results"][0]["memory"]
    # the log's own product: 44.39 GiB x 0.85 = 37.73 GiB (two decimals, as vLLM prints it)
    assert memory["usable_bytes"] / GIB == pytest.approx(37.73, abs=0.006)
    assert memory["capacity_bytes"] / GIB == pytest.approx(44.39, abs=0.005)


def test_an_l4_is_planned_at_the_memory_its_ci_logs(capsys):
    """vLLM's CI runs on L4s: vllm-project/vllm#20214 logs 'GPU 0 has a total capacity of 22.05 GiB' (24 GiB less
    ECC's 1/16 and the driver's share), so at --utilization 0.9 the usable memory is 0.9 x 22.05 = 19.85 GiB."""
    code, out, _ = run(capsys, "plan", "--model", "Llama-3.2-3B", "--hardware", "L4", "--method", "bf16",
                       "--utilization", "0.9", "--json")
    assert code == 0
    memory = json.loads(out)["results"][0]["memory"]
    assert memory["capacity_bytes"] / GIB == pytest.approx(22.05, abs=0.005)
    assert memory["usable_bytes"] / GIB == pytest.approx(0.9 * 22.05, abs=0.005)


def test_vllm_pool_on_an_l40s_starts_from_the_cuda_total(capsys):
    """vLLM 0.24's default gpu_memory_utilization is 0.92: the pool is 0.92 x 44.39 GiB less the weights
    (8,030,261,248 parameters x 2 B) and the profiled terms, so at most 0.92 x 44.39 - 14.957 = 25.88 GiB; the
    datasheet's 48 GiB would give 29.2 GiB (the pool 14 % high)."""
    code, out, _ = run(capsys, "capacity", "--model", "Llama-3.1-8B", "--hardware", "L40S", "--engine", "vllm",
                       "--json")
    assert code == 0
    pool = json.loads(out)["kv_pool_bytes"]
    assert pool <= 0.92 * 44.395 * GIB - 8_030_261_248 * 2
    assert pool >= 0.92 * 44.385 * GIB - 8_030_261_248 * 2 - 1.0 * GIB  # the profiled terms stay under 1 GiB


def test_max_rate_under_a_concurrency_cap_names_the_cap_not_the_run_length(capsys):
    """With --max-concurrency the requests past the cap wait at the client and TTFT starts at the send (`vllm bench
    serve` stamps a request's start inside its semaphore: vllm/benchmarks/serve.py limited_request_func), so once
    the saturated run meets the SLO every arrival rate does: the answer is the cap's throughput, and more --requests
    would not change it."""
    args = ["simulate", "--model", "Llama-3.1-8B", "--hardware", "H200", "--method", "bf16", "--engine", "vllm",
            "--prompt-tokens", "1024", "--output-tokens", "128", "--requests", "120", "--max-concurrency", "4",
            "--json"]
    code, out, _ = run(capsys, *args, "--rate", "5", "--slo-ttft-ms", "2000", "--slo-tpot-ms", "100")
    assert code == 0
    found = json.loads(out)
    code, out, _ = run(capsys, *args, "--rate", "inf")
    closed_loop = json.loads(out)["requests_per_s"]  # four clients with no think time: the cap's throughput
    assert found["max_rate_at_slo"] == pytest.approx(closed_loop, rel=0.02)
    assert "--max-concurrency 4 clients hold the excess" in found["max_rate_reason"]
    assert "more --requests" not in found["max_rate_reason"]


def test_expert_parallel_replicas_are_refused_under_llamacpp(capsys):
    """llama.cpp splits a model over GPUs by --split-mode none | layer | row (common/arg.cpp), never by experts; tp
    was refused already, --ep 2 planned two expert-parallel replicas llama.cpp cannot run."""
    code, out, err = run(capsys, "plan", "--model", "Qwen3-30B-A3B", "--ep", "2", "--engine", "llamacpp",
                         "--method", "bf16")
    assert code == 2 and out == ""
    assert err.count("\n") == 1 and "--ep: 2 replicas: llama.cpp has no expert parallelism" in err
    code, _, _ = run(capsys, "plan", "--model", "Qwen3-30B-A3B", "--ep", "2", "--engine", "vllm", "--method", "bf16")
    assert code == 0  # vLLM's --enable-expert-parallel


def test_a_trace_window_is_replayed_from_its_first_row(capsys, tmp_path):
    """A window cut from a longer log (BurstGPT's Timestamp counts seconds from its first day): three requests at
    1,000, 1,000.5 and 1,001 s of 10, 20 and 30 output tokens. Replayed from time 0 the run reported 0.003 req/s
    offered and 0.06 output tok/s over 1,001 s of idle; from its first row the window offers n / last arrival =
    3 / 1 s, and its 60 output tokens come in about 1 s (between 60 / 1.5 and 60 / 1 tok/s on an H200)."""
    trace = tmp_path / "window.csv"
    trace.write_text("arrival_s,prompt_tokens,output_tokens\n1000,100,10\n1000.5,200,20\n1001,300,30\n")
    code, out, _ = run(capsys, "simulate", "--model", "Llama-3.1-8B", "--hardware", "H200", "--method", "bf16",
                       "--trace", str(trace), "--json")
    assert code == 0
    result = json.loads(out)
    assert result["offered_rate_per_s"] == pytest.approx(3.0)
    assert 60 / 1.5 <= result["throughput_tokens_per_s"] <= 60 / 1.0
    assert any("starts at 1,000 s" in n for n in result["notes"])


def test_llamacpp_refuses_a_weight_format_it_cannot_load(capsys):
    # llama.cpp loads GGUF files whose tensors are ggml types (Q4_K, Q8_0, MXFP4, F16 ...): a compressed-tensors W4A16,
    # an FP8, INT8 or NVFP4 checkpoint is none of them (convert_hf_to_gguf writes ggml types), so `--weight-dtype int4`
    # under llamacpp was planned as vLLM's W4A16 layout; now one line naming the field and what to give, exit 2
    from roofline.cli import main

    for dtype in ("int4", "int8", "fp8", "nvfp4"):
        code = main(["plan", "--model", "Llama-3.1-8B", "--hardware", "H200", "--engine", "llamacpp",
                     "--weight-dtype", dtype, "--method", "fp16"])
        err = capsys.readouterr().err
        assert code == 2 and "weight_dtype" in err and "gguf:" in err and err.count("\n") == 1, dtype
    assert main(["plan", "--model", "Llama-3.1-8B", "--hardware", "H200", "--engine", "llamacpp", "--weight-dtype",
                 "gguf:Q4_K_M", "--method", "fp16"]) == 0
