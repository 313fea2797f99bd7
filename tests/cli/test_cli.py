"""The CLI contract: list / show / kv, --json shapes, one-line errors with exit status 2."""

import json
import subprocess
import sys
from pathlib import Path

import pytest
from cli_run import run


def test_list_models_json(capsys) -> None:
    code, out, _ = run(capsys, "list", "models", "--json")
    assert code == 0
    rows = {r["name"]: r for r in json.loads(out)}
    assert rows["Llama-3.1-8B"]["bf16_kv_bytes_per_token"] == 131_072
    assert len(rows) >= 17


def test_list_hardware_table(capsys) -> None:
    code, out, _ = run(capsys, "list", "hardware")
    assert code == 0
    assert "H100-SXM" in out and "GiB" in out


def test_show_model_and_hardware(capsys) -> None:
    code, out, _ = run(capsys, "show", "model", "DeepSeek-V3", "--json")
    assert code == 0
    data = json.loads(out)
    assert data["mla"]["kv_lora_rank"] == 512
    code, out, _ = run(capsys, "show", "hardware", "H200")
    assert code == 0 and "sources:" in out


def test_kv_json_contract(capsys) -> None:
    code, out, _ = run(capsys, "kv", "--model", "Llama-3.2-3B", "--context", "131072", "--json")
    assert code == 0
    data = json.loads(out)
    assert data["kv_bytes"] == 15_032_385_536
    assert data["bytes_per_token"] == 2 * 8 * 128 * 28 * 2
    assert data["effective_bits"] == 16.0


def test_kv_batch_scales(capsys) -> None:
    _, out, _ = run(capsys, "kv", "--context", "1000", "--batch", "3", "--method", "fp8", "--json")
    assert json.loads(out)["kv_bytes"] == 3 * 1000 * 65_536


@pytest.mark.parametrize(
    ("argv", "needle"),
    [
        (["kv", "--context", "0"], "--context: 0 must be positive"),
        (["kv", "--context", "ten"], "--context: 'ten' is not a whole number"),
        (["kv", "--context", "10", "--method", "nope"], "method: unknown method or preset 'nope'"),
        (["kv", "--context", "10", "--model", "Llama-9"], "model: unknown name 'Llama-9'"),
        (["show", "hardware", "H100"], "hardware: unknown name 'H100'"),
        (["list", "gpus"], "invalid choice"),
        (["kv", "--context", "10", "--method", "baseline:dtype=int3"], "dtype"),
        (["kv", "--context", "10", "--method", "baseline:dtype"], "expected key=value"),
    ],
)
def test_bad_input_is_one_line_and_exit_2(capsys, argv, needle) -> None:
    code, out, err = run(capsys, *argv)
    assert code == 2
    assert needle in err
    assert err.count("\n") == 1 and err.startswith("roofline: error: ")
    assert "Traceback" not in err


BAD_FILES = {
    "malformed.yaml": ("name: [unclosed", "not valid YAML/JSON"),
    "list.yaml": ("- 1\n- 2\n", "expected a mapping"),
    "unknown_key.yaml": (None, "colour: Extra inputs are not permitted"),
    "negative.yaml": (None, "hidden_size: Input should be greater than 0"),
    "kvheads.yaml": (None, "num_kv_heads: 7 does not divide num_heads 32"),
    "bad.json": ('{"architectures": ["GPT2LMHeadModel"], "n_embd": 768}', "architectures"),
}


@pytest.mark.parametrize("filename", sorted(BAD_FILES))
def test_bad_model_files(capsys, tmp_path: Path, filename: str) -> None:
    import yaml

    from roofline.catalogue import load_model

    text, needle = BAD_FILES[filename]
    if text is None:
        data = load_model("Llama-3.1-8B").model_dump()
        if filename == "unknown_key.yaml":
            data["colour"] = "red"
        elif filename == "negative.yaml":
            data["hidden_size"] = -1
        else:
            data["num_kv_heads"] = 7
        text = yaml.safe_dump(data)
    path = tmp_path / filename
    path.write_text(text)
    code, out, err = run(capsys, "kv", "--model", str(path), "--context", "10")
    assert code == 2, err
    assert str(path) in err and needle in err
    assert err.count("\n") == 1 and out == ""


