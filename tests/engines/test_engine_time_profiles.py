"""An engine's time profile (roofline.engines.timing) and the lab's derivation of it (validate/engines): padding to
CUDA-graph sizes, host work and overlap, the affine fits, the start-up log lines. Expected values by hand."""

import json

import pytest

from roofline.engines.timing import IDEAL, EngineTiming, timing
from validate.engines.compare import parse_log
from validate.engines.derive import fit_affine, fit_host

# vLLM 0.24.0 default capture sizes: [1, 2, 4] + range(8, 256, 8) + range(256, max + 1, 16) (vllm/config/vllm.py:1644)
SIZES = (1, 2, 4, 8, 16, 24, 32, 40, 48, 56, 64, 72, 80, 88, 96, 104, 112, 120, 128)


def test_a_decode_batch_runs_at_the_next_captured_size():
    t = EngineTiming(engine="x", version="0", capture_sizes=SIZES)
    assert [t.padded(b) for b in (1, 3, 8, 9, 17, 128)] == [1, 4, 8, 16, 24, 128]
    assert t.padded(129) == 129  # past the largest graph the step runs at its own size


def test_host_work_adds_without_overlap_and_binds_with_it():
    t = EngineTiming(engine="x", version="0", step_s=1e-3, per_seq_s=1e-5)
    assert t.host_s(100) == pytest.approx(2e-3)
    assert t.step(5e-3, 100) == pytest.approx(7e-3)
    o = EngineTiming(engine="x", version="0", step_s=1e-3, per_seq_s=1e-5, overlap=True)
    assert o.step(5e-3, 100) == pytest.approx(5e-3)  # the GPU binds
    assert o.step(1e-3, 100) == pytest.approx(2e-3)  # the host binds


def test_ideal_costs_nothing_beyond_the_gpu():
    assert timing("ideal") is IDEAL
    assert IDEAL.step(3e-3, 256) == 3e-3 and IDEAL.padded(7) == 7


def test_affine_fit_recovers_a_known_law():
    alpha, rate = 12e-6, 3.2e12  # 12 us + bytes / 3.2 TB/s
    xs = [2 ** k * 1e6 for k in range(10)]
    ts = [alpha + x / rate for x in xs]
    a, r = fit_affine(xs, ts)
    assert a == pytest.approx(alpha, rel=1e-9) and r == pytest.approx(rate, rel=1e-9)
    s, p = fit_host([1, 8, 64, 256], [4e-3 + 2e-6 * b for b in (1, 8, 64, 256)])
    assert s == pytest.approx(4e-3) and p == pytest.approx(2e-6)


def test_the_engines_start_up_lines_are_read():
    # the format strings of vLLM 0.24: v1/worker/gpu_worker.py "Available KV cache memory: %s GiB",
    # v1/core/kv_cache_utils.py "GPU KV cache size: %s tokens" (f"{num_tokens:,}") and
    # "Maximum concurrency for %s tokens per request: %.2fx"
    text = ("(EngineCore pid=1) INFO gpu_worker.py:509] Available KV cache memory: 112.6 GiB\n"
            "INFO kv_cache_utils.py:2146] GPU KV cache size: 922,416 tokens\n"
            "INFO kv_cache_utils.py:2148] Maximum concurrency for 32,768 tokens per request: 28.15x\n")
    assert parse_log(text) == {"kv_gib": 112.6, "pool_tokens": 922416.0, "max_concurrency": 28.15}


def test_a_profile_file_with_a_missing_field_is_refused(tmp_path, monkeypatch):
    from roofline.engines import timing as mod
    from roofline.errors import SpecError

    (tmp_path / "broken.json").write_text(json.dumps({"version": "1"}))
    monkeypatch.setattr(mod, "PROFILES", tmp_path)
    mod.timing.cache_clear()
    try:
        with pytest.raises(SpecError, match="broken.json"):
            mod.timing("broken")
    finally:
        mod.timing.cache_clear()


def _vllm_concurrency(model, **flags):
    from roofline.catalogue.store import load_model
    from roofline.engines import GIB, EngineOptions, capacity

    m = load_model(model)
    return capacity(m, "vllm", EngineOptions(max_model_len=32768, kv_memory_bytes=100 * GIB, **flags)).max_concurrency


