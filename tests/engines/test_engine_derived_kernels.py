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
    # the fused MoE's prefill-batch rate on the H200 is the engine's own micro.json timing at M = 4096 (run 1):
    # 2 M k 3 H I / t = 2 x 4096 x 8 x 3 x 2048 x 768 / (890.208 - 3.952) us (the call less a one-call graph
    # replay's own fixed cost, micro4's graph_floor intercept), not the derived table's
    assert t.kernel_ceilings("H200")["grouped_gemm_flops"] == pytest.approx(
        2 * 4096 * 8 * 3 * 2048 * 768 / (890.2080059051513e-6 - 3.952394537454673e-6), rel=1e-9)
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


def _synthetic_db(tmp_path):
    """A one-system aiconfigurator folder whose vLLM tables follow known laws (times in ms, as the wheel stores)."""
    import pandas as pd

    from roofline.catalogue.derive.tables import Database

    root = tmp_path / "aiconfigurator_core"
    base = root / "systems" / "data" / "h200_sxm"
    for family in ("attention", "moe"):
        (base / family / "vllm" / "0.24.0").mkdir(parents=True)
    gen = [{"batch_size": b, "isl": 1, "step": ctx - 1, "num_heads": 32, "num_key_value_heads": 8, "head_dim": 128,
            "kv_cache_dtype": "bfloat16", "window_size": 0, "kernel_source": "vllm_flash_attn_fa3",
            "latency": (20e-6 + 2 * b * ctx * 8 * 128 * 2 / 4e12) * 1e3}
           for b, ctx in ((1, 16384), (32, 16384), (8, 8192))]
    pd.DataFrame(gen).to_parquet(base / "attention/vllm/0.24.0/generation_attention_perf.parquet")
    p = 16384
    ctx = [{"batch_size": 1, "isl": p, "num_heads": 32, "num_key_value_heads": 8, "head_dim": 128,
            "kv_cache_dtype": "bfloat16", "window_size": 0, "kernel_source": "vllm_flash_attn_fa3",
            "latency": 4 * p * p * 32 * 128 / 2 / 6e14 * 1e3}]
    pd.DataFrame(ctx).to_parquet(base / "attention/vllm/0.24.0/context_attention_perf.parquet")
    expert = 3 * 2048 * 768 * 2
    rows = [{"moe_dtype": "bfloat16", "moe_tp_size": 1, "moe_ep_size": 1, "num_experts": 128, "topk": 8,
             "hidden_size": 2048, "inter_size": 768, "kernel_source": "triton", "distribution": "balanced",
             "num_tokens": m, "latency": (25e-6 + min(128, 8 * m) * expert / 4.5e12) * 1e3} for m in (1, 4, 16, 64)]
    rows.append({**rows[0], "distribution": "power_law_1.01", "num_tokens": 4096,
                 "latency": 2 * 4096 * 8 * expert / 2 / 3.5e14 * 1e3})
    pd.DataFrame(rows).to_parquet(base / "moe/vllm/0.24.0/moe_perf.parquet")
    return Database(root=root, version="0.0-test")


def test_the_converter_recovers_the_laws_its_tables_follow(tmp_path):
    from roofline.catalogue.derive.engine_kernels import derive_system

    d = derive_system(_synthetic_db(tmp_path), "h200_sxm", l2_bytes=0, dram_bytes_per_s=4.8e12)
    k = d["kernels"]
    assert k["attn_decode_latency"] == pytest.approx(20e-6, rel=1e-6)
    assert k["attn_decode_bw"] == pytest.approx(4e12, rel=1e-6)
    assert k["grouped_gemm_latency"] == pytest.approx(25e-6, rel=1e-6)  # balanced: min(E, M k) experts, exact
    assert k["grouped_gemm_bw"] == pytest.approx(4.5e12, rel=1e-6)
    assert k["grouped_gemm_flops"] == pytest.approx(3.5e14, rel=1e-6)
    assert d["attention_flops"] == {128: pytest.approx(6e14, rel=1e-9)}
    # a law streaming faster than the device's DRAM is rows read from the L2: left out
    d2 = derive_system(_synthetic_db(tmp_path / "b"), "h200_sxm", l2_bytes=0, dram_bytes_per_s=4.0e12)
    assert "grouped_gemm_bw" not in d2["kernels"] and "grouped_gemm_flops" in d2["kernels"]


def test_a_bad_package_is_a_one_line_error_and_nothing_written(tmp_path, capsys, monkeypatch):
    from roofline.catalogue.derive import engine_kernels

    target = tmp_path / "vllm-derived.json"
    monkeypatch.setattr(engine_kernels, "PROFILE", target)
    assert engine_kernels.main(["--package", str(tmp_path), "--write"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "--package" in err
    assert not target.exists()
