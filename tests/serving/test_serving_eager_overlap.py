"""An eager step's launch overlapping the step before it (roofline/engines/timing.py mechanism 24), by hand: the host's
chain (scheduling.chained_ends, simulate.host_start) and both record loops.

vLLM 0.24's engine core under asynchronous scheduling (v1/engine/core.py@v0.24.0:519-603 step_with_batch_queue)
schedules and launches step k + 1 once step k's launch has ended and step k - 1's result is in: its host work begins at
H(k + 1) = max(H(k) + host, S(k)), S(k) step k's start. An eager step's kernels run as they are launched, so it ends at
max(S + gpu, H + host): its wall is max(gpu, host - lead), the lead E(k) - H(k + 1) the host had on it. A graph step
keeps max(gpu, host). Run 23's step log read an eager step after a decode 55.0 ms after the line two before, where the
rule before (each step's host work from its own start) put it 13.4 + 54.9 ms after (validate/notes/
2026-11-30-c16-ttft.md, section 2).
"""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

pytest.importorskip("numba")

from roofline.engines.scheduling import EngineOverheads, chained_ends  # noqa: E402
from roofline.serving import kernel  # noqa: E402
from roofline.serving.fleet import Fleet  # noqa: E402
from roofline.serving.requests import Requests  # noqa: E402
from roofline.serving.simulate import host_start  # noqa: E402
from tests.serving.test_serving_kernel import python_loop  # noqa: E402
from tests.serving.test_serving_kernel_clients import vllm  # noqa: E402

MS = 1e-3


def test_an_eager_step_after_a_graph_step_launches_under_it():
    """The brief's case: a graph decode of G = 13 ms (host 2 ms) after an idle engine, then an eager step of GPU 20 ms
    and host 2 + 50 ms. The decode's host work runs 0 - 2 ms, so the eager step's begins at 2 ms (its schedule,
    host_start) and its launch ends at 54 ms: it ends 54 - 13 = 41 ms after the decode, max(20, 52 - (13 - 2)); the
    rule before ran its launch from the decode's end: 13 + 52 = 65 ms."""
    decode = chained_ends([13 * MS], 2 * MS, 0.0, eager=False)
    assert decode.tolist() == pytest.approx([13 * MS])
    start = host_start(decode, 0, 2 * MS, 0.0)
    assert start == pytest.approx(2 * MS)
    lead = decode[0] - start  # 11 ms
    assert chained_ends([20 * MS], 52 * MS, lead, eager=True).tolist() == pytest.approx([41 * MS])


@pytest.mark.parametrize("gpu, host", [(60 * MS, 52 * MS), (20 * MS, 52 * MS)])
def test_a_block_of_identical_eager_steps_is_unchanged(gpu, host):
    """Steady state: a GPU-bound chain's lead is a whole step (max(gpu, host - gpu) = gpu), a host-bound one's 0
    (max(gpu, host) = host): each step takes max(gpu, host), EngineOverheads.combine's."""
    lead = gpu if gpu > host else 0.0
    walls = np.diff(chained_ends(np.full(5, gpu), host, lead, eager=True), prepend=0.0)
    assert walls.tolist() == pytest.approx([max(gpu, host)] * 5)
    # after an idle engine (no lead) too: the first step max(gpu, host), the chain then in its steady state
    walls = np.diff(chained_ends(np.full(5, gpu), host, 0.0, eager=True), prepend=0.0)
    assert walls.tolist() == pytest.approx([max(gpu, host)] * 5)


def test_a_graph_step_keeps_max_gpu_host_whatever_the_lead():
    """A graph step's GPU work waits for its one launch: the lead does not shorten it (3 ms of host over 2 ms of GPU
    is 3 ms with a lead of 10 ms too)."""
    assert chained_ends([2 * MS, 2 * MS], 3 * MS, 10 * MS, eager=False).tolist() == pytest.approx([3 * MS, 6 * MS])


def test_the_next_schedule_is_at_the_launch_end_or_the_steps_start():
    """host_start: step 0 from a lead of 4 ms with 10 ms of host work, GPU-bound, ends at 20 ms: its launch ends at 6
    ms, after its start, so the next schedule is at 6 ms; step 1 (20 - 40 ms) was launched by 16 ms, before its start:
    the schedule after it is at its start, 20 ms. Host-bound (the step ends with its launch): at its end."""
    ends = np.array([20 * MS, 40 * MS])
    assert host_start(ends, 0, 10 * MS, 4 * MS) == pytest.approx(6 * MS)
    assert host_start(ends, 1, 10 * MS, 4 * MS) == pytest.approx(20 * MS)
    assert host_start(np.array([10 * MS]), 0, 10 * MS, 0.0) == 10 * MS
    assert host_start(ends, 1, 0.0, 0.0) == pytest.approx(20 * MS)  # no host chain: the last step's start


# The engine: 1 ms of host work a step, asynchronous with the admission lag, a step of more than 256 tokens pays a 50 ms
# eager launch; nothing else on the host. Llama-3.1-8B on an H100: an 8-token prefill or a one-sequence decode reads the
# weights, ~5 ms of GPU (> 1 ms: GPU-bound); a 513-token step ~12 ms of GPU, under its 51 ms of host work.
STEP, EAGER = 1 * MS, 50 * MS


