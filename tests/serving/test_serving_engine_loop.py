"""The engine loop's two timings around a host-bound step (serving.simulate.host_bound, clients.launch_delay_s), by
hand, in the Python loop and the compiled one.

vLLM 0.24's engine core under asynchronous scheduling (v1/engine/core.py@v0.24.0:519-603 step_with_batch_queue)
schedules and launches step n + 1, then waits for step n, sends its outputs and takes new requests. Found in run
23's step log (validate/notes/2026-11-30-vllm-h200-run23.md, last section):
1. a request that arrives while a host-bound step is launched runs in the next step (the admission lag's two steps
   hold only where the GPU bounds the step);
2. step n's tokens leave once step n + 1 is launched: a first token waits for the next step's eager launch.

By hand: the engine's host work is 10 ms a step with asynchronous overlap, a step of more than 256 tokens pays a 50 ms
eager launch, no other host cost (no API path, no per-sequence cost). Llama-3.1-8B on an H100: a 513-token step's
GPU work is ~2 x 8e9 x 513 FLOP / ~700 TFLOP/s ~ 12 ms, under its 60 ms of host work; a decode of one or two
sequences a few ms, under 10 ms: every step is host-bound, 60 ms with a prompt of 512, 10 ms without.
- A (512 prompt tokens, 3 output) arrives at 0 on an idle engine: its prefill runs 0 - 60 ms.
- B (512, 3) arrives at 30 ms, during that host-bound step: seen at its end, B's prefill rides with A's first decode
  in the step 60 - 120 ms (513 tokens: eager, 60 ms).
- A's first token is made at 60 ms and leaves when the next step's eager launch ends: 60 + 50 = 110 ms.
- B's first token is made at 120 ms; the next step (two decodes, 10 ms) replays a graph: it leaves at 120 ms, TTFT
  90 ms.
Under the rule before (the admission lag's two steps everywhere, tokens out at their step's end): A 60 ms; B runs in
the step after A's first decode (60 - 70 ms), 70 - 130 ms: TTFT 100 ms.
"""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

pytest.importorskip("numba")

from roofline.engines.scheduling import EngineOverheads  # noqa: E402
from roofline.serving import kernel  # noqa: E402
from roofline.serving.clients import Clients, launch_delay_s  # noqa: E402
from roofline.serving.fleet import Fleet  # noqa: E402
from roofline.serving.requests import Requests  # noqa: E402
from tests.serving.test_serving_kernel import python_loop  # noqa: E402
from tests.serving.test_serving_kernel_clients import vllm  # noqa: E402

STEP, EAGER = 0.010, 0.050


def eager_engine():
    sim = vllm(4096)
    sim.engine = dataclasses.replace(sim.engine, overheads=EngineOverheads(
        step_s=STEP, overlap=True, eager_s=EAGER, eager_above_tokens=256), admission_lag=True)
    return sim


REQS = Requests(np.array([0.0, 0.030]), np.array([512, 512]), np.array([3, 3]))


@pytest.mark.parametrize("compiled", [False, True])
def test_an_arrival_during_a_host_bound_step_runs_next_and_a_first_token_waits_for_the_next_eager_launch(compiled):
    sim = eager_engine()
    if compiled:
        assert kernel.covers(sim, REQS) is None
        sim.kernel = True
    else:
        sim = python_loop(sim)
    t = sim.run(REQS)
    assert t.steps[0, 1] == pytest.approx(STEP + EAGER, rel=1e-9)  # A's prefill: host-bound, eager
    assert t.steps[1, 0] == pytest.approx(STEP + EAGER, rel=1e-9) and t.steps[1, 6] == 513  # B rides with A's decode
    assert t.first_token_s[0] == pytest.approx(STEP + EAGER + EAGER, rel=1e-9)  # 60 + 50 = 110 ms
    assert t.ttft_s[1] == pytest.approx(0.120 - 0.030, rel=1e-9)
    # a fleet of one replica gives the same
    f = Fleet(sim, 1).run(REQS).trace
    assert f.first_token_s == pytest.approx(t.first_token_s, rel=1e-12)


