"""validate/engines/sglang_load.py: SGLang's decode steps, prefills and stalls read off its server log and the clients'
token stream. Expected values are worked by hand from the few lines each test writes, and for the committed run from
its server log's own numbers (`grep -c "Decode batch"` in rate24's window, lines 640-1300: 23 lines; the last two
read `#running-req: 39, #token: 48653` and `#running-req: 17, #token: 16546, ... gen throughput (token/s):
4555.78`)."""

import json

import numpy as np
import pytest

from roofline.engines.scheduling import EngineOverheads
from validate import stored
from validate.engines import sglang_load as mod
from validate.engines.sglang_steps import RUN, run_lines

DEC = ("[t] Decode batch, #running-req: {}, #token: {}, token usage: 0.01, cuda graph: True, "
       "gen throughput (token/s): {}, #queue-req: 0")
PRE = ("[t] Prefill batch, #new-seq: {}, #new-token: {}, #cached-token: 0, token usage: 0.01, #running-req: 9, "
       "input throughput (token/s): 1.0")


def test_decode_line_intervals_their_batch_context_step_and_prefills():
    lines = [DEC.format(10, 11000, 500.0), PRE.format(1, 1024), PRE.format(2, 2048), DEC.format(12, 13000, 1100.0),
             DEC.format(8, 9000, 2000.0)]
    first, second = mod.intervals(lines)
    # 10 -> 12 requests: mean 11 / 1100 tok/s = 10 ms a step; context (11000 + 13000) / (10 + 12)
    assert first.running == (10, 12) and first.step_s == pytest.approx(0.010)
    assert first.context == pytest.approx(24000 / 22) and first.prefills == ((1, 1024), (2, 2048))
    # 12 -> 8: mean 10 / 2000 = 5 ms, 40 steps 0.2 s; no prefill between
    assert second.step_s == pytest.approx(0.005) and second.seconds == pytest.approx(0.2) and not second.prefills


def test_the_decode_law_pools_intervals_of_one_batch_and_the_prefills_take_the_rest():
    ivs = [mod.Interval((20, 20), 1100.0, 0.006), mod.Interval((20, 20), 1200.0, 0.008),
           mod.Interval((40, 40), 1100.0, 0.010),
           # 40 steps at 15 ms = 0.6 s, of which 40 x 8.5 ms (the law at B 30, halfway from 7 to 10 ms) = 0.34 s
           # decode: 0.26 s of prefill over 1 + 2 requests, 86.67 ms each
           mod.Interval((28, 32), 1100.0, 0.015, ((1, 1024), (2, 2048)))]
    batches, steps = mod.decode_law(ivs)
    assert batches.tolist() == [20.0, 40.0] and steps == pytest.approx([0.007, 0.010])
    seconds, requests = mod.prefill_per_request_s(ivs, (batches, steps))
    assert requests == 3 and seconds == pytest.approx(0.26 / 3)


def test_prefill_batches_while_a_request_decodes():
    # two intervals of 40 steps: batches of 1, 1, 1 request in the first (steps 10, 20, 30), one of 2 in the second
    # (step 60); with 31 output tokens a request decodes 30 steps from its own batch's step
    ivs = [mod.Interval((1, 1), 1.0, 0.005, ((1, 1), (1, 1), (1, 1))), mod.Interval((1, 1), 1.0, 0.005, ((2, 2),))]
    # the request of step 10 sees 20 and 30; of 20: 30; of 30: none (60 is 30 steps on); the two of 60: none
    assert mod.prefills_in_life(ivs, 31).tolist() == [2, 1, 0, 0, 0]


