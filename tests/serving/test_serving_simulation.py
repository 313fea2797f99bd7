"""Serving simulation: the step model against the planner's phases, and the queueing checks of issue 17.

Expected numbers come from the planner's own path (PhaseModel: graphs compiled by Roofline.compile, the
plan's capacity), never from the serving tables under test.
"""

from __future__ import annotations

import numpy as np
import pytest

from roofline.catalogue import load_hardware, load_model
from roofline.methods import parse_method
from roofline.planner import plan_method
from roofline.planner.phases import PhaseModel
from roofline.serving.metrics import littles_law, summarize
from roofline.serving.requests import LengthDist, poisson_requests
from roofline.serving.scheduler import SchedulerConfig
from roofline.serving.search import max_rate_at_slo
from roofline.serving.simulate import Simulator, Slo
from roofline.serving.stepmodel import StepModel
from roofline.specs import Workload

E = np.zeros(0, dtype=np.int64)
MODEL, H100 = load_model("Llama-3.1-8B"), load_hardware("H100-SXM")


def workload(context: int, tp: int = 1, **kw) -> Workload:
    return Workload(context_tokens=context, tp=tp, prefill_chunk_tokens=8192, **kw)


def simulator(spec: str, max_tokens: int, **config) -> Simulator:
    return Simulator(MODEL, H100, workload(max_tokens), parse_method(spec), SchedulerConfig(**config),
                     max_tokens=max_tokens)


def requests(rate: float, n: int, prompt: int, output: int, seed: int = 0):
    return poisson_requests(rate, n, LengthDist.parse(str(prompt), "p"), LengthDist.parse(str(output), "o"), seed)


@pytest.mark.parametrize("spec,tp", [("bf16", 1), ("kivi-2", 1), ("xquant-2", 1), ("innerq-base", 2)])
def test_lone_prompt_and_lone_decode_are_the_planner_phases(spec, tp):
    phases = PhaseModel.build(MODEL, H100, workload(8192, tp), parse_method(spec))
    steps = StepModel(phases, 8192, 8192 + 256)
    prefill = steps.step_time(E, np.array([0]), np.array([3000]), np.array([True]))
    assert prefill == pytest.approx(phases.prefill_time(1, 3000), rel=1e-9)
    decode = steps.step_time(np.array([5000]), E, E, E.astype(bool))
    assert decode == pytest.approx(phases.decode_time(1, 5000), rel=1e-9)


@pytest.mark.parametrize("preset", ["gguf:Q4_K_M", "gguf:Q8_0"])
def test_a_gguf_models_lone_prompt_and_decode_are_the_planner_phases(preset):
    # llama.cpp's quantized matmuls (Roofline._ggml_matmul: MMVQ / MMQ by the call's rows) in a serving step's
    # aggregated ops as in the planner's graph, at one decode token (MMVQ), 8 (MMVQ over columns) and a prompt (MMQ)
    h200 = load_hardware("H200")
    phases = PhaseModel.build(MODEL, h200, workload(8192, engine="llamacpp", weight_dtype=preset), parse_method("bf16"))
    steps = StepModel(phases, 8192, 8192 + 256)
    prefill = steps.step_time(E, np.array([0]), np.array([2048]), np.array([True]))
    # the planner's prompt holds the engine's per-row work after the kernels (llama.cpp: the logits' copy to the host,
    # its `sampler` law), which the simulator adds to every step apart (scheduling's combine): the GPU work alone
    # and its tokens' host work (token_s, serial): the GPU work alone
    host = phases.engine.token_s * 2048
    assert prefill == pytest.approx(phases.prefill_time(1, 2048) - phases.sampler_s(1) - host, rel=1e-9)
    gpu = phases.engine.padded  # the engine's step wraps the GPU work: compare the GPU work alone
    for batch in (1, 8):
        decode = steps.step_time(np.full(batch, 5000), E, E, E.astype(bool))
        expected = phases.kernel("decode").total(gpu(batch), 5000)
        assert decode == pytest.approx(float(expected), rel=1e-9), batch


