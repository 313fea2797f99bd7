"""`roofline simulate` as a new user runs it: a public trace replayed whole, and every flag the run would ignore or
could not simulate honestly refused in one line naming it (exit 2, nothing on stdout). Expected values are worked
out by hand in each docstring."""

from __future__ import annotations

import json

import pytest

from roofline.cli import main

BASE = ["simulate", "--model", "Llama-3.1-8B", "--hardware", "H100-SXM", "--method", "bf16"]
AZURE = ("TIMESTAMP,ContextTokens,GeneratedTokens\n"
         "2023-11-16 18:15:46.6805900,374,44\n"
         "2023-11-16 18:15:50.9951690,396,109\n"
         "2023-11-16 18:15:51.5437120,879,45\n")


def run(capsys, *argv):
    try:
        code = main([*BASE, *argv])
    except SystemExit as exc:  # argparse's refusals
        code = exc.code
    out, err = capsys.readouterr()
    return code, out, err


def test_azure_trace_is_replayed_whole(tmp_path, capsys):
    """Azure's trace (Azure/AzurePublicDataset AzureLLMInferenceDataset2023.md columns) replays its 3 rows: output
    tokens served 44 + 109 + 45 = 198, all tokens 374 + 396 + 879 + 198 = 1847 (throughput x duration), offered
    rate 3 / 4.863122 s (the last row's time after the first) = 0.61689 req/s, and the run lasts at least that span."""
    trace = tmp_path / "azure_conv.csv"
    trace.write_text(AZURE)
    code, out, err = run(capsys, "--trace", str(trace), "--json")
    assert code == 0, err
    data = json.loads(out)
    assert data["requests"] == 3
    assert data["throughput_tokens_per_s"] * data["duration_s"] == pytest.approx(198, rel=1e-9)
    assert data["throughput_total_tokens_per_s"] * data["duration_s"] == pytest.approx(1847, rel=1e-9)
    assert data["offered_rate_per_s"] == pytest.approx(3 / 4.863122, rel=1e-6)
    assert data["duration_s"] >= 4.863122


def test_rows_far_apart_each_run_alone(tmp_path, capsys):
    """Rows 1000 s apart each find the engine idle: every TTFT of a 3-row trace equals the lone first-row TTFT of
    a 2-row trace (both runs' GEMM duty is ~4e-5, so both run at the burst clock, serving.clock): no queueing is
    invented between rows and none is dropped (3 requests, 3 x 4 output tokens served)."""
    two, three = tmp_path / "two.csv", tmp_path / "three.csv"
    two.write_text("0,1000,4\n1000,1000,4\n")
    three.write_text("0,1000,4\n1000,1000,4\n2000,1000,4\n")
    _, out2, _ = run(capsys, "--trace", str(two), "--json")
    _, out3, _ = run(capsys, "--trace", str(three), "--json")
    d2, d3 = json.loads(out2), json.loads(out3)
    assert d3["requests"] == 3
    assert d3["throughput_tokens_per_s"] * d3["duration_s"] == pytest.approx(12, rel=1e-9)
    for key in ("p50", "p99"):
        assert d3["ttft_s"][key] == pytest.approx(d2["ttft_s"]["p50"], rel=1e-9)


