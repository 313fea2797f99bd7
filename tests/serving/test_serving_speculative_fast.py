"""Speculative decoding's fast paths against StepModel's numpy reference (Simulator(fast=False)): the verify step and
the draft's passes through serving.closedform (ClosedForm.chunk_work, an EAGLE / MTP head's once-counted law) give
the same engine records and per-request times to 1e-9, for a draft model, EAGLE and MTP, under vLLM's profile (the
drafter's host floor a pass, the admission lag) and the ideal engine, with prompt chunks riding with verify steps.

Each case asserts speculative behaviour in the reference run itself: drafts accepted (fewer decode records than
output tokens), the draft's cost paid (a verify record takes longer than the target's verify alone) and the draft's
KV in the pool (its bytes per sequence above the target's).
"""

from __future__ import annotations

import numpy as np
import pytest

from roofline.catalogue import load_hardware, load_model
from roofline.engines.scheduling import scheduling
from roofline.methods import parse_method
from roofline.serving.requests import LengthDist, poisson_requests
from roofline.serving.simulate import Simulator
from roofline.serving.speculative import Speculative
from roofline.specs import Workload

MODEL, H200 = load_model("Llama-3.1-8B"), load_hardware("H200")
SPECS = ["draft=Llama-3.2-1B:3:0.7", "eagle:3:0.8,0.6,0.4", "mtp:1:0.9"]


def requests(rate: float, n: int, seed: int = 5):
    return poisson_requests(rate, n, LengthDist.parse("uniform:64:2500", "p"), LengthDist.parse("uniform:2:300", "o"),
                            seed)


def simulator(spec: str, engine: str | None, max_tokens: int, **kw) -> Simulator:
    wl = Workload(context_tokens=max_tokens, prefill_chunk_tokens=8192)
    profile = scheduling(engine, H200, "api", 1, context_len=max_tokens) if engine else None
    return Simulator(MODEL, H200, wl, parse_method("bf16"), max_tokens=max_tokens, engine=profile,
                     speculative=Speculative.parse(spec), **kw)


def assert_same(fast, slow) -> None:
    assert fast.steps.shape == slow.steps.shape
    assert fast.preemptions == slow.preemptions
    assert np.array_equal(fast.steps[:, 2:4], slow.steps[:, 2:4])
    assert np.array_equal(fast.steps[:, 6], slow.steps[:, 6])
    assert fast.steps[:, :2] == pytest.approx(slow.steps[:, :2], rel=1e-9, abs=1e-12)
    assert fast.steps[:, 4] == pytest.approx(slow.steps[:, 4], rel=1e-12)
    for name in ("first_token_s", "finish_s", "ttft_s", "tpot_s"):
        assert getattr(fast, name) == pytest.approx(getattr(slow, name), rel=1e-9, abs=1e-12, nan_ok=True), name


def assert_speculative(sim: Simulator, trace, reqs) -> None:
    """Drafts were accepted, the draft's passes were paid and its KV sits in the pool, in this run."""
    decode_tokens = int((reqs.output_tokens - 1).sum())
    verify_records = int(np.count_nonzero(trace.steps[:, 6] % (sim.speculative.tokens + 1) == 0))
    assert len(trace.steps) < decode_tokens  # more than one token a verify step on average: accepted drafts
    assert verify_records > 0
    assert sim.draft.time_s(np.array([1000, 1500])) > 0
    target_seq = sim.pool.seq_bytes - sim.draft.seq_bytes[:len(sim.pool.seq_bytes)]
    assert np.all(sim.pool.seq_bytes[1:] > target_seq[1:])


@pytest.mark.parametrize("spec", SPECS)
@pytest.mark.parametrize("engine", [None, "vllm"])
def test_closed_form_speculative_steps_give_the_numpy_paths_times(spec, engine):
    reqs = requests(8.0, 60)
    fast = simulator(spec, engine, reqs.max_tokens, kernel=False)
    slow = simulator(spec, engine, reqs.max_tokens, kernel=False, fast=False)
    assert fast.closed is not None and fast.draft.closed is not None and slow.draft.closed is None
    reference = slow.run(reqs)
    assert_speculative(slow, reference, reqs)
    assert_same(fast.run(reqs), reference)


@pytest.mark.parametrize("spec", SPECS)
def test_closed_form_draft_passes_equal_stepmodels_with_chunks(spec):
    """One step's K draft passes with decoding sequences and prompt chunks, both paths."""
    fast, slow = simulator(spec, "vllm", 4096), simulator(spec, "vllm", 4096, fast=False)
    context = np.array([17, 900, 2048, 3000])
    start, tokens = np.array([0, 512]), np.array([700, 1024])
    for args in ((context,), (context, start, tokens), (context[:0], start, tokens)):
        assert fast.draft.time_s(*args) == pytest.approx(slow.draft.time_s(*args), rel=1e-12)
