"""validate/engines/offline_schedule.py: lat.py's differenced decode window replayed as vLLM's scheduler runs it
(running requests first, then waiting ones, FIFO within the token budget). Schedules derived by hand."""

from types import SimpleNamespace

import pytest

from validate.engines import offline_schedule as mod


@pytest.fixture
def steps_seen(monkeypatch):
    seen = []

    def step(pm, steps, decode_ctx, chunks):
        seen.append((len(decode_ctx), [(s, c, d) for s, c, d in chunks]))
        return 1.0 + 0.001 * (len(decode_ctx) + sum(c for _, c, _ in chunks))
    monkeypatch.setattr(mod, "step_wall_s", step)
    return seen


def test_four_prompts_of_ten_tokens_in_a_sixteen_token_budget(steps_seen):
    # by hand, 3 outputs each: step 1 r0 10 (ends, 1st token) + r1 6; step 2 r0 decode, r1 4 (ends), r2 10 (ends),
    # r3 1; step 3 r0 (3rd: done), r1, r2 decode, r3 9 (ends); step 4 r1, r2 (done), r3; step 5 r3 (done)
    total, count = mod.makespan_s(None, None, 4, 10, 3, 16)
    assert count == 5
    assert steps_seen == [(0, [(0, 10, True), (0, 6, False)]), (1, [(6, 4, True), (0, 10, True), (0, 1, False)]),
                          (3, [(1, 9, True)]), (3, []), (1, [])]
    assert total == pytest.approx(5 + 0.001 * (16 + 16 + 12 + 3 + 1))
    steps_seen.clear()
    # one output each: step 1 r0 10 + r1 6; step 2 r1 4, r2 10, r3 2; step 3 r3 8
    _, count = mod.makespan_s(None, None, 4, 10, 1, 16)
    assert count == 3 and steps_seen[-1] == (0, [(2, 8, True)])


def test_max_num_seqs_holds_back_the_later_prompts(steps_seen):
    mod.makespan_s(None, None, 3, 4, 2, 100, max_seqs=2)
    # r2 waits until r0 and r1 finish (2 tokens: the prefill's and one decode)
    assert steps_seen == [(0, [(0, 4, True), (0, 4, True)]), (2, []), (0, [(0, 4, True)]), (1, [])]


def test_a_decode_only_step_is_the_planners_own_decode_step():
    pm = SimpleNamespace(decode_time=lambda b, ctx: (b, ctx))
    assert mod.step_wall_s(pm, None, [300, 302], []) == (2, 301.0)
