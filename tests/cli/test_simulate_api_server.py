"""`roofline simulate`'s API-server figure (roofline.engines.timing 25.): the loop's busy share, by hand."""

import json

import pytest

from roofline.engines.timing import timing
from tests.cli_run import run

SHORT = ["--hardware", "H200", "--method", "bf16", "--engine", "vllm", "--no-search"]


def _sim(capsys, *argv: str) -> tuple[dict, str]:
    code, out, err = run(capsys, "simulate", *SHORT, *argv, "--json")
    assert code == 0, err
    d = json.loads(out)
    code, text, err = run(capsys, "simulate", *SHORT, *argv)
    assert code == 0, err
    return d, text


def test_the_profile_holds_run_25s_costs():
    t = timing("vllm")
    # run 25 on the H200 host (api_loop_bench.py): ~9.5 us an output, ~58 us a chunk (the note's table: 7.5 / 11.4 us
    # an output and 55 us a chunk in the two repetitions; the profile takes each figure's median over them)
    assert 5e-6 < t.api_output_s < 15e-6
    assert 40e-6 < t.api_chunk_s < 80e-6
    assert "run25" in t.sources["api_output_s"] and "run25" in t.sources["api_chunk_s"]


def test_load_is_streamed_tokens_times_the_cost_a_token(capsys):
    d, text = _sim(capsys, "--model", "Llama-3.1-8B", "--rate", "12", "--requests", "120", "--prompt-tokens", "1024",
                   "--output-tokens", "256")
    api, t = d["api_server"], timing("vllm")
    assert api["per_token_s"] == pytest.approx(t.api_output_s + t.api_chunk_s)
    assert api["tokens_per_s"] == pytest.approx(d["throughput_tokens_per_s"])
    # 12 req/s x 256 tokens ~ 3,072 tok/s x ~67 us: about a fifth of the loop, no warning
    assert api["load"] == pytest.approx(d["throughput_tokens_per_s"] * api["per_token_s"])
    assert 0.1 < api["load"] < 0.3
    assert "API server's one loop" not in text


def test_a_loop_past_ninety_percent_is_a_warning_and_replicas_share_it(capsys):
    argv = ["--model", "Llama-3.2-1B", "--rate", "inf", "--max-concurrency", "256", "--requests", "512",
            "--prompt-tokens", "128", "--output-tokens", "256"]
    d, text = _sim(capsys, *argv)
    assert d["api_server"]["load"] >= 0.9  # a 1B model's ~15k+ tok/s at 256 streams x ~67 us
    assert "warning: bf16: the API server's one loop is" in text
    two, _ = _sim(capsys, *argv, "--replicas", "2")
    assert two["api_server"]["tokens_per_s"] == pytest.approx(two["throughput_tokens_per_s"] / 2)


def test_engines_without_the_figures_report_none(capsys):
    code, out, _ = run(capsys, "simulate", "--model", "Llama-3.1-8B", "--hardware", "H200", "--method", "bf16",
                       "--rate", "4", "--requests", "40", "--no-search", "--json")
    assert code == 0 and json.loads(out)["api_server"] is None
