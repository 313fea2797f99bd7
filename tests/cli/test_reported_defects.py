"""Regression tests for issue 12 (measured at 46e2f77): each defect named there, by its own invocation."""

from __future__ import annotations

import json
import os

import pytest
import yaml
from cli_run import run

from roofline.catalogue.loading import parse_text
from roofline.catalogue.strict_yaml import StrictLoader
from roofline.errors import SpecError

ROOT = __import__("pathlib").Path(__file__).resolve().parents[2]




def strict_json(text: str):
    def refuse(name):
        raise AssertionError(f"{name} in JSON")

    return json.loads(text, parse_constant=refuse)


def one_error(err: str, *needles: str) -> None:
    assert err.count("\n") == 1 and err.startswith("roofline: error: ") and "Traceback" not in err, err
    for needle in needles:
        assert needle in err, err


# ---- catalogue models that crashed the plan ------------------------------------------------------------

@pytest.mark.parametrize("model", ["Mistral-7B-v0.1", "Phi-3-mini"])
def test_sliding_window_remat_note_has_no_overflow(capsys, model) -> None:
    """46e2f77: OverflowError formatting the infinite remat limit of all-sliding-window models."""
    code, out, err = run(capsys, "plan", "--model", model, "--method", "xquant-2", "--context", "4096")
    assert code == 0, err
    assert "xquant-2: remat stays memory-bound at any context" in out
    code, out, err = run(capsys, "plan", "--model", model, "--method", "xquant-2", "--context", "4096", "--json")
    limits = strict_json(out)["results"][0]["limits"]
    assert limits["remat_limit_tokens"] is None and "sliding-window" in limits["remat_limit_tokens_reason"]


def test_presets_that_do_not_apply_are_skipped_with_a_note() -> None:
    """46e2f77: `plan --model DeepSeek-V3` over all presets exited 2 on aquakv's MLA refusal."""
    from roofline.catalogue import load_model
    from roofline.cli.plan import _methods
    from roofline.methods import presets

    methods, skipped = _methods(None, load_model("DeepSeek-V3"))
    names = {s["method"] for s in skipped}
    assert {"aquakv-2", "xquant-2", "zack-50"} <= names
    assert {m.label() for m in methods} | names == set(presets())
    assert all("MLA" in s["reason"] or "latent" in s["reason"] for s in skipped)
    assert "bf16" not in names


def test_an_explicit_method_that_does_not_apply_is_an_error(capsys) -> None:
    code, out, err = run(capsys, "plan", "--model", "DeepSeek-V3", "--hardware", "H200", "--tp", "8",
                         "--weight-dtype", "fp8", "--method", "aquakv-2")
    assert code == 2
    one_error(err, "aquakv", "MLA")


def test_tpot_inversions_are_capped_by_memory(capsys) -> None:
    """46e2f77: 'batch 74' under 100 ms where memory holds 13 sequences of Llama-3.1-8B at 32K on an H100."""
    code, out, err = run(capsys, "plan", "--method", "bf16", "--tpot-target-ms", "100", "--json")
    row = strict_json(out)["results"][0]
    sla = row["sla"]
    assert sla["max_batch_tpot"] > row["max_batch"]  # TPOT alone would allow more than memory holds
    assert sla["max_batch"] == row["max_batch"] and sla["max_batch_bound"] == "memory"
    assert sla["max_context"] <= row["max_context"]
    code, out, err = run(capsys, "plan", "--method", "bf16", "--tpot-target-ms", "100")
    assert f"batch {row['max_batch']:,} (memory-bound) at this context" in out


def test_tpot_inversions_are_capped_by_the_models_positions(capsys) -> None:
    """The TPOT target answered 'up to context 140,828' for skvq-k2v2-fp8 on Llama-3.1-8B, whose config.json says
    max_position_embeddings 131,072: a context the model cannot run. The answer is capped there and says so."""
    code, out, err = run(capsys, "plan", "--method", "skvq-k2v2-fp8", "--tpot-target-ms", "20", "--json")
    sla = strict_json(out)["results"][0]["sla"]
    assert sla["max_context_tpot"] > 131_072  # TPOT alone would allow more than the model's positions
    assert sla["max_context"] == 131_072 and sla["max_context_bound"] == "positions"
    code, out, err = run(capsys, "plan", "--method", "skvq-k2v2-fp8", "--tpot-target-ms", "20")
    assert "up to context 131,072 (positions-bound)" in out