def _write_run(tmp_path, sends: dict, times: dict) -> None:
    rows = [{"start_perf_s": -1.0, "ttft_s": 0.0, "latency_s": 0.0}] + [
        {"start_perf_s": sends[i], "ttft_s": times[i][0] - sends[i], "latency_s": times[i][-1] - sends[i]}
        for i in sorted(sends)]
    (tmp_path / "M-r-sends.json").write_text(json.dumps({"requests": rows}))
    doc = {"ttfts": [r["ttft_s"] for r in rows[1:]], "itls": [np.diff(times[i]).tolist() for i in sorted(sends)]}
    (tmp_path / "M-r.jsonl").write_text(json.dumps(doc) + "\n")


def test_a_stall_is_a_gap_in_every_stream_while_requests_are_in_flight(tmp_path):
    # request 0 (sent at 0) streams every 10 ms from 10 to 100 ms, then nothing until 0.4 s (a 300 ms gap), then to
    # 0.5 s; request 1, sent at 0.15 s inside the gap, gets its first token at 0.4 s (TTFT 250 ms)
    times = {0: np.concatenate([np.arange(0.01, 0.101, 0.01), np.arange(0.4, 0.501, 0.01)]),
             1: np.arange(0.4, 0.451, 0.01)}
    _write_run(tmp_path, {0: 0.0, 1: 0.15}, times)
    got = mod.stalls(tmp_path, "M", "r", 0.1)
    assert got == [{"from_s": 0.1, "to_s": 0.4, "ms": 300.0, "in_flight": 1, "sent_inside": 1,
                    "first_token_after_it_ms": [250]}]


def test_a_light_runs_ttft_splits_at_the_step_end_that_formed_its_prefill(tmp_path):
    # sglang_steps's case: request 0's steps end at 0, 5, 10, 15, 20 ms; request 1 (sent at 11 ms) is formed at the
    # 15 ms end (4 ms after its send) and its first token comes at 45 ms (30 ms after); request 2 (sent at 14.5 ms)
    # is formed at 20 ms (5.5 ms) and its first token comes at 70 ms (50 ms after). Medians of two: 4.75 and 40 ms
    times = {0: np.array([0.0, 0.005, 0.010, 0.015, 0.020, 0.075, 0.080]), 1: np.array([0.045, 0.075, 0.080]),
             2: np.array([0.070, 0.075, 0.080])}
    _write_run(tmp_path, {0: -0.02, 1: 0.011, 2: 0.0145}, times)
    assert mod.formation_split(tmp_path, "M", "r") == {"requests": 2, "send_to_forming_end_ms": 4.75,
                                                       "forming_end_to_first_token_ms": 40.0}


def test_the_scaled_decode_diagnostic_scales_decode_steps_only():
    base = {"step_s": 0.001, "per_seq_s": 0.0, "overlap": True}
    scaled = mod.ScaledDecode(**base, batches=(10.0, 30.0), ratios=(1.0, 1.2))
    plain = EngineOverheads(**base)
    # a decode step of 20 sequences (ratio 1.1 halfway): 10 ms of GPU -> 11 ms; a prefill (1,024 tokens) is not scaled
    assert scaled.combine(0.010, 20, 20) == pytest.approx(0.011)
    assert scaled.combine(0.010, 1, 1024) == pytest.approx(plain.combine(0.010, 1, 1024)) == pytest.approx(0.010)


def test_the_committed_runs_last_interval_from_its_log_line():
    runs = ("rate4", "rate12", "rate24", "conc32")
    ivs = mod.intervals(run_lines(stored.read_text(RUN / "Llama-3.1-8B-server.log", newline=""), "rate24", runs))
    # 23 decode lines: 22 intervals, 7 with no prefill line between (the log's order, counted with awk)
    assert len(ivs) == 22 and sum(not iv.prefills for iv in ivs) == 7
    last = ivs[-1]
    # 39 -> 17 requests: (39 + 17) / 2 / 4555.78 tok/s = 6.146 ms; context (48653 + 16546) / (39 + 17) = 1164.3
    assert last.running == (39, 17) and last.step_s == pytest.approx(28 / 4555.78)
    assert last.context == pytest.approx(65199 / 56)
