"""llama.cpp's ubatches as passes (roofline.engines.timing 19.): llama_decode splits a call's tokens into ubatches of at
most n_ubatch tokens and computes one graph a ubatch, so a prompt or a server step of T tokens reads the weights and
launches every kernel ceil(T / n_ubatch) times. Each figure here comes from the engine's own logs and timelines or from
the laws' definitions by hand, not from the planner's output."""

import json
import re
from pathlib import Path

import numpy as np
import pytest

from roofline.catalogue.store import load_hardware, load_model
from roofline.engines.timing import timing
from roofline.methods.registry import parse_method
from roofline.planner.phases import PhaseModel
from roofline.serving.stepmodel import StepModel
from roofline.specs import Workload

RESULTS = Path(__file__).resolve().parents[2] / "validate/results/engines"
RUN1, RUN5 = RESULTS / "nvidia-h200-llamacpp-2026-11-30-run1", RESULTS / "nvidia-h200-llamacpp-2026-11-30-run5"
MODEL, H200 = load_model("Llama-3.1-8B"), load_hardware("H200")
E = np.zeros(0, dtype=np.int64)


def phases(weight_dtype: str, context: int = 8192, chunk: int = 2048) -> PhaseModel:
    wl = Workload(batch=1, context_tokens=context, engine="llamacpp", weight_dtype=weight_dtype,
                  prefill_chunk_tokens=chunk)
    return PhaseModel.build(MODEL, H200, wl, parse_method("bf16"))


def test_the_pass_is_the_servers_own_ubatch():
    """llama-server started with its defaults logs its context's n_ubatch: the profile's pass_tokens."""
    line = re.search(r"llama_context: n_ubatch\s+=\s+(\d+)", (RUN1 / "mem-c32768-np8.log").read_text())
    assert timing("llamacpp").pass_tokens == int(line.group(1)) == 512


def test_a_2048_token_prompt_launches_four_ubatches_of_kernels():
    """Run 5's timeline of llama-bench (Q8_0): the 2,048-token prompt runs mul_mat_q 4 x as often as the 512-token one
    (884 = 4 x 221 calls: 7 projections x 32 layers less the LM head's for the outputs alone, once a ubatch)."""
    groups = json.loads((RUN5 / "trace-Q8_0-pp.json").read_text())["groups"]
    calls = {g["kernels_per_step"]: sum(x["calls"] for x in g["per_name_per_step"]
                                        if x["name"].startswith("_Z9mul_mat_q")) for g in groups}
    assert sorted(calls.values()) == [221, 884]
    assert timing("llamacpp").passes(2048) == 4 and timing("llamacpp").passes(512 + 7) == 2


@pytest.mark.parametrize("batch", [2, 8])
def test_prompts_of_one_ubatch_each_cost_one_prompt_a_pass(batch):
    """batched-bench's B prompts of 512 tokens are B ubatches, each exactly one prompt's work: the GPU time (the
    prompts' host work and the logits' copy aside) is B x one prompt's."""
    ph = phases("gguf:Q8_0", chunk=2048)
    token = ph.engine.token_s * 512

    def gpu(b):
        return ph.prefill_time(b, 512) - ph.sampler_s(b) - token * b
    assert gpu(batch) == pytest.approx(batch * gpu(1), rel=1e-9)


def test_a_quantized_projection_pays_its_latency_and_weights_once_a_ubatch():
    """ffn_down (14,336 -> 4,096, q8_0: 34 bytes a block of 32) over a 2,048-token prompt, by MMQ's law
    k mmq_latency + W / mmq_bw + F / mmq_rate per call, four ubatches of 512 rows: 4 x (latency + (weights + a
    ubatch's F32 activations in and out) / bw) + all the FLOPs / rate."""
    k = timing("llamacpp").kernels["H200"]
    weights = 14336 * 4096 * 34 / 32
    acts = 512 * (14336 + 4096) * 4
    flops = 2 * 2048 * 14336 * 4096
    per_ubatch = k["ggml:q8_0:mmq_latency"] + (weights + acts) / k["ggml:q8_0:mmq_bw"]
    by_hand = 4 * per_ubatch + flops / k["ggml:q8_0:mmq_rate"]
    rows = [r for r in phases("gguf:Q8_0").rows("prefill", 1, 2048) if r["name"] == "mlp_down"]
    assert rows[0]["time_s"] == pytest.approx(by_hand, rel=1e-9)


def test_a_server_step_of_four_prompts_is_four_passes_of_one():
    """A server step holding four 512-token prompts (n_batch 2048) runs four ubatches, each one prompt's work."""
    steps = StepModel(phases("gguf:Q4_K_M"), 8192, 8192 + 256)
    four = steps.step_time(E, np.zeros(4, dtype=np.int64), np.full(4, 512), np.ones(4, dtype=bool))
    one = steps.step_time(E, np.array([0]), np.array([512]), np.array([True]))
    assert four == pytest.approx(4 * one, rel=1e-9)
