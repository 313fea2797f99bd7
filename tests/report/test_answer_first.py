"""The answer first: verdicts, ranking, `roofline best`, grouped notes, and the inputs that used to give a silently
wrong answer (each now one error line, exit status 2).

Hand figures: Llama-3.1-8B's bf16 KV is 2 x 8 x 128 x 32 x 2 = 131,072 B/token, 4 GiB per 32,768-token sequence;
on an H100 (79.18 GiB as CUDA reports it, 0.9 usable = 71.26 GiB, less weights 14.96, activations 0.85 and
reserve 1.01 GiB) 54.44 GiB hold 13 such sequences, not 16.
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest
from cli_run import run

ROOT = Path(__file__).resolve().parents[2]


def _one_error(code: int, err: str, *needles: str) -> None:
    assert code == 2, err
    assert err.startswith("roofline: error: ") and err.count("\n") == 1 and "Traceback" not in err
    for needle in needles:
        assert needle in err, err


def test_rows_that_do_not_fit_are_never_ranked(capsys) -> None:
    code, out, err = run(capsys, "plan", "--method", "bf16", "--method", "kivi-2", "--method", "fp8", "--json")
    rows = {r["method"]: r for r in json.loads(out)["results"]}
    assert rows["bf16"]["max_batch"] == 13 and rows["bf16"]["rank"] is None
    assert not rows["bf16"]["verdict"]["fits"] and "13 of 16" in rows["bf16"]["verdict"]["why"]
    ranked = sorted((r for r in rows.values() if r["rank"]), key=lambda r: r["rank"])
    assert [r["rank"] for r in ranked] == [1, 2]
    assert ranked[0]["tokens_per_s"] >= ranked[1]["tokens_per_s"]
    assert json.loads(out)["answer"]["best"] == ranked[0]["method"]


def test_plan_text_answers_first_and_explains_its_columns(capsys) -> None:
    code, out, err = run(capsys, "plan", "--method", "bf16", "--method", "kivi-2")
    lines = out.splitlines()
    assert lines[1].startswith("answer: 1 of 2 methods fit; best") and "kivi-2" in lines[1]
    assert lines[2].startswith("does not fit: bf16 (at most 13 of 16")
    assert "79.18 GiB as CUDA reports it (datasheet 80.00 GiB" in out  # list hardware prints 80.00 GiB
    for needle in ("bits = KV bits", "bound = what limits", "TTFT = prefill of the whole batch", "vLLM's TPOT"):
        assert needle in out


def test_notes_are_grouped_and_shown_in_full_on_request(capsys) -> None:
    code, short, _ = run(capsys, "plan")
    code, full, _ = run(capsys, "plan", "--notes")
    assert "aquakv-2, aquakv-3, aquakv-4: predictors cost" in short
    assert short.count("predictors cost") == 1
    assert "--notes prints them all" in short and "--notes prints them all" not in full
    assert "is beyond the model's 131,072 positions" in full and "is beyond the model's" not in short


def test_context_past_the_models_positions_is_not_a_fit(capsys) -> None:
    """Question b: Qwen3-8B was trained to 40,960 positions (its config.json max_position_embeddings)."""
    code, out, err = run(capsys, "best", "--model", "Qwen3-8B", "--hardware", "H200", "--context", "131072",
                         "--batch", "1")
    assert code == 0 and "answer: no method fits" in out
    assert "hint: the model was trained to 40,960 positions" in out


def test_best_ranks_every_preset_and_keeps_misfits_out(capsys) -> None:
    code, out, err = run(capsys, "best", "--json")
    b = json.loads(out)
    assert {n["method"] for n in b["not_fit"]} == {"bf16", "fp16"}
    assert b["best"]["method"] == b["ranked"][0]["method"] and b["best"]["verdict"]["fits"]
    speeds = [r["tokens_per_s"] for r in b["ranked"]]
    assert speeds == sorted(speeds, reverse=True)
    code, out, err = run(capsys, "best", "--by", "context", "--json")
    contexts = [r["max_context_capped"] for r in json.loads(out)["ranked"]]
    assert contexts == sorted(contexts, reverse=True)


def test_best_by_gpus_uses_the_fit_solver(capsys) -> None:
    """Question a's model: Llama-3.1-70B bf16 weights are 141 GB, more than one 80 GB H100 holds."""
    code, out, err = run(capsys, "best", "--model", "Llama-3.1-70B", "--batch", "8", "--context", "65536",
                         "--by", "gpus", "--json")
    b = json.loads(out)
    gpus = [r["fewest_gpus"]["gpus"] for r in b["ranked"]]
    assert gpus == sorted(gpus) and gpus[0] >= 2