@pytest.mark.parametrize("argv,flag", [
    (["--rate", "4", "--think-time-s", "5"], "--think-time-s"),              # open loop: was ignored
    (["--rate", "4", "--prefill-tp", "2"], "--prefill-tp"),                  # without --disaggregate: ignored
    (["--rate", "4", "--prefill-hardware", "A10"], "--prefill-hardware"),
    (["--rate", "4", "--kv-link-bytes-per-s", "1e9"], "--kv-link-bytes-per-s"),
    (["--rate", "4", "--replicas", "2", "--cache-threshold", "0.9"], "--cache-threshold"),
    (["--rate", "4", "--router", "prefix-aware"], "--router"),             # one replica: no router
    (["--rate", "4", "--micro-batches", "4"], "--micro-batches"),            # pp 1: ignored
    (["--rate", "4", "--engine", "sglang", "--entry-point", "offline"], "--entry-point"),
    (["--rate", "4", "--pp", "33"], "--pp"),                                  # 32 layers: was simulated
    (["--rate", "4", "--disaggregate", "1:1", "--size-fleet", "--target-rate", "10", "--slo-ttft-ms", "500",
      "--slo-tpot-ms", "50"], "--size-fleet"),
    (["--rate", "4", "--engine", "vllm", "--max-num-batched-tokens", "64"], "--max-num-batched-tokens"),
    (["--rate", "1e-300"], "--rate"),                                         # arrivals at 1e300 s: TTFT was 0
    (["--rate", "4", "--prompt-tokens", "99999999999999999999999"], "--prompt-tokens"),  # was a traceback
    (["--rate", "4", "--output-tokens", "uniform:1:99999999999999999999999"], "--output-tokens"),
    (["--rate", "4", "--seed", "-1"], "--seed"),                               # numpy's message named no flag
    (["--rate", "4", "--utilization", "0.01"], "--utilization"),              # 'kv pool: ...' named no flag
    (["--rate", "4", "--speculative", "draft=Llama-3.1-70B:4:0.8"], "--speculative"),
    (["--trace", "https://example.com/t.csv"], "--trace"),
])
def test_flags_the_run_would_ignore_or_get_wrong_are_refused(capsys, argv, flag):
    code, out, err = run(capsys, *argv, "--requests", "5", "--no-search")
    assert code == 2 and out == "", err
    assert err.count("\n") == 1 and flag in err and "Traceback" not in err


@pytest.mark.parametrize("flag,value", [("--dataset", "sharegpt"), ("--prompt-tokens", "100"),
                                        ("--output-tokens", "10")])
def test_trace_with_length_flags_is_refused(tmp_path, capsys, flag, value):
    """The trace gives the lengths: a length flag beside it was silently ignored."""
    trace = tmp_path / "t.csv"
    trace.write_text("0,100,10\n")
    code, out, err = run(capsys, "--trace", str(trace), flag, value)
    assert code == 2 and out == "" and flag in err and err.count("\n") == 1


def test_disaggregated_run_reports_no_aggregated_max_rate(capsys):
    """The max-rate search replays one aggregated replica; under --disaggregate it is not the pools' rate, so none is
    reported (it was the aggregated replica's, printed as the P:D run's)."""
    code, out, err = run(capsys, "--rate", "4", "--requests", "5", "--disaggregate", "1:1", "--slo-ttft-ms", "500",
                         "--slo-tpot-ms", "50", "--json")
    assert code == 0, err
    data = json.loads(out)
    assert data["max_rate_at_slo"] is None and "--disaggregate" in data["max_rate_reason"]


@pytest.mark.parametrize("argv,field", [
    (["--rate", "4", "--dataset", "agentic-claude"], "--dataset"),       # was named --prompt-tokens, not given
    (["--rate", "4", "--session-turns", "5", "--prompt-tokens", "60000"], "--session-turns"),
    (["--rate", "4", "--prefix", "system:130000"], "--prefix"),
])
def test_too_long_request_names_the_flag_that_made_it(capsys, argv, field):
    """Llama-3.1-8B has 131,072 positions: agentic-claude's prompts reach ~600 k (TraceLab p99 prefix 918 k), five
    turns of 60 k prompts pass 131 k by the third turn, and a 130,000-token system prompt + 4,096 + 512 > 131,072."""
    code, out, err = run(capsys, *argv, "--requests", "5", "--no-search")
    assert code == 2 and out == "" and err.count("\n") == 1 and "max positions" in err
    assert field in err.split(": a request")[0]  # the flag is named before the rule


def test_trace_sessions_and_partial_session_are_noted(tmp_path, capsys):
    """3 rows as sessions of 2 turns: one full session and one of 1 turn, and the rows' later arrival times are not
    used; both are said in the notes."""
    trace = tmp_path / "t.csv"
    trace.write_text("0,100,10\n0.5,200,20\n1.0,300,30\n")
    code, out, err = run(capsys, "--trace", str(trace), "--session-turns", "2", "--json")
    assert code == 0, err
    notes = json.loads(out)["notes"]
    assert any("consecutive trace rows" in n for n in notes)
    assert any("1 session of 2 turns and one of 1" in n for n in notes)


