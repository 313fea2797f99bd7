"""Speculative decoding (serving.speculative): acceptance, the draft's step cost and KV, and TPOT.

Expectations: E[tokens per step] = 1 + sum_k prod_{j<=k} a_j by hand (Leviathan et al. 2023, Sec. 3); a lone
request's TPOT composed by hand from the step path's own pieces (a verify chunk of K + 1 tokens after the cached
context, K draft passes) at the contexts the request walks through; the draft's KV and weights from the target's
accounting (one layer's share for EAGLE / MTP, Llama-3.1-8B has 32 layers).
"""

from __future__ import annotations

import numpy as np
import pytest

from roofline.catalogue import load_hardware, load_model
from roofline.errors import SpecError
from roofline.methods import parse_method
from roofline.planner.memory import weights_per_gpu
from roofline.serving.requests import Requests
from roofline.serving.simulate import Simulator
from roofline.serving.speculative import Speculative
from roofline.specs import Workload

MODEL, H200 = load_model("Llama-3.1-8B"), load_hardware("H200")
E = np.zeros(0, dtype=np.int64)


def sim(spec: str | None, max_tokens: int) -> Simulator:
    wl = Workload(context_tokens=max_tokens, prefill_chunk_tokens=8192)
    return Simulator(MODEL, H200, wl, parse_method("bf16"), max_tokens=max_tokens,
                     speculative=Speculative.parse(spec) if spec else None)


def lone(prompt: int, output: int) -> Requests:
    return Requests(np.array([0.0]), np.array([prompt]), np.array([output]))


def test_expected_tokens_per_step_and_parsing():
    assert Speculative.parse("eagle:3:0.8").expected_tokens() == pytest.approx(1 + 0.8 + 0.64 + 0.512)
    assert Speculative.parse("mtp:2:0.9,0.5").expected_tokens() == pytest.approx(1 + 0.9 + 0.45)
    spec = Speculative.parse("draft=Llama-3.2-1B:4:0.7")
    assert spec.draft_model == "Llama-3.2-1B" and spec.acceptance == (0.7,) * 4
    for bad in ("eagle:3", "eagle:3:1.5", "mtp:2:0.9,0.5,0.1", "medusa:2:0.5", "eagle:0:0.5", "draft:2:0.5"):
        with pytest.raises(SpecError, match="--speculative"):
            Speculative.parse(bad)


def test_acceptance_draws_have_the_expected_mean():
    spec = Speculative.parse("eagle:4:0.9,0.7,0.5,0.3")
    drawn = spec.draw(np.random.default_rng(1), 200_000)
    assert drawn.mean() + 1 == pytest.approx(spec.expected_tokens(), rel=0.01)
    assert drawn.min() == 0 and drawn.max() == 4


@pytest.mark.parametrize("spec", ["eagle:3:1.0", "draft=Llama-3.2-1B:3:1.0"])
def test_lone_request_tpot_is_verify_plus_drafts_per_token(spec):
    """All drafts accepted: 4 tokens a step; 40 tokens after the first are 10 steps at contexts P+1, P+5, ..."""
    prompt, output = 1000, 41
    s = sim(spec, prompt + output)
    trace = s.run(lone(prompt, output))
    def verify(ctx):
        return s.steps.step_time(E, ctx - 1, np.array([4]), np.array([True]))

    def drafts(ctx):
        if s.draft.steps is None:
            return sum(s.steps.once_time(s.steps.work(ctx + k, E, E, E.astype(bool)), 1, 1, False) for k in range(3))
        # vLLM's propose: the target's K + 1 tokens and the sampled token's slot (K + 2 after ctx - 1), one logits
        # row, then K - 1 = 2 one-token passes at ctx + 2, ctx + 3
        first = s.draft.steps.step_time(E, ctx - 1, np.array([5]), np.array([True]))
        return first + sum(s.draft.steps.step_time(ctx + 1 + j, E, E, E.astype(bool)) for j in (1, 2))

    total = sum(verify(c) + drafts(c) for c in (np.array([prompt + 1 + 4 * j]) for j in range(10)))
    assert float(trace.tpot_s[0]) == pytest.approx(total / 40, rel=1e-9)
    # the planner-side formula at the middle context agrees with the simulated TPOT
    mid = np.array([prompt + 21])
    assert s.speculative.tpot_s(verify(mid), drafts(mid)) == pytest.approx(float(trace.tpot_s[0]), rel=0.01)
    plain = sim(None, prompt + output).run(lone(prompt, output))
    assert trace.tpot_s[0] < plain.tpot_s[0]  # four tokens a step beat one (memory-bound decode at batch 1)


def test_a_draft_model_prefills_the_prompt_with_the_target():
    """vLLM runs the drafter after every target step, a prefill too (it fills the draft's KV with the prompt): a
    lone request's first token waits for the target's prefill, the draft's prefill of the prompt and its sampled
    slot (P + 1 tokens, the planner's prefill of the draft model at B = 1), and K - 1 = 2 one-token draft passes
    (the draft's decode at P + 2, P + 3). Composed from the planner's phases of both models."""
    from roofline.planner.phases import PhaseModel

    prompt, output = 1000, 8
    s = sim("draft=Llama-3.2-1B:3:0.0", prompt + output)
    ttft = float(s.run(lone(prompt, output)).ttft_s[0])
    target = PhaseModel.build(MODEL, H200, s.workload, parse_method("bf16"))
    draft = PhaseModel.build(load_model("Llama-3.2-1B"), H200, s.workload, parse_method("bf16"))
    expected = (target.prefill_time(1, prompt) + draft.prefill_time(1, prompt + 1) + draft.decode_time(1, prompt + 2)
                + draft.decode_time(1, prompt + 3))
    assert ttft == pytest.approx(expected, rel=1e-6)
    assert ttft > float(sim(None, prompt + output).run(lone(prompt, output)).ttft_s[0])