def test_a_token_waits_only_for_a_back_to_back_eager_step():
    # records: start, duration, running, waiting, used, preemptions, tokens; launch: the eager part of each record
    steps = np.array([[0.0, 0.06, 0, 1, 0, 0, 512], [0.06, 0.06, 1, 1, 0, 0, 513], [0.12, 0.01, 2, 0, 0, 0, 2],
                      [0.5, 0.01, 0, 1, 0, 0, 1]])
    launch = np.array([EAGER, EAGER, 0.0, 0.0])
    stamps = np.array([0.06, 0.12, 0.13, 0.51, np.nan])
    # 0.06: the next record (0.06) is eager; 0.12: the next is a graph; 0.13: the engine idles until 0.5;
    # 0.51: no record after it; NaN: another replica's request
    assert launch_delay_s(stamps, steps, launch).tolist() == [EAGER, 0.0, 0.0, 0.0, 0.0]


# A closed loop of two clients on the same engine with a 1,024-token budget: A (8 prompt tokens, 2 output) and B (3,000,
# 2) sent at 0, C (8, 2) on the slot A frees. Every step is host-bound: B's three chunks run eagerly (60 ms each), A's
# prefill and decode riding the first two. A's last token is made at 120 ms; the step after (B's third chunk) is
# launched first, 50 ms, so A's client has it at 170 ms and sends C then (Simulator.release_at_launch). C arrives during
# that host-bound step, runs in the next with B's decode (9 tokens, a graph, 10 ms): first token 190 ms, TTFT 20 ms.
# Under the rule before (the slot freed at the schedule's finish): C sent at 120 ms rides B's last chunk (969 tokens),
# first token 180 ms, TTFT 60 ms.
LOOP = Requests(np.zeros(3), np.array([8, 3000, 8]), np.array([2, 2, 2]))


@pytest.mark.parametrize("compiled", [False, True])
def test_a_closed_loop_client_sends_its_next_request_after_the_next_steps_eager_launch(compiled):
    sim = eager_engine()
    sim.scheduler = dataclasses.replace(sim.scheduler, max_num_batched_tokens=1024)
    clients = Clients(max_concurrency=2)
    if compiled:
        assert kernel.covers(sim, LOOP, clients) is None
        sim.kernel = True
    else:
        sim = python_loop(sim)
    t = sim.run(LOOP, clients=clients)
    assert t.finish_s[0] == pytest.approx(2 * (STEP + EAGER), rel=1e-9)  # A's finish keeps the schedule's time
    assert t.requests.arrival_s[2] == pytest.approx(2 * (STEP + EAGER) + EAGER, rel=1e-9)  # sent at 170 ms
    assert t.steps[3, 0] == pytest.approx(0.180, rel=1e-9) and t.steps[3, 6] == 9  # C with B's decode
    assert t.first_token_s[2] == pytest.approx(0.190, rel=1e-9)
    assert t.ttft_s[2] == pytest.approx(0.020, rel=1e-9)
    # a fleet of one (which starts A alone as it arrives first: its own schedule) frees the slot the same way, its
    # compiled loop as its Python one
    f = Fleet(sim, 1).run(LOOP, clients).trace
    slow = Fleet(python_loop(sim), 1).run(LOOP, clients).trace
    assert f.requests.arrival_s[2] == pytest.approx(f.finish_s[0] + EAGER, rel=1e-9)
    assert f.requests.arrival_s == pytest.approx(slow.requests.arrival_s, rel=1e-12)
    assert f.first_token_s == pytest.approx(slow.first_token_s, rel=1e-12)


def test_a_synchronous_engine_frees_the_slot_at_the_finish():
    sim = eager_engine()
    sim.engine = dataclasses.replace(sim.engine, overheads=dataclasses.replace(sim.engine.overheads, overlap=False))
    assert not sim.release_at_launch(Clients(max_concurrency=2))
    assert not eager_engine().release_at_launch(Clients())
