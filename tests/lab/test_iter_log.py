# ruff: noqa: E501
"""validate.engines.iter_log: vLLM 0.24's per-step log lines, written by hand in the format
EngineCore.log_iteration_details joins (vllm/v1/engine/core.py@v0.24.0:452-470) behind logging-iter.json's stamp."""

from validate.engines.iter_log import steps, summary, windows

STAGES = "S 11:59:00\nr6 12:00:00\nr12 12:00:02\nALL_DONE 12:00:09\n"

LOG = """\
(EngineCore pid=9) INFO 11:59:59.000 [core.py:452] Iteration(7): 0 context requests, 0 context tokens, 3 generation requests, 3 generation tokens, iteration elapsed time: 6.00 ms
(EngineCore pid=9) INFO 12:00:01.000 [core.py:452] Iteration(8): 0 context requests, 0 context tokens, 3 generation requests, 3 generation tokens, iteration elapsed time: 6.10 ms
(EngineCore pid=9) INFO 12:00:01.060 [core.py:452] Iteration(9): 0 context requests, 0 context tokens, 3 generation requests, 3 generation tokens, iteration elapsed time: 0.05 ms
(EngineCore pid=9) INFO 12:00:01.065 [core.py:452] Iteration(10): 2 context requests, 3000 context tokens, 3 generation requests, 3 generation tokens, iteration elapsed time: 2.50 ms
(APIServer pid=8) INFO 12:00:01.066 [loggers.py:1] Engine 000: Avg prompt throughput
(EngineCore pid=9) INFO 12:00:01.075 [core.py:452] Iteration(11): 0 context requests, 0 context tokens, 5 generation requests, 5 generation tokens, iteration elapsed time: 9.00 ms
(EngineCore pid=9) INFO 12:00:01.125 [core.py:452] Iteration(12): 0 context requests, 0 context tokens, 5 generation requests, 5 generation tokens, iteration elapsed time: 0.04 ms
(EngineCore pid=9) INFO 12:00:01.130 [core.py:452] Iteration(13): 1 context requests, 1000 context tokens, 5 generation requests, 5 generation tokens, iteration elapsed time: 3.00 ms
(EngineCore pid=9) INFO 12:00:01.140 [core.py:452] Iteration(14): 0 context requests, 0 context tokens, 6 generation requests, 6 generation tokens, iteration elapsed time: 9.50 ms
(EngineCore pid=9) INFO 12:00:03.000 [core.py:452] Iteration(15): 1 context requests, 100 context tokens, 0 generation requests, 0 generation tokens, iteration elapsed time: 1.00 ms
"""


def test_steps_of_one_run():
    w = windows(STAGES)
    assert w["r6"] == (12 * 3600.0, 12 * 3600.0 + 2) and w["r12"] == (12 * 3600.0 + 2, 12 * 3600.0 + 9)
    st = steps(LOG, w["r6"])
    assert [s.index for s in st] == [8, 9, 10, 11, 12, 13, 14]
    assert (st[2].ctx_reqs, st[2].ctx_tokens, st[2].gen_reqs, st[2].wait_ms) == (2, 3000, 3, 2.5)
    assert abs(st[2].stamp_s - (12 * 3600 + 1.065)) < 1e-9
    assert len(steps(LOG)) == 9


def test_summary_by_hand():
    w = windows(STAGES)
    s = summary(steps(LOG, w["r6"]))
    # prefill steps 10 and 13: 3 prompts over 2 steps; both eager (3,003 and 1,005 tokens > 512)
    assert (s["steps"], s["prefill_steps"], s["eager_steps"], s["context_requests"]) == (7, 2, 2, 3)
    assert s["prompts_per_prefill_step"] == 1.5
    # an eager step's launch shows in the period ending at the line before its own: 8 -> 9 (60 ms, step 10's) and
    # 11 -> 12 (50 ms, step 13's): median 55
    assert abs(s["eager_period_ms"] - 55.0) < 1e-6
    # decode-only periods between decode-only lines launching a decode-only step: 10 -> 11 (10 ms) alone (9 -> 10
    # ends at a prefill line, 12 -> 13 too; 13 -> 14 launches nothing logged)
    assert abs(s["decode_period_ms"] - 10.0) < 1e-6
    assert s["eager_wait_ms"] == 2.75
    # a prefill of 100 tokens is graphed, not eager
    assert summary(steps(LOG, w["r12"]))["eager_steps"] == 0