def test_steps_taken_follow_the_acceptance():
    prompt, output = 512, 4001
    spec = Speculative.parse("mtp:2:0.6")
    trace = sim("mtp:2:0.6", prompt + output).run(lone(prompt, output))
    decode_steps = len(trace.steps) - 1  # one prefill step
    assert decode_steps == pytest.approx((output - 1) / spec.expected_tokens(), rel=0.03)


def test_the_draft_takes_its_weights_and_kv_from_the_pool():
    target, eagle = sim(None, 4096), sim("eagle:2:0.5", 4096)
    layers = MODEL.num_layers  # 32: EAGLE / MTP cost one layer's share
    assert eagle.pool.capacity_bytes == pytest.approx(
        target.pool.capacity_bytes - float(weights_per_gpu(MODEL, target.workload)) / layers, rel=1e-12)
    assert eagle.pool.seq_bytes[4096] == pytest.approx(target.pool.seq_bytes[4096] * (1 + 1 / layers), rel=1e-12)
    drafted = sim("draft=Llama-3.2-1B:2:0.5", 4096)
    small = Simulator(load_model("Llama-3.2-1B"), H200, Workload(context_tokens=4098, prefill_chunk_tokens=8192),
                      parse_method("bf16"), max_tokens=4096)
    # Llama-3.2-1B: 16 layers x 8 KV heads x 64 dims x 2 (K, V) x 2 bytes = 32 KiB per token
    assert drafted.pool.seq_bytes[4096] - target.pool.seq_bytes[4096] == 4096 * 16 * 8 * 64 * 2 * 2
    assert small.pool.seq_bytes[4096] == 4096 * 32768


def test_a_draft_pass_takes_at_least_the_drafters_host_work(monkeypatch):
    """Under vLLM a draft pass takes max(its GPU time, the drafter's host work a pass) (serving.speculative; the host
    law by hand: 50 ms + 0 a layer, far above a 1B pass's GPU time): the K = 3 passes of a step cost exactly 3 x 50
    ms; with no host law they cost the GPU's passes, each well under 50 ms."""
    from dataclasses import replace

    import roofline.engines.timing as timing_module
    from roofline.engines.scheduling import vllm

    real = timing_module.timing("vllm")
    wl = Workload(context_tokens=2048, prefill_chunk_tokens=8192)

    def draft_s(pass_s: float) -> float:
        monkeypatch.setattr(timing_module, "timing",
                            lambda engine: replace(real, draft_pass_s=pass_s, draft_layer_s=0.0))
        s = Simulator(MODEL, H200, wl, parse_method("bf16"), max_tokens=2048, engine=vllm(H200, "api"),
                      speculative=Speculative.parse("draft=Llama-3.2-1B:3:0.0"))
        return s.draft.time_s(np.array([1000, 1500]), E, E)

    assert draft_s(0.05) == pytest.approx(3 * 0.05)
    gpu = draft_s(0.0)
    assert 0 < gpu < 3 * 0.05 / 5
    # the law by hand for Llama-3.2-1B's 16 layers: 0.2 ms + 16 x 0.05 ms = 1.0 ms a pass; none without an engine
    monkeypatch.setattr(timing_module, "timing",
                        lambda engine: replace(real, draft_pass_s=2e-4, draft_layer_s=5e-5))
    spec = Speculative.parse("draft=Llama-3.2-1B:3:0.0")
    vllm_sim = Simulator(MODEL, H200, wl, parse_method("bf16"), max_tokens=2048, engine=vllm(H200, "api"),
                         speculative=spec)
    assert vllm_sim.draft.pass_host_s == pytest.approx(1e-3)
    assert Simulator(MODEL, H200, wl, parse_method("bf16"), max_tokens=2048,
                     speculative=spec).draft.pass_host_s == 0.0


def test_simulate_says_the_drafters_floor_under_vllm_only(capsys, monkeypatch):
    """`roofline simulate` prints the drafter's host work a pass where it bounds the draft passes (a draft model
    under vLLM; the law by hand: 0.2 ms + 16 x 0.05 ms = 1.00 ms for Llama-3.2-1B) and nothing of it for an EAGLE
    head, whose host work was not measured."""
    from dataclasses import replace

    from cli_run import run

    import roofline.engines.timing as timing_module

    real = timing_module.timing("vllm")
    monkeypatch.setattr(timing_module, "timing", lambda engine: replace(real, draft_pass_s=2e-4, draft_layer_s=5e-5))
    common = ("simulate", "--model", "Llama-3.1-8B", "--hardware", "H200", "--method", "bf16", "--engine", "vllm",
              "--prompt-tokens", "256", "--output-tokens", "16", "--rate", "2", "--requests", "8")
    code, out, err = run(capsys, *common, "--speculative", "draft=Llama-3.2-1B:3:0.5")
    assert code == 0, err
    assert "each draft pass takes at least 1.00 ms of the drafter's host work" in out
    code, out, err = run(capsys, *common, "--speculative", "eagle:3:0.5")
    assert code == 0, err
    assert "speculative eagle" in out and "drafter's host work" not in out
