"""An admission retried with nothing changed in the prefix cache since its last failure (serving.kernel_prefix.
failed_again / failed_room, serving.kernel_sched.admit) takes that failure's hit and room instead of walking its
path: the records, per-request times and cache stats stay those of the Python loop (serving.scheduler.Scheduler, which
always walks), on runs where such retries happen (counted by kernel_prefix.repeats, so the equality is not vacuous)."""

from __future__ import annotations

import dataclasses

import pytest

pytest.importorskip("numba")

from roofline.serving import kernel  # noqa: E402
from roofline.serving.clients import Clients  # noqa: E402
from roofline.serving.kernel_prefix import repeats  # noqa: E402
from roofline.serving.prefix import parse_prefix  # noqa: E402
from roofline.serving.scheduler import SchedulerConfig  # noqa: E402
from tests.serving.test_serving_kernel import python_loop, requests, simulator  # noqa: E402
from tests.serving.test_serving_kernel_prefix import small_pool  # noqa: E402
from tests.serving.test_serving_kernel_sessions import chats, engine, same_fleet, same_run  # noqa: E402


@pytest.fixture
def pfx_seen(monkeypatch):
    """The prefix-cache state each kernel run is given (kernel._prefix_state's result), read after the run."""
    seen = []

    def capture(*args):
        out = original(*args)
        seen.append(out)
        return out

    original = kernel._prefix_state
    monkeypatch.setattr(kernel, "_prefix_state", capture)
    return seen


def _small(reqs, lag: bool, tokens: int):
    sim = engine(reqs, lag, True, scheduler=SchedulerConfig(max_num_batched_tokens=1024, max_num_seqs=48))
    small_pool(sim, reqs, tokens)
    return sim


@pytest.mark.parametrize("lag", [True, False])
def test_repeated_failures_on_one_replica_keep_the_python_loops_run(pfx_seen, lag):
    """Conversations up to ~3,000 tokens, 48 at a time, in a 10,000-token pool: the queue's head waits for pages
    for many records."""
    reqs = chats(30.0, 192, 4, seed=11)
    fast, slow = same_run(_small(reqs, lag, 10000), reqs, Clients(think_s=0.2, session_turns=4))
    assert slow.preemptions > 0
    assert sum(repeats(pfx_seen[-1])) > 0


@pytest.mark.parametrize("router", ["least-outstanding", "prefix-aware"])
def test_repeated_failures_in_a_fleet_keep_the_python_loops_run(pfx_seen, router):
    reqs = chats(60.0, 256, 4, seed=29)
    fast, _ = same_fleet(_small(reqs, True, 10000), 2, router, reqs, Clients(think_s=0.1, session_turns=4))
    assert all(n > 0 for n in repeats(pfx_seen[-1]))


@pytest.mark.parametrize("spec", ["system:1024:4", "tree:3x512,4x256"])
def test_whole_prompt_admission_with_a_prefix_cache_keeps_the_python_loops_run(pfx_seen, spec):
    """vLLM's gate (admit_full_prompt, 0.19 on) with 512-token chunks in a 6,000-token pool: admission asks room for
    the whole prompt less its hit, unused prefixes counted, and the queue's head fails again and again; the gate
    spares most of first-chunk admission's preemptions."""
    reqs, _ = parse_prefix(spec, requests(40.0, 160), 0)
    config = SchedulerConfig(max_num_batched_tokens=512, max_num_seqs=64, admit_full_prompt=True)
    sim = simulator(reqs.max_tokens, scheduler=config)
    small_pool(sim, reqs, 6000)
    _, slow = same_run(sim, reqs, None)
    assert slow.prefix_cache["hit_tokens"] > 0 and sum(repeats(pfx_seen[-1])) > 0
    first = python_loop(sim)
    first.scheduler = dataclasses.replace(config, admit_full_prompt=False)
    assert first.run(reqs).preemptions > 5 * slow.preemptions
