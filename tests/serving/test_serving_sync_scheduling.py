"""vLLM's --no-async-scheduling (the default before 0.14; roofline.engines.scheduling.vllm_async_scheduling): each
step's host work runs after its GPU work instead of under it (timing mechanism 2), and a request arriving during a
step joins the next one (no admission lag).

By hand, for a lone request decoding on Llama-3.1-8B on the H200 (a GPU step of several ms against the API server's
host law of ~3 ms): asynchronously a decode step takes max(GPU, host) = GPU, synchronously GPU + host, so its TPOT
rises by exactly host(1) = server_step_s + server_per_seq_s (the profile's API-server law).
Measured (run 14, validate/results/engines/nvidia-h200x2-vllm-2026-11-29-run14, public_burst.sh: 1,000 x 1,024/128
at once on one H200): TPOT mean 132.66 ms asynchronous, 144.55 ms synchronous.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from roofline.catalogue import load_hardware, load_model
from roofline.cli import main
from roofline.engines.scheduling import scheduling
from roofline.engines.timing import timing
from roofline.methods import parse_method
from roofline.serving.requests import Requests
from roofline.serving.simulate import Simulator
from roofline.specs import Workload

H200 = load_hardware("H200")
RUN14 = Path(__file__).resolve().parents[2] / "validate/results/engines/nvidia-h200x2-vllm-2026-11-29-run14"


def lone_tpot(overlap):
    engine = scheduling("vllm", H200, "api", overlap=overlap)
    sim = Simulator(load_model("Llama-3.1-8B"), H200, Workload(context_tokens=2048, engine="vllm"),
                    parse_method("bf16"), max_tokens=2048, engine=engine)
    return float(sim.run(Requests(np.array([0.0]), np.array([512]), np.array([64]))).tpot_s[0])


def test_a_synchronous_step_adds_the_host_law_to_a_lone_decode():
    t = timing("vllm")
    host = t.server_step_s + t.server_per_seq_s
    assert 0.001 < host < 0.01
    assert lone_tpot(False) - lone_tpot(None) == pytest.approx(host, rel=1e-6)


def test_the_measured_bursts_are_slower_synchronous():
    """The run's own figures (not the model's): synchronous scheduling costs the burst ~9 % of its TPOT."""
    a, s = (json.loads((RUN14 / f"Llama-3.1-8B-burst-{tag}.json").read_text()) for tag in ("default", "sync"))
    assert s["mean_tpot_ms"] > 1.05 * a["mean_tpot_ms"]
    assert s["output_throughput"] < a["output_throughput"]


def test_the_flag_is_vllms_only(capsys):
    code = main(["simulate", "--model", "Llama-3.1-8B", "--hardware", "H200", "--method", "bf16", "--engine", "sglang",
                 "--no-async-scheduling", "--rate", "2", "--requests", "4"])
    err = capsys.readouterr().err
    assert code == 2 and "--no-async-scheduling" in err and len(err.strip().splitlines()) == 1


def test_the_flag_slows_a_served_run(capsys):
    args = ["simulate", "--model", "Llama-3.1-8B", "--hardware", "H200", "--method", "bf16", "--engine", "vllm",
            "--rate", "8",
            "--prompt-tokens", "512", "--output-tokens", "64", "--requests", "60", "--json"]
    assert main(args) == 0
    fast = json.loads(capsys.readouterr().out)
    assert main([*args, "--no-async-scheduling"]) == 0
    slow = json.loads(capsys.readouterr().out)
    assert slow["tpot_s"]["p50"] > fast["tpot_s"]["p50"]