def engine(eager_s: float = EAGER, above: int = 256, lag: bool = True):
    sim = vllm(4096)
    sim.engine = dataclasses.replace(sim.engine, overheads=EngineOverheads(
        step_s=STEP, overlap=True, eager_s=eager_s, eager_above_tokens=above), admission_lag=lag)
    return sim


def loop(sim, compiled: bool, reqs: Requests):
    if compiled:
        assert kernel.covers(sim, reqs) is None
        sim.kernel = True
        return sim
    return python_loop(sim)


@pytest.mark.parametrize("compiled", [False, True])
def test_an_eager_prefill_after_a_decode_ends_its_launch_after_the_decodes_start(compiled):
    """A (8 prompt tokens, 2 output) at 0 on an idle engine: its prefill (step 0, GPU-bound, G0) then its decode (step
    1, GPU-bound, G1). B (512, 2) at 1.5 ms, after step 0's launch (0 - 1 ms): seen at step 2's schedule, which the
    host makes at step 1's start (step 0's result in): B's eager prefill launches from G0 to G0 + 51 ms and ends there
    (its GPU, ~12 ms, starts at G0 + G1 and is done before). The rule before: G0 + G1 + 51 ms."""
    reqs = Requests(np.array([0.0, 1.5 * MS]), np.array([8, 512]), np.array([2, 2]))
    sim = loop(engine(), compiled, reqs)
    t = sim.run(reqs)
    g0, g1 = t.steps[0, 1], t.steps[1, 1]
    assert g0 > 2 * STEP and g1 > 2 * STEP  # both graph steps GPU-bound (their lead covers the next step's host work)
    assert t.steps[1, 0] == pytest.approx(g0, rel=1e-9) and t.steps[2, 6] == 512
    assert t.steps[2, 0] + t.steps[2, 1] == pytest.approx(g0 + STEP + EAGER, rel=1e-9)
    assert t.first_token_s[1] == pytest.approx(g0 + STEP + EAGER, rel=1e-9)  # B's next step replays a graph
    # A's last token (step 1's) leaves when that launch ends, its graph-step part aside: the launch column 50 - G1 ms
    assert t.launch_s[2] == pytest.approx(EAGER - g1, rel=1e-9)
    f = Fleet(sim, 1).run(reqs).trace
    assert f.steps[:, :2] == pytest.approx(t.steps[:, :2], rel=1e-12)


@pytest.mark.parametrize("compiled", [False, True])
def test_an_arrival_during_a_launch_runs_next_and_the_token_before_waits_for_the_launchs_remainder(compiled):
    """B (512, 2) at 0.5 ms, while step 0 (A's prefill) is still launched (0 - 1 ms): taken in at 1 ms, it rides in
    step 1 with A's decode (513 tokens: eager). That step's host work runs 1 - 52 ms (its lead: G0 - 1 ms), longer than
    its GPU's: it ends at 52 ms. A's first token, made at G0, leaves once the eager launch is done, its graph-step part
    (the schedule's 1 ms, in the API path) aside: at 1 + 50 = 51 ms (clients.launch_delay_s: the launch column
    50 - (G0 - 1) ms)."""
    reqs = Requests(np.array([0.0, 0.5 * MS]), np.array([8, 512]), np.array([2, 2]))
    sim = loop(engine(), compiled, reqs)
    t = sim.run(reqs)
    g0 = t.steps[0, 1]
    assert t.steps[1, 6] == 513
    assert t.steps[1, 0] + t.steps[1, 1] == pytest.approx(STEP + STEP + EAGER, rel=1e-9)  # 52 ms
    assert t.launch_s[1] == pytest.approx(EAGER - (g0 - STEP), rel=1e-9)
    assert t.first_token_s[0] == pytest.approx(STEP + EAGER, rel=1e-9)  # 51 ms
    assert t.first_token_s[1] == pytest.approx(STEP + STEP + EAGER, rel=1e-9)


@pytest.mark.parametrize("compiled", [False, True])
@pytest.mark.parametrize("eager_s", [EAGER, 2 * MS])
def test_a_lone_requests_eager_steps_take_what_they_took_before(compiled, eager_s):
    """Every step eager (past 0 tokens), one request alone (20 outputs): with a 50 ms launch every step is host-bound
    (lead 0), with a 2 ms one GPU-bound (~5 ms against 3 ms of host): the chain's steady state, each step max(GPU,
    host) as the loop without the admission lag (EngineOverheads.combine's) gives."""
    reqs = Requests(np.array([0.0]), np.array([8]), np.array([20]))
    t = loop(engine(eager_s, 0), compiled, reqs).run(reqs)
    before = python_loop(engine(eager_s, 0, lag=False)).run(reqs)
    assert t.steps[:, [0, 1, 6]] == pytest.approx(before.steps[:, [0, 1, 6]], rel=1e-9)
    assert t.finish_s == pytest.approx(before.finish_s, rel=1e-9)
