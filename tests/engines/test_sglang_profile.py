"""SGLang's time profile (roofline/engines/profiles/sglang.json, validate/engines/derive_sglang.py): its host law from
the tiny model's own steps, and what it changes in a served request (SGLang run 1, one H200, 2026-11-30)."""

import json
from pathlib import Path

import pytest
from cli_run import run

from roofline.engines.timing import timing

ROOT = Path(__file__).resolve().parents[2]
RUN = ROOT / "validate/results/engines/nvidia-h200-sglang-2026-11-30-run1"
PROFILE = json.loads((ROOT / "roofline/engines/profiles/sglang.json").read_text())


def test_the_host_law_meets_the_tiny_models_steps():
    """The tiny model's GPU work is ~0.1 ms, so its offline decode step is SGLang's host work: the law within 3 % of
    each measured step (1.563 ms at B = 1 .. 3.498 ms at B = 256)."""
    t = timing("sglang")
    lat = json.loads((RUN / "tiny-llama-lat.json").read_text())
    for d in lat["decode"]:
        assert t.host_s(d["B"]) == pytest.approx(d["decode_step_s"], rel=0.03), d["B"]
    assert t.overlap  # SGLang's overlap scheduler was on (server_info disable_overlap_schedule False)
    assert t.capture_sizes[0] == 1 and t.capture_sizes[-1] == 256


def test_a_lone_sglang_requests_ttft_carries_the_servers_own_cost(capsys):
    """A lone request's TTFT pays the request's own and the API server's cost less the first step's host work
    (scheduling.measured_overheads); at host speed 100 that part is a hundredth."""
    argv = ("simulate", "--model", "Llama-3.1-8B", "--hardware", "H200", "--method", "bf16", "--engine", "sglang",
            "--prompt-tokens", "128", "--output-tokens", "4", "--requests", "1", "--rate", "1", "--no-search",
            "--json")
    ttft = {}
    for speed in ("1", "100"):
        code, out, err = run(capsys, *argv, "--host-speed", speed)
        assert code == 0, err
        d = json.loads(out)
        ttft[speed] = (d[0] if isinstance(d, list) else d)["ttft_s"]["p50"]
    api = PROFILE["request_s"] + PROFILE["api_request_s"] - PROFILE["server_step_s"] - PROFILE["server_per_seq_s"]
    assert ttft["1"] - ttft["100"] == pytest.approx(api * 0.99, rel=1e-6)


def test_sglang_run_1s_short_prefill():
    """Judged against the run (the profile's input is the tiny model only): Llama-3.1-8B's 256-token prefill read
    18.67 ms, the GPU work alone 7.05 (-62 %); with SGLang's measured request cost within 15 %."""
    from roofline.catalogue.loading import validate
    from roofline.catalogue.store import load_hardware, load_model
    from roofline.methods.registry import parse_method
    from roofline.planner.phases import PhaseModel
    from roofline.specs import Workload

    lat = json.loads((RUN / "Llama-3.1-8B-lat.json").read_text())
    measured = next(p["median_s"] for p in lat["prefill"] if p["P"] == 256)
    wl = validate(Workload, {"batch": 1, "context_tokens": 8193, "engine": "sglang", "page_tokens": 1}, "workload")
    pm = PhaseModel.build(load_model("Llama-3.1-8B"), load_hardware("H200"), wl, parse_method("bf16"))
    assert pm.prefill_time(1, 256) == pytest.approx(measured, rel=0.15)


def test_sglangs_capacity_trust_names_its_runs(capsys):
    """The trust line of `capacity --engine sglang` on the H200 states the runs' worst pool error: run 2's 8B at
    mem_fraction_static 0.80 and context 8,192 logged max_total_num_tokens 788,619 (its -lat.json server_info), where
    `capacity` predicts the pool at that setting; run 1's 3 logged pools, run 2's 6, run 3's 2 (launch_server: the 8B
    and Qwen3-30B-A3B) and run 3b's 4 (the narrow models offline) make 15, of 4 runs."""
    code, out, err = run(capsys, "capacity", "--model", "Llama-3.1-8B", "--hardware", "H200", "--engine", "sglang",
                         "--max-model-len", "8192", "--gpu-memory-utilization", "0.8", "--json")
    assert code == 0, err
    d = json.loads(out)
    run2 = RUN.parent / "nvidia-h200-sglang-2026-11-30-run2"
    logged = json.loads((run2 / "Llama-3.1-8B-mf80-lat.json").read_text())["server_info"]["max_total_num_tokens"]
    assert logged == 788619
    text = d["trust"]["text"] if isinstance(d.get("trust"), dict) else json.dumps(d)
    assert f"{(d['pool_tokens'] / logged - 1) * 100:+.2f} % at worst on 15 logged pools of 4 real sglang runs" in text


