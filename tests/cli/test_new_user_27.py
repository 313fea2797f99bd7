"""Defects found trying the tool as a new user (session 27, validate/notes/2026-11-30-new-user-27.md), each by the
invocation that showed it; expected figures derived by hand or from the rule the defect broke."""

from __future__ import annotations

import json

from cli_run import run

DECODE_KEYS = ("decode_step_s", "tpot_s", "tpot_avg_s", "tokens_per_s", "tokens_per_s_max_batch", "bound", "decode",
               "benchmark_latency")


def _json(capsys, *argv: str) -> dict:
    code, out, err = run(capsys, *argv, "--json")
    assert code == 0, err
    return json.loads(out)


def test_plan_generating_no_token_has_no_decode_figures_in_text_or_json(capsys):
    """`plan --generated 0` printed TPOT@L 18.015 ms and 888 tok/s (fp8, the default scenario) and ranked by them,
    for a workload that prefills the prompts and decodes nothing. Now: every decode figure is null with its reason,
    the text prints '-' for them and says 'prefill only', and `tokens` ranks the rows by the shorter prefill."""
    argv = ("plan", "--method", "fp8", "--method", "kivi-2", "--method", "bf16", "--context", "8192",
            "--generated", "0")
    result = _json(capsys, *argv)
    rows = result["results"]
    for row in rows:
        assert {key: row[key] for key in DECODE_KEYS} == dict.fromkeys(DECODE_KEYS)
        assert row["decode_reason"].startswith("generated_tokens 0: no decode step")
        assert row["ttft_s"] > 0
    fitting = sorted((r for r in rows if r["rank"]), key=lambda r: r["rank"])
    assert [r["ttft_s"] for r in fitting] == sorted(r["ttft_s"] for r in fitting)
    assert result["answer"]["by_text"] == "shortest prefill of the batch (generated 0: no decode step)"
    code, out, err = run(capsys, *argv)
    assert code == 0, err
    head, answer = out.splitlines()[:2]
    assert head.endswith("prompt 8,192, generated 0 (prefill only: no decode step)")
    assert "tok/s" not in answer and "TPOT" not in answer and "no decode" in answer
    table = out.split("\n\n")[1].splitlines()
    for line in table[2:2 + len(rows)]:
        cells = line.split()
        # TPOT@L, TPOT avg, tok/s, tok/s@maxB and the bound: five '-' after the TTFT's value and unit
        ttft_unit = next(i for i, c in enumerate(cells) if c in ("s", "ms") and i > 5)
        assert cells[ttft_unit + 1:ttft_unit + 6] == ["-"] * 5, line


def test_plan_generating_no_token_prefills_as_the_same_prompt_with_one_token(capsys):
    """The prefill does not depend on what follows it: P 4,096 prompts prefilled at batch 16 take the same time
    with --generated 0 (L = P) as with --generated 1 (L = P + 1)."""
    none = _json(capsys, "plan", "--method", "fp8", "--context", "4096", "--generated", "0")["results"][0]
    one = _json(capsys, "plan", "--method", "fp8", "--context", "4097", "--prompt", "4096", "--generated", "1")
    assert none["ttft_s"] == one["results"][0]["ttft_s"]
    assert one["results"][0]["tpot_s"] > 0 and none["tpot_s"] is None


def test_best_generating_no_token_ranks_by_the_prefill(capsys):
    code, out, err = run(capsys, "best", "--context", "8192", "--generated", "0", "--method", "fp8")
    assert code == 0, err
    assert "best by shortest prefill of the batch" in out.splitlines()[0]
    assert "no decode" in out.splitlines()[1] and "tok/s" not in out.splitlines()[1]


def test_a_tpot_target_with_no_generated_token_is_refused(capsys):
    code, out, err = run(capsys, "plan", "--generated", "0", "--tpot-target-ms", "50")
    assert (code, out) == (2, "")
    assert err.count("\n") == 1 and "--tpot-target-ms" in err and "--generated 0" in err and "Traceback" not in err


JAMBA = "tests/data/hf/Jamba-1.5-Mini/config.json"
NEXT = "tests/data/hf/Qwen3-Next-80B-A3B/config.json"


def _capacity(capsys, *argv: str) -> dict:
    return _json(capsys, "capacity", "--engine", "vllm", "--hardware", "H200", "--max-model-len", "32768", *argv)


def test_mamba_cache_mode_on_a_model_without_state_layers_says_it_has_no_effect(capsys):
    """`capacity --engine vllm --mamba-cache-mode all` on Llama-3.1-8B was taken silently. vLLM 0.24 takes the flag
    for any model and reads it only in MambaModelConfig / the mamba layers (model_executor/models/config.py), so the
    pool is the same with or without it; the output now says the flag has no effect."""
    plain = _capacity(capsys, "--model", "Llama-3.1-8B")
    given = _capacity(capsys, "--model", "Llama-3.1-8B", "--mamba-cache-mode", "all")
    assert given["max_concurrency"] == plain["max_concurrency"] and "notes" not in plain
    assert given["notes"] == ["--mamba-cache-mode all: no effect, Llama-3.1-8B has no mamba or linear-attention "
                              "state layers (vLLM accepts the flag and reads it only for those)"]
    code, out, err = run(capsys, "capacity", "--engine", "vllm", "--model", "Llama-3.1-8B", "--mamba-cache-mode",
                         "align")
    assert code == 0, err
    assert "\nnote: --mamba-cache-mode align: no effect, Llama-3.1-8B has no mamba" in out


def test_mamba_cache_mode_without_prefix_caching_is_reset_to_none_as_vllm_warns(capsys):
    """MambaModelConfig.verify_and_update_config: prefix caching off -> mamba_cache_mode 'none' ('Mamba cache mode
    is set to 'none' when prefix caching is disabled'): Jamba's pool is the one without the flag, and the note says
    so; with prefix caching on, 'all' on an architecture without SupportsMambaPrefixCaching (Qwen3-Next) falls back
    to 'align' (the same warning's other branch)."""
    plain = _capacity(capsys, "--model", JAMBA)
    given = _capacity(capsys, "--model", JAMBA, "--mamba-cache-mode", "all")
    assert given["max_concurrency"] == plain["max_concurrency"]
    assert given["notes"][0].startswith("--mamba-cache-mode all: no effect without --enable-prefix-caching")
    align = _capacity(capsys, "--model", NEXT, "--tp", "2", "--enable-prefix-caching", "--mamba-cache-mode", "align")
    asked_all = _capacity(capsys, "--model", NEXT, "--tp", "2", "--enable-prefix-caching", "--mamba-cache-mode",
                          "all")
    assert asked_all["max_concurrency"] == align["max_concurrency"] and "notes" not in align
    assert asked_all["notes"][0].startswith("--mamba-cache-mode all: vLLM falls back to 'align'")
