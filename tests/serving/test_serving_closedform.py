"""The compiled step time (serving.closedform) against StepModel's numpy path, which the planner's phases check
(test_serving_simulation): the same per-request times to float rounding on every engine's scheduling, chunked
prefill, preemption, prefix caching, padding, a compressed KV format, tensor parallelism and a fleet.

The reference is the same Simulator with its closed form switched off (`closed = None`), so both runs share the
scheduler and differ only in how a step's time is evaluated.
"""

from __future__ import annotations

import copy

import numpy as np
import pytest

from roofline.catalogue import load_hardware, load_model
from roofline.engines.scheduling import scheduling
from roofline.methods import parse_method
from roofline.serving.fleet import Fleet
from roofline.serving.pool import KVPool
from roofline.serving.prefix import parse_prefix
from roofline.serving.requests import LengthDist, poisson_requests
from roofline.serving.scheduler import SchedulerConfig
from roofline.serving.simulate import Simulator
from roofline.specs import Workload

MODEL, H100 = load_model("Llama-3.1-8B"), load_hardware("H100-SXM")


def requests(rate: float, n: int, seed: int = 3):
    return poisson_requests(rate, n, LengthDist.parse("uniform:64:3000", "p"), LengthDist.parse("uniform:2:400", "o"),
                            seed)


def simulator(max_tokens: int, method: str = "bf16", tp: int = 1, **kw) -> Simulator:
    wl = Workload(context_tokens=max_tokens, tp=tp, prefill_chunk_tokens=8192)
    return Simulator(MODEL, H100, wl, parse_method(method), max_tokens=max_tokens, **kw)


def reference(sim: Simulator) -> Simulator:
    ref = copy.copy(sim)
    ref.closed = None
    return ref


def assert_same(fast, slow) -> None:
    assert len(fast.steps) == len(slow.steps)
    assert fast.preemptions == slow.preemptions
    assert fast.first_token_s == pytest.approx(slow.first_token_s, rel=1e-9, abs=1e-12)
    assert fast.finish_s == pytest.approx(slow.finish_s, rel=1e-9, abs=1e-12)
    assert fast.ttft_s == pytest.approx(slow.ttft_s, rel=1e-9, abs=1e-12)
    assert fast.tpot_s == pytest.approx(slow.tpot_s, rel=1e-9, abs=1e-12)


@pytest.mark.parametrize("engine", ["ideal", "vllm", "sglang", "trtllm", "llamacpp"])
def test_every_engines_scheduling_gives_the_numpy_paths_times(engine):
    reqs = requests(8.0, 120)
    profile = scheduling(engine, H100, "api", 1, context_len=reqs.max_tokens)
    sim = simulator(reqs.max_tokens, engine=profile)
    assert sim.closed is not None and sim.closed.blocks
    fast = sim.run(reqs)
    assert_same(fast, reference(sim).run(reqs))
    assert int(fast.steps[:, 6].sum()) > len(fast.steps)  # decode blocks of several steps were taken


def test_chunked_prefill_and_preemption_give_the_numpy_paths_times():
    reqs = requests(40.0, 150)
    sim = simulator(reqs.max_tokens, scheduler=SchedulerConfig(max_num_batched_tokens=512, max_num_seqs=64))
    sim.pool = KVPool.uniform(6000 * 131072, 16, 131072, reqs.max_tokens, "test: a small pool")
    slow = reference(sim).run(reqs)
    assert slow.preemptions > 0  # the pool is small enough to preempt
    assert_same(sim.run(reqs), slow)


def test_prefix_caching_gives_the_numpy_paths_times():
    base = requests(10.0, 100)
    reqs, _ = parse_prefix("system:1024", base, 0)
    sim = simulator(reqs.max_tokens + 1024)
    fast = sim.run(reqs)
    assert fast.prefix_cache["hit_tokens"] > 0
    assert_same(fast, reference(sim).run(reqs))


@pytest.mark.parametrize("method,tp", [("kivi-2", 1), ("xquant-2", 1), ("bf16", 2)])
def test_compressed_formats_and_tensor_parallelism_give_the_numpy_paths_times(method, tp):
    reqs = requests(10.0, 80)
    sim = simulator(reqs.max_tokens, method, tp)
    assert_same(sim.run(reqs), reference(sim).run(reqs))


@pytest.mark.parametrize("method", ["bf16", "kivi-2"])
def test_a_long_decode_block_is_its_steps_summed(method):
    """256 steps of 40 sequences crossing the decode table's irregular contexts: every end time is the running sum of
    StepModel's own step times."""
    sim = simulator(9000, method)
    context = np.arange(40) * 97 + 1900  # sequences cross 2048, 4096, ... inside the block
    steps = sim.steps
    expected = np.cumsum(steps.decode_block(context, 256, 3))
    ends = sim.closed.decode_ends(context, 256, 3, lambda gpu: gpu, np.inf)
    assert ends == pytest.approx(expected, rel=1e-11)
    # stopped at an arrival: the step that holds it is the last evaluated
    cut = sim.closed.decode_ends(context, 256, 3, lambda gpu: gpu, float(expected[100]) - 1e-9)
    assert len(cut) >= 101 and cut == pytest.approx(expected[:len(cut)], rel=1e-11)


def test_a_fleet_gives_the_numpy_paths_times():
    reqs = requests(30.0, 200)
    sim = simulator(reqs.max_tokens)
    fast = Fleet(sim, 3, "least-outstanding").run(reqs)
    slow = Fleet(reference(sim), 3, "least-outstanding").run(reqs)
    assert np.array_equal(fast.routed, slow.routed)
    assert_same(fast.trace, slow.trace)
