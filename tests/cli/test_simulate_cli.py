"""`roofline simulate`: strict JSON with the contract's keys, and one-line errors (exit 2) naming the field."""

from __future__ import annotations

import json
import math

import pytest

from roofline.cli import main
from roofline.serving.requests import LengthDist, load_trace

BASE = ["simulate", "--model", "Llama-3.1-8B", "--hardware", "H100-SXM", "--method", "bf16"]


def run(capsys, *argv):
    code = main([*BASE, *argv])
    out, err = capsys.readouterr()
    return code, out, err


def test_json_has_the_contract_keys_and_is_strict(capsys):
    code, out, _ = run(capsys, "--rate", "2", "--prompt-tokens", "512", "--output-tokens", "32", "--requests", "40",
                       "--json")
    assert code == 0
    data = json.loads(out, parse_constant=lambda c: pytest.fail(f"non-strict JSON constant {c}"))
    for key in ("ttft_s", "tpot_s", "e2e_s"):
        assert set(data[key]) >= {"p50", "p90", "p99"}
        assert data[key]["p50"] <= data[key]["p90"] <= data[key]["p99"]
    assert data["throughput_tokens_per_s"] > 0
    assert data["goodput_requests_per_s"] is None and data["goodput_reason"]
    assert data["max_rate_at_slo"] is None and "no SLO" in data["max_rate_reason"]


def test_trace_file_with_slo_and_fleet(tmp_path, capsys):
    trace = tmp_path / "t.csv"
    rows = ["arrival_s,prompt_tokens,output_tokens"] + [f"{i * 0.5},{256 + 16 * i},{8 + i % 5}" for i in range(30)]
    trace.write_text("\n".join(rows) + "\n")
    code, out, _ = run(capsys, "--trace", str(trace), "--slo-ttft-ms", "500", "--slo-tpot-ms", "40",
                       "--target-rate", "50", "--usd-per-gpu-hour", "2", "--json")
    assert code == 0
    data = json.loads(out)
    assert data["requests"] == 30
    assert 0 < data["goodput_requests_per_s"] <= data["requests_per_s"]
    rate = data["max_rate_at_slo"]
    assert rate > 0
    fleet = data["fleet"]
    assert fleet["gpus"] == math.ceil(50 / rate)  # one GPU per replica
    assert fleet["usd_per_million_output_tokens"] > 0


@pytest.mark.parametrize("argv,field", [
    (["--rate", "-1"], "--rate"),
    (["--rate", "1", "--slo-ttft-ms", "0", "--slo-tpot-ms", "50"], "--slo-ttft-ms"),
    (["--rate", "1", "--slo-ttft-ms", "100"], "--slo-tpot-ms"),
    (["--rate", "1", "--prompt-tokens", "uniform:1000:200000"], "--prompt-tokens"),
    (["--rate", "1", "--output-tokens", "lognormal:mean=100"], "--output-tokens"),
    (["--rate", "1", "--prompt-tokens", "uniform:5:1"], "--prompt-tokens"),
])
def test_bad_input_is_one_line_naming_the_field(capsys, argv, field):
    code, out, err = run(capsys, *argv, "--requests", "20")
    assert code == 2 and out == ""
    assert err.count("\n") == 1 and field in err and "Traceback" not in err


@pytest.mark.parametrize("row,what", [
    ("1.0,100", "expected 3 fields"),
    ("x,100,10", "arrival_s"),
    ("-2,100,10", "arrival_s"),
    ("1.0,100,0", "output_tokens"),
    ("1.0,1e3,10", "prompt_tokens"),
])
def test_malformed_trace_row_names_line_and_column(tmp_path, capsys, row, what):
    trace = tmp_path / "bad.csv"
    trace.write_text(f"0.0,100,10\n{row}\n")
    code, _, err = run(capsys, "--trace", str(trace))
    assert code == 2 and "--trace" in err and "line 2" in err and what in err


def test_length_distributions():
    import numpy as np

    rng = np.random.default_rng(0)
    assert LengthDist.parse("4096", "f").sample(rng, 3).tolist() == [4096] * 3
    u = LengthDist.parse("uniform:10:20", "f").sample(rng, 2000)
    assert u.min() == 10 and u.max() == 20
    ln = LengthDist.parse("lognormal:mean=2048,sigma=0.5", "f").sample(rng, 20000)
    assert ln.mean() == pytest.approx(2048, rel=0.02)  # the mean is the distribution's mean
    capped = LengthDist.parse("lognormal:mean=2048,sigma=1,max=3000", "f").sample(rng, 2000)
    assert capped.max() == 3000


def test_trace_rows_are_sorted_by_arrival(tmp_path):
    trace = tmp_path / "t.csv"
    trace.write_text("# comment\n2.0,10,1\n\n1.0,20,2\n")
    reqs = load_trace(trace)
    # sorted, and replayed from the first row (at 1 s): the run starts at 0 (serving.traces)
    assert reqs.arrival_s.tolist() == [0.0, 1.0] and reqs.prompt_tokens.tolist() == [20, 10]


def test_pipeline_stages_split_a_step_into_pp_micro_batches_by_default(capsys):
    """`plan` runs min(pp, batch) micro-batches through the pipeline (cli/plan.py); `simulate` now does too: --pp 2
    alone equals --pp 2 --micro-batches 2, and one micro-batch is another step law (the whole batch stage after stage:
    (1 + pp - 1) stage times of T(B) / pp, against (2 + pp - 1) of T(B / 2) / pp; PhaseModel.pipeline)."""
    args = ["--model", "Llama-3.1-70B", "--hardware", "H200", "--method", "bf16", "--tp", "4", "--pp", "2",
            "--rate", "8", "--prompt-tokens", "512", "--output-tokens", "64", "--requests", "60", "--json",
            "--no-search"]
    outs = []
    for extra in ([], ["--micro-batches", "2"], ["--micro-batches", "1"]):
        code = main(["simulate", *args, *extra])
        out, err = capsys.readouterr()
        assert code == 0, err
        outs.append(json.loads(out))
    default, two, one = outs
    assert default["micro_batches"] == 2 and one["micro_batches"] == 1
    assert default["tpot_s"] == two["tpot_s"] and default["ttft_s"] == two["ttft_s"]
    assert one["tpot_s"]["p50"] != two["tpot_s"]["p50"]


def test_micro_batches_must_be_positive(capsys):
    with pytest.raises(SystemExit) as exit_:
        main([*BASE, "--pp", "2", "--micro-batches", "0", "--requests", "4"])
    err = capsys.readouterr().err
    assert exit_.value.code == 2 and "--micro-batches" in err and err.count("\n") == 1