def test_unreachable_tpot_target_says_so(capsys) -> None:
    """16.06 GB of bf16 weights at 3.13 TB/s take 5.1 ms per step: 1 ms cannot be met at any context or batch."""
    code, out, err = run(capsys, "plan", "--method", "bf16", "--tpot-target-ms", "1")
    assert code == 0 and "TPOT <= 1 ms: unreachable" in out
    assert "context 0" not in out and "batch 0" not in out


def test_best_answers_under_the_tpot_target_it_was_given(capsys) -> None:
    """`best --tpot-target-ms` printed its ranking with no word on the target (plan's sla was computed, then dropped).
    An L4 reads at most 300 GB/s (its datasheet), so Llama-3.1-8B's 16.06 GB of bf16 weights take >= 53 ms a step:
    5 ms is unreachable for every method, in the text and in the JSON. Batch 8: the L4's 22.05 GiB as CUDA reports it
    (vllm-project/vllm#20214) holds no method's 16 sequences of 32,768 tokens, and with nothing fitting `best` has
    no ranking to qualify."""
    argv = ("best", "--model", "Llama-3.1-8B", "--hardware", "L4", "--tpot-target-ms", "5", "--batch", "8")
    code, out, err = run(capsys, *argv)
    assert code == 0 and out.splitlines()[2].strip().startswith("TPOT <= 5 ms: unreachable"), out
    code, out, err = run(capsys, *argv, "--json")
    b = json.loads(out)
    assert all(r["sla"]["tpot_target_s"] == 0.005 and r["sla"]["unreachable"] for r in b["ranked"])


def test_capacity_never_prints_a_negative_pool(capsys) -> None:
    """Llama-3.1-70B's bf16 weights (70.6 B x 2 B = 131.4 GiB) exceed an 80 GiB H100 by over 51 GiB."""
    code, out, err = run(capsys, "capacity", "--model", "Llama-3.1-70B", "--engine", "vllm")
    assert code == 0 and "-" not in out.splitlines()[3].split()[-1]
    assert "the weights do not fit" in out
    code, out, err = run(capsys, "capacity", "--model", "Llama-3.1-70B", "--engine", "vllm", "--json")
    data = json.loads(out)
    assert data["kv_pool_bytes"] == 0 and data["kv_pool_shortfall_bytes"] > 51 * 2**30


def test_sglang_says_how_far_short_its_pool_is(capsys) -> None:
    """SGLang's rule clamped its budget at 0 before reporting it, so a pool that cannot exist printed 'none (-0.00
    GiB short)' and 'exceed ... by -0.00 GiB'. Llama-3.1-70B's 141 GB of bf16 weights overrun an 80 GB H100 by at
    least 141 - 80 = 61 GB (56.8 GiB) whatever fraction the engine keeps."""
    code, out, err = run(capsys, "capacity", "--model", "Llama-3.1-70B", "--engine", "sglang", "--json")
    data = json.loads(out)
    assert data["kv_pool_bytes"] == 0 and data["kv_pool_shortfall_bytes"] > 61e9
    code, out, err = run(capsys, "capacity", "--model", "Llama-3.1-70B", "--engine", "sglang")
    assert "-0.00" not in out and "GiB short)" in out


def test_a_method_that_does_not_apply_is_skipped_with_its_reason(capsys) -> None:
    code, out, err = run(capsys, "plan", "--model", "DeepSeek-V2-Lite", "--method", "aquakv-2", "--method", "bf16")
    assert code == 0, err
    assert "skipped aquakv-2:" in out


def test_mamba_rows_show_no_nan_bits(capsys) -> None:
    code, out, err = run(capsys, "plan", "--model", str(ROOT / "tests/data/hf/Mamba-2.8B/config.json"),
                         "--method", "bf16")
    assert code == 0, err
    assert "nan" not in out and " state " in out