def test_plan_json_has_no_infinity(capsys) -> None:
    """46e2f77: `plan --method h2o-2048 --json` wrote Infinity."""
    code, out, err = run(capsys, "plan", "--method", "h2o-2048", "--json")
    assert code == 0 and "Infinity" not in out and "NaN" not in out
    row = strict_json(out)["results"][0]
    assert row["max_context"] is None and row["max_context_reason"].startswith("unbounded")
    assert row["max_context_capped"] == 131_072  # Llama-3.1-8B's max_position_embeddings


def test_plan_table_legend_marks_and_caps(capsys) -> None:
    code, out, err = run(capsys, "plan", "--method", "bf16", "--method", "h2o-2048")
    lines = out.splitlines()
    assert any(line.startswith("legend: ") for line in lines)
    assert "KV/seq/GPU" in out
    bf16 = next(line for line in lines if line.split()[1:2] == ["bf16"])
    h2o = next(line for line in lines if line.split()[1:2] == ["h2o-2048"])
    assert bf16.split()[:3] == ["-", "bf16", "no"]  # 16 sequences at 32K do not fit (13 do): not ranked
    assert h2o.split()[:3] == ["1*", "h2o-2048", "yes"] and "131,072^" in h2o


# ---- files, flags and outputs ------------------------------------------------------------------------------

def _h100(tmp_path, field: str, value: str):
    text = (ROOT / "hardware" / "H100-SXM.yaml").read_text()
    path = tmp_path / "hw.yaml"
    path.write_text(text.replace(f"{field}: ", f"{field}: {value}  # ", 1))
    return str(path)


def test_fifo_and_devices_are_refused_at_once(capsys, tmp_path) -> None:
    fifo = tmp_path / "fifo.yaml"
    os.mkfifo(fifo)
    for path in (str(fifo), "/dev/zero", "/dev/urandom", str(tmp_path)):
        code, out, err = run(capsys, "show", "hardware", path)
        assert code == 2
        one_error(err, "not a regular file")


@pytest.mark.parametrize(("field", "value", "needle"), [
    ("memory_bytes_per_s", "1e-300", "memory_bytes_per_s: 1e-300 bytes/s is outside"),
    ("memory_bytes_per_s", "3.35", "memory_bytes_per_s: 3.35 bytes/s is outside"),
    ("bf16_dense_flops_per_s", "1e-300", "bf16_dense_flops_per_s: 1e-300 FLOP/s is outside"),
    ("memory_bytes", "80", "memory_bytes: 80 bytes is outside"),
])
def test_implausible_hardware_is_an_error_naming_the_field(capsys, tmp_path, field, value, needle) -> None:
    code, out, err = run(capsys, "plan", "--hardware", _h100(tmp_path, field, value), "--method", "bf16")
    assert code == 2
    one_error(err, needle)


def test_unusual_hardware_is_one_warning_line(capsys, tmp_path) -> None:
    code, out, err = run(capsys, "show", "hardware", _h100(tmp_path, "memory_bytes_per_s", "1.5e10"))
    assert code == 0
    assert err.count("\n") == 1 and err.startswith("roofline: warning: ") and "memory_bytes_per_s" in err


@pytest.mark.parametrize(("argv", "needle"), [
    (["plan", "--reserve-gib", "1e300", "--method", "bf16"], "--reserve-gib"),
    (["kv", "--context", "10000000000000", "--method", "aquakv-2"], "--context"),
    (["plan", "--batch", "10000000000", "--method", "bf16"], "--batch"),
    (["kv", "--context", "64", "--model", "m" * 300], "model: unknown name"),
    (["kv", "--context", "²"], "--context"),
])
def test_out_of_domain_flags(capsys, argv, needle) -> None:
    code, out, err = run(capsys, *argv)
    assert code == 2
    one_error(err, needle)


