"""`simulate`'s TPOT is served, `plan`'s is a decode-only step: the two differ by the prefill chunks that vLLM mixes
into the decode steps, and simulate names the decode-only step at its own operating point.

Trinity-Nano at 7 req/s with 2,048-token prompts: the served TPOT p50 is about twice the decode-only step; with
16-token prompts (next to no prefill work) the two meet.
"""

from __future__ import annotations

import json
from pathlib import Path

from cli_run import run

MODEL = str(Path(__file__).parents[1] / "data" / "hf" / "Trinity-Nano-Preview" / "config.json")


def _simulate(capsys, rate: str, prompt: str) -> dict:
    rc, out, err = run(capsys, "simulate", "--json", "--model", MODEL, "--hardware", "H200", "--method", "bf16",
                       "--engine", "vllm", "--rate", rate, "--prompt-tokens", prompt, "--output-tokens", "256",
                       "--requests", "200", "--seed", "1")
    assert rc == 0, err
    got = json.loads(out)
    return got["results"][0] if "results" in got else got


def test_the_decode_only_step_simulate_names_is_plans_tpot(capsys):
    sim = _simulate(capsys, "7", "2048")
    step = sim["decode_only_step"]
    assert step["context_tokens"] == 2048 + 128  # the mean prompt and half the output
    rc, out, err = run(capsys, "plan", "--json", "--model", MODEL, "--hardware", "H200", "--engine", "vllm",
                       "--method", "bf16", "--batch", str(step["batch"]), "--context", str(step["context_tokens"]),
                       "--generated", "128")
    assert rc == 0, err
    assert json.loads(out)["results"][0]["tpot_s"] == step["step_s"]
    # the steps carrying 2,048-token prompts (eager past vLLM's 512-token captures) double what a request sees
    assert sim["tpot_s"]["p50"] > 1.5 * step["step_s"]


def test_without_prompts_to_prefill_served_tpot_is_the_decode_step(capsys):
    sim = _simulate(capsys, "12", "16")
    assert abs(sim["tpot_s"]["p50"] / sim["decode_only_step"]["step_s"] - 1) < 0.25


def test_the_text_says_which_tpot_it_is(capsys):
    rc, out, err = run(capsys, "simulate", "--model", MODEL, "--hardware", "H200", "--method", "bf16", "--engine",
                       "vllm", "--rate", "7", "--prompt-tokens", "2048", "--output-tokens", "256", "--requests", "100")
    assert rc == 0, err
    assert "TPOT is served" in out and "a decode-only step at this run's mean" in out
    rc, out, err = run(capsys, "plan", "--model", MODEL, "--hardware", "H200", "--method", "bf16")
    assert "TPOT@L = one decode-only step at L" in out and "served: `roofline simulate`" in out