def test_console_script_runs_as_a_module() -> None:
    result = subprocess.run([sys.executable, "-m", "roofline.cli", "kv", "--context", "16"],
                            capture_output=True, text=True, check=False)
    assert result.returncode == 0, result.stderr
    assert "2,097,152 bytes" in result.stdout  # 16 x 131,072


# ---- plan and limits ------------------------------------------------------------------------------------

PLAN_KEYS = {"method", "max_context", "max_batch", "decode_step_s", "prefill_s", "tokens_per_s", "bound",
             "kv_bytes", "memory", "tpot_s", "tpot_avg_s", "ttft_s", "tokens_per_s_max_batch", "limits",
             "effective_bits", "warnings"}


def test_plan_json_contract(capsys) -> None:
    code, out, err = run(capsys, "plan", "--method", "kivi-2", "--method", "xquant-2", "--batch", "4",
                         "--context", "16384", "--json")
    assert code == 0, err
    data = json.loads(out)
    assert data["model"] == "Llama-3.1-8B" and data["hardware"] == "H100-SXM"
    assert [r["method"] for r in data["results"]] == ["kivi-2", "xquant-2"]
    for row in data["results"]:
        assert PLAN_KEYS <= set(row)
        assert {"weights_bytes", "kv_pool_bytes", "kv_parts_bytes"} <= set(row["memory"])
    assert "remat_limit_tokens" in data["results"][1]["limits"]


def test_plan_text_extras(capsys) -> None:
    code, out, _ = run(capsys, "plan", "--model", "Llama-3.1-70B", "--method", "fp8", "--batch", "8",
                       "--context", "32768", "--fewest-gpus", "--tpot-target-ms", "50")
    assert code == 0
    assert "fewest GPUs that fit" in out and "TPOT <= 50 ms" in out


@pytest.mark.parametrize(
    ("argv", "needle"),
    [
        (["plan", "--utilization", "1.5"], "gpu_memory_utilization"),
        (["plan", "--model", "Llama-3.1-70B", "--tp", "3", "--method", "bf16"], "tp: 3 does not divide"),
        (["plan", "--model", "Llama-3.1-405B", "--context", "1", "--method", "bf16"], "not even context 1"),
        (["plan", "--generated", "100", "--context", "50"], "generated_tokens"),
        (["plan", "--reserve-gib", "-1"], "--reserve-gib"),
        (["plan", "--method", "kivi-2+kivi-4"], "both fill it"),
        (["limits", "remat", "--bits", "nan"], "--bits"),
        (["limits", "remat", "--hardware", "Z100"], "hardware: unknown name 'Z100'"),
    ],
)
def test_plan_and_limits_bad_input(capsys, argv, needle) -> None:
    code, out, err = run(capsys, *argv)
    assert code == 2
    assert needle in err and err.count("\n") == 1 and "Traceback" not in err


def test_limits_paper_values_via_cli(capsys) -> None:
    code, out, _ = run(capsys, "limits", "remat", "--model", "Llama-2-7B", "--paper-assumptions", "--json")
    assert code == 0 and round(json.loads(out)["limit_tokens"]) == 2281
    code, out, _ = run(capsys, "limits", "remat", "--model", "Llama-3.1-8B", "--paper-assumptions")
    assert code == 0 and "40,627 tokens (40.6K)" in out


def test_plan_warns_past_max_positions(capsys) -> None:
    code, out, _ = run(capsys, "plan", "--model", "Phi-3-mini", "--method", "bf16", "--batch", "1",
                       "--context", "8192")
    assert code == 0 and "exceeds Phi-3-mini's max_position_embeddings 4,096" in out


def test_claims_cli(capsys) -> None:
    code, out, _ = run(capsys, "claims", "--json")
    assert code == 0
    rows = json.loads(out)
    ids = {r["id"] for r in rows}
    assert {"skvq-1m-context", "skvq-7x-decode", "xquant-remat-2.3k", "xquant-remat-40.6k", "aquakv-15gb",
            "aquakv-42.9gb", "aquakv-500x", "innerq-table3-bits"} <= ids
    code, out, _ = run(capsys, "claims")
    assert code == 0 and "claims:" in out.splitlines()[-1]