@pytest.mark.parametrize(("change", "needle"), [
    (("attention:\n  - kind: full", "attention: []"), "attention: List should have at least 1 item"),
    (("num_layers: 16", "num_layers: 1000000000"), "num_layers: 1,000,000,000 is outside"),
    (("num_layers: 16", "num_layers: 1:20"), "num_layers: Input should be a valid integer"),
    (("num_layers: 16", "num_layers: true"), "num_layers: Input should be a valid integer"),
    (("num_layers: 16", "num_layers: 16\nnum_layers: 17"), "duplicate key 'num_layers'"),
    (("qkv_bias: false", "qkv_bias: yes"), "qkv_bias: Input should be a valid boolean"),
])
def test_lax_model_files_are_refused(capsys, tmp_path, change, needle) -> None:
    text = (ROOT / "models" / "Llama-3.2-1B.yaml").read_text()
    assert change[0] in text
    path = tmp_path / "m.yaml"
    path.write_text(text.replace(change[0], change[1], 1))
    code, out, err = run(capsys, "show", "model", str(path))
    assert code == 2
    one_error(err, needle)


def test_yaml_1_2_scalars() -> None:
    data = yaml.load("a: 1:20\nb: yes\nc: 017\nd: 0o17\ne: 1_000\nf: 2026-01-01\ng: True\nh: 1e9\ni: ~\n",
                     Loader=StrictLoader)
    assert data == {"a": "1:20", "b": "yes", "c": 17, "d": 15, "e": "1_000", "f": "2026-01-01", "g": True,
                    "h": 1e9, "i": None}
    with pytest.raises(SpecError, match="not a finite number"):
        parse_text("a: .inf\n", "x.yaml")
    with pytest.raises(SpecError, match="aliases"):
        parse_text("a: &a [1,1,1,1,1,1,1,1,1,1]\n" + "".join(
            f"{c}: &{c} [{', '.join(['*' + p] * 10)}]\n" for p, c in zip("abcde", "bcdef", strict=True)), "x.yaml")


@pytest.mark.parametrize("target", ["file", "/dev/null", "link", "under-file", "/proc/roofline-hostile/x"])
def test_plot_into_a_non_directory_is_one_line(capsys, tmp_path, target) -> None:
    afile = tmp_path / "afile"
    afile.write_text("keep")
    (tmp_path / "link").symlink_to(afile)
    path = {"file": str(afile), "link": str(tmp_path / "link"), "under-file": str(afile / "x")}.get(target, target)
    code, out, err = run(capsys, "plan", "--method", "bf16", "--plot", path)
    assert code == 2
    one_error(err, "--plot")
    assert afile.read_text() == "keep"


# ---- reporting -------------------------------------------------------------------------------------------

def test_kv_warns_past_the_models_positions(capsys) -> None:
    code, out, err = run(capsys, "kv", "--model", "Llama-3.1-8B", "--context", "200000", "--json")
    assert code == 0
    assert any("131,072" in w for w in strict_json(out)["warnings"])
    code, out, err = run(capsys, "kv", "--model", "Llama-3.1-8B", "--context", "131072", "--json")
    assert "warnings" not in strict_json(out)


def test_list_models_kv_bytes_of_sliding_window_models(capsys) -> None:
    code, out, err = run(capsys, "list", "models", "--json")
    rows = {r["name"]: r for r in strict_json(out)}
    # bf16, by hand: 2 (K,V) x kv_heads x head_dim x layers x 2 bytes, every layer attending (windows filling)
    assert rows["Mistral-7B-v0.1"]["bf16_kv_bytes_per_token"] == 2 * 8 * 128 * 32 * 2 == 131_072
    assert rows["Phi-3-mini"]["bf16_kv_bytes_per_token"] == 2 * 32 * 96 * 32 * 2 == 393_216
    assert rows["Mistral-7B-v0.1"]["bf16_kv_bytes_per_token_past_windows"] == 0
    # a sequence at Mistral's 32,768 positions holds only its 4,096-token window in every layer
    assert rows["Mistral-7B-v0.1"]["bf16_kv_bytes_at_max_context"] == 131_072 * 4096
    assert rows["Llama-3.1-8B"]["bf16_kv_bytes_at_max_context"] == 131_072 * 131_072
