"""A first token leaves the API server after the step's running sequences' tokens (serving.clients.emission_delay_s).

Derived from the mechanism's definition, not from the simulator: vLLM 0.24 streams a step's outputs running
requests first (v1/core/sched/scheduler.py); a new request's first token therefore waits per_seq_s x (the
sequences already running in that step). per_seq_s is the vLLM profile's served host work per sequence
(roofline/engines/profiles/vllm.json server_per_seq_s, read here from the file, not from the simulator).
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

import roofline
from roofline.catalogue import load_hardware, load_model
from roofline.dashboard.appdata import workload_from
from roofline.methods import parse_method
from roofline.serving.clients import emission_delay_s
from roofline.serving.engined import workload_simulator
from roofline.serving.requests import Requests

PER_SEQ_S = json.loads((Path(roofline.__file__).parent / "engines" / "profiles" / "vllm.json").read_text())[
    "server_per_seq_s"]


def test_the_delay_counts_the_running_sequences_of_the_first_tokens_step():
    # records: start, duration, running, waiting, kv, preemptions, tokens (Trace.steps)
    steps = np.array([[0.0, 0.010, 0, 3, 0, 0, 300], [0.010, 0.020, 3, 1, 0, 0, 103], [0.030, 0.020, 4, 0, 0, 0, 4]])
    first = np.array([0.010, 0.010, 0.010, 0.030, np.nan])
    # three first tokens at the end of the first step (nothing ran before them), one at the end of the second
    # (three running), one request with no first token here (another replica's)
    assert np.allclose(emission_delay_s(first, steps, 1e-4), [0.0, 0.0, 0.0, 3e-4, 0.0])
    assert not emission_delay_s(first, steps, 0.0).any()


def test_a_request_arriving_among_eight_running_waits_for_their_eight_tokens():
    """Eight requests start at t = 0 and decode 2,000 tokens each; a ninth arrives at t = 1 s, while all eight
    still run (2,000 decode steps of an 8B at batch 8 take far longer than 1 s): its first token leaves the server
    8 x per_seq_s after its step ends, the first eight's after none."""
    sim = workload_simulator(load_model("Llama-3.1-8B"), load_hardware("H200"), workload_from({"engine": "vllm"}),
                             parse_method("bf16"), 2304)
    arrival = np.array([0.0] * 8 + [1.0])
    requests = Requests(arrival, np.full(9, 128), np.full(9, 2000))
    served = sim.run(requests)
    # the same run without the emission: at this light load the clock rule runs the burst twin (serving.clock)
    schedule = (sim.twin(served.gemm_clock["sustained_share"]) if served.gemm_clock["clock"] != "sustained"
                else sim)._run(requests)
    assert np.allclose(served.finish_s, schedule.finish_s, rtol=0, atol=0)  # the schedule itself is unchanged
    assert np.all(schedule.finish_s[:8] > 1.5)  # the eight are still running when the ninth's first token comes
    extra = served.first_token_s - schedule.first_token_s
    assert PER_SEQ_S > 0
    assert np.allclose(extra[:8], 0.0, atol=1e-15)
    assert abs(extra[8] - 8 * PER_SEQ_S) < 1e-12