def test_prefix_caching_on_a_hybrid_holds_more_mamba_blocks_per_request():
    # vLLM 0.24.0 MambaSpec.max_memory_usage_bytes: 'none' 1 block, 'align' 2, 'all' cdiv(max_model_len, block).
    # Qwen3-Next-80B-A3B: 12 full-attention + 36 Gated DeltaNet layers -> groups of 12: 1 attention group, 3 mamba
    # groups; block raised to 544 tokens (tp 1 as tp 2 here: the ratio is what is checked). A request of 32,768
    # tokens holds cdiv(32768, 544) = 61 attention blocks + 3 x 1 (none) or 3 x 2 (align: no 'all' for Qwen3-Next).
    none = _vllm_concurrency("Qwen3-Next-80B-A3B")
    align = _vllm_concurrency("Qwen3-Next-80B-A3B", enable_prefix_caching=True)
    assert align / none == pytest.approx(64 / 67, rel=1e-12)
    # Jamba-1.5-Mini: 4 attention + 28 Mamba layers -> 1 + 7 groups, block 80: 410 + 7 (none) against 410 + 7 x 410
    # ('all': JambaForCausalLM implements SupportsMambaPrefixCaching)
    jamba = "tests/data/hf/Jamba-1.5-Mini/config.json"
    assert _vllm_concurrency(jamba, enable_prefix_caching=True) / _vllm_concurrency(jamba) == pytest.approx(
        417 / 3280, rel=1e-12)


def test_the_engines_attention_pays_its_cost_per_tile_on_top_of_its_law():
    # an engine's decode attention in its own steps (timing.py item 4): alpha + KV bytes / rate + tiles x cost
    from roofline.catalogue.store import load_hardware
    from roofline.costmodel.device import RooflineOptions, roofline_for
    from roofline.costmodel.graph import Op

    hw = load_hardware("H200")
    law = (("attn_decode_bw", 4e12), ("attn_decode_latency", 16e-6))
    plain = roofline_for(hw, options=RooflineOptions(kernels=law))
    tiled = roofline_for(hw, options=RooflineOptions(kernels=law + (("attn_decode_program", 13e-9),)))
    op = Op("attention", "full", 1, traffic={"kv_read": 285_736_960}, kind="attention", head_dim=128, programs=2048)
    # 2048 tiles (256 sequences x 8 KV heads) x 13 ns = 26.6 us more; an op without tiles pays nothing more
    assert float(tiled.op_times(op).total - plain.op_times(op).total) == pytest.approx(2048 * 13e-9)
    bare = Op("attention", "full", 1, traffic={"kv_read": 285_736_960}, kind="attention", head_dim=128)
    assert float(tiled.op_times(bare).total) == pytest.approx(float(plain.op_times(bare).total))


def test_vllm_runs_a_draft_model_without_async_scheduling(monkeypatch):
    # vllm/config/vllm.py (0.24.0): async scheduling off for draft-model speculation, kept for EAGLE / MTP; the
    # speculative step's serial host work (spec_step_s, here 1 ms by hand) follows the GPU's
    import roofline.engines.timing as timing_module
    from roofline.engines.scheduling import EngineOverheads, EngineScheduling, with_speculative

    monkeypatch.setattr(timing_module, "timing",
                        lambda engine: EngineTiming(engine="vllm", version="0.24.0", spec_step_s=1e-3))
    vllm = EngineScheduling("vllm", 1024, 8192, overheads=EngineOverheads(step_s=3e-3, overlap=True))
    drafted = with_speculative(vllm, "draft")
    assert not drafted.overheads.overlap
    assert drafted.overheads.combine(5e-3, 1) == pytest.approx(9e-3)  # 3 + 1 ms of host after 5 ms of GPU
    assert with_speculative(vllm, "eagle") is vllm and with_speculative(vllm, "mtp") is vllm
    assert with_speculative(vllm, None) is vllm


