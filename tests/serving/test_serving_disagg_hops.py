"""A remotely loaded request's two scheduler hops on a disaggregated decode engine (serving.disagg's docstring,
vLLM 0.24.0's scheduler and NixlConnector; Scheduler.transfer_s) in the Python loop, by hand, and in the compiled
loop (serving.kernel_remote) against it.

By hand: the engine's host work is 10 ms a step with asynchronous overlap and no other host cost, so a step takes
max(GPU, 10 ms + the loads it posts); a single Llama-3.1-8B decode at ~1,000 tokens is a few ms on an H100, so every
step is 10 ms, one that posts a 2 ms load 12 ms, and a step that only posts takes its host work, 12 ms. Transfers
take 25 ms from their post.
- A arrives at 0 on an idle engine: the schedule at 0 posts its load (a step of no tokens, 0 - 12 ms); its load ends
  at 25 ms; the engine, with nothing else to run, acts on it at once: its last prompt token runs 25 - 35 ms, its first
  output token at 35 ms. A then decodes in 10 ms steps starting at 35 + 10 k ms.
- B arrives at 123.4 ms, during A's step 115 - 125 ms.
  Synchronous (no admission lag; a step's schedule is made at its start): the schedule at 125 ms posts B's load
  (step 125 - 137 ms), which ends at 150 ms; the first step started after it (157 - 167 ms) observes it, its output
  reports it at 167 ms, and the schedule then runs B's last token: first token at 177 ms.
  Asynchronous (vLLM's default), every step host-bound: the engine core launches a step and only then takes new
  requests (v1/engine/core.py@v0.24.0:519-603 step_with_batch_queue), and a step that lasts its host work is that
  launch, so what arrives during it is in the next schedule, made at its end (serving.simulate.host_bound; run 23's
  step log, validate/notes/2026-11-30-vllm-h200-run23.md): with every step host-bound the asynchronous engine
  schedules as the synchronous one does. B: 177 ms. (The admission lag's two steps, the schedule made when the step
  before started, hold where the GPU bounds the step: the host then launched the next step before the arrival.)
- The schedule after a posting step waits for the post's host work (vLLM's engine core loop is serial:
  v1/engine/core.py@v0.24.0:519-632, the READs posted inside execute_model before the forward,
  v1/worker/gpu/model_runner.py:1261 / 1281): here the posting step is host-bound, so the next schedule is at its
  end either way. B's load posted by the schedule at 125 ms (step 125 - 137 ms); with an 11 ms transfer it ends at
  136 ms: the step started at 137 ms observes it, reports it at 147, first token 157 ms; with 13 ms (ready at
  138 ms) the step started at 147 ms observes it, first token 167 ms. Synchronous: the same.
"""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

pytest.importorskip("numba")

from roofline.catalogue import load_hardware, load_model  # noqa: E402
from roofline.engines.scheduling import EngineOverheads  # noqa: E402
from roofline.methods import parse_method  # noqa: E402
from roofline.serving import kernel  # noqa: E402
from roofline.serving.disagg import Disaggregated, KvLink  # noqa: E402
from roofline.serving.engined import workload_simulator  # noqa: E402
from roofline.serving.fleet import Fleet  # noqa: E402
from roofline.serving.requests import Requests  # noqa: E402
from roofline.serving.scheduler import SchedulerConfig  # noqa: E402
from roofline.specs import Workload  # noqa: E402
from tests.serving.test_serving_kernel import assert_same, python_loop, requests  # noqa: E402
from tests.serving.test_serving_kernel_clients import vllm  # noqa: E402
from tests.serving.test_serving_kernel_prefix import small_pool  # noqa: E402

STEP, POST, TRANSFER = 0.010, 0.002, 0.025
MODEL, H200 = load_model("Llama-3.1-8B"), load_hardware("H200")


def flat(lag: bool, max_tokens: int = 4096, seqs: int = 256):
    """A vLLM simulator whose every step takes 10 ms of host work (module docstring), at most `seqs` running."""
    sim = vllm(max_tokens)
    sim.engine = dataclasses.replace(sim.engine, overheads=EngineOverheads(step_s=STEP, overlap=True),
                                     admission_lag=lag)
    sim.scheduler = dataclasses.replace(sim.scheduler, max_num_seqs=seqs)
    return sim


def pair(lag: bool, seqs: int = 256):
    reqs = Requests(np.array([0.0, 0.1234]), np.array([512, 512]), np.array([200, 20]))
    sim = flat(lag, seqs=seqs)
    return sim, reqs, Fleet(python_loop(sim), 1).run(reqs, preloaded=reqs.prompt_tokens - 1,
                                                     load_host_s=np.full(2, POST), transfer_s=np.full(2, TRANSFER))


@pytest.mark.parametrize("lag", [False, True])
def test_a_lone_request_on_an_idle_engine_posts_then_runs_its_last_token_when_its_load_ends(lag):
    sim, _, run = pair(lag)
    t = run.trace
    assert t.first_token_s[0] == pytest.approx(TRANSFER + STEP, rel=1e-9)
    first = t.steps[0]  # the post: no tokens, the host's step and the post; the prompt's pages held, A waiting
    assert first[0] == 0.0 and first[1] == pytest.approx(STEP + POST, rel=1e-12) and first[6] == 0
    assert (first[2], first[3]) == (0, 1)
    assert first[4] == sim.pool.seq_bytes[512]


