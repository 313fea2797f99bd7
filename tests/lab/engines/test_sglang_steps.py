"""validate/engines/sglang_steps.py: SGLang's prefill steps read off its server log and the client's token stream.
Expected values are worked by hand from the few lines each test writes, and for the committed run from `grep` counts
of its server log (`grep -c "Prefill batch, #new-seq: 2,"` between rate24's cache flush, line 640, and conc32's
warm-up request, line 1300)."""

import json
from collections import Counter

import numpy as np
import pytest

from validate import stored
from validate.engines import sglang_steps as mod

LOG = "\n".join([
    '[t] INFO:     127.0.0.1:1 - "POST /generate HTTP/1.1" 200 OK',  # run a's warm-up
    "[t] Prefill batch, #new-seq: 1, #new-token: 7, #cached-token: 0, input throughput (token/s): 1.00",
    '[t] INFO:     127.0.0.1:2 - "POST /flush_cache HTTP/1.1" 200 OK',
    "[t] Prefill batch, #new-seq: 1, #new-token: 1024, #cached-token: 0, input throughput (token/s): 2048.00",
    "[t] Decode batch, #running-req: 1, #token: 1065, gen throughput (token/s): 32.59, #queue-req: 0",
    "[t] Prefill batch, #new-seq: 2, #new-token: 2048, #cached-token: 0, input throughput (token/s): 40960.00",
    '[t] INFO:     127.0.0.1:3 - "POST /generate HTTP/1.1" 200 OK',  # run b's warm-up
    "[t] Prefill batch, #new-seq: 1, #new-token: 9, #cached-token: 0, input throughput (token/s): 3.00",
    '[t] INFO:     127.0.0.1:4 - "POST /flush_cache HTTP/1.1" 200 OK',
    "[t] Prefill batch, #new-seq: 3, #new-token: 3072, #cached-token: 0, input throughput (token/s): 30720.00",
])


def test_a_runs_prefill_lines_are_those_between_its_flush_and_the_next_warm_up():
    # run a: 1024 tokens at 2048/s (0.5 s since the warm-up's line), 2048 at 40960/s (0.05 s); run b: 3072 / 30720
    assert mod.log_prefills(LOG, "a", ("a", "b")) == [(1, 1024, 0.5), (2, 2048, 0.05)]
    assert mod.log_prefills(LOG, "b", ("a", "b")) == [(3, 3072, 0.1)]


def test_the_prefill_rate_is_read_off_the_batches_of_two_or_more_requests():
    gaps = np.array([0.030, 0.050, 0.100, 0.0725])  # 1024 after a decode step; 2048, 4096 and 3072 tokens
    tokens = np.array([1024, 2048, 4096, 3072])
    # gap / token over the three of >= 2 x 1024 tokens: 24.4141, 24.4141, 23.6003 us; their lower decile, by numpy's
    # linear rule: 23.6003 + 0.2 x (24.4141 - 23.6003) = 23.7630 us
    assert mod.per_token_s(gaps, tokens) == pytest.approx(23.7630e-6, rel=1e-4)
    with pytest.raises(ValueError, match="two or more"):
        mod.per_token_s(gaps[:1], tokens[:1])


def test_back_to_back_pairs_and_the_requests_sent_while_the_earlier_ran():
    # batch 0 runs 0 .. 25 ms; batch 1 starts at its end (back to back), batch 2 10 ms after batch 1's end (not)
    b = mod.Batches(start_s=np.array([0.0, 0.0251, 0.060]), end_s=np.array([0.025, 0.050, 0.085]),
                    first=np.array([0, 1, 3]), sends_s=np.array([-0.01, -0.002, 0.004, 0.030, 0.040]))
    # pair (0, 1): batch 1 holds requests 1 and 2, sent at -2 ms and +4 ms: one sent after batch 0 started
    assert b.pairs() == {"batches": 3, "back_to_back": 1, "sent_after_the_earlier_started": 1,
                         "pairs_with_such_a_request": 1}


def test_when_a_request_was_formed_into_a_prefill_from_the_clients_token_stream(tmp_path):
    # request 0 decodes alone, its steps ending at 0, 5, 10, 15 and 20 ms; request 1, sent at 11 ms, is formed at the
    # step end of 15 ms (4 ms after its send) and prefills after the step then launched, 20 .. 45 ms; request 2, sent
    # at 14.5 ms (0.5 ms before that end: too short a path), is formed at 20 ms and prefills 45 .. 70 ms; then all
    # three decode (steps ending at 75 and 80 ms). Step ends between send and first token: request 1 sees 15 and 20,
    # request 2 15, 20 and 45 (request 1's first token), request 0 none.
    times = {0: np.array([0.0, 0.005, 0.010, 0.015, 0.020, 0.075, 0.080]), 1: np.array([0.045, 0.075, 0.080]),
             2: np.array([0.070, 0.075, 0.080])}
    sends = {0: -0.02, 1: 0.011, 2: 0.0145}
    rows = [{"start_perf_s": -1.0, "ttft_s": 0.0}] + [
        {"start_perf_s": sends[i], "ttft_s": times[i][0] - sends[i]} for i in range(3)]
    (tmp_path / "M-r-sends.json").write_text(json.dumps({"requests": rows}))
    doc = {"ttfts": [r["ttft_s"] for r in rows[1:]], "itls": [np.diff(times[i]).tolist() for i in range(3)]}
    (tmp_path / "M-r.jsonl").write_text(json.dumps(doc) + "\n")
    got = mod.first_boundary(tmp_path, "M", "r")
    assert got == {"step_ends_before_the_first_token": {0: 1, 2: 1, 3: 1}, "formed_at_the_first_end": 1,
                   "its_shortest_send_to_end_ms": 4.0, "formed_at_the_second_end": 1,
                   "its_longest_send_to_end_ms": 0.5}


def test_the_committed_runs_prefill_batches_and_their_sizes():
    run, runs = mod.RUN, ("rate4", "rate12", "rate24", "conc32")
    rows = mod.log_prefills(stored.read_text(run / "Llama-3.1-8B-server.log", newline=""), "rate24", runs)
    # grep -c over the rate24 window: 273 lines; #new-seq 1 / 2 / 3 / 4 / 5 on 212 / 42 / 13 / 5 / 1 of them
    assert len(rows) == 273
    assert Counter(r[0] for r in rows) == {1: 212, 2: 42, 3: 13, 4: 5, 5: 1}
    batches, _ = mod.measured(run, "Llama-3.1-8B", "rate24", runs)
    assert len(batches.end_s) == 273 and batches.first[-1] + rows[-1][0] == 360  # every request sent, once
