"""Speculative decoding in the compiled record loop (serving.kernel_spec through serving.kernel_single) against the
Python loop it replaces (Simulator(kernel=False)): the same engine records, acceptance draws and per-request times to
1e-9, for a draft model (with vLLM's drafter host floor a pass), EAGLE with per-position acceptance and MTP, under
vLLM's profile (admission lag, graph padding, sampler) and the ideal engine, with chunked prompts riding with verify
steps, preemption in a small pool, --max-concurrency clients and a shared prefix cache
(fleets: test_serving_fleet_spec.py).

Each case asserts speculative behaviour in the reference run: accepted drafts (fewer engine records than decode
tokens), the draft's passes paid and its KV in the pool (test_serving_speculative_fast.assert_speculative).
"""

from __future__ import annotations

import copy
import dataclasses

import pytest

pytest.importorskip("numba")

from roofline.serving import kernel  # noqa: E402
from roofline.serving.clients import Clients  # noqa: E402
from roofline.serving.prefix import parse_prefix  # noqa: E402
from tests.serving.test_serving_speculative_fast import (  # noqa: E402
    SPECS,
    assert_same,
    assert_speculative,
    requests,
    simulator,
)


def python_loop(sim):
    other = copy.copy(sim)
    other.kernel = False
    return other


@pytest.mark.parametrize("spec", SPECS)
@pytest.mark.parametrize("engine", [None, "vllm"])
def test_the_kernel_gives_the_python_loops_speculative_records_and_times(spec, engine):
    reqs = requests(10.0, 80)
    sim = simulator(spec, engine, reqs.max_tokens, kernel=True)
    assert kernel.covers(sim, reqs, single=True) is None
    reference = python_loop(sim).run(reqs)
    assert_speculative(sim, reference, reqs)
    assert_same(sim.run(reqs), reference)


def test_preemption_in_a_small_pool_gives_the_python_loops_times():
    reqs = requests(40.0, 80, seed=9)
    sim = simulator(SPECS[0], "vllm", reqs.max_tokens, kernel=True)
    sim.pool = dataclasses.replace(sim.pool, capacity_bytes=sim.pool.seq_bytes[reqs.max_tokens] * 6)
    reference = python_loop(sim).run(reqs)
    assert reference.preemptions > 0
    assert_speculative(sim, reference, reqs)
    assert_same(sim.run(reqs), reference)


@pytest.mark.parametrize("spec", SPECS[:2])
def test_closed_loop_clients_and_a_prefix_cache_give_the_python_loops_times(spec):
    base = requests(20.0, 80, seed=11)
    reqs = parse_prefix("system:1024:4", base, 0)[0]
    sim = simulator(spec, "vllm", reqs.max_tokens, kernel=True)
    clients = Clients(max_concurrency=6, think_s=0.2)
    reference = python_loop(sim).run(reqs, clients=clients)
    assert reference.prefix_cache["hit_rate"] > 0
    assert_speculative(sim, reference, reqs)
    assert_same(sim.run(reqs, clients=clients), reference)

