"""Run 2 of a real vLLM 0.24.0 on the H200 (validate/results/engines/nvidia-h200-vllm-2026-11-28-run2/): the served
runs' recorded send times against the arrivals the lab replays, the speculative run's acceptance counters, and the
second memory settings against the engine's logs. Expected values are the engine's recorded figures or hand sums."""

import json
from pathlib import Path

import pytest

from validate import stored
from validate.engines.predict import vllm_arrivals
from validate.engines.spec import acceptance

RUN = Path(__file__).resolve().parents[3] / "validate" / "results" / "engines" / "nvidia-h200-vllm-2026-11-28-run2"


@pytest.mark.parametrize(("seed", "rate", "n"), [(101, 4, 60), (102, 12, 180), (105, 48, 480)])
def test_the_replayed_arrivals_are_the_clients_recorded_send_times(seed, rate, n):
    # serve.sh gives run k of the cases file the seed 100 + k; vllm bench serve --save-detailed recorded start_times
    sent = json.loads(stored.read_text(RUN / f"Llama-3.1-8B-rate{rate}.json"))["start_times"]
    drawn = vllm_arrivals(seed, rate, n)
    assert len(sent) == n
    # relative to the first request: the client's sleep-based sending lags its schedule by a few ms at most
    lag = max(abs((s - sent[0]) - (d - drawn[0])) for s, d in zip(sent, drawn, strict=True))
    assert lag < 5e-3
    assert drawn[-1] == pytest.approx(n / rate)  # get_request rescales the last send to n / rate


def test_acceptance_per_position_is_conditional_on_the_earlier_drafts(tmp_path):
    before, after = tmp_path / "b.txt", tmp_path / "a.txt"
    before.write_text('vllm:spec_decode_num_drafts_total{engine="0"} 20.0\n'
                      'vllm:spec_decode_num_accepted_tokens_per_pos_total{engine="0",position="0"} 10.0\n')
    after.write_text('vllm:spec_decode_num_drafts_total{engine="0"} 120.0\n'
                     'vllm:spec_decode_num_drafts_created{engine="0"} 1.7e9\n'
                     'vllm:spec_decode_num_accepted_tokens_per_pos_total{engine="0",position="0"} 70.0\n'
                     'vllm:spec_decode_num_accepted_tokens_per_pos_total{engine="0",position="1"} 30.0\n')
    # 100 drafts in the run: 60 accepted the first token (0.6), 30 of those 60 the second (0.5), none a third
    assert acceptance(before, after, 3) == pytest.approx((0.6, 0.5, 0.0))


def test_the_draft_model_run_accepted_nothing_on_dummy_weights():
    # the engine's own counters of the concurrency-16 run: 1B random draft vs 8B random target
    acc = acceptance(RUN / "Llama-3.1-8B-spec-metrics-before-conc16.txt", RUN / "Llama-3.1-8B-spec-metrics-conc16.txt",
                     3)
    assert acc == (0.0, 0.0, 0.0)


def test_the_engine_disables_async_scheduling_with_a_draft_model():
    # the mechanism behind the speculative run's miss (no host/GPU overlap): the engine's own log line
    log = stored.read_text(RUN / "Llama-3.1-8B-spec-server.log", errors="replace")
    assert "Async scheduling not supported with draft_model-based speculative decoding" in log


def test_the_rate_at_an_slo_is_interpolated_where_the_p99_crosses_it():
    from validate.engines.compare import _crossing

    # p99 TTFT 0.1 s at 10 req/s, 0.3 s at 20: a 0.2 s limit is crossed half-way, at 15 req/s
    assert _crossing([10, 20, 30], [0.1, 0.3, 0.9], 0.2) == pytest.approx(15.0)
    assert _crossing([10, 20], [0.1, 0.15], 0.2) is None  # every run meets it: the max rate is past the runs
    assert _crossing([10, 20], [0.3, 0.4], 0.2) == 10  # the slowest run already misses it
