"""The compiled record loop (serving.kernel) against the Python loop it replaces: the same engine records and
per-request times to float rounding on every engine's scheduling (mixed or prefill-first steps, chunked or whole
prompts, graph padding, host overheads), preemption, reserve-to-the-end and whole-prompt admission, a compressed KV
format, tensor parallelism and fleets behind both routers it covers; the runs it does not cover take the Python loop.

The reference is the same Simulator with `kernel=False`; one case also checks StepModel's numpy step times. Runs are
small (~100-200 requests): the loop compiles once per machine (numba's cache), each law in ~0.5 s.
"""

from __future__ import annotations

import copy
import dataclasses

import numpy as np
import pytest

pytest.importorskip("numba")

from roofline.catalogue import load_hardware, load_model  # noqa: E402
from roofline.engines.scheduling import scheduling  # noqa: E402
from roofline.methods import parse_method  # noqa: E402
from roofline.serving import kernel  # noqa: E402
from roofline.serving.clients import Clients  # noqa: E402
from roofline.serving.fleet import Fleet  # noqa: E402
from roofline.serving.pool import KVPool  # noqa: E402
from roofline.serving.prefix import parse_prefix  # noqa: E402
from roofline.serving.requests import LengthDist, poisson_requests  # noqa: E402
from roofline.serving.scheduler import SchedulerConfig  # noqa: E402
from roofline.serving.simulate import Simulator  # noqa: E402
from roofline.specs import Workload  # noqa: E402

MODEL, H100 = load_model("Llama-3.1-8B"), load_hardware("H100-SXM")


def requests(rate: float, n: int, seed: int = 3):
    return poisson_requests(rate, n, LengthDist.parse("uniform:64:3000", "p"), LengthDist.parse("uniform:2:400", "o"),
                            seed)


def simulator(max_tokens: int, method: str = "bf16", tp: int = 1, **kw) -> Simulator:
    wl = Workload(context_tokens=max_tokens, tp=tp, prefill_chunk_tokens=8192)
    return Simulator(MODEL, H100, wl, parse_method(method), max_tokens=max_tokens, kernel=True, **kw)


def python_loop(sim: Simulator) -> Simulator:
    other = copy.copy(sim)
    other.kernel = False
    return other


def assert_same(fast, slow) -> None:
    assert fast.steps.shape == slow.steps.shape
    assert fast.preemptions == slow.preemptions
    assert np.array_equal(fast.steps[:, 2:4], slow.steps[:, 2:4])  # requests running and waiting at each record
    assert np.array_equal(fast.steps[:, 6], slow.steps[:, 6])  # tokens of each record
    assert fast.steps[:, :2] == pytest.approx(slow.steps[:, :2], rel=1e-9, abs=1e-12)
    assert fast.steps[:, 4] == pytest.approx(slow.steps[:, 4], rel=1e-12)
    for name in ("first_token_s", "finish_s", "ttft_s", "tpot_s"):
        assert getattr(fast, name) == pytest.approx(getattr(slow, name), rel=1e-9, abs=1e-12, nan_ok=True), name


@pytest.mark.parametrize("engine", ["ideal", "vllm", "sglang", "trtllm", "llamacpp"])
def test_every_engines_scheduling_gives_the_python_loops_records_and_times(engine):
    reqs = requests(8.0, 120)
    profile = scheduling(engine, H100, "api", 1, context_len=reqs.max_tokens)
    if profile.admission_lag:  # vLLM with async scheduling: test_serving_kernel_clients.py runs it with the lag
        profile = dataclasses.replace(profile, admission_lag=False)  # the rest of its scheduling, without
    sim = simulator(reqs.max_tokens, engine=profile)
    assert kernel.covers(sim, reqs) is None
    fast = sim.run(reqs)
    assert_same(fast, python_loop(sim).run(reqs))
    assert int(fast.steps[:, 6].sum()) > len(fast.steps)  # decode blocks of several steps were taken