def test_mixed_step_reads_weights_once():
    """A decode token riding on a prefill chunk costs far less than a decode step of its own (the weights
    are read once), and the mix costs at least its larger part."""
    phases = PhaseModel.build(MODEL, H100, workload(8192), parse_method("bf16"))
    steps = StepModel(phases, 8192, 8192 + 256)
    alone_decode = steps.step_time(np.arange(2000, 2032), E, E, E.astype(bool))
    alone_chunk = steps.step_time(E, np.array([1024]), np.array([512]), np.array([False]))
    mixed = steps.step_time(np.arange(2000, 2032), np.array([1024]), np.array([512]), np.array([False]))
    assert max(alone_decode, alone_chunk) <= mixed < alone_decode + alone_chunk
    # the cached prefix of a later chunk is read: a chunk at prefix 4096 costs more than the same at 0
    later = steps.step_time(E, np.array([4096]), np.array([512]), np.array([False]))
    assert later > alone_chunk


def test_low_rate_ttft_is_the_prefill_and_tpot_the_batch_one_step():
    prompt, output = 1024, 64
    sim = simulator("bf16", prompt + output)
    trace = sim.run(requests(0.001, 20, prompt, output))  # mean gap 1000 s: every request is alone
    phases = sim.phases
    assert np.median(trace.ttft_s) == pytest.approx(phases.prefill_time(1, prompt), rel=0.02)
    assert np.percentile(trace.ttft_s, 99) == pytest.approx(phases.prefill_time(1, prompt), rel=0.02)
    expected_tpot = phases.average_decode_time(1, prompt, output - 1)
    assert np.median(trace.tpot_s) == pytest.approx(expected_tpot, rel=0.02)


def test_saturated_throughput_is_the_plans_max_batch_throughput():
    """All requests at once, the sequence cap at the plan's max batch for prompt + output: the decode waves
    run at the plan's steady-state throughput max_batch / mean TPOT over the generation."""
    prompt, output = 64, 2048
    # the planner's max batch with the engine's peak step (8192 prefill tokens, 256 sequences' logits)
    plan = plan_method(MODEL, H100, Workload(batch=256, context_tokens=prompt + output, prompt_tokens=prompt,
                                             generated_tokens=output, prefill_chunk_tokens=8192),
                       parse_method("bf16"))
    mb = plan.data["max_batch"]
    assert 16 < mb < 256
    sim = simulator("bf16", prompt + output, max_num_seqs=mb)
    trace = sim.run(requests(1e9, 2 * mb, prompt, output))
    simulated = summarize(trace, None)["throughput_tokens_per_s"]
    steady = mb / sim.phases.average_decode_time(mb, prompt, output)
    assert trace.preemptions == 0
    assert simulated == pytest.approx(steady, rel=0.05)


def test_littles_law_on_the_simulated_queue():
    prompt, output = 2048, 256
    sim = simulator("bf16", prompt + output)
    trace = sim.run(requests(4.0, 400, prompt, output, seed=3))
    law = littles_law(trace)
    assert law["mean_in_system"] > 5  # a real queue, not an empty system
    assert law["mean_in_system"] == pytest.approx(law["rate_x_time"], rel=0.02)


def test_same_seed_same_numbers_other_seed_other_numbers():
    sim = simulator("kivi-2", 2048 + 256)
    runs = [summarize(sim.run(requests(6.0, 150, 2048, 256, seed=s)), None) for s in (7, 7, 8)]
    assert runs[0]["ttft_s"] == runs[1]["ttft_s"] and runs[0]["e2e_s"] == runs[1]["e2e_s"]
    assert runs[0]["ttft_s"] != runs[2]["ttft_s"]


def test_a_method_that_fits_more_tokens_admits_more_and_queues_less():
    """Everything arrives at once: the pool decides how many run, and a queue drains faster the more run."""
    prompt, output = 8192, 512
    reqs = requests(1e9, 150, prompt, output, seed=1)
    bf16, kivi = (simulator(s, prompt + output) for s in ("bf16", "kivi-2"))
    assert kivi.pool.tokens_that_fit(prompt + output) > 3 * bf16.pool.tokens_that_fit(prompt + output)
    a, b = summarize(bf16.run(reqs), None), summarize(kivi.run(reqs), None)
    assert b["max_running"] > a["max_running"]
    assert b["preemptions"] <= a["preemptions"]
    assert b["ttft_s"]["p99"] < a["ttft_s"]["p99"]


