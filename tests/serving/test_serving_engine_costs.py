"""The engine's per-model step costs in the serving simulation, as the planner prices them (roofline/engines/timing.py
mechanisms 8 and 9): the sampler's GPU law on a GPU it was measured on and the launches of a step past the capture
sizes. By hand: EngineOverheads.combine's arithmetic; the simulator's profile carries the model's figures (its
vocabulary, its layers); the compiled record loop gives the Python loop's times with both in play (H200, vLLM)."""

from __future__ import annotations

import copy
import dataclasses

import numpy as np
import pytest

from roofline.catalogue import load_hardware, load_model
from roofline.engines.scheduling import EngineOverheads, scheduling
from roofline.engines.timing import timing
from roofline.methods import parse_method
from roofline.serving.requests import LengthDist, poisson_requests
from roofline.serving.simulate import Simulator
from roofline.specs import Workload

MODEL, H200 = load_model("Llama-3.1-8B"), load_hardware("H200")


def test_the_sampler_adds_to_the_gpu_work_before_the_host_composes():
    o = EngineOverheads(step_s=0.002, per_seq_s=1e-5, overlap=True, sampler_s=1e-5, sampler_row_s=1e-6)
    # 100 sequences: GPU 5 ms + 10 us + 100 us; host 3 ms hides under it
    assert o.combine(0.005, 100) == pytest.approx(0.00511)
    assert o.combine(0.001, 100) == pytest.approx(0.003)  # host-bound: the sampler hides too
    sync = dataclasses.replace(o, overlap=False)
    assert sync.combine(0.005, 100) == pytest.approx(0.00511 + 0.003)


def test_the_simulator_takes_the_models_sampler_and_launches_on_a_measured_gpu():
    t = timing("vllm")
    wl = Workload(context_tokens=4096, prefill_chunk_tokens=8192)
    sim = Simulator(MODEL, H200, wl, parse_method("bf16"), max_tokens=4096,
                    engine=scheduling("vllm", H200, "api", 1, context_len=4096))
    o = sim.engine.overheads
    lat, rate = t.sampler["H200"]
    assert o.sampler_s == pytest.approx(lat)
    assert o.sampler_row_s == pytest.approx(128256 / rate)  # Llama-3's vocabulary, one row a sequence
    assert o.eager_s == pytest.approx(t.eager_step_s + 32 * t.eager_layer_s)  # 32 dense layers
    assert o.eager_above_tokens == 512
    h100 = Simulator(MODEL, load_hardware("H100-SXM"), wl, parse_method("bf16"), max_tokens=4096,
                     engine=scheduling("vllm", load_hardware("H100-SXM"), "api", 1, context_len=4096))
    assert h100.engine.overheads.sampler_s == 0.0  # not measured there


def test_the_compiled_loop_gives_the_python_loops_times_with_both_costs():
    pytest.importorskip("numba")
    reqs = poisson_requests(10.0, 150, LengthDist.parse("uniform:64:3000", "p"),
                            LengthDist.parse("uniform:2:300", "o"), 5)
    wl = Workload(context_tokens=reqs.max_tokens, prefill_chunk_tokens=8192)
    profile = scheduling("vllm", H200, "api", 1, context_len=reqs.max_tokens)
    sim = Simulator(MODEL, H200, wl, parse_method("bf16"), max_tokens=reqs.max_tokens, engine=profile, kernel=True)
    assert sim.engine.overheads.sampler_s > 0 and sim.engine.overheads.eager_s > 0
    slow = copy.copy(sim)
    slow.kernel = False
    a, b = sim.run(reqs), slow.run(reqs)
    assert int((b.steps[:, 6] > 512).sum()) > 0  # some steps were past the capture sizes
    for name in ("first_token_s", "finish_s"):
        assert np.asarray(getattr(a, name)) == pytest.approx(np.asarray(getattr(b, name)), rel=1e-9, abs=1e-12)