@pytest.mark.parametrize("full", [False, True])
def test_chunked_prefill_and_preemption_give_the_python_loops_times(full):
    """First-chunk admission, and vLLM 0.24's gate on the whole prompt (admit_full_prompt), which changes the run."""
    reqs = requests(40.0, 150)
    config = SchedulerConfig(max_num_batched_tokens=512, max_num_seqs=64, admit_full_prompt=full)
    sim = simulator(reqs.max_tokens, scheduler=config)
    sim.pool = KVPool.uniform(6000 * 131072, 16, 131072, reqs.max_tokens, "test: a small pool")
    slow = python_loop(sim).run(reqs)
    assert slow.preemptions > 0  # the pool is small enough to preempt
    if full:
        other = python_loop(sim)
        other.scheduler = dataclasses.replace(config, admit_full_prompt=False)
        assert other.run(reqs).preemptions > slow.preemptions  # the gate spares some preemptions
        fast, ref = Fleet(sim, 2, "round-robin").run(reqs), Fleet(python_loop(sim), 2, "round-robin").run(reqs)
        assert ref.trace.preemptions > 0 and np.array_equal(fast.routed, ref.routed)
        assert_same(fast.trace, ref.trace)
    assert_same(sim.run(reqs), slow)
    ref = copy.copy(python_loop(sim))
    ref.closed = None  # StepModel's numpy step times (the kernel's decode steps are per-step evaluations too)
    assert_same(sim.run(reqs), ref.run(reqs))


@pytest.mark.parametrize("method,tp", [("kivi-2", 1), ("bf16", 2)])
def test_a_compressed_format_and_tensor_parallelism_give_the_python_loops_times(method, tp):
    reqs = requests(10.0, 80)
    sim = simulator(reqs.max_tokens, method, tp)
    assert kernel.covers(sim, reqs) is None
    assert_same(sim.run(reqs), python_loop(sim).run(reqs))


@pytest.mark.parametrize("router", ["least-outstanding", "round-robin"])
def test_a_fleet_gives_the_python_loops_routing_and_times(router):
    reqs = requests(30.0, 200)
    sim = simulator(reqs.max_tokens)
    fast = Fleet(sim, 3, router).run(reqs)
    slow = Fleet(python_loop(sim), 3, router).run(reqs)
    assert np.array_equal(fast.routed, slow.routed)
    assert_same(fast.trace, slow.trace)
    for mine, theirs in zip(fast.replicas, slow.replicas, strict=True):
        assert_same(mine, theirs)


def test_one_replica_fleet_is_the_single_simulator():
    reqs = requests(12.0, 100)
    sim = simulator(reqs.max_tokens)
    assert_same(Fleet(sim, 1).run(reqs).trace, python_loop(sim).run(reqs))


def test_runs_it_does_not_cover_take_the_python_loop():
    base = requests(10.0, 60)
    reqs, _ = parse_prefix("system:1024", base, 0)
    sim = simulator(reqs.max_tokens + 1024)
    assert kernel.covers(sim, reqs) is None  # prefix caching is covered: test_serving_kernel_prefix.py
    short = dataclasses.replace(reqs.prefix, leaf=reqs.prefix.leaf[:10])  # a tree not made for these requests
    assert "leaves" in kernel.covers(sim, dataclasses.replace(reqs, prefix=short))
    assert not sim.use_kernel(dataclasses.replace(reqs, prefix=short))
    assert kernel.covers(sim, base, Clients(max_concurrency=4)) is None
    assert kernel.covers(sim, base, Clients(session_turns=3)) is None  # test_serving_kernel_sessions.py
    assert kernel.covers(sim, base, preloaded=np.ones(len(base), dtype=np.int64)) is None  # _disagg.py
    auto = copy.copy(sim)
    auto.kernel = None
    assert not auto.use_kernel(base)  # auto mode: fewer than kernel.MIN_REQUESTS requests


def test_requests_arriving_together_are_queued_as_each_loop_queues_them():
    """--rate inf: every request arrives at 0; Simulator.run queues them all before its first step, Fleet.run starts
    a replica on the first routed to it."""
    reqs = requests(float("inf"), 60)
    assert np.all(reqs.arrival_s == 0)
    sim = simulator(reqs.max_tokens)
    assert_same(sim.run(reqs), python_loop(sim).run(reqs))
    for n in (1, 3):
        fast, slow = Fleet(sim, n).run(reqs), Fleet(python_loop(sim), n).run(reqs)
        assert np.array_equal(fast.routed, slow.routed)
        assert_same(fast.trace, slow.trace)