@pytest.mark.parametrize(("lag", "expected"), [(False, 0.177), (True, 0.177)])
def test_a_request_arriving_while_another_decodes_crosses_the_step_boundaries_the_rule_gives(lag, expected):
    _, _, run = pair(lag)
    assert run.trace.first_token_s[1] == pytest.approx(expected, rel=1e-9)
    # while B's load is in flight it counts as waiting, not running (vLLM's skipped_waiting)
    during = run.trace.steps[(run.trace.steps[:, 0] > 0.14) & (run.trace.steps[:, 0] < 0.16)]
    assert np.all(during[:, 2] == 1) and np.all(during[:, 3] == 1)


@pytest.mark.parametrize(("lag", "transfer", "expected"), [(True, 0.011, 0.157), (True, 0.013, 0.167),
                                                        (False, 0.011, 0.157), (False, 0.013, 0.167)])
@pytest.mark.parametrize("compiled", [False, True])
def test_the_schedule_after_a_posting_step_waits_for_the_posts_host_work(lag, transfer, expected, compiled):
    sim = flat(lag)
    sim = sim if compiled else python_loop(sim)
    reqs = Requests(np.array([0.0, 0.1234]), np.array([512, 512]), np.array([200, 20]))
    if compiled:
        assert kernel.covers(sim, reqs, None, reqs.prompt_tokens - 1, "least-outstanding",
                             transfer_s=np.array([TRANSFER, transfer])) is None
    run = Fleet(sim, 1).run(reqs, preloaded=reqs.prompt_tokens - 1, load_host_s=np.full(2, POST),
                            transfer_s=np.array([TRANSFER, transfer]))
    assert run.trace.first_token_s[0] == pytest.approx(TRANSFER + STEP, rel=1e-9)
    assert run.trace.first_token_s[1] == pytest.approx(expected, rel=1e-9)


def test_a_full_running_set_holds_the_post_until_a_place_frees():
    """max_num_seqs 1: vLLM's admission loop stops at a full `running`, posts included, so B's load is posted by the
    schedule after A's last token (A: first token at 35 ms, 199 more 10 ms steps: done at 2.025 s); the step posting
    it has no tokens (12 ms), its load ends 25 ms after the post and its last token runs at once: 2.060 s."""
    _, _, run = pair(False, seqs=1)
    assert run.trace.finish_s[0] == pytest.approx(0.035 + 199 * STEP, rel=1e-9)
    assert run.trace.first_token_s[1] == pytest.approx(2.025 + TRANSFER + STEP, rel=1e-9)


def pools(engine: str, on: bool | None = None) -> Disaggregated:
    """One prefill and one decode replica of `engine` (its timing profile: the connector's law) on an H200."""
    wl = Workload(context_tokens=4096, engine=engine)
    sims = [workload_simulator(MODEL, H200, wl, parse_method("bf16"), 4096, clock="sustained") for _ in range(2)]
    for s in sims:
        s.kernel = on
    return Disaggregated(*sims, 1, 1, KvLink(50e9, 5e-6))


def test_only_an_engine_with_a_connector_law_takes_the_hops():
    """vLLM's profile carries the NixlConnector's law; the ideal engine and SGLang's do not: their pools see a
    request when its KV has arrived, as before."""
    assert pools("vllm").hops
    assert not pools("ideal").hops and not pools("sglang").hops


def test_whole_disaggregated_runs_with_hops_give_the_python_loops_times():
    """Both pools through the kernel against both through the Python loop under vLLM's profile; the hops cost the
    decode side steps: every request's TTFT is at least its prefill, its transfer and one decode step after it."""
    reqs = requests(25.0, 160)
    fast, slow = (pools("vllm", on).run(reqs) for on in (True, False))
    assert_same(fast.trace, slow.trace)
    assert_same(fast.decode, slow.decode)
    assert np.all(fast.trace.first_token_s > fast.prefill.finish_s + fast.transfer_s)


def same(sim, n: int, reqs, loads, transfer):
    pre = reqs.prompt_tokens - 1
    assert kernel.covers(sim, reqs, None, pre, "least-outstanding", transfer_s=transfer) is None
    fast = Fleet(sim, n).run(reqs, preloaded=pre, load_host_s=loads, transfer_s=transfer)
    slow = Fleet(python_loop(sim), n).run(reqs, preloaded=pre, load_host_s=loads, transfer_s=transfer)
    assert np.array_equal(fast.routed, slow.routed)
    assert_same(fast.trace, slow.trace)
    for mine, theirs in zip(fast.replicas, slow.replicas, strict=True):
        assert_same(mine, theirs)
    return fast, slow


@pytest.mark.parametrize("n", [1, 3])
@pytest.mark.parametrize("lag", [True, False])
def test_the_compiled_loop_takes_the_same_hops(n, lag):
    """Random loads and transfers, rates that leave the engines idle at times and busy at others."""
    reqs = requests(12.0 * n, 150)
    rng = np.random.default_rng(4)
    sim = vllm(reqs.max_tokens)
    sim.engine = dataclasses.replace(sim.engine, admission_lag=lag)
    fast, _ = same(sim, n, reqs, rng.uniform(0.0, 4e-3, len(reqs)), rng.uniform(2e-3, 0.06, len(reqs)))
    assert np.any(fast.trace.steps[:, 6] == 0)  # steps that only post
    assert fast.trace.steps[:, 6].sum() == reqs.output_tokens.sum()  # each request computes its last prompt token


def test_the_compiled_loop_takes_the_same_hops_in_a_preempting_pool():
    """A 9,000-token pool: posted loads hold their pages while running sequences are preempted (and lose theirs)."""
    reqs = requests(40.0, 150)
    sim = vllm(reqs.max_tokens, scheduler=SchedulerConfig(max_num_batched_tokens=512, max_num_seqs=64))
    small_pool(sim, reqs, 9000)
    _, slow = same(sim, 2, reqs, np.full(len(reqs), 2e-3), np.full(len(reqs), 0.03))
    assert slow.trace.preemptions > 0