def test_vllm_fused_moe_law_is_paid_once_per_layer_and_routing_keeps_topk_alone():
    # micro.py times vLLM's fused_experts as ONE call (align, w13 GEMM, silu_and_mul, w2 GEMM, moe_sum:
    # vllm/model_executor/layers/fused_moe/fused_moe.py fused_experts_impl); at Qwen3-30B-A3B's shapes and M = 1 it
    # measured 41.76 us (validate/results/engines/nvidia-h200-vllm-2026-11-28/micro.json fused_moe, E 128 top-8,
    # H 2048, I 768: 8 active experts x 3 x 2048 x 768 x 2 B = 75,497,472 B). Under the vLLM profile a decode step's
    # routed experts at B = 1 cost that call's law once per MoE layer (within the law's fit residual), not twice its
    # alpha; the routing op keeps topk_softmax, one kernel (align and the activation are inside the timed call).
    from roofline.catalogue.store import load_hardware, load_model
    from roofline.methods import parse_method
    from roofline.planner.phases import PhaseModel
    from roofline.specs.workload import Workload

    model, hw = load_model("Qwen3-30B-A3B"), load_hardware("H200")
    pm = PhaseModel.build(model, hw, Workload(batch=1, context_tokens=4096, engine="vllm"), parse_method("bf16"))
    rows = {r["name"]: r for r in pm.rows("decode", 1, 1024)}
    per_layer = rows["experts"]["time_s"]
    # 41.76 us less the one-call replay's own fixed cost micro.py's timing carried (3.95 us, micro4's graph_floor)
    assert per_layer == pytest.approx(41.76e-6 - 3.95e-6, rel=0.05)
    law = timing("vllm").kernels["H200"]
    # (+ the token activations' few KiB at the same rate)
    assert per_layer == pytest.approx(law["grouped_gemm_latency"] + 75_497_472 / law["grouped_gemm_bw"], rel=1e-3)
    assert pm.decode.ops[[o.name for o in pm.decode.ops].index("routing")].kernels == 1
    ideal = PhaseModel.build(model, hw, Workload(batch=1, context_tokens=4096), parse_method("bf16"))
    assert ideal.decode.ops[[o.name for o in ideal.decode.ops].index("routing")].kernels == 3  # the fusion table's


def test_a_draft_pass_host_work_by_hand():
    """draft_pass_s + draft_layer_s x layers: 0.2 ms + 16 x 0.05 ms = 1.0 ms a pass of Llama-3.2-1B (16 layers)."""
    t = EngineTiming(engine="vllm", version="0.24.0", spec_step_s=1e-3, draft_pass_s=2e-4, draft_layer_s=5e-5)
    assert t.draft_pass_host_s(16) == pytest.approx(1e-3)
    assert t.draft_pass_host_s(2) == pytest.approx(3e-4)


def test_derive_spec_host_recovers_hand_made_costs(tmp_path):
    """spec_step.py's multiprocess walls built by hand from a 3 ms step with no draft, a fixed 1 ms per speculative
    step and a pass of 0.2 ms + 0.05 ms per draft layer (tiny-llama 2 layers: 0.3 ms; Llama-3.2-1B 16: 1.0 ms), at
    two batches (the same walls: medians) and one case read from a diag log: derive.spec_host gives the three numbers
    back, and the 32-layer check draft's residual (measured 10 % over the law's 1 + 3 x 1.8 = 6.4 ms)."""
    from validate.engines.derive import spec_host

    def case(draft, k, added_ms, b=1):
        return {"target": "tiny-llama", "draft": draft, "K": k, "B": b, "multiprocess": True,
                "step_wall_s": (3.0 + added_ms) * 1e-3}
    cases = [case("-", 0, 0.0), case("-", 0, 0.0, 16), case("tiny-llama", 1, 1.0 + 0.3),
             case("tiny-llama", 3, 1.0 + 3 * 0.3), case("Llama-3.2-1B", 1, 1.0 + 1.0),
             case("Llama-3.2-1B", 3, 1.0 + 3 * 1.0), case("Llama-3.2-1B", 3, 1.0 + 3 * 1.0, 16),
             case("tiny-llama-32", 3, 6.4 * 1.1)]
    (tmp_path / "spec").mkdir()
    (tmp_path / "diag").mkdir()
    (tmp_path / "spec" / "spec_step_mp.json").write_text(json.dumps({"cases": cases[:-1]}))
    (tmp_path / "diag" / "t32.log").write_text("noise\nSPECCASE " + json.dumps(cases[-1]) + "\n")
    values, sources, residuals = spec_host(tmp_path)
    assert values["spec_step_s"] == pytest.approx(1e-3)
    assert values["draft_pass_s"] == pytest.approx(2e-4)
    assert values["draft_layer_s"] == pytest.approx(5e-5)
    assert set(sources) == set(values)
    assert residuals["tiny-llama-32:3"] == pytest.approx(1 / 1.1 - 1, abs=1e-4)
    assert residuals["Llama-3.2-1B:3"] == pytest.approx(0.0, abs=1e-4)
    (tmp_path / "spec" / "spec_step_mp.json").write_text(json.dumps({"cases": cases[:3]}))
    with pytest.raises(SystemExit, match="no multiprocess result for tiny-llama:3"):
        spec_host(tmp_path)
