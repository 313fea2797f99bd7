"""Disaggregated prefill / decode pools (serving.disagg) and tensor parallelism across nodes.

Expectations by hand: Llama-3.1-8B caches 2 x 8 x 128 x 32 x 2 = 131,072 bytes per token in bf16, so a 4096-token
prompt's KV is 536,870,912 bytes, over one 50 GB/s NIC 10.74 ms plus the link latency; a lone request's TTFT is the
prefill pool's prefill + that transfer + the decode pool's one-token step after the preloaded prompt, and its
TPOT the colocated engine's (the same decode steps at the same contexts).
"""

from __future__ import annotations

import json

import numpy as np
import pytest

from roofline.catalogue import load_hardware, load_model
from roofline.cli import main
from roofline.methods import parse_method
from roofline.serving.disagg import Disaggregated, KvLink
from roofline.serving.requests import Requests
from roofline.serving.simulate import Simulator
from roofline.specs import Workload

MODEL, H100, H200 = load_model("Llama-3.1-8B"), load_hardware("H100-SXM"), load_hardware("H200")
E = np.zeros(0, dtype=np.int64)


def sim(hw, max_tokens: int, tp: int = 1, spec: str = "bf16") -> Simulator:
    wl = Workload(context_tokens=max_tokens, tp=tp, prefill_chunk_tokens=8192)
    return Simulator(MODEL, hw, wl, parse_method(spec), max_tokens=max_tokens)


def test_transfer_time_is_the_prompts_kv_over_the_link():
    prefill, decode = sim(H100, 4200), sim(H200, 4200)
    pools = Disaggregated(prefill, decode, 1, 1, KvLink(50e9, 5e-6))
    assert pools.transfer_s(np.array([4096]))[0] == pytest.approx(536_870_912 / 50e9 + 5e-6, rel=1e-12)
    kivi = Disaggregated(sim(H100, 4200, spec="kivi-2"), decode, 1, 1, KvLink(50e9, 5e-6))
    assert kivi.transfer_s(np.array([4096]))[0] < 0.3 * pools.transfer_s(np.array([4096]))[0]  # compressed KV


def test_lone_request_ttft_and_tpot():
    prompt, output = 4096, 33
    prefill, decode = sim(H100, prompt + output), sim(H200, prompt + output)
    pools = Disaggregated(prefill, decode, 1, 1, KvLink(50e9, 5e-6))
    run = pools.run(Requests(np.array([0.0]), np.array([prompt]), np.array([output])))
    expected = (prefill.phases.prefill_time(1, prompt) + 536_870_912 / 50e9 + 5e-6
                + decode.steps.step_time(E, np.array([prompt - 1]), np.array([1]), np.array([True])))
    assert run.trace.ttft_s[0] == pytest.approx(expected, rel=1e-9)
    colocated = decode.run(Requests(np.array([0.0]), np.array([prompt]), np.array([output])))
    assert run.trace.tpot_s[0] == pytest.approx(colocated.tpot_s[0], rel=1e-9)


def test_cli_disaggregated_pools(capsys):
    argv = ["simulate", "--model", "Llama-3.1-8B", "--hardware", "H200", "--method", "bf16", "--json",
            "--rate", "4", "--requests", "40", "--prompt-tokens", "2048", "--output-tokens", "32",
            "--disaggregate", "1:2", "--prefill-hardware", "H100-SXM"]
    assert main(argv) == 0
    data = json.loads(capsys.readouterr().out)["disaggregated"]
    assert data["prefill"]["hardware"] == "H100-SXM" and data["decode"]["gpus"] == 2
    assert main([*argv[:-4], "--disaggregate", "2"]) == 2
    assert "--disaggregate" in capsys.readouterr().err


def test_tensor_parallelism_past_the_node_uses_the_scale_out_link():
    """H200 nodes hold 8 GPUs (scale_up max_gpus 8): tp 16 all-reduces over InfiniBand, tp 8 over NVLink; the
    16-GPU decode step is slower per token than half the 8-GPU one would suggest."""
    model = load_model("Llama-3.1-70B")
    wl8 = Workload(context_tokens=4096, tp=8, prefill_chunk_tokens=8192)
    s8 = Simulator(model, H200, wl8, parse_method("bf16"), max_tokens=4096)
    s16 = Simulator(model, H200, wl8.model_copy(update={"tp": 16}), parse_method("bf16"), max_tokens=4096)
    assert s8.phases.roofline.link() is H200.scale_up and s16.phases.roofline.link() is H200.scale_out
    ctx = np.full(8, 2048)
    assert s16.steps.step_time(ctx, E, E, E.astype(bool)) > s8.steps.step_time(ctx, E, E, E.astype(bool))