def test_one_client_runs_requests_back_to_back_with_think_time(capsys):
    """--max-concurrency 1 with --think-time-s Z: each request is sent Z after the previous one finished, so 5
    identical requests last 5 x the lone request's E2E + 4 x Z (all arrive at once: --rate inf)."""
    args = ["--prompt-tokens", "1000", "--output-tokens", "50", "--rate", "inf", "--no-search", "--json"]
    _, lone, _ = run(capsys, *args, "--requests", "1")
    code, five, err = run(capsys, *args, "--requests", "5", "--max-concurrency", "1", "--think-time-s", "2")
    assert code == 0, err
    e2e = json.loads(lone)["e2e_s"]["p50"]
    assert json.loads(five)["duration_s"] == pytest.approx(5 * e2e + 4 * 2.0, rel=1e-9)


@pytest.mark.parametrize("prefix,rule", [
    ("tree:100000x1,100000x1", "shared segments"),   # 1e5 + 1e10 nodes: built in a Python loop, never ended
    ("system:100:100000000", "shared segments"),      # 1e8 system prompts: minutes of arrays
    ("system:100:1000000000000", "shared segments"),  # 1e12: a 7 TiB allocation, a traceback
    ("hit:1", "[0, 1)"),                               # the rule, no longer swallowed into 'not a prefix workload'
])
def test_prefix_workloads_past_what_a_run_holds_are_refused(capsys, prefix, rule):
    code, out, err = run(capsys, "--rate", "4", "--requests", "5", "--no-search", "--prefix", prefix)
    assert code == 2 and out == "" and err.count("\n") == 1 and "--prefix" in err and rule in err


@pytest.mark.parametrize("argv,flag", [
    (["--disaggregate", "1:1", "--kv-link-bytes-per-s", "1e-300"], "--kv-link-bytes-per-s"),  # was a traceback
    (["--max-concurrency", "1", "--think-time-s", "1e300"], "--think-time-s"),  # TTFT p50 came out 0.0
    (["--session-turns", "5", "--think-time-s", "1e12"], "--think-time-s"),  # 4e12 s: a clock ulp of 5e-4 s
    (["--model", "Llama-3.1-70B"], "--tp"),              # 141 GB of bf16 weights on an 80 GB GPU: not --utilization
    (["--max-num-seqs", "1048576"], "--max-num-seqs"),   # the flag that filled the memory is the one named
])
def test_inputs_past_the_clock_or_the_memory_name_their_flag(capsys, argv, flag):
    code, out, err = run(capsys, "--rate", "4", "--requests", "5", "--no-search", *argv)
    assert code == 2 and out == "" and err.count("\n") == 1 and err.startswith(f"roofline: error: {flag}:"), err


@pytest.mark.parametrize("argv,flag", [
    (["--replicas", "1048576"], "--replicas"),                       # argparse's bound; never ended
    (["--disaggregate", "1000000000:1"], "--disaggregate"),          # unbounded int; never ended
    (["--disaggregate", "1:1", "--router", "prefix-aware", "--cache-threshold", "0.5"], "--cache-threshold"),
])
def test_fleets_past_what_a_run_simulates_are_refused(capsys, argv, flag):
    code, out, err = run(capsys, "--rate", "4", "--requests", "5", "--no-search", *argv)
    assert code == 2 and out == "" and err.count("\n") == 1 and err.startswith(f"roofline: error: {flag}:"), err


MOONCAKE = (  # the first rows of Mooncake's trace as ai-dynamo/dynamo benchmarks/data_generator/README.md quotes them
    '{"timestamp": 0, "input_length": 6755, "output_length": 500, "hash_ids": [0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, '
    '11, 12, 13]}\n'
    '{"timestamp": 0, "input_length": 7319, "output_length": 490, "hash_ids": [0, 14, 15, 16, 17, 18, 19, 20, 21, '
    '22, 23, 24, 25, 26, 27]}\n'
    '{"timestamp": 3052, "input_length": 7234, "output_length": 794, "hash_ids": [0, 28, 29, 30, 31, 32, 33, 34, 35, '
    '36, 37, 38, 39, 40, 41]}\n'
    '{"timestamp": 3052, "input_length": 2287, "output_length": 316, "hash_ids": [0, 42, 43, 44, 45]}\n')