def test_config_json_in_its_own_folder_is_named(capsys, tmp_path, monkeypatch) -> None:
    folder = tmp_path / "my-llama"
    folder.mkdir()
    shutil.copy(ROOT / "tests/data/hf/Llama-3.2-1B/config.json", folder / "config.json")
    monkeypatch.chdir(folder)
    data = json.loads(json.dumps({}))
    with open("config.json") as fh:
        data = json.load(fh)
    data.pop("_name_or_path", None)
    Path("config.json").write_text(json.dumps(data))
    code, out, err = run(capsys, "plan", "--model", "config.json", "--method", "bf16", "--context", "4096")
    assert code == 0, err and out.startswith("my-llama on")
    code, out, err = run(capsys, "plan", "--model", "config.json", "--name", "Mine", "--method", "bf16",
                         "--context", "4096")
    assert code == 0 and out.startswith("Mine on")


# ---- silently wrong before: now one error line, exit 2 -------------------------------------------------------

def test_more_pipeline_stages_than_layers_is_an_error(capsys) -> None:
    code, out, err = run(capsys, "plan", "--model", "Llama-3.2-1B", "--pp", "1000", "--method", "bf16")
    _one_error(code, err, "--pp", "16 layers")  # Llama-3.2-1B: num_hidden_layers 16


@pytest.mark.parametrize("argv", [["--tp", "3"], ["--tp", "64"]])
def test_tp_against_heads(capsys, argv) -> None:
    code, out, err = run(capsys, "plan", "--method", "bf16", *argv)
    _one_error(code, err, "tp:", "attention heads")


def test_ep_against_experts(capsys) -> None:
    code, out, err = run(capsys, "plan", "--model", "Mixtral-8x7B", "--ep", "3", "--method", "bf16")
    _one_error(code, err, "ep:", "8 routed experts")


@pytest.mark.parametrize("target", ["/", "/..", ""])
def test_plots_never_go_to_the_root(capsys, target) -> None:
    code, out, err = run(capsys, "plan", "--method", "bf16", "--plot", target)
    _one_error(code, err, "--plot")
    assert out == ""


def _simulate(trace: str, *extra: str) -> list[str]:
    return ["simulate", "--model", "Llama-3.2-1B", "--hardware", "H100-SXM", "--method", "bf16", "--trace", trace,
            "--no-search", *extra]


def test_trace_longer_than_requests_is_never_cut_silently(capsys, tmp_path) -> None:
    trace = tmp_path / "t.csv"
    trace.write_text("".join(f"{i * 0.1:.1f},128,16\n" for i in range(30)))
    # an explicit --requests replays that many rows and says so; without it, every row
    code, out, err = run(capsys, *_simulate(str(trace), "--requests", "10", "--json"))
    assert code == 0, err
    data = json.loads(out)
    assert data["requests"] == 10 and data["notes"] == ["--trace: replaying the first 10 of its 30 rows (--requests)"]
    code, out, err = run(capsys, *_simulate(str(trace), "--json"))
    assert code == 0, err
    assert json.loads(out)["requests"] == 30  # every row of the trace


@pytest.mark.parametrize("kind", ["fifo", "device", "folder", "huge"])
def test_trace_must_be_a_bounded_regular_file(capsys, tmp_path, kind) -> None:
    if kind == "fifo":
        path = tmp_path / "fifo.csv"
        os.mkfifo(path)
    elif kind == "huge":
        path = tmp_path / "huge.csv"
        with open(path, "wb") as fh:
            fh.truncate(10 << 30)  # 10 GB, sparse: no disk used; refused from its size, never read
    else:
        path = Path("/dev/zero") if kind == "device" else tmp_path
    code, out, err = run(capsys, *_simulate(str(path)))
    _one_error(code, err, "--trace")


def test_integers_past_a_float_are_one_error_line(capsys, tmp_path) -> None:
    data = json.loads((ROOT / "tests/data/hf/Llama-3.1-8B/config.json").read_text())
    data["hidden_size"] = 2**1100
    path = tmp_path / "m" / "config.json"
    path.parent.mkdir()
    path.write_text(json.dumps(data))
    code, out, err = run(capsys, "plan", "--model", str(path), "--method", "bf16")
    _one_error(code, err, "hidden_size", "2**1100")


def test_plan_json_states_the_tpot_definitions(capsys) -> None:
    code, out, err = run(capsys, "plan", "--method", "kivi-2", "--json")
    data = json.loads(out)
    assert "first token" in data["tpot_definitions"]["vllm_tpot_s"]
    row = data["results"][0]
    assert row["benchmark_latency"]["vllm_tpot_s"] == row["tpot_avg_s"]
    assert row["benchmark_latency"]["last_itl_s"] == row["tpot_s"]
