"""The host's speed (roofline/engines/timing.py mechanism 11): an engine's host figures divided by it, its GPU
figures left alone; a lone served request's TTFT moves by its API path only; run 17's host, calibrated by its own
tiny server."""

import json
import math
from pathlib import Path

import pytest
from cli_run import run

from roofline.engines.timing import on_host, timing
from validate import stored

ROOT = Path(__file__).resolve().parents[2]
PROFILE = json.loads((ROOT / "roofline/engines/profiles/vllm.json").read_text())
RUN17 = ROOT / "validate/results/engines/nvidia-h200x2-vllm-2026-11-30-run17"
REFERENCE = ROOT / "validate/results/engines/nvidia-h200-vllm-2026-11-28"
LONE = ("simulate", "--model", "Llama-3.1-8B", "--hardware", "H200", "--method", "bf16", "--engine", "vllm",
        "--prompt-tokens", "128", "--output-tokens", "4", "--requests", "1", "--rate", "1", "--no-search", "--json")


def test_host_figures_divide_and_gpu_figures_stay():
    fast = on_host(timing("vllm"), 2.0)
    # the host work, from the profile file itself: halved
    for name in ("step_s", "per_seq_s", "server_step_s", "server_per_seq_s", "api_request_s", "request_s",
                 "eager_step_s", "eager_layer_s", "eager_moe_layer_s", "kv_post_s", "kv_post_descriptor_s",
                 "kv_handshake_s"):
        assert getattr(fast, name) == pytest.approx(float(PROFILE[name]) / 2, rel=1e-12), name
    # the GPU's: the engine's kernels, its sampler, the connector's completion (the wire and the remote NIC)
    assert fast.kernels["H200"]["attn_decode_bw"] == pytest.approx(PROFILE["kernels"]["H200"]["attn_decode_bw"])
    assert fast.sampler == timing("vllm").sampler
    assert fast.kv_descriptor_s == pytest.approx(float(PROFILE["kv_descriptor_s"]))
    assert fast.overlap == timing("vllm").overlap and fast.capture_sizes == timing("vllm").capture_sizes
    assert on_host(timing("vllm"), 1.0) is timing("vllm")


@pytest.mark.parametrize("speed", [0.0, -1.0, math.inf, math.nan])
def test_a_host_speed_that_is_not_a_positive_number_is_refused(speed):
    from roofline.errors import SpecError

    with pytest.raises(SpecError, match="host_speed"):
        on_host(timing("vllm"), speed)


def test_a_lone_requests_ttft_moves_by_its_api_path_alone(capsys):
    """An idle engine runs a 128-token prompt of an 8B at once; its TTFT is the request's own and the API server's
    cost (less the first step's host work, which the step charges) plus a GPU-bound step: at host speed 2 the first
    part halves, the step does not (the GPU's ~3.5 ms is above either host)."""
    ttft = {}
    for speed in ("1", "2"):
        code, out, err = run(capsys, *LONE, "--host-speed", speed)
        assert code == 0, err
        d = json.loads(out)
        ttft[speed] = (d[0] if isinstance(d, list) else d)["ttft_s"]["p50"]
    api = PROFILE["request_s"] + PROFILE["api_request_s"] - PROFILE["server_step_s"] - PROFILE["server_per_seq_s"]
    assert ttft["1"] - ttft["2"] == pytest.approx(api / 2, rel=1e-6)


def test_a_bad_host_speed_is_one_line(capsys):
    code, out, err = run(capsys, "plan", "--host-speed", "0")
    assert code == 2 and err.strip().startswith("roofline: error:") and "--host-speed" in err
    assert len(err.strip().splitlines()) == 1 and out == ""


def test_the_plan_says_its_host(capsys):
    code, out, err = run(capsys, "plan", "--engine", "vllm", "--hardware", "H200", "--method", "bf16",
                         "--host-speed", "1.75")
    assert code == 0, err
    assert "host 1.75x the vllm profile's" in out


def test_run_17s_host_calibrated_by_its_own_tiny_server(monkeypatch):
    """Run 17 (2 x H200, 2026-11-30) served a disaggregated pair and, on the same host in the same lease, the tiny
    server the profile's host figures come from (stage K). Its median TTFT at concurrency 1 read 9.50 ms against the
    profile host's 16.63: that ratio, nothing of the pair's figures, is the host speed. With it the model's TTFT p50
    at 4 and 8 requests/s is within 10 % of the pair's measured 58.88 / 63.60 ms (the profile's own host: +31 / +24
    %)."""
    import importlib

    import validate.engines.predict as predict

    monkeypatch.setenv("ROOFLINE_ENGINE_CASES", "cases-run17.json")
    try:
        run17 = importlib.reload(predict)
        speed = run17.host_speed_of(RUN17)
        own = json.loads((RUN17 / "tiny-conc1.json").read_text())["median_ttft_ms"]
        ref = json.loads((REFERENCE / "tiny-conc1.json").read_text())["median_ttft_ms"]
        assert speed == pytest.approx(ref / own) and 1.7 < speed < 1.8
        pd = run17.pd_predictions("H200", RUN17, ("--host-speed", f"{speed:.4f}"))
    finally:
        monkeypatch.delenv("ROOFLINE_ENGINE_CASES")
        importlib.reload(predict)
    for rate in ("pd-rate4", "pd-rate8"):
        measured = json.loads(stored.read_text(RUN17 / f"Llama-3.1-8B-{rate}.json"))["median_ttft_ms"] * 1e-3
        assert pd[rate]["ttft_s"]["p50"] == pytest.approx(measured, rel=0.10), rate


def test_the_simulation_says_its_host(capsys):
    code, out, err = run(capsys, *[a for a in LONE if a != "--json"], "--host-speed", "1.75")
    assert code == 0, err
    assert "host 1.75x its time profile's" in out
