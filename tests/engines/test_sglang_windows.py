"""SGLang runs a model's sliding window only where its implementation of the architecture takes one (sglang 0.5.17
srt/models/llama.py:209-217: LlamaAttention builds RadixAttention without sliding_window_size, and
srt/models/mistral.py:30 MistralForCausalLM is LlamaForCausalLM): Mistral-7B-v0.1's 4,096-token window is not run,
so every request keeps its whole context in SGLang's pool and every decode step reads it; Gemma-2's windows are
(srt/models/gemma2.py:181)."""

from roofline.catalogue.loading import validate
from roofline.catalogue.store import load_hardware, load_model
from roofline.engines import as_run
from roofline.methods.registry import parse_method
from roofline.planner.plan import plan_method
from roofline.specs import Workload

# Mistral-7B-v0.1 (its config.json): 32 layers x 8 KV heads x 128 x (K, V) x 2 B = 131,072 B a token
MISTRAL_TOKEN_BYTES = 32 * 8 * 128 * 2 * 2


def plan(model: str, engine: str, context: int) -> dict:
    w = validate(Workload, {"batch": 16, "context_tokens": context, "engine": engine}, "workload")
    return plan_method(load_model(model), load_hardware("H200"), w, parse_method("bf16")).as_dict()


def test_mistral_keeps_its_whole_context_under_sglang_and_its_window_under_vllm():
    sglang, vllm = plan("Mistral-7B-v0.1", "sglang", 8192), plan("Mistral-7B-v0.1", "vllm", 8192)
    assert sglang["memory"]["kv_parts_bytes"]["data"] == 16 * 8192 * MISTRAL_TOKEN_BYTES
    assert vllm["memory"]["kv_parts_bytes"]["data"] == 16 * 4096 * MISTRAL_TOKEN_BYTES  # the window
    assert any("takes no window" in w for w in sglang["warnings"])
    assert not any("takes no window" in w for w in vllm["warnings"])


def test_sglangs_mistral_step_reads_the_whole_context():
    """Past the window, vLLM's step stops growing with the context; SGLang's keeps growing by the KV bytes of the
    extra tokens (16 sequences x 4,096 tokens x 131,072 B = 8.6 GB: at least 1.5 ms on the H200's 4.8 TB/s)."""
    grow = plan("Mistral-7B-v0.1", "sglang", 12288)["tpot_s"] - plan("Mistral-7B-v0.1", "sglang", 8192)["tpot_s"]
    assert grow > 16 * 4096 * MISTRAL_TOKEN_BYTES / 4.8e12
    flat = plan("Mistral-7B-v0.1", "vllm", 12288)["tpot_s"] - plan("Mistral-7B-v0.1", "vllm", 8192)["tpot_s"]
    assert flat < grow / 10


def test_windows_sglang_takes_stay():
    gemma = load_model("Gemma-2-9B")
    assert as_run("sglang", gemma) is gemma
    mistral = load_model("Mistral-7B-v0.1")
    assert {a.kind for a in as_run("sglang", mistral).attention} == {"full"}
    assert as_run("vllm", mistral) is mistral


def test_one_process_planning_two_engines_gets_each_its_own():
    """The planner cache is keyed by the engine and host speed: a vLLM plan first must not answer for SGLang."""
    first = plan("Llama-3.1-8B", "vllm", 2048)
    second = plan("Llama-3.1-8B", "sglang", 2048)
    assert first["engine_step"]["engine"] == "vllm" and second["engine_step"]["engine"] == "sglang"
    assert second["engine_step"]["host_s"] != first["engine_step"]["host_s"]
