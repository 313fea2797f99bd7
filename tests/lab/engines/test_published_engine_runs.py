"""Published engine runs (validate/results/engines/public/): every record parses, cites its source with the
quoted lines its figures come from, names catalogue entries, and the replay harness models its client."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import numpy as np
import pytest

from roofline.errors import SpecError
from roofline.validation.engine_results import load_run, load_runs

ROOT = Path(__file__).resolve().parents[3]
RUNS = ROOT / "validate" / "results" / "engines" / "public"
FILES = sorted(RUNS.glob("*.json"))


def test_there_are_at_least_eight_records_on_gpus_other_than_h100_h200():
    runs = load_runs(RUNS)
    assert sum(not r.control for r in runs) >= 8
    assert len({r.source.url for r in runs if not r.control}) >= 4  # several independent sources


@pytest.mark.parametrize("path", FILES, ids=[p.stem for p in FILES])
def test_each_record_parses_and_cites_the_figures_it_holds(path):
    run = load_run(path)
    if run.source.repository is not None:
        assert run.source.url.startswith("https://github.com/" + run.source.repository)
    if run.source.number is not None:
        assert str(run.source.number) in run.source.url
    elif run.source.repository is not None:  # a committed document: the URL pins the file at the quote's commit
        assert run.source.url.endswith(f"/blob/{run.source.commit}/{run.source.path}")
    quote = run.source.quote
    figures = [run.outputs.request_throughput_per_s, run.outputs.output_throughput_tokens_per_s]
    for stat in (run.outputs.ttft, run.outputs.tpot, run.outputs.itl):
        figures += [stat.mean_ms, stat.median_ms, stat.p99_ms]
    for value in (v for v in figures if v is not None):
        # the digits as printed: 9.42, 3452.00, 10.5, 0.73 ...
        spellings = {f"{value:.2f}", f"{value:.1f}", f"{value:g}", f"{value:.3f}"}
        assert any(re.search(rf"(?<![\d.]){re.escape(s)}(?![\d])", quote) for s in spellings), (path.name, value)


TOTALS = r"Total input tokens:\s+(\d+)\s+Total generated tokens:\s+(\d+)"
# the records whose client printed its totals and whose lengths are fixed (random dataset, ignore-eos)
PRINTED = [p for p in FILES if load_run(p).benchmark.lengths_fixed and re.search(TOTALS, load_run(p).source.quote)]


@pytest.mark.parametrize("path", PRINTED, ids=[p.stem for p in PRINTED])
def test_fixed_lengths_match_the_printed_token_totals(path):
    """Where the client printed its totals, fixed lengths x requests must equal them (random, ignore-eos)."""
    run = load_run(path)
    totals = re.search(TOTALS, run.source.quote)
    n = run.benchmark.num_prompts
    assert (run.benchmark.input_tokens * n, run.benchmark.output_tokens * n) == tuple(map(int, totals.groups()))


def _bad(tmp_path, mutate, name="mi300x-qwen3guard-gen-8b-c32"):
    data = json.loads((RUNS / f"{name}.json").read_text())
    mutate(data)
    path = tmp_path / f"{data['name']}.json"
    path.write_text(json.dumps(data))
    return path


@pytest.mark.parametrize("mutate, field", [
    (lambda d: d["source"].pop("quote"), "source.quote"),
    (lambda d: d["deployment"].update(gpus=2), "gpus"),
    (lambda d: d.update(control=True), "control"),
    (lambda d: d["deployment"].update(catalogue_model="Qwen3-9B"), "catalogue_model"),
    (lambda d: d["deployment"].update(catalogue_hardware="MI999X"), "catalogue_hardware"),
    (lambda d: d["benchmark"].update(input_tokens=1024.5), "input_tokens"),
    (lambda d: d["outputs"].update(tpot={}, output_throughput_tokens_per_s=None), "tpot"),
    (lambda d: d["source"].update(url="http://example.com/x"), "source.url"),
])
def test_a_bad_record_is_one_line_naming_the_field(tmp_path, mutate, field):
    with pytest.raises(SpecError) as err:
        load_run(_bad(tmp_path, mutate))
    assert field in str(err.value) and "\n" not in str(err.value)


def test_the_name_must_be_the_file_stem(tmp_path):
    path = tmp_path / "other.json"
    shutil.copy(RUNS / "mi300x-qwen3guard-gen-8b-c32.json", path)
    with pytest.raises(SpecError, match="name"):
        load_run(path)


def test_qwen3_14b_kv_bytes_per_token_by_hand():
    from roofline.accounting import kv_bytes_per_token
    from roofline.catalogue import load_model

    # 2 (K, V) x 40 layers x 8 KV heads x 128 head dim x 2 bytes (bf16) = 163,840 (config.json of Qwen/Qwen3-14B)
    assert int(kv_bytes_per_token(load_model("Qwen3-14B"), "bf16")) == 163_840


def test_closed_loop_sends_each_request_when_the_one_c_places_earlier_finishes():
    from validate.engines.public_predict import _sent_s

    finish = np.array([5.0, 3.0, 9.0, 7.0, 11.0])
    # C = 2: requests 0, 1 at t = 0; request 2 at the 1st completion (3.0), 3 at the 2nd (5.0), 4 at the 3rd (7.0)
    assert _sent_s(np.zeros(5), finish, 2).tolist() == [0.0, 0.0, 3.0, 5.0, 7.0]
    assert _sent_s(np.arange(5.0), finish, None).tolist() == [0.0, 1.0, 2.0, 3.0, 4.0]


def test_a_concurrency_one_replay_adds_up_request_by_request(tmp_path):
    """C = 1, fixed lengths: the run lasts N x (TTFT + (output - 1) x TPOT) when every request is alike."""
    from validate.engines.public_predict import simulate

    run = load_run(RUNS / "rtx4090-qwen3-4b-c1-128-128.json")
    pred = simulate(run)
    n, out = run.benchmark.num_prompts, run.benchmark.output_tokens
    per_request_s = (pred["ttft"]["mean_ms"] + (out - 1) * pred["tpot"]["mean_ms"]) / 1e3
    assert pred["duration_s"] == pytest.approx(n * per_request_s, rel=1e-6)
    assert pred["output_throughput_tokens_per_s"] == pytest.approx(n * out / pred["duration_s"])


def test_the_harness_refuses_a_missing_folder_with_one_line(tmp_path, capsys):
    from validate.engines.public import main

    assert main(["--runs", str(tmp_path / "none"), "--out", str(tmp_path / "r.txt")]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "no such folder" in err
    assert not (tmp_path / "r.txt").exists()


def test_summary_medians_and_signs_by_hand():
    from validate.engines.public import summary

    def row(name, control, regime, hw, tpot_pub, tpot_pred):
        metric = {"published": tpot_pub, "predicted": tpot_pred, "ape": abs(tpot_pred - tpot_pub) / tpot_pub}
        empty = {"published": None, "predicted": None, "ape": None}
        return {"name": name, "control": control, "regime": regime, "catalogue_hardware": hw,
                "metrics": {"TPOT mean": metric, "TPOT median": empty, "ITL mean": empty, "out tok/s": empty}}

    rows = [row("a", False, "closed loop", "A100-80GB", 10.0, 5.0),   # APE 0.5, signed -0.5
            row("b", False, "all at once", "A100-80GB", 10.0, 11.0),  # APE 0.1, signed +0.1
            row("c", False, "closed loop", "MI300X", 20.0, 17.0),     # APE 0.15, signed -0.15
            row("d", True, "closed loop", "H100-SXM", 8.0, 8.0),
            {"name": "e", "control": False, "skipped": "device not in the catalogue"}]
    s = summary(rows)
    everything = s["other GPUs, all"]["TPOT mean"]
    assert everything["records"] == 3 and everything["median_ape"] == pytest.approx(0.15)
    assert everything["median_signed"] == pytest.approx(-0.15) and everything["within_15pct"] == 2
    assert s["other GPUs, closed loop"]["TPOT mean"]["median_ape"] == pytest.approx(0.325)
    assert s["other GPUs, A100-80GB"]["TPOT mean"]["records"] == 2
    assert s["controls (H100/H200), all"]["TPOT mean"]["median_ape"] == 0
    assert "other GPUs, poisson rate" not in s  # empty groups are left out


def test_the_harness_refuses_a_malformed_record_with_one_line_and_writes_nothing(tmp_path, capsys):
    from validate.engines.public import main

    (tmp_path / "runs").mkdir()
    (tmp_path / "runs" / "bad.json").write_text('{"name": "bad"')
    assert main(["--runs", str(tmp_path / "runs"), "--out", str(tmp_path / "r.txt")]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "bad.json" in err
    assert not (tmp_path / "r.txt").exists()


def test_the_harness_refuses_an_unwritable_report_path_with_one_line(tmp_path, capsys):
    from validate.engines.public import main

    runs = tmp_path / "runs"
    runs.mkdir()
    shutil.copy(RUNS / "rtx4090-qwen3-4b-c1-128-128.json", runs)
    blocker = tmp_path / "file"
    blocker.write_text("")
    assert main(["--runs", str(runs), "--out", str(blocker / "r.txt")]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "--out" in err


def test_a_sharegpt_burst_is_replayed_at_spread_lengths_vllm_bench_would_keep():
    """ShareGPT: geometric lengths with the record's means, filtered as vllm bench filters ShareGPT (prompt and output
    >= 4, prompt <= 1024, total <= 2048: vllm/benchmarks/datasets.py is_valid_sequence); a random run: its means."""
    from validate.engines.public_predict import lengths

    run = load_run(RUNS / "a100-gpustack-qwen3-14b-sharegpt.json")
    prompt, output = lengths(run)
    assert len(prompt) == len(output) == run.benchmark.num_prompts
    assert prompt.min() >= 4 and output.min() >= 4 and prompt.max() <= 1024 and (prompt + output).max() <= 2048
    # the filter cuts only the far tail (P(prompt > 1024) = e^(-1024/217) < 1 %): the means stay the record's
    assert prompt.mean() == pytest.approx(run.benchmark.input_tokens, rel=0.1)
    assert output.mean() == pytest.approx(run.benchmark.output_tokens, rel=0.1)
    assert np.std(output) > 0.5 * output.mean()  # a geometric's spread, not one length
    rand = load_run(RUNS / "a100-gpustack-qwen3-14b-random-2k.json")
    p2, o2 = lengths(rand)
    assert set(p2.tolist()) == {round(rand.benchmark.input_tokens)} and set(o2.tolist()) == {100}


def test_prefix_caching_is_the_records_else_its_releases_default():
    """A record's flag stands (0.3.3's False, a current build's True); else vLLM V1 (0.9.1, 0.11.0) caches prefixes by
    default (engine/arg_utils.py@v0.11.0 _set_default_args), so a preempted request of a random-prompt burst re-hits
    its own pages; the replay's engine profile carries it."""
    from validate.engines.public_predict import prefix_caching

    assert prefix_caching(load_run(RUNS / "l40-llama-7b-tp8-sharegpt-rate10.json")) is False
    assert prefix_caching(load_run(RUNS / "b200-qwen3-235b-a22b-fp8-tp4-c64-30k.json")) is True
    assert prefix_caching(load_run(RUNS / "a100-80gb-qwen3-14b-awq-c1.json")) is True
    assert prefix_caching(load_run(RUNS / "a100-gpustack-gpt-oss-120b-async-mnbt4096-random-32k.json")) is True
