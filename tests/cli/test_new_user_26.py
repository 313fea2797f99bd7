"""Defects found trying the tool as a new user (session 26, validate/notes/2026-11-30-new-user-26.md), each by the
invocation that showed it; expected figures derived by hand from the config.json named."""

from __future__ import annotations

import json

from cli_run import run

FP8_30B = "tests/data/hf/Qwen3-30B-A3B-FP8/config.json"  # Qwen/Qwen3-30B-A3B-FP8 (SOURCE.md beside it)


def _json(capsys, *argv: str) -> dict:
    code, out, err = run(capsys, *argv, "--json")
    assert code == 0, err
    return json.loads(out)


def test_kv_decode_step_reads_a_quantized_checkpoint_at_its_stored_width(capsys):
    """`roofline kv --hardware` timed the decode step of an FP8 (or GPTQ, AWQ, NVFP4) checkpoint with bf16 weights
    and did not say so, while `roofline plan` reads the stored widths: Qwen3-30B-A3B-FP8 at B 4, L 32,768 on H100
    gave 13.708 ms under kv against plan's 10.716 ms. Qwen3-30B-A3B's qkv_proj is hidden 2,048 x (32 query heads +
    2 x 4 KV heads) x head_dim 128 = 10,485,760 weights: at fp8 (quantization_config quant_method fp8) 1 byte each."""
    kv = _json(capsys, "kv", "--model", FP8_30B, "--context", "32768", "--batch", "4", "--hardware", "H100-SXM")
    qkv = next(o for o in kv["decode_ops"] if o["name"] == "qkv_proj")
    assert qkv["traffic"]["weights"] == 2048 * (32 + 2 * 4) * 128 * 1
    assert kv["decode_weights"] == {"weight_dtype": "fp8", "expert_weight_dtype": None,
                                    "read": "quantization_config: fp8"}
    plan = _json(capsys, "plan", "--model", FP8_30B, "--context", "32768", "--batch", "4", "--hardware", "H100-SXM",
                 "--method", "bf16", "--prompt", "31744")
    assert abs(kv["decode_step_s"] - plan["results"][0]["decode_step_s"]) <= 1e-9 * plan["results"][0]["decode_step_s"]
    code, out, err = run(capsys, "kv", "--model", FP8_30B, "--context", "32768", "--hardware", "H100-SXM")
    assert code == 0, err
    assert "weights fp8 (quantization_config: fp8)" in out


def test_kv_decode_step_of_an_unquantized_model_says_bf16(capsys):
    code, out, err = run(capsys, "kv", "--model", "Llama-3.1-8B", "--context", "4096", "--hardware", "H100-SXM")
    assert code == 0, err
    assert "weights bf16 (no quantization_config)" in out


def test_a_url_or_hub_id_for_model_or_hardware_is_refused_by_rule(capsys):
    """A new user's first try, `--model https://huggingface.co/.../config.json` or `--model Qwen/Qwen3-8B`, was
    answered 'https:/huggingface.co/...: (file): cannot read: No such file or directory' (the URL's '//' folded by
    the path reading, no rule named)."""
    url = "https://huggingface.co/Qwen/Qwen3-8B/resolve/main/config.json"
    for argv, needles in (
            (("kv", "--model", url, "--context", "100"), ("model: " + url, "is a URL", "download")),
            (("plan", "--hardware", "https://example.com/h200.yaml"), ("hardware: https://example.com/h200.yaml",
                                                                       "is a URL")),
            (("kv", "--model", "Qwen/Qwen3-8B", "--context", "100"), ("model: 'Qwen/Qwen3-8B'",
                                                                       "Hugging Face id is not fetched"))):
        code, out, err = run(capsys, *argv)
        assert code == 2 and out == "", err
        assert err.count("\n") == 1 and err.startswith("roofline: error: ") and "Traceback" not in err, err
        for needle in needles:
            assert needle in err, err


def test_a_checkpoint_folder_named_without_a_slash_is_read(capsys, tmp_path, monkeypatch):
    """`--model Qwen3-30B-A3B-FP8` in the folder that holds the checkpoint (as `vllm serve Qwen3-30B-A3B-FP8` takes
    it) was 'model: unknown name' though `--model ./Qwen3-30B-A3B-FP8` read it. KV bytes per token by hand: 48 layers
    x 4 KV heads x head_dim 128 x (K, V) x 2 bytes = 98,304."""
    import pathlib
    folder = tmp_path / "Qwen3-30B-A3B-FP8"
    folder.mkdir()
    (folder / "config.json").write_text((pathlib.Path(__file__).parents[2] / FP8_30B).read_text())
    monkeypatch.chdir(tmp_path)
    kv = _json(capsys, "kv", "--model", "Qwen3-30B-A3B-FP8", "--context", "1000")
    assert (kv["model"], kv["bytes_per_token"]) == ("Qwen3-30B-A3B-FP8", 48 * 4 * 128 * 2 * 2)


def test_the_max_rate_at_an_slo_is_never_past_the_saturated_throughput(capsys):
    """Qwen3-30B-A3B on an H200 under vLLM, 200 requests of 1,024 + 256 tokens, SLO TTFT 2 s / TPOT 50 ms: the search
    answered 140 req/s (and 1 GPU for 100 req/s) while the same 200 requests all sent at once finish at ~21 req/s:
    the 200 requests fit in the pool together, so a 1.4 s burst at 140 req/s met the SLO before any queue built.
    No replica sustains more requests per second than it completes: rate <= N / (the all-at-once run's span), and
    GPUs for a target = ceil(target / rate)."""
    import math
    r = _json(capsys, "simulate", "--model", "tests/data/hf/Qwen3-30B-A3B/config.json", "--hardware", "H200",
              "--engine", "vllm", "--method", "bf16", "--rate", "4", "--prompt-tokens", "1024", "--output-tokens",
              "256", "--requests", "200", "--slo-ttft-ms", "2000", "--slo-tpot-ms", "50", "--target-rate", "100")
    saturated = r["max_rate_search"]["saturated_rate_per_s"]
    assert r["max_rate_at_slo"] <= saturated
    assert r["max_rate_search"]["finite_run_rate_per_s"] > 2 * saturated  # what the search found in the burst
    assert "capped at the saturated throughput" in r["max_rate_reason"]
    assert r["fleet"]["replicas"] == math.ceil(100 / r["max_rate_at_slo"])
