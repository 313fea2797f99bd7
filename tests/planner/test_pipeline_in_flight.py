"""A pipeline's batches in flight (engines.timing 26.): a decode step of B sequences in m micro-batches on pp stages
takes max(m, pp) stage-times where the engine keeps its batches in flight (vLLM, SGLang, the ideal bound), m + pp - 1
where it fills and drains every step (llama.cpp, TensorRT-LLM), and a batch's one-off prefill fills and drains
whatever the engine. Each expectation from the pp = 1 step of B / m sequences, by hand."""

import pytest

from roofline.catalogue.store import load_hardware, load_model
from roofline.engines.timing import pipeline_slots
from roofline.methods.registry import parse_method
from roofline.planner.phases import PhaseModel
from roofline.specs import Workload

H100 = load_hardware("H100-SXM")
MODEL = load_model("Llama-3.1-8B")


def phases(pp=1, micro=1, engine="ideal"):
    wl = Workload(context_tokens=8192, batch=16, pp=pp, micro_batches=micro, engine=engine)
    return PhaseModel.build(MODEL, H100, wl, parse_method("bf16"))


def test_the_slots_by_engine():
    assert pipeline_slots("vllm", 2, 2) == 2 and pipeline_slots("sglang", 4, 2) == 4
    assert pipeline_slots("ideal", 1, 4) == 4  # one micro-batch: it returns to the first stage after pp stage-times
    assert pipeline_slots("llamacpp", 2, 2) == 3 and pipeline_slots("trtllm", 3, 4) == 6
    assert pipeline_slots("llamacpp", 3, 1) == pipeline_slots("vllm", 3, 1) == 3  # pp 1: the engine's passes


def test_two_micro_batches_in_flight_cost_the_half_batchs_step():
    one, two = phases(), phases(pp=2, micro=2)
    handoff = two._handoff(8)
    # 2 x (T(8) / 2 + handoff(8)) = T(8) + 2 handoff(8)
    assert two.decode_time(16, 4096) == pytest.approx(one.decode_time(8, 4096) + 2 * handoff, rel=1e-12)
    # micro-batching never costs more than one batch through the stages (session 32's pp 2 70B read 1.5 x T(8))
    assert two.decode_time(16, 4096) < phases(pp=2, micro=1).decode_time(16, 4096)


def test_a_batchs_prefill_fills_and_drains_the_pipeline():
    one, two = phases(), phases(pp=2, micro=2)
    chunks = two.prefill_chunks(16, 1024)
    assert chunks == one.prefill_chunks(8, 1024) * 2  # 16 x 1,024 tokens: two chunks of the 8,192 default
    total = one.kernel("prefill").total
    # 3 x (T(8 prompts in the step's chunks) / 2 + handoff(8)) with the 16-prompt step's chunk count
    expected = 3 * (total(8, 1024, chunks) / 2 + two._handoff(8))
    assert two.prefill_time(16, 1024) == pytest.approx(expected, rel=1e-12)
