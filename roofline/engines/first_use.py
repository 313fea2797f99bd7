"""A fresh server's first eager step at a new fused-MoE specialisation: the Triton kernel compiled just in time
(timing mechanism 12, roofline.engines.timing).

vLLM and SGLang run an unquantized MoE's routed experts through their Triton `fused_moe_kernel` (vLLM 0.24
model_executor/layers/fused_moe/fused_moe.py:293-330; SGLang 0.5.17 srt/layers/moe/fused_moe_triton). Triton compiles
a kernel once per set of constexprs and per "integer argument divisible by 16" key of its integer arguments
(triton runtime/jit.py specialisation). The constexprs come from the tuned config nearest the call's token count M
(try_get_optimal_moe_config: configs[min(keys, key=|k - M|)], keys the tuner's batch sizes below), and the integer
argument that moves with M is num_valid_tokens = M x top-k (EM moves with it in vLLM, and is always odd in SGLang).
So a call compiles its two launches (gate-up and down: different constexprs) the first time its
(config key, M x top-k divisible by 16) is seen, and never again in that process.

A server compiles at start what its start-up runs: every CUDA-graph capture size (decode batches; SGLang's prefill
graphs by tokens) and vLLM's profile run at max_num_batched_tokens. Captured steps replay graphs; an eager step (past
the largest capture size: EngineOverheads.eager) runs the kernel at its own M and may meet a new key. Measured alone
(run 18, validate/engines/jit_probe.py, notes 2026-11-30-vllm-h200-run18.md): the rule held call for call, a new key
cost 1.06-1.60 s (two compiles), EngineTiming.moe_jit_key_s; SGLang run 3's stall at its first odd eager batch past
256 read 1.95 s (2026-11-30-sglang-first-eager-stall.md). Steady state pays nothing: this is charged only when the
simulation starts from a fresh server (`simulate --cold-start`)."""

from __future__ import annotations

# the batch sizes vLLM's MoE tuner writes a config for (benchmarks/kernels/benchmark_moe.py's default list; every
# tuned file of vLLM 0.24, e.g. configs/E=128,N=768,device_name=NVIDIA_H200.json, and SGLang's copies)
MOE_CONFIG_KEYS = (1, 2, 4, 8, 16, 24, 32, 48, 64, 96, 128, 256, 512, 1024, 1536, 2048, 3072, 4096)


# Tuned configs that are the same tile compile as one kernel: where the engine's tuned file is known, each key's
# class (equal configs, equal class), in MOE_CONFIG_KEYS' order. (engine, experts, expert intermediate, GPU) ->
# classes. vLLM 0.24 configs/E=128,N=768,device_name=NVIDIA_H200.json (Qwen3-30B-A3B's layers): 4 and 32 share
# {16, 64, 128, 16, 4 warps, 2 stages}, 96 and 128 {16, 128, 128, 1, 4, 2}, 1024 and 4096 {128, 256, 64, 16, 8, 4},
# 1536, 2048 and 3072 {128, 256, 64, 1, 8, 4}; the rest are their own (run 19 found 4 new keys where distinct
# configs would have made 10: validate/notes/2026-11-30-vllm-h200-run18.md). Elsewhere every key is its own class.
TUNED_CLASSES = {
    ("vllm", 128, 768, "H200"): (1, 2, 4, 8, 16, 24, 4, 48, 64, 96, 96, 256, 512, 1024, 1536, 1536, 1536, 1024),
}


def moe_key(tokens: int, top_k: int, classes: tuple[int, ...] | None = None) -> tuple[int, bool]:
    """The fused-MoE kernel's compile key at `tokens` tokens: (the nearest tuned config's batch size, or its class
    in `classes` (TUNED_CLASSES), tokens x top-k divisible by 16); ties go to the smaller key, as min() over the
    ascending keys does."""
    i = min(range(len(MOE_CONFIG_KEYS)), key=lambda j: abs(MOE_CONFIG_KEYS[j] - tokens))
    return (classes or MOE_CONFIG_KEYS)[i], (tokens * top_k) % 16 == 0


class FirstUse:
    """The keys a server has compiled; `stall(tokens)` is the compile an eager step of `tokens` tokens pays (and
    records, with the step's tokens in `tokens`): `key_s` when its key is new, else 0."""

    def __init__(self, top_k: int, key_s: float, started: tuple[int, ...],
                 classes: tuple[int, ...] | None = None) -> None:
        self.top_k, self.key_s, self.classes = top_k, key_s, classes
        self.seen = {moe_key(m, top_k, classes) for m in started}
        self.stalls = 0
        self.tokens: list[int] = []  # the eager step that compiled each new key, in order

    def stall(self, tokens: int) -> float:
        key = moe_key(tokens, self.top_k, self.classes)
        if key in self.seen:
            return 0.0
        self.seen.add(key)
        self.stalls += 1
        self.tokens.append(tokens)
        return self.key_s


def first_use(model, engine_name: str, capture_sizes: tuple[int, ...], prefill_capture_sizes: tuple[int, ...],
              max_num_batched_tokens: int, key_s: float, expert_dtype: str, hardware_name: str = "",
              tp: int = 1, served: tuple[int, ...] = ()) -> FirstUse | None:
    """A fresh server's compile state, or None where nothing compiles on first use: a model without routed experts,
    a quantized MoE (another backend: timing.EAGER_MOE_DTYPES), an engine other than vLLM / SGLang (TensorRT-LLM and
    llama.cpp compile ahead of time), or no measured compile time. `served`: the tokens of eager steps the same
    process ran in earlier traffic (a FirstUse's `tokens`): their keys are compiled too, Triton's kernel cache
    living as long as the process."""
    from roofline.engines.timing import EAGER_MOE_DTYPES

    if model.moe is None or engine_name not in ("vllm", "sglang") or not key_s or expert_dtype not in EAGER_MOE_DTYPES:
        return None
    started = tuple(capture_sizes) + tuple(prefill_capture_sizes) + tuple(served)
    if engine_name == "vllm":  # the memory profile run at the step budget (gpu_worker.determine_available_memory)
        started += (max_num_batched_tokens,)
    # the file vLLM reads: E experts, N = the expert intermediate width per rank (fused_moe.py get_config_file_name)
    classes = TUNED_CLASSES.get((engine_name, model.moe.num_experts, model.moe.expert_intermediate_size // tp,
                                 hardware_name))
    return FirstUse(model.moe.experts_per_token, key_s, started, classes)
