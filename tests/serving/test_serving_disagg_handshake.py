"""A fresh disaggregated pair's first KV connector handshake (roofline/engines/timing.py mechanism 13;
serving.remote.Handshake; `simulate --cold-start --disaggregate`).

By hand, from vLLM 0.24's NixlConnector (nixl/pull_worker.py:63-75, base_worker.py:752-827): the first load a
decode worker posts from a prefill engine it has not met starts one background handshake with it and is not posted;
every load from that engine posted before the handshake ends attaches to the same future; all of them are posted by
the first worker call after its end. So, on an idle pair, the lone first request's transfer starts kv_handshake_s
later and its TTFT grows by exactly kv_handshake_s; a second request posted during the handshake starts its transfer
at the handshake's end too (same prompt, same transfer: same first-token step as the first); a request after it
pays nothing. The figure: run 17's first warm-up request's decode leg, 1796004762.7088 - 1796004761.3203 = 1.3885 s
at the proxy, less the warm pair's median decode leg at its next rate (36.5 ms over 80 requests): 1.352 s on run 17's
host, whose tiny server read a median TTFT at concurrency 1 of 9.500 ms against the profile host's 16.626 ms (host
speed 1.7501, timing mechanism 11); the profile keeps it at its own host: 1.352 x 1.7501 = 2.366 s.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from roofline.catalogue import load_hardware, load_model
from roofline.engines.timing import PROFILES
from roofline.methods import parse_method
from roofline.serving.disagg import Disaggregated, KvLink
from roofline.serving.requests import Requests
from roofline.serving.simulate import Simulator
from roofline.specs import Workload
from tests.cli_run import run
from validate.engines.derive_handshake import handshake_seconds

H200 = load_hardware("H200")
RUN17 = "validate/results/engines/nvidia-h200x2-vllm-2026-11-30-run17"
HANDSHAKE_S = json.loads((PROFILES / "vllm.json").read_text())["kv_handshake_s"]


@pytest.fixture
def one_figure():
    """The profile's handshake as one figure, kv_handshake_s for any pool (the per-descriptor law off: its growth with
    the pool is tests/serving/test_serving_disagg_handshake_pool.py's): here: who waits, not how long."""
    from roofline.engines.timing import timing

    engine = timing("vllm")
    was = (engine.kv_handshake_fixed_s, engine.kv_handshake_descriptor_s)
    object.__setattr__(engine, "kv_handshake_fixed_s", 0.0)
    object.__setattr__(engine, "kv_handshake_descriptor_s", 0.0)
    yield
    object.__setattr__(engine, "kv_handshake_fixed_s", was[0])
    object.__setattr__(engine, "kv_handshake_descriptor_s", was[1])


def pools(cold: bool, prefill: int = 1, prefill_tp: int = 1, decode_tp: int = 1) -> Disaggregated:
    model, method = load_model("Llama-3.1-8B"), parse_method("bf16")
    dec = Simulator(model, H200, Workload(context_tokens=4096, tp=decode_tp, engine="vllm"), method, max_tokens=4096)
    pre = Simulator(model, H200, Workload(context_tokens=4096, tp=prefill_tp, engine="vllm"), method,
                    max_tokens=4096, engine=dec.engine)
    dec.cold_start = cold
    return Disaggregated(pre, dec, prefill, 1, KvLink(386e9, 5e-6))


def requests(arrivals, prompt=512, output=16) -> Requests:
    n = len(arrivals)
    return Requests(np.array(arrivals, dtype=float), np.full(n, prompt, dtype=np.int64),
                    np.full(n, output, dtype=np.int64))


def test_profile_figure_is_run17_warmup_first_decode_leg_less_the_warm_median():
    first_leg = 1796004762.7087996 - 1796004761.3203313  # Llama-3.1-8B-pd-proxy-requests.jsonl, first line
    value, why = handshake_seconds(Path(RUN17))
    assert why["first_decode_leg_s"] == pytest.approx(first_leg, abs=1e-6)
    assert why["steady_stage"] == "pd-rate4" and why["steady_requests"] == 80
    assert 0.030 < why["steady_decode_leg_s"] < 0.045
    assert why["host_speed"] == pytest.approx(16.62616 / 9.50014, rel=1e-5)
    assert HANDSHAKE_S == pytest.approx(value, rel=1e-12)
    assert 2.35 < HANDSHAKE_S < 2.38  # (1.3885 - 0.0365) x 1.7501


def test_on_run17s_own_host_the_handshake_is_what_its_warm_up_waited(capsys):
    """At --host-speed 1.7501 (run 17's, from its tiny server alone) and run 17's pools (--gpu-memory-utilization 0.85,
    validate/engines/cases-run17.json) a fresh pair waits 1.352 s: run 17's first decode leg less its warm median, by
    hand above. The handshake grows with the remote pool's descriptors (run 23h's probe), and the model's pool is
    3,367,424 descriptors against the 3,358,592 run 17 logged (+0.26 %, the pool's known over-promise): 8,832 x the
    profile's 545.7 ns a descriptor / 1.7501 = 2.8 ms more."""
    code, out, err = run(capsys, *SIM, "--engine", "vllm", "--cold-start", "--host-speed", "1.7501", "--utilization",
                         "0.85", "--json")
    assert code == 0, err
    assert json.loads(out)["first_use"]["kv_handshake"]["seconds_each"] == pytest.approx(1.3885 - 0.0365, abs=4e-3)


