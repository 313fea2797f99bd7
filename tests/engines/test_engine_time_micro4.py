"""The engine's kernels micro4 measured (roofline.engines.timing mechanism 9 and the KV-write / graph kernel
ceilings) and their derivation (validate/engines/derive.py micro4_kernels). Expected values by hand."""

from dataclasses import replace
from pathlib import Path

import pytest

from roofline.engines.timing import IDEAL, EngineTiming, timing
from validate.engines.derive import derive, graph_replay, kv_write_law, less_replay, sampler_law


def test_the_sampler_law_costs_latency_plus_rows_times_vocabulary_over_its_rate():
    t = EngineTiming(engine="x", version="0", sampler={"H200": (10e-6, 1e11)})
    # 256 rows x 128,256 tokens = 32,833,536 elements at 1e11 a second: 328.34 us, + 10 us
    assert t.sampler_s("H200", 256, 128256) == pytest.approx(338.33536e-6)
    assert t.sampler_s("H100", 256, 128256) == 0.0  # not measured on that GPU
    assert t.sampler_s("H200", 0, 128256) == 0.0  # nothing sampled
    assert IDEAL.sampler_s("H200", 256, 128256) == 0.0


def test_graph_replay_separates_the_replays_fixed_cost_from_the_per_kernel_time():
    micro4 = {"graph_floor": [{"kernels": k, "s": 4e-6 + 1.2e-6 * k} for k in (1, 16, 64, 256)]}
    replay, per_kernel = graph_replay(micro4)
    assert replay == pytest.approx(4e-6) and per_kernel == pytest.approx(1.2e-6)


def test_the_sampler_and_kv_write_laws_are_recovered_less_the_replay():
    replay = 4e-6
    micro4 = {"sampler": [{"B": b, "V": v, "cast_and_sample_s": replay + 12e-6 + b * v / 8.5e10}
                          for b, v in ((32, 128256), (256, 128256), (32, 32000), (256, 32000))],
              "kv_write": [{"T": t, "hk": 8, "d": 128, "s": replay + 2e-6 + 2 * t * 8 * 128 * 2 / 7e11}
                           for t in (32, 256, 2048)]}
    a, rate = sampler_law(micro4, replay)
    assert a == pytest.approx(12e-6) and rate == pytest.approx(8.5e10)
    a, rate = kv_write_law(micro4, replay)
    assert a == pytest.approx(2e-6) and rate == pytest.approx(7e11)


def test_micro_py_s_one_call_kernels_are_fitted_less_the_replay(tmp_path):
    """micro.py timed FA3's paged decode and the fused MoE as the one call of a replayed graph: the decode attention
    and fused-MoE laws come out of derive() less that replay's fixed cost, as micro4's laws do (each kernel in the
    engine's step is one of hundreds in one replay)."""
    import json
    replay = 3.95e-6
    fa3 = [{"B": b, "L": n, "window": None, "kv_bytes_read": kv, "s": replay + 12e-6 + kv / 4e12}
           for b, n, kv in ((1, 1024, 4e6), (8, 8192, 2.5e8), (32, 16384, 2e9))]
    moe = [{"M": m, "E": 128, "topk": 8, "H": 2048, "I": 768, "active_experts": e,
            "active_weight_bytes": e * 3 * 2048 * 768 * 2, "s": replay + 20e-6 + e * 3 * 2048 * 768 * 2 / 4e12}
           for m, e in ((1, 8), (4, 30), (16, 83), (64, 126), (4096, 128))]
    moe[-1]["s"] = 890e-6  # the prefill-sized batch: FLOP/s = 2 M k 3 H I / (890 - 3.95) us
    pre = [{"P": 16384, "hq": 32, "hk": 8, "d": 128, "window": None, "s": 5e-3, "flops": 4 * 16384 ** 2 * 32 * 128 / 2,
            "flops_per_s": 4 * 16384 ** 2 * 32 * 128 / 2 / 5e-3}]
    (tmp_path / "micro.json").write_text(json.dumps({"fa3_decode": fa3, "fused_moe": moe, "fa3_prefill": pre}))
    (tmp_path / "tiny-llama-lat.json").write_text(json.dumps({
        "engine": {"async_scheduling": True, "cudagraph_capture_sizes": [1, 2, 4]},
        "decode": [{"B": 1, "decode_step_s": 2e-3}, {"B": 8, "decode_step_s": 2.1e-3}],
        "prefill": [{"P": 128, "median_s": 6e-3}]}))
    k = derive(tmp_path, "H200", replay_s=replay)["kernels"]["H200"]
    assert k["attn_decode_latency"] == pytest.approx(12e-6) and k["attn_decode_bw"] == pytest.approx(4e12)
    assert k["grouped_gemm_latency"] == pytest.approx(20e-6) and k["grouped_gemm_bw"] == pytest.approx(4e12)
    assert k["grouped_gemm_flops"] == pytest.approx(2 * 4096 * 8 * 3 * 2048 * 768 / 886.05e-6)
    assert less_replay(pre, replay)[0]["flops_per_s"] == pytest.approx(4 * 16384 ** 2 * 32 * 128 / 2 / 4.99605e-3)
    # without the replay the fits keep it in alpha: the law before (3.95 us more per call)
    k0 = derive(tmp_path, "H200")["kernels"]["H200"]
    assert k0["grouped_gemm_latency"] == pytest.approx(23.95e-6)
    assert k0["attn_decode_latency"] == pytest.approx(15.95e-6)


