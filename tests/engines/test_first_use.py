"""A fresh server's first eager step at a new fused-MoE specialisation (engines.first_use, simulate --cold-start):
the key rule by hand and against run 18's measured compiles, the stall in a simulated run, and the flag's limits."""

from __future__ import annotations

import json

import pytest

from roofline.catalogue import load_model
from roofline.engines.first_use import FirstUse, first_use, moe_key
from roofline.engines.timing import timing
from tests.cli_run import run
from validate import stored
from validate.engines.run18 import JIT_ORDER

RUN18 = "validate/results/engines/nvidia-h200-vllm-2026-11-30-run18"


def test_key_is_the_nearest_tuned_batch_and_the_divisible_by_16_class():
    # vLLM's tuned keys ... 128, 256, 512, 1024 ...; top-k 8: M x 8 divisible by 16 exactly when M is even
    assert moe_key(257, 8) == (256, False)
    assert moe_key(258, 8) == (256, True)
    assert moe_key(386, 8) == (512, True)
    assert moe_key(384, 8) == (256, True)  # a tie (128 either way) goes to the smaller key, as min() does
    assert moe_key(1, 8) == (1, False)
    # DeepSeek-V2-Lite's top-k 6: 8 x 6 = 48 divisible, 3 x 6 = 18 not
    assert moe_key(8, 6) == (8, True) and moe_key(3, 6) == (2, False)


def test_rule_reproduces_run18s_measured_compiles_call_for_call():
    # jit_probe.py in a fresh Triton cache: each call's new cubins (two kernels a new key), committed results
    calls = json.loads(stored.read_text(__import__("pathlib").Path(RUN18) / "jit-cold.json"))["calls"]
    assert [c["M"] for c in calls] == list(JIT_ORDER)
    state = FirstUse(8, 1.0, started=())
    assert [2 * int(state.stall(m) > 0) for m in JIT_ORDER] == [c["cubins_added"] for c in calls]


def test_sglangs_first_odd_eager_batch_past_its_graphs_stalls_once():
    model = load_model("Qwen3-30B-A3B")
    sizes = tuple(range(8, 257, 8)) + (1, 2, 4)  # even captured batches (SGLang's list is multiples of 8 past 8)
    state = first_use(model, "sglang", tuple(sorted(sizes)), (), 8192, 1.5, "bf16")
    assert state.stall(258) == 0.0  # (256, even): compiled when batch 256 was captured
    assert state.stall(257) == 1.5 and state.stall(257) == 0.0 and state.stall(259) == 0.0
    assert state.stalls == 1


def test_nothing_compiles_where_the_kernel_is_not_the_path():
    moe, dense = load_model("Qwen3-30B-A3B"), load_model("Llama-3.1-8B")
    assert first_use(dense, "vllm", (1, 2), (), 8192, 1.0, "bf16") is None
    assert first_use(moe, "trtllm", (1, 2), (), 8192, 1.0, "bf16") is None
    assert first_use(moe, "vllm", (1, 2), (), 8192, 1.0, "fp8") is None
    assert first_use(moe, "vllm", (1, 2), (), 8192, 0.0, "bf16") is None
    # vLLM's memory profile runs the step budget at start: its key is compiled
    assert first_use(moe, "vllm", (1, 2), (), 8192, 1.0, "bf16").stall(8192) == 0.0


SIM = ["simulate", "--model", "Qwen3-30B-A3B", "--hardware", "H200", "--method", "bf16", "--engine", "sglang",
       "--rate", "inf", "--prompt-tokens", "64", "--output-tokens", "32", "--no-search", "--json"]


@pytest.mark.parametrize("requests, keys", [(301, 1), (300, 0)])
def test_a_cold_server_pays_the_compile_once_in_its_run(capsys, requests, keys):
    # 301 requests at once decode together at B 301 (odd, past SGLang's 256: eager, key (256, odd) new): every
    # request's end moves by the one compile; at B 300 the key (256, even) was compiled at start and nothing moves
    code, out, err = run(capsys, *SIM, "--requests", str(requests))
    assert code == 0, err
    warm = json.loads(out)
    code, out, err = run(capsys, *SIM, "--requests", str(requests), "--cold-start")
    assert code == 0, err
    cold = json.loads(out)
    key_s = timing("sglang").moe_jit_key_s
    assert key_s > 0.5
    assert cold["first_use"] == {"keys": keys, "seconds": pytest.approx(keys * key_s)}
    assert warm["first_use"] is None
    assert cold["e2e_s"]["p50"] - warm["e2e_s"]["p50"] == pytest.approx(keys * key_s, abs=0.02 * key_s)


@pytest.mark.parametrize("extra, word", [(["--engine", "trtllm"], "compiles nothing"),
                                          (["--engine", "vllm", "--replicas", "2"], "--replicas"),
                                          (["--engine", "vllm", "--speculative", "eagle:3:0.7"], "--speculative")])
def test_cold_start_limits_are_one_line(capsys, extra, word):
    base = ["simulate", "--model", "Qwen3-30B-A3B", "--hardware", "H200", "--method", "bf16", "--rate", "2",
            "--requests", "10", "--no-search", "--cold-start"]
    code, out, err = run(capsys, *base, *extra)
    assert code == 2 and out == "" and err.count("\n") == 1
    assert "--cold-start" in err and word in err