def test_sglangs_kernels_in_its_profile_are_the_alone_timings_less_the_replays_own_cost():
    """SGLang's FA3 decode law on the H200 (profiles/sglang.json kernels.H200) is micro_sglang.py's alone timing less a
    one-call CUDA-graph replay's fixed cost. By hand: micro4's graph_floor (one replay of K dependent one-element
    kernels: 4.864, 22.848, 80.288, 307.360 us at K 1, 16, 64, 256) by ordinary least squares, slope = (n Sxt - Sx St)
    / (n Sxx - Sx^2) with n 4, Sx 337, Sxx 70,049, St 415.36, Sxt 84,107.8 -> 1.1856 us a kernel, intercept (St -
    slope Sx) / n = 3.952 us. FA3 decode at B 1, L 1,056, 8 KV heads took 16.224 us alone, so ~12.27 us in the
    engine's graph; the profile's law there (alpha + 1 x 1,056 x 2 x 8 x 128 x 2 B / rate) is within 10 % of it."""
    n, sx, sxx = 4, 1 + 16 + 64 + 256, 1 + 16 ** 2 + 64 ** 2 + 256 ** 2
    ts = [4.864, 22.848, 80.288, 307.360]
    st, sxt = sum(ts), 1 * 4.864 + 16 * 22.848 + 64 * 80.288 + 256 * 307.360
    slope = (n * sxt - sx * st) / (n * sxx - sx * sx)
    replay_us = (st - slope * sx) / n
    assert replay_us == pytest.approx(3.952, abs=0.002)
    law = json.loads((Path(__file__).resolve().parents[2] / "roofline" / "engines" / "profiles" / "sglang.json")
                     .read_text())["kernels"]["H200"]
    kv = 1 * 1056 * 2 * 8 * 128 * 2
    predicted_us = (law["attn_decode_latency"] + kv / law["attn_decode_bw"]) * 1e6
    assert predicted_us == pytest.approx(16.224 - replay_us, rel=0.10)
    assert predicted_us < 16.224 - 2  # not the alone timing with its replay


RUN3B = ROOT / "validate/results/engines/nvidia-h200-sglang-2026-11-30-run3b"


def test_sglangs_eager_decode_law_meets_the_narrow_models_steps_past_its_graphs():
    """Mechanism 8 for SGLang (run 3b, lat_sglang.py on the narrow models): a decode batch past B 256 runs without
    CUDA graphs. By hand from the run's files, the 32-layer narrow Llama's step read 2.688 ms at B 256 (graphed) and
    23.974 ms at B 288, its graphed slope from B 16 (1.766 ms) (2.688 - 1.766) / 240 = 3.84 us a sequence, so the
    launches cost 23.974 - (2.688 + 32 x 0.00384) = 21.16 ms; the 48-layer narrow Qwen3 MoE's 69.105 ms at B 288
    less (5.004 + 32 x (5.004 - 2.518) / 240) = 63.77 ms, at B 384 90.262 - (5.004 + 128 x 0.01036) = 83.93 ms
    (each point read once). The profile's law (a least-squares fit over 8 such points) within 5 % of the 32-layer
    point; for the MoE between its two points (the fit's MoE term is their mean less the dense layers')."""
    t = timing("sglang")
    assert t.eager_launch_s(32, 0) * 1e3 == pytest.approx(23.974 - (2.688 + 32 * (2.688 - 1.766) / 240), rel=0.05)
    moe_slope = (5.004 - 2.518) / 240
    low, high = 69.105 - (5.004 + 32 * moe_slope), 90.262 - (5.004 + 128 * moe_slope)
    assert low < t.eager_launch_s(48, 48) * 1e3 < high
    assert t.eager_launch_s(48, 48) * 1e3 == pytest.approx((low + high) / 2, rel=0.01)
    lat = {p.name: json.loads(p.read_text()) for p in RUN3B.glob("*-lat.json")}
    assert {d["B"]: round(d["decode_step_s"] * 1e3, 3) for d in lat["tiny-llama-32-lat.json"]["decode"]} == {
        16: 1.766, 256: 2.688, 288: 23.974, 384: 23.826}
    # the threshold is the largest decode graph (B 256); a prefill runs eagerly only past SGLang's prefill graphs
    assert t.eager_above() == 256 and t.eager_above(prefill=True) == 8192
    assert t.eager_host_s(256, 32, 0) == 0.0 and t.eager_host_s(257, 32, 0) > 0.02
    assert t.eager_host_s(1024, 32, 0, prefill=True) == 0.0 and t.eager_host_s(8193, 32, 0, prefill=True) > 0.02


def test_vllms_eager_threshold_is_one_for_every_step():
    """vLLM's graphs count the tokens of any step (FULL_AND_PIECEWISE up to 512): no prefill limit of its own."""
    t = timing("vllm")
    assert t.prefill_capture_tokens == 0
    assert t.eager_above() == t.eager_above(prefill=True) == t.capture_sizes[-1]