def test_one_request_on_a_fresh_pair_waits_the_handshake_exactly(one_figure):
    r = requests([0.0])
    steady = pools(cold=False).run(r).trace
    p = pools(cold=True)
    cold = p.run(r).trace
    assert cold.ttft_s[0] == pytest.approx(steady.ttft_s[0] + HANDSHAKE_S, abs=1e-9)
    # the remote's whole pool: 2 regions x 32 layers, one descriptor per 16-token page of 131,072 bytes a token
    pages = int(p.prefill.pool.capacity_bytes // (16 * 131_072))
    assert cold.first_use["kv_handshake"] == {"pairs": 1, "seconds_each": HANDSHAKE_S, "requests_waited": 1,
                                              "max_wait_s": pytest.approx(HANDSHAKE_S),
                                              "remote_pool_descriptors": 64 * pages}


def test_a_request_during_the_handshake_waits_for_the_same_one_and_a_later_one_pays_nothing(one_figure):
    r = requests([0.0, 0.5, 6.0])
    steady = pools(cold=False).run(r).trace
    p = pools(cold=True)
    cold = p.run(r).trace
    # the second's transfer starts at the handshake's end, as the first's: the same first-token step
    assert cold.first_token_s[1] == pytest.approx(cold.first_token_s[0], abs=1e-9)
    assert cold.ttft_s[1] == pytest.approx(steady.ttft_s[0] + HANDSHAKE_S - 0.5, abs=0.01)
    assert cold.ttft_s[2] == pytest.approx(steady.ttft_s[2], abs=1e-12)
    assert cold.first_use["kv_handshake"]["pairs"] == 1
    assert cold.first_use["kv_handshake"]["requests_waited"] == 2


def test_each_prefill_replica_is_a_pair_of_its_own(one_figure):
    # two prompts at once on 2 prefill replicas (least outstanding: one each), one decode replica: two handshakes,
    # in parallel (one executor per remote future; each load waits for its own remote's)
    r = requests([0.0, 0.0])
    cold = pools(cold=True, prefill=2).run(r).trace
    steady = pools(cold=False, prefill=2).run(r).trace
    assert cold.first_use["kv_handshake"]["pairs"] == 2
    assert cold.ttft_s == pytest.approx(steady.ttft_s + HANDSHAKE_S, abs=0.01)


def test_a_wider_prefill_side_is_met_rank_by_rank(one_figure):
    # vLLM's handshake_target_ranks: a decode rank at tp 1 reads from both ranks of a tp 2 prefill engine, handshaking
    # them one after the other in one background job (base_worker.py:554-643)
    assert pools(cold=True, prefill_tp=2).handshake_s() == pytest.approx(2 * HANDSHAKE_S)
    assert pools(cold=True, prefill_tp=2, decode_tp=2).handshake_s() == pytest.approx(HANDSHAKE_S)
    assert pools(cold=False).handshake_s() == 0.0


def test_steady_state_never_reads_the_handshake():
    r = requests([0.0, 0.5, 6.0])
    p = pools(cold=False)
    before = p.run(r).trace
    engine = p.decode.phases.engine
    object.__setattr__(engine, "kv_handshake_s", 100.0)
    try:
        after = p.run(r).trace
    finally:
        object.__setattr__(engine, "kv_handshake_s", HANDSHAKE_S)
    assert np.array_equal(before.first_token_s, after.first_token_s) and after.first_use is None


SIM = ["simulate", "--model", "Llama-3.1-8B", "--hardware", "H200", "--method", "bf16", "--rate", "2",
       "--requests", "20", "--prompt-tokens", "512", "--output-tokens", "32", "--no-search", "--disaggregate", "1:1"]


def test_cli_cold_start_disaggregate_reports_the_handshake(capsys, one_figure):
    code, out, err = run(capsys, *SIM, "--engine", "vllm", "--cold-start", "--json")
    assert code == 0, err
    shake = json.loads(out)["first_use"]["kv_handshake"]
    assert shake["pairs"] == 1 and shake["seconds_each"] == HANDSHAKE_S and shake["requests_waited"] >= 1
    code, out, err = run(capsys, *SIM, "--engine", "vllm", "--cold-start")
    assert code == 0, err
    assert "KV connector handshakes: 1 (decode, prefill) replica pairs met" in out


@pytest.mark.parametrize("model, engine, word", [("Llama-3.1-8B", "sglang", "NixlConnector"),
                                                 ("Qwen3-30B-A3B", "vllm", "fused-MoE compiles")])
def test_cli_cold_start_disaggregate_limits_are_one_line(capsys, model, engine, word):
    args = [a if a != "Llama-3.1-8B" else model for a in SIM]
    code, out, err = run(capsys, *args, "--engine", engine, "--cold-start")
    assert code == 2 and out == "" and err.count("\n") == 1
    assert "--cold-start" in err and word in err