def test_max_rate_search_brackets_the_slo():
    prompt, output = 1024, 128
    sim = simulator("bf16", prompt + output)
    reqs = requests(1.0, 200, prompt, output)
    slo = Slo(ttft_s=0.5, tpot_s=0.030)
    found = max_rate_at_slo(sim, reqs, slo, iterations=12)
    rate = found["rate_per_s"]
    assert rate is not None
    ok = sim.run(reqs.at_rate(rate))
    assert np.percentile(ok.ttft_s, 99) <= slo.ttft_s and np.percentile(ok.tpot_s, 99) <= slo.tpot_s
    low, high = found["bracket_per_s"]
    assert high - low <= 0.02 * high
    bad = sim.run(reqs.at_rate(rate * 1.25))
    assert np.percentile(bad.ttft_s, 99) > slo.ttft_s or np.percentile(bad.tpot_s, 99) > slo.tpot_s


def test_an_unreachable_slo_has_no_rate_and_says_why():
    sim = simulator("bf16", 4096 + 16)
    found = max_rate_at_slo(sim, requests(1.0, 50, 4096, 16), Slo(ttft_s=0.001, tpot_s=1.0))
    assert found["rate_per_s"] is None and "TTFT" in found["reason"]


def test_zack_attention_imbalance_slows_the_decode_step_as_the_plan_does():
    """ZACK's (sequence, KV head) tasks fill the SMs in whole rounds (§5.3): at 20 sequences the planner's TPOT
    is the decode phase with the attention kernels x the method's imbalance; the step model applies the same."""
    method, batch, context = parse_method("zack-50"), 20, 4096
    assert method.attention_imbalance(MODEL, batch, H100.sm_count) > 1.2
    plan = plan_method(MODEL, H100, Workload(batch=batch, context_tokens=context, prompt_tokens=context - 1,
                                             generated_tokens=1, prefill_chunk_tokens=8192), method)
    phases = PhaseModel.build(MODEL, H100, workload(context), method)
    steps = StepModel(phases, context, 8192 + 256)
    step = steps.step_time(np.full(batch, context), E, E, E.astype(bool))
    assert step == pytest.approx(plan.data["tpot_s"], rel=1e-9)
    assert step > 1.1 * phases.decode_time(batch, context)  # the factor is really there


def test_first_token_after_a_one_token_last_chunk_is_not_stamped_at_a_block_end():
    """A prompt one token past the chunk budget: the first chunk takes 512 tokens, the last prompt token runs as a
    decode-like step, and the first output token is due right then. Its TTFT is two steps (the chunk, then the
    one-token step), never the end of a block of decode steps (the bug: 63 steps later)."""
    budget, output = 512, 64
    sim = simulator("bf16", budget + 1 + output, max_num_batched_tokens=budget)
    trace = sim.run(requests(0.001, 3, budget + 1, output))
    steps = StepModel(sim.phases, budget + 1 + output, budget + 256)
    chunk = steps.step_time(E, np.array([0]), np.array([budget]), np.array([False]))
    last = steps.step_time(np.array([budget + 1]), E, E, E.astype(bool))
    assert np.median(trace.ttft_s) == pytest.approx(chunk + last, rel=0.02)


