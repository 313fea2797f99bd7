"""A prompt whose chunks stop one token short of its end: the scheduler plans that last prompt token as a decode
(Scheduler._plan_running: one known token left to compute), so the request's FIRST token is emitted by a decode
step. The compiled loops (serving.kernel_sched.commit) must stamp it there as the Python loop does; a shortcut that
skipped the first-token check for decodes left those requests' TTFT NaN at scale (32 x 100,000 with a draft
model: TPOT p50 nan) while the other kernel tests, whose prompts never end one token past a chunk, passed.

The case is built by hand: every prompt is max_num_batched_tokens + 1 tokens and the requests arrive 2 s apart, so
each runs alone: a chunk of 512 tokens, then the last token as a decode."""

from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("numba")

from roofline.serving import kernel  # noqa: E402
from roofline.serving.fleet import Fleet  # noqa: E402
from roofline.serving.requests import Requests  # noqa: E402
from roofline.serving.scheduler import SchedulerConfig  # noqa: E402
from tests.serving.test_serving_kernel import assert_same, python_loop, simulator  # noqa: E402

BUDGET = 512


def _requests(n: int) -> Requests:
    return Requests(np.arange(n) * 2.0, np.full(n, BUDGET + 1, dtype=np.int64), np.full(n, 20, dtype=np.int64))


def _sim():
    return simulator(2048, scheduler=SchedulerConfig(max_num_batched_tokens=BUDGET, max_num_seqs=16))


def test_a_first_token_emitted_by_a_decode_step_is_stamped_on_one_replica():
    reqs = _requests(12)
    slow = python_loop(_sim()).run(reqs)
    assert np.array_equal(slow.steps[:2, 6], [BUDGET, 1])  # the prompt's last token is a step of its own
    sim = _sim()
    assert kernel.covers(sim, reqs, single=True) is None
    fast = sim.run(reqs)
    assert np.isfinite(fast.first_token_s).all()
    assert_same(fast, slow)


def test_a_first_token_emitted_by_a_decode_step_is_stamped_in_a_fleet():
    reqs = _requests(12)
    fast = Fleet(_sim(), 2, "round-robin").run(reqs)
    slow = Fleet(python_loop(_sim()), 2, "round-robin").run(reqs)
    assert np.isfinite(fast.trace.first_token_s).all()
    assert_same(fast.trace, slow.trace)
