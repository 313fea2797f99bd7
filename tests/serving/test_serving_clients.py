"""Closed-loop clients (serving.clients): a concurrency cap, think time, chat sessions, and a trace never cut.

Expectations: a request alone takes the planner's prefill then its decode steps (PhaseModel, not the simulator);
a closed system of N clients obeys the interactive response-time law X = N / (R + Z) (Denning & Buzen 1978,
"The operational analysis of queueing network models", ACM Computing Surveys 10(3)); sends follow completions
by the think time, by the definition of each client.
"""

from __future__ import annotations

import json

import numpy as np
import pytest

from roofline.catalogue import load_hardware, load_model
from roofline.cli import main
from roofline.methods import parse_method
from roofline.serving.clients import Clients
from roofline.serving.metrics import summarize
from roofline.serving.requests import LengthDist, poisson_requests
from roofline.serving.simulate import Simulator
from roofline.specs import Workload

MODEL, H100 = load_model("Llama-3.1-8B"), load_hardware("H100-SXM")
PROMPT, OUTPUT = 1024, 64


def simulator(max_tokens: int = PROMPT + OUTPUT) -> Simulator:
    wl = Workload(context_tokens=max_tokens, prefill_chunk_tokens=8192)
    return Simulator(MODEL, H100, wl, parse_method("bf16"), max_tokens=max_tokens)


def at_once(n: int, prompt: int = PROMPT, output: int = OUTPUT):
    return poisson_requests(float("inf"), n, LengthDist.parse(str(prompt), "p"), LengthDist.parse(str(output), "o"), 0)


def lone_e2e(sim: Simulator) -> tuple[float, float]:
    """A request alone: its prefill, then output - 1 decode steps at batch 1 (the planner's phases)."""
    ttft = sim.phases.prefill_time(1, PROMPT)
    return ttft, ttft + (OUTPUT - 1) * sim.phases.average_decode_time(1, PROMPT, OUTPUT - 1)


def test_one_client_runs_requests_back_to_back():
    sim = simulator()
    trace = sim.run(at_once(5), clients=Clients(max_concurrency=1))
    ttft, e2e = lone_e2e(sim)
    assert trace.ttft_s == pytest.approx(np.full(5, ttft), rel=1e-3)
    assert trace.e2e_s == pytest.approx(np.full(5, e2e), rel=1e-3)
    sends = trace.requests.arrival_s
    assert sends[0] == 0.0 and np.array_equal(sends[1:], trace.finish_s[:-1])  # each sent at the last's finish
    assert trace.horizon_s == pytest.approx(5 * e2e, rel=1e-3)


def test_think_time_separates_a_completion_from_the_next_send():
    sim = simulator()
    trace = sim.run(at_once(4), clients=Clients(max_concurrency=1, think_s=2.0))
    assert trace.requests.arrival_s[1:] == pytest.approx(trace.finish_s[:-1] + 2.0, rel=1e-12)
    _, e2e = lone_e2e(sim)
    assert trace.horizon_s == pytest.approx(4 * e2e + 3 * 2.0, rel=1e-3)


def test_a_cap_of_four_runs_four_then_refills_the_freed_slots():
    sim = simulator()
    trace = sim.run(at_once(8), clients=Clients(max_concurrency=4))
    sends = trace.requests.arrival_s
    assert np.all(sends[:4] == 0.0)
    assert np.all(sends[4:] == trace.finish_s[0])  # identical requests: the first four end together
    assert summarize(trace, None)["max_running"] == 4


def test_closed_loop_throughput_is_the_interactive_response_time_law():
    sim = simulator()
    n, think = 8, 0.5
    trace = sim.run(at_once(240), clients=Clients(max_concurrency=n, think_s=think))
    rate = len(trace.e2e_s) / trace.horizon_s
    assert rate == pytest.approx(n / (float(np.mean(trace.e2e_s)) + think), rel=0.04)


def test_sessions_send_each_turn_after_the_last_answer():
    sim = simulator()
    reqs = poisson_requests(0.5, 6, LengthDist.parse(str(PROMPT), "p"), LengthDist.parse(str(OUTPUT), "o"), 1)
    trace = sim.run(reqs, clients=Clients(session_turns=3, think_s=1.5))
    sends = trace.requests.arrival_s
    assert sends[0] == reqs.arrival_s[0] and sends[3] == reqs.arrival_s[3]  # first turns: their own arrivals
    for i in (1, 2, 4, 5):
        assert sends[i] == pytest.approx(trace.finish_s[i - 1] + 1.5, rel=1e-12)


def test_bad_client_inputs_are_errors_naming_the_flag():
    with pytest.raises(ValueError, match="--max-concurrency"):
        Clients(max_concurrency=0)
    with pytest.raises(ValueError, match="--think-time-s"):
        Clients(think_s=-1.0)
    with pytest.raises(ValueError, match="--max-concurrency"):
        Clients(max_concurrency=2, session_turns=2)


BASE = ["simulate", "--model", "Llama-3.1-8B", "--hardware", "H100-SXM", "--method", "bf16", "--json"]


def test_a_trace_longer_than_a_thousand_rows_is_replayed_whole(tmp_path, capsys):
    trace = tmp_path / "long.csv"
    trace.write_text("".join(f"{i * 0.01},{64 + i % 7},{4 + i % 3}\n" for i in range(1500)))
    assert main([*BASE, "--trace", str(trace)]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["requests"] == 1500 and data["notes"] == []
    assert main([*BASE, "--trace", str(trace), "--requests", "200"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["requests"] == 200
    assert data["notes"] == ["--trace: replaying the first 200 of its 1,500 rows (--requests)"]


def test_cli_closed_loop_reports_its_clients(capsys):
    code = main([*BASE, "--rate", "inf", "--max-concurrency", "2", "--requests", "6", "--prompt-tokens", "256",
                 "--output-tokens", "8", "--slo-ttft-ms", "500", "--slo-tpot-ms", "50"])
    assert code == 0
    data = json.loads(capsys.readouterr().out)
    assert data["clients"]["max_concurrency"] == 2 and data["max_running"] == 2
    assert data["max_rate_at_slo"] is None and "time 0" in data["max_rate_reason"]