def test_mooncake_hash_ids_are_replayed_as_shared_blocks(tmp_path, capsys):
    """Ids 0..45: 46 blocks of 512 tokens, block 0 in every prompt. The two rows at 0 ms are admitted together, so
    neither finds block 0 cached; at 3052 ms both later rows find it (the first row's 512 tokens, whole 16-token
    pages): 2 x 512 = 1024 hit tokens of 6755 + 7319 + 7234 + 2287 = 23595 asked for (vLLM's hit rate: hits /
    queries in tokens, serving.prefix)."""
    trace = tmp_path / "mooncake_trace.jsonl"
    trace.write_text(MOONCAKE)
    code, out, err = run(capsys, "--trace", str(trace), "--json")
    assert code == 0, err
    data = json.loads(out)
    assert data["prefix_cache"]["hit_tokens"] == 1024 and data["prefix_cache"]["query_tokens"] == 23595
    assert any("46 shared blocks" in n for n in data["notes"])


def test_mooncake_hash_ids_with_prefix_is_refused(tmp_path, capsys):
    trace = tmp_path / "mooncake_trace.jsonl"
    trace.write_text(MOONCAKE)
    code, out, err = run(capsys, "--trace", str(trace), "--prefix", "hit:0.5")
    assert code == 2 and out == "" and err.startswith("roofline: error: --prefix:") and "hash_ids" in err


def test_mtp_needs_a_model_that_ships_an_mtp_module(capsys):
    """Llama-3.1-8B's config.json names no num_nextn_predict_layers (nor mtp_num_hidden_layers): its checkpoint has
    no MTP module for vLLM to draft with (SpeculativeConfig.hf_config_override builds the mtp draft from the target's
    own weights), so --speculative mtp is refused; eagle needs a separate head and is still simulated."""
    lengths = ("--rate", "2", "--prompt-tokens", "256", "--output-tokens", "16", "--requests", "4", "--no-search")
    code, out, err = run(capsys, *lengths, "--speculative", "mtp:1:0.9")
    assert code == 2 and out == "" and err.count("\n") == 1, err
    assert err.startswith("roofline: error: --speculative: mtp") and "Llama-3.1-8B has none" in err
    code, out, err = run(capsys, *lengths, "--speculative", "eagle:1:0.9")
    assert code == 0, err


@pytest.mark.parametrize("flags,needle", [(("--tp", "2"), "--tp: 2 GPUs: llama.cpp has no tensor parallelism"),
                                          (("--disaggregate", "1:1"), "--disaggregate: llama.cpp's server has no")])
def test_llamacpp_runs_what_its_server_can(capsys, flags, needle):
    """llama.cpp's server splits a model over GPUs by layers (--split-mode layer, its default; row splits matrices)
    and serves prefill and decode in one process (ggml-org/llama.cpp tools/server/README.md): tensor parallelism and
    P:D disaggregation are refused under --engine llamacpp, in one line naming the flag."""
    code, out, err = run(capsys, "--engine", "llamacpp", "--rate", "2", "--prompt-tokens", "256", "--output-tokens",
                         "16", "--requests", "4", "--no-search", *flags)
    assert code == 2 and out == "" and err.count("\n") == 1, err
    assert err.startswith(f"roofline: error: {needle}"), err


def test_a_trace_of_600k_requests_is_read_whole(tmp_path, capsys):
    """Issue 33: a day of requests (~1 M) is readable and never silently cut. 600,000 rows of '123.4567,1000,100'
    (with the header) are 11.9 MB, past the former 8 MiB cap; every row is read, and --requests 5 replays the first
    five of them, saying so."""
    trace = tmp_path / "day.csv"
    trace.write_text("arrival_s,prompt_tokens,output_tokens\n"
                     + "".join(f"{i * 0.144:.4f},1000,100\n" for i in range(600_000)))
    assert trace.stat().st_size > 8 << 20
    code, out, err = run(capsys, "--trace", str(trace), "--requests", "5", "--no-search", "--json")
    assert code == 0, err
    assert json.loads(out)["notes"] == ["--trace: replaying the first 5 of its 600,000 rows (--requests)"]
