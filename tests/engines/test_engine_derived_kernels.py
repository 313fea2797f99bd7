"""Per-GPU engine kernels derived from aiconfigurator (roofline.catalogue.derive.engine_kernels ->
profiles/vllm-derived.json), how the time profile merges them, the version rule of vLLM's asynchronous scheduling,
and the routed experts' law inside the serving step model. Expected values by hand or from the planner's own path."""

import json
from pathlib import Path

import numpy as np
import pytest

from roofline.catalogue.derive.engine_kernels import check, fit_affine
from roofline.engines.scheduling import vllm_async_scheduling
from roofline.engines.timing import PROFILES, timing
from roofline.errors import SpecError

E = np.zeros(0, dtype=np.int64)


def test_the_fit_recovers_a_known_law_as_the_labs_does():
    # t = 20 us + x / 4 TB/s at three sizes: the law itself comes back
    xs = [1e6, 1e8, 1e9]
    alpha, rate = fit_affine(xs, [20e-6 + x / 4e12 for x in xs])
    assert alpha == pytest.approx(20e-6, rel=1e-9) and rate == pytest.approx(4e12, rel=1e-9)


def test_the_h200_check_is_derived_over_measured_minus_one():
    derived = {"kernels": {"attn_decode_bw": 4.4e12}, "attention_flops": {128: 6.6e14}}
    measured = {"kernels": {"H200": {"attn_decode_bw": 4.0e12, "grouped_gemm_bw": 1.0}},
                "attention_flops": {"H200": {"128": 6.0e14}}}
    assert check(derived, measured) == pytest.approx({"attn_decode_bw": 0.1, "attention_flops:128": 0.1})


def test_a_measured_gpu_keeps_its_own_kernels_and_others_take_the_derived_ones():
    measured = json.loads((PROFILES / "vllm.json").read_text())
    derived = json.loads((PROFILES / "vllm-derived.json").read_text())
    t = timing("vllm")
    assert t.kernel_ceilings("H200") == measured["kernels"]["H200"]  # the lead's figures, untouched
    assert "grouped_gemm_flops" not in t.kernel_ceilings("H200")
    assert t.kernel_ceilings("A100-80GB") == derived["kernels"]["A100-80GB"]
    assert t.attention_rates("A100-80GB") == {int(h): r for h, r in derived["attention_flops"]["A100-80GB"].items()}
    assert t.kernel_ceilings("RTX-4090") == {}  # in neither file
    assert "aiconfigurator" in t.sources["derived:A100-80GB"]


def test_a_broken_derived_file_is_refused_with_its_name(tmp_path, monkeypatch):
    from roofline.engines import timing as mod

    (tmp_path / "vllm.json").write_text((PROFILES / "vllm.json").read_text())
    (tmp_path / "vllm-derived.json").write_text(json.dumps({"kernels": {"A100-80GB": {"attn_decode_bw": "fast"}}}))
    monkeypatch.setattr(mod, "PROFILES", tmp_path)
    mod.timing.cache_clear()
    try:
        with pytest.raises(SpecError, match="vllm-derived.json"):
            mod.timing("vllm")
    finally:
        mod.timing.cache_clear()


@pytest.mark.parametrize("release,flag,expected", [("0.11.0", False, False), ("0.10.2", False, False),
                                                   ("0.11.0", True, True), ("0.14.0", False, True),
                                                   ("0.24.0", False, True), (None, False, True)])
def test_async_scheduling_by_release_and_flag(release, flag, expected):
    # vllm-project/vllm PR #27614 turned it on by default; 0.10 / 0.11 need --async-scheduling
    assert vllm_async_scheduling(release, flag) is expected


def test_a_release_that_is_not_a_version_is_refused():
    with pytest.raises(SpecError, match="engine release"):
        vllm_async_scheduling("nightly")


def test_the_serving_step_gives_the_experts_the_engines_law_as_the_plan_does():
    """A lone prompt of an MoE model is the planner's prefill phase (the step model's identity), also where the
    engine's fused-MoE law replaces the dense GEMM's for the routed experts (vLLM on the A100: derived kernels)."""
    from roofline.catalogue import load_hardware, load_model
    from roofline.methods import parse_method
    from roofline.planner.phases import PhaseModel
    from roofline.serving.stepmodel import StepModel
    from roofline.specs import Workload

    model, a100 = load_model("Qwen3-30B-A3B"), load_hardware("A100-80GB")
    phases = PhaseModel.build(model, a100, Workload(context_tokens=4096, engine="vllm", prefill_chunk_tokens=4096),
                              parse_method("bf16"))
    steps = StepModel(phases, 4096, 4096 + 256)
    prefill = steps.step_time(E, np.array([0]), np.array([2048]), np.array([True]))
    # the planner's engine prefill adds the request's own host cost (timing.request_s); the step model charges
    # host work apart (EngineOverheads), so its GPU time is the phase's less that cost
    assert prefill == pytest.approx(phases.prefill_time(1, 2048) - timing("vllm").request_s, rel=1e-9)
    ideal = PhaseModel.build(model, a100, Workload(context_tokens=4096, prefill_chunk_tokens=4096),
                             parse_method("bf16"))
    # the fused MoE's rate is below the dense GEMM's
    assert phases.prefill_time(1, 2048) - timing("vllm").request_s > ideal.prefill_time(1, 2048)


def test_the_committed_derived_profile_names_its_tables():
    derived = json.loads((PROFILES / "vllm-derived.json").read_text())
    for gpu, source in derived["sources"].items():
        assert "aiconfigurator-core" in source and f"/{gpu}" not in source  # systems/data/<system>/...
        assert all(Path(p.split(": ", 1)[-1]).suffix == ".parquet" for p in source.split("; "))
