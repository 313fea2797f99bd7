"""A fresh server's first eager step at a new fused-MoE specialisation (engines.first_use, simulate --cold-start):
the key rule by hand and against run 18's measured compiles, the stall in a simulated run, and the flag's limits."""

from __future__ import annotations

import json

import pytest

from roofline.catalogue import load_model
from roofline.engines.first_use import TUNED_CLASSES, FirstUse, first_use, moe_key
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


def test_a_process_keeps_what_its_earlier_traffic_compiled():
    # run 3's server ran rate 24 (an eager step at B 257 compiled (256, odd)) before rate 36 in the same process
    model = load_model("Qwen3-30B-A3B")
    sizes = tuple(range(8, 257, 8)) + (1, 2, 4)
    # SGLang's prefill graphs include 512 tokens (its start-up log's list)
    state = first_use(model, "sglang", tuple(sorted(sizes)), (512,), 8192, 1.5, "bf16", served=(257,))
    assert state.stall(259) == 0.0 and state.stall(331) == 0.0  # (256, odd): compiled in the earlier traffic
    # 385: nearest tuned key 512 (127 away against 256's 129), 385 x 8 = 3,080 = 16 x 192.5: (512, odd), new
    assert state.stall(385) == 1.5 and state.stall(386) == 0.0  # (512, even): the 512-token prefill graph's
    assert state.tokens == [385]


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
    assert cold["first_use"] == {"keys": keys, "seconds": pytest.approx(keys * key_s), "tokens": [301] * keys}
    assert warm["first_use"] is None
    assert cold["e2e_s"]["p50"] - warm["e2e_s"]["p50"] == pytest.approx(keys * key_s, abs=0.02 * key_s)


def test_a_server_that_ran_the_key_before_pays_nothing(capsys):
    # the same 301 at once on a server whose earlier traffic ran an eager step at B 257: key (256, odd) compiled
    code, out, err = run(capsys, *SIM, "--requests", "301")
    assert code == 0, err
    warm = json.loads(out)
    code, out, err = run(capsys, *SIM, "--requests", "301", "--cold-start", "--compiled-tokens", "257")
    assert code == 0, err
    cold = json.loads(out)
    assert cold["first_use"]["keys"] == 0 and cold["e2e_s"] == warm["e2e_s"]


def test_compiled_tokens_needs_a_cold_start(capsys):
    code, out, err = run(capsys, *SIM, "--requests", "10", "--compiled-tokens", "257")
    assert code == 2 and out == "" and err.count("\n") == 1 and "--cold-start" in err


@pytest.mark.parametrize("extra, word", [(["--engine", "trtllm"], "compiles nothing"),
                                          (["--engine", "vllm", "--replicas", "2"], "--replicas"),
                                          (["--engine", "vllm", "--speculative", "eagle:3:0.7"], "--speculative")])
def test_cold_start_limits_are_one_line(capsys, extra, word):
    base = ["simulate", "--model", "Qwen3-30B-A3B", "--hardware", "H200", "--method", "bf16", "--rate", "2",
            "--requests", "10", "--no-search", "--cold-start"]
    code, out, err = run(capsys, *base, *extra)
    assert code == 2 and out == "" and err.count("\n") == 1
    assert "--cold-start" in err and word in err


def test_tuned_configs_that_are_one_tile_compile_once():
    # vLLM 0.24 configs/E=128,N=768,device_name=NVIDIA_H200.json: 1536, 2048 and 3072 are all {BLOCK_SIZE_M 128,
    # BLOCK_SIZE_N 256, BLOCK_SIZE_K 64, GROUP_SIZE_M 1, 8 warps, 4 stages}; 1024 and 4096 the same with GROUP_SIZE_M
    # 16; 512 {64, 128, 64, 1, 4, 3} its own
    classes = TUNED_CLASSES[("vllm", 128, 768, "H200")]
    assert moe_key(1600, 8, classes) == moe_key(2100, 8, classes) == moe_key(3000, 8, classes)
    assert moe_key(1000, 8, classes) == moe_key(4000, 8, classes) != moe_key(2000, 8, classes)
    assert moe_key(600, 8, classes) != moe_key(1000, 8, classes)
    # so a fresh vLLM server of Qwen3-30B-A3B on the H200 (its profile run at 8,192 tokens compiles the 1024 / 4096
    # tile, even) meets at most 4 new keys past its 512-token graphs: 512 odd, the 1024 tile odd, the 1536 tile both
    state = first_use(load_model("Qwen3-30B-A3B"), "vllm", (512,), (), 8192, 1.0, "bf16", "H200")
    assert sum(state.stall(m) > 0 for m in range(513, 8193)) == 4


def test_run19s_fresh_server_compiled_what_the_rule_says(capsys, tmp_path):
    # run 19's cold run replayed at its recorded sends and lengths: the model compiles 4 keys (8 kernels); the engine
    # wrote 9 cubins during the run, one of them _compute_slot_mapping_kernel (its JIT monitor's warning in
    # server.log), so 8 fused-MoE kernels; the warm run after it on the same server wrote none
    from pathlib import Path

    run19 = Path("validate/results/engines/nvidia-h200-vllm-2026-11-30-run19")
    meas = json.loads(stored.read_text(run19 / "cold.json"))
    assert int(stored.read_text(run19 / "cold-cubins.txt")) == 9
    assert int(stored.read_text(run19 / "warm-cubins.txt")) == 0
    log = stored.read_text(run19 / "server.log")
    assert "JIT compilation during inference: _compute_slot_mapping_kernel" in log
    assert "JIT compilation during inference: fused_moe_kernel" in log
    t0 = meas["start_times"][0]
    trace = tmp_path / "cold.csv"
    trace.write_text("".join(f"{t - t0},{i},{o}\n" for t, i, o in zip(meas["start_times"], meas["input_lens"],
                                                                       meas["output_lens"], strict=True)))
    code, out, err = run(capsys, "simulate", "--model", "Qwen3-30B-A3B", "--hardware", "H200", "--method", "bf16",
                         "--engine", "vllm", "--trace", str(trace), "--no-search", "--json", "--cold-start")
    assert code == 0, err
    assert 2 * json.loads(out)["first_use"]["keys"] == 9 - 1


def test_a_dense_model_fresh_says_why_nothing_compiles(capsys):
    base = ["simulate", "--model", "Llama-3.1-8B", "--hardware", "H200", "--method", "bf16", "--engine", "vllm",
            "--rate", "2", "--requests", "20", "--prompt-tokens", "1024", "--output-tokens", "16", "--no-search"]
    code, out, err = run(capsys, *base, "--cold-start", "--json")
    assert code == 0, err
    fresh = json.loads(out)["first_use"]
    assert fresh["keys"] == 0 and "no routed experts" in fresh["why"]
    code, out, _ = run(capsys, *base, "--cold-start")
    assert code == 0 and "a fresh server (--cold-start): 0 new fused-MoE" in out