def test_the_vllm_profile_charges_the_sampler_on_the_h200_decode_step(monkeypatch):
    from roofline.catalogue.loading import validate
    from roofline.catalogue.store import load_hardware, load_model
    from roofline.methods.registry import parse_method
    from roofline.planner import phases
    from roofline.specs import Workload

    measured = timing("vllm")
    latency, rate = measured.sampler["H200"]
    wl = validate(Workload, {"batch": 1, "context_tokens": 4096, "engine": "vllm"}, "workload")
    pm = phases.PhaseModel.build(load_model("Llama-3.1-8B"), load_hardware("H200"), wl, parse_method("bf16"))
    with_sampler = pm.decode_time(256, 1024)
    monkeypatch.setattr(phases, "timing_on", lambda engine, speed=1.0: replace(measured, sampler={}))
    without = pm.decode_time(256, 1024)
    # a dense 8B step at B = 256 is GPU-bound (~12 ms against ~8 ms of host), so the sampler adds in full:
    # latency + 256 x 128,256 (Llama-3.1-8B's vocabulary) / rate
    assert with_sampler - without == pytest.approx(latency + 256 * 128256 / rate, rel=1e-9)
    assert latency + 256 * 128256 / rate == pytest.approx(400e-6, rel=0.05)  # micro4: 402 us less a 4 us replay


def test_the_kv_update_row_meets_the_engines_kv_write_law_on_the_h200():
    from roofline.catalogue.loading import validate
    from roofline.catalogue.store import load_hardware, load_model
    from roofline.methods.registry import parse_method
    from roofline.planner.phases import PhaseModel
    from roofline.specs import Workload

    k = timing("vllm").kernel_ceilings("H200")
    wl = validate(Workload, {"batch": 1, "context_tokens": 4096, "engine": "vllm"}, "workload")
    pm = PhaseModel.build(load_model("Llama-3.1-8B"), load_hardware("H200"), wl, parse_method("bf16"))
    row = next(r for r in pm.rows("decode", 32, 1024) if r["name"] == "kv_update")
    # one reshape_and_cache_flash a layer: 32 tokens x 8 KV heads x 128 x (K, V) x 2 bytes = 131,072 bytes
    assert row["time_s"] == pytest.approx(k["kv_write_latency"] + 131072 / k["kv_write_bw"], rel=1e-9)
    ideal = PhaseModel.build(load_model("Llama-3.1-8B"), load_hardware("H200"),
                             validate(Workload, {"batch": 1, "context_tokens": 4096}, "workload"), parse_method("bf16"))
    assert next(r for r in ideal.rows("decode", 32, 1024) if r["name"] == "kv_update")["time_s"] < 1.5e-6


def test_a_file_that_is_not_micro4s_result_is_refused_and_nothing_written(tmp_path, monkeypatch, capsys):
    import sys

    from validate.engines import derive

    bad, out = tmp_path / "micro4.json", tmp_path / "vllm.json"
    bad.write_text('{"graph_floor": []}')
    results = Path(__file__).resolve().parents[2] / "validate" / "results" / "engines" / "nvidia-h200-vllm-2026-11-28"
    monkeypatch.setattr(sys, "argv", ["derive", str(results),
                                      "--micro4", str(bad), "--out", str(out)])
    with pytest.raises(SystemExit) as exc:
        derive.main()
    assert exc.value.code == 2 and not out.exists()
    assert "--micro4" in capsys.readouterr().err
