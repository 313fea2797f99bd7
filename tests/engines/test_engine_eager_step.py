"""Mechanism 8 of the engine profile (roofline/engines/timing.py): a step of more tokens than the largest CUDA-graph
capture size launches every kernel from Python. Checked by hand: the law's arithmetic and its composition with the
GPU and host work, derive.py's least squares on a synthetic results folder built from a known law, and the planner's
prefill of an MoE model past the capture size costing at least its launches (the profile's own figures, summed by
hand), a prefill within it none."""

from __future__ import annotations

import json

import pytest

from roofline.catalogue import load_hardware, load_model
from roofline.engines.scheduling import EngineOverheads
from roofline.engines.timing import EngineTiming, timing
from roofline.methods import parse_method
from roofline.planner.phases import PhaseModel
from roofline.specs import Workload

SIZES = (1, 2, 4, 8, 512)
LAW = EngineTiming(engine="x", version="", capture_sizes=SIZES, step_s=0.002, per_seq_s=1e-5, overlap=True,
                   eager_step_s=1e-3, eager_layer_s=5e-4, eager_moe_layer_s=1e-3)


def test_the_launches_cost_nothing_within_the_capture_sizes_and_the_law_past_them():
    assert LAW.eager_host_s(512, 48, 48) == 0.0
    assert LAW.eager_host_s(513, 48, 48) == pytest.approx(1e-3 + 48 * 5e-4 + 48 * 1e-3)  # 73 ms
    assert LAW.eager_host_s(4096, 32, 0) == pytest.approx(1e-3 + 32 * 5e-4)  # 17 ms
    assert EngineTiming(engine="y", version="", capture_sizes=SIZES).eager_host_s(4096, 32, 0) == 0.0  # unmeasured


def test_the_step_schedules_then_launches_on_one_thread():
    # async scheduling: max(gpu, host + launches); B = 100: host 2 + 1 = 3 ms, launches 17 ms
    assert LAW.step(0.010, 100, 0.017) == pytest.approx(0.020)
    assert LAW.step(0.030, 100, 0.017) == pytest.approx(0.030)
    sync = EngineTiming(engine="x", version="", capture_sizes=SIZES, step_s=0.002, per_seq_s=1e-5)
    assert sync.step(0.010, 100, 0.017) == pytest.approx(0.003 + 0.017)  # host, then max(gpu, launches)
    assert sync.step(0.030, 100, 0.017) == pytest.approx(0.003 + 0.030)
    o = EngineOverheads(step_s=0.002, per_seq_s=1e-5, overlap=True, eager_above_tokens=512, eager_s=0.017)
    assert o.combine(0.010, 100, 512) == pytest.approx(0.010)  # within the capture sizes: no launches
    assert o.combine(0.010, 100, 513) == pytest.approx(0.020)


def _lat(folder, name, walls, request=0.0068):
    """A lat.py result: a graphed 256-token prefill (the request's cost) and eager ones at 1,024 .. 4,096."""
    prefill = [{"P": 256, "median_s": request}] + [{"P": p, "median_s": w} for p, w in
                                                   zip((1024, 2048, 4096), walls, strict=True)]
    (folder / f"{name}-lat.json").write_text(json.dumps({"model": name, "prefill": prefill,
                                                          "engine": {"cudagraph_capture_sizes": [1, 256, 512]}}))


def test_derive_recovers_a_known_law_from_narrow_models(tmp_path):
    from validate.engines.derive import eager_host

    # walls built from step 0.8 ms + 0.6 ms a layer + 1.2 ms more a MoE layer over the request's 6.8 ms, with the
    # median (the middle wall) on the law; layer counts as roofline imports the narrow configs
    law = {"tiny-llama": (2, 0), "tiny-llama-32": (32, 0), "tiny-qwen3moe-48": (48, 48), "tiny-dsv2-27": (27, 26)}
    for name, (layers, moe) in law.items():
        t = 0.0068 + 0.0008 + 0.0006 * layers + 0.0012 * moe
        _lat(tmp_path, name, (t * 0.9, t, t * 1.1))
    values, sources, points = eager_host(tmp_path)
    assert values["eager_step_s"] == pytest.approx(0.0008, rel=1e-6)
    assert values["eager_layer_s"] == pytest.approx(0.0006, rel=1e-6)
    assert values["eager_moe_layer_s"] == pytest.approx(0.0012, rel=1e-6)
    assert {(p["model"], p["layers"], p["moe_layers"]) for p in points} == {(n, *lm) for n, lm in law.items()}


def test_an_moe_prefill_past_the_capture_sizes_costs_at_least_its_launches():
    t = timing("vllm")
    model = load_model("Qwen3-30B-A3B")  # 48 layers, each with routed experts
    launches = t.eager_step_s + 48 * (t.eager_layer_s + t.eager_moe_layer_s)
    pm = PhaseModel.build(model, load_hardware("H200"), Workload(context_tokens=4096, engine="vllm"),
                          parse_method("bf16"))
    assert pm.prefill_time(1, 2048) >= launches + t.request_s - 1e-12
    assert pm.prefill_time(1, 2048) == pytest.approx(launches + t.request_s)  # the launches set the pace here
    assert pm.prefill_time(1, 512) < launches  # within the capture sizes: graphs, no launches from Python