def test_latency_curves_for_the_serving_page():
    """The dashboard's Serving page: p99 latencies at 5-120 % of max(saturated rate, max rate at the SLO). No request
    is faster than a lone prefill; latencies grow with the rate; each row's SLO flag follows its p99s; the max rate
    at the SLO is at least the lowest rate, which meets it, and inside the curve."""
    from roofline.dashboard.serving_curves import FRACTIONS, latency_vs_rate
    from roofline.serving.simulate import Slo

    slo = Slo(ttft_s=2.0, tpot_s=0.05)
    result = latency_vs_rate(MODEL, H100, workload(2048), ["bf16"], 1024, 64, 60, slo)
    rows = result["rows"]
    assert [r["rate_per_s"] / rows[-1]["rate_per_s"] for r in rows] == pytest.approx(
        [f / FRACTIONS[-1] for f in FRACTIONS])
    lone = PhaseModel.build(MODEL, H100, workload(2048), parse_method("bf16")).prefill_time(1, 1024)
    assert rows[0]["ttft_p99_s"] >= lone * 0.98
    assert rows[-1]["ttft_p99_s"] > rows[0]["ttft_p99_s"]
    for r in rows:
        assert r["meets_slo"] == (r["ttft_p99_s"] <= slo.ttft_s and r["tpot_p99_s"] <= slo.tpot_s)
    assert result["max_rate"]["bf16"] is not None and result["max_rate"]["bf16"] >= rows[0]["rate_per_s"]
    assert rows[-1]["rate_per_s"] >= FRACTIONS[-1] * result["max_rate"]["bf16"] * (1 - 1e-12)


@pytest.mark.parametrize("rate", [3.0, 40.0])
def test_decode_blocks_give_the_step_by_step_metrics(monkeypatch, rate):
    """The fast path (decode-only steps evaluated as vectorized blocks, lazily up to the next arrival) against one
    step at a time: the same per-request times to rounding (block ends are a cumulative sum instead of a clock
    advanced step by step)."""
    import roofline.serving.simulate as simulate

    prompt, output = LengthDist.parse("uniform:128:2048", "p"), LengthDist.parse("uniform:8:300", "o")
    reqs = poisson_requests(rate, 150, prompt, output, 4)
    sim = simulator("bf16", reqs.max_tokens)
    fast = sim.run(reqs)
    monkeypatch.setattr(simulate, "BLOCK_STEPS", 1)
    slow = sim.run(reqs)
    assert len(slow.steps) > len(fast.steps)  # the fast path did batch steps
    assert fast.first_token_s == pytest.approx(slow.first_token_s, rel=1e-9)
    assert fast.finish_s == pytest.approx(slow.finish_s, rel=1e-9)
    assert fast.preemptions == slow.preemptions


def test_an_mla_models_lone_prompt_and_decode_are_the_planner_phases():
    """DeepSeek-V2-Lite's prefill graph has an op the decode graph lacks (the kv_b_proj up-projection), whose
    weight reads carry the prefill graph's chunk count: one step is one pass (this crashed `simulate` before)."""
    model, h200 = load_model("DeepSeek-V2-Lite"), load_hardware("H200")
    phases = PhaseModel.build(model, h200, workload(8192), parse_method("bf16"))
    steps = StepModel(phases, 8192, 8192 + 256)
    prefill = steps.step_time(E, np.array([0]), np.array([3000]), np.array([True]))
    assert prefill == pytest.approx(phases.prefill_time(1, 3000), rel=1e-9)
    decode = steps.step_time(np.array([5000]), E, E, E.astype(bool))
    assert decode == pytest.approx(phases.decode_time(1, 5000), rel=1e-9)


@pytest.mark.parametrize("engine", ["vllm", "sglang"])
def test_an_engines_lone_decode_is_the_planner_phase(engine):
    # the ops whose name or programs pick their laws keep them in a serving step's aggregated ops: vLLM's KV write
    # (kv_update at kv_write_latency + bytes / kv_write_bw) and its decode attention's per-(sequence, KV head, split)
    # tile cost (attn_decode_program x programs: at context 5,000 three splits, so B 8 runs 8 x 8 x 3 = 192 tiles a
    # layer). The simulator had dropped both: 12 us under the planner at B 1, 95 us at B 8 (Llama-3.1-8B, H200).
    h200 = load_hardware("H200")
    phases = PhaseModel.build(MODEL, h200, workload(8192, engine=engine), parse_method("bf16"))
    steps = StepModel(phases, 8192, 8192 + 256)
    gpu = phases.engine.padded
    for batch in (1, 8, 64):
        decode = steps.step_time(np.full(batch, 5000), E, E, E.astype(bool))
        assert decode == pytest.approx(float(phases.kernel("decode").total(gpu(batch), 5000)), rel=1e-9), batch
