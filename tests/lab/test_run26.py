"""validate/engines/run26.py: the TTFT split, the serving windows and the GIL holders, on hand-built files."""

import json

import pytest

from validate.engines import run26


def _metrics(path, stamp, pairs):
    lines = [str(stamp)] + [f"vllm:{k}{{engine=\"0\"}} {v}" for k, v in pairs.items()]
    path.write_text("\n".join(lines) + "\n")


def test_ttft_split_means_from_metric_deltas(tmp_path):
    m = run26.MODEL
    before = {"time_to_first_token_seconds_sum": 1.0, "time_to_first_token_seconds_count": 10,
              "request_queue_time_seconds_sum": 0.0, "request_queue_time_seconds_count": 10,
              "request_prefill_time_seconds_sum": 0.5, "request_prefill_time_seconds_count": 10,
              "inter_token_latency_seconds_sum": 2.0, "inter_token_latency_seconds_count": 100}
    # 20 requests in the run: API server's TTFT 2.0 s in all (100 ms each), queue 0.2 s (10 ms), prefill 1.2 s
    # (60 ms), 400 inter-token gaps over 8 s (20 ms)
    after = {"time_to_first_token_seconds_sum": 3.0, "time_to_first_token_seconds_count": 30,
             "request_queue_time_seconds_sum": 0.2, "request_queue_time_seconds_count": 30,
             "request_prefill_time_seconds_sum": 1.7, "request_prefill_time_seconds_count": 30,
             "inter_token_latency_seconds_sum": 10.0, "inter_token_latency_seconds_count": 500}
    _metrics(tmp_path / f"{m}-rate24-before-metrics.txt", 1.0, before)
    _metrics(tmp_path / f"{m}-rate24-after-metrics.txt", 2.0, after)
    (tmp_path / f"{m}-rate24.json").write_text(json.dumps({"mean_ttft_ms": 112.0}))
    s = run26.ttft_split(tmp_path, "rate24")
    assert s["client_s"] == pytest.approx(0.112)
    assert s["api_s"] == pytest.approx(0.100)
    assert s["engine_s"] == pytest.approx(0.010 + 0.060)
    assert s["itl_s"] == pytest.approx(0.020)


def _window(t0, cpu, hop_s):
    return {"t0": t0, "t1": t0 + 1.0, "cpu_s": cpu, "posted": 0, "loop": True,
            "thread": {"n": 1, "sum": 1e-4, "max": 1e-4, "bins": [0, 1] + [0] * 11},
            "hop": {"n": 1, "sum": hop_s, "max": hop_s, "bins": [0] * 13}}


def test_serve_lag_takes_the_busy_windows_between_a_run_and_the_next_mark(tmp_path):
    m = run26.MODEL
    (tmp_path / f"{m}-marks.txt").write_text("rate24 100.0\nrate24-end 110.0\nconc32 110.5\nend 130.0\n")
    lag = tmp_path / "lag"
    lag.mkdir()
    head = {"pid": 7, "argv": ["-m", "vllm.entrypoints.cli.main", "serve", "/m"], "t": 0, "switch_interval_s": 0.005,
            "tick_s": 0.002}
    # 100-101 idle (the client starting), 101-103 busy, 109.5-110.5 straddles the end (left out), 111 in conc32
    ws = [_window(100.0, 0.02, 1e-3), _window(101.0, 0.4, 2e-3), _window(102.0, 0.5, 4e-3), _window(109.5, 0.5, 9e-3),
          _window(111.0, 0.9, 7e-3)]
    (lag / "lag-7.jsonl").write_text("\n".join(json.dumps(x) for x in [head, *ws]) + "\n")
    got = run26.serve_lag(tmp_path, "rate24")
    assert got["wall_s"] == pytest.approx(2.0)
    assert got["cpu_s"] == pytest.approx(0.9)
    assert got["hop"].mean() == pytest.approx(3e-3)
    assert run26.serve_lag(tmp_path, "conc32")["hop"].mean() == pytest.approx(7e-3)


def test_gil_holders_share_by_thread(tmp_path):
    (tmp_path / "pyspy-64-gil.txt").write_text(
        "thread (1): MainThread;Runner.run (asyncio/runners.py:118) 30\n"
        "thread (1): MainThread;f (a.py:1);g (b.py:2) 60\n"
        "thread (9): ThreadPoolExecutor-2_0;encode (t.py:3) 10\n")
    got = run26.gil_holders(tmp_path)
    assert got == pytest.approx({"MainThread": 0.9, "ThreadPoolExecutor-2_0": 0.1})
    assert list(got) == ["MainThread", "ThreadPoolExecutor-2_0"]
    assert run26.gil_holders(tmp_path / "absent") == {}
