"""Memory conventions of the serving engines: how vLLM, SGLang, TensorRT-LLM and llama.cpp size the KV
cache and what they log at start-up, next to the planner's own ('ideal').

`capacity(model, engine, options, parts)` reproduces an engine's pool (pass options.kv_memory_bytes to start
from its logged budget line); `kv_pool(engine, parts, options)` is the budget rule alone, which the planner
uses in place of its own when a workload names an engine.
"""

from __future__ import annotations

from roofline.engines import ideal, llamacpp, sglang, trtllm, vllm
from roofline.engines.base import GIB, BudgetParts, Capacity, EngineOptions
from roofline.errors import SpecError
from roofline.specs import Model

ENGINES = ("ideal", "vllm", "sglang", "trtllm", "llamacpp")
# default allocation granularity in tokens: vLLM block 16, SGLang page 1, TensorRT-LLM tokens_per_block 32,
# llama.cpp cells padded to 256 (sources in each profile's docstring)
PAGE_TOKENS = {"ideal": 16, "vllm": 16, "sglang": 1, "trtllm": 32, "llamacpp": 256}
_PROFILES = {"ideal": ideal, "vllm": vllm, "sglang": sglang, "trtllm": trtllm, "llamacpp": llamacpp}
_BUDGET_RULES = {
    "ideal": "ideal: pool = total x utilization - weights - activations - reserve (planner.memory)",
    "vllm": "vllm: avail = total x gpu_memory_utilization - weights - profiled activations - non-torch "
            "(gpu_worker.py@35d5cda determine_available_memory)",
    "sglang": "sglang: rest = total x mem_fraction_static - weights - non-torch (model_runner_kv_cache_mixin.py"
              "@001ccef profile_max_num_token)",
    "trtllm": "trtllm: avail = (total - weights - activations - non-torch) x free_gpu_memory_fraction "
              "(_torch/pyexecutor/_util.py@0004396 _cal_max_memory)",
    "llamacpp": "llamacpp: the cache follows n_ctx; room = total - weights - compute buffers (at n_ctx) - reserve",
}

__all__ = ["ENGINES", "GIB", "PAGE_TOKENS", "BudgetParts", "Capacity", "EngineOptions", "as_run", "capacity",
           "default_utilization", "kv_pool"]


def _profile(engine: str):
    if engine not in _PROFILES:
        raise SpecError(f"--engine: unknown engine {engine!r}; valid: {', '.join(ENGINES)}")
    return _PROFILES[engine]


def as_run(engine: str, model: Model) -> Model:
    """The model as `engine` runs it (SGLang: windows its implementation of the architecture does not take run over
    the whole context, sglang.as_run); the model itself for every other engine."""
    return sglang.as_run(model) if engine == "sglang" else model


def default_utilization(engine: str, total: float, tp: int = 1, pp: int = 1) -> float:
    """The memory fraction `engine` sizes its pool with when the user gives none (a workload's
    gpu_memory_utilization None): vLLM's release default (vllm.default_utilization), SGLang's mem_fraction_static
    rule by the GPU's memory (sglang.default_fraction), TensorRT-LLM's free_gpu_memory_fraction 0.9, and the
    planner's own 0.90 (ideal; llama.cpp sizes by what is left, the fraction only shows as usable memory)."""
    if engine == "vllm":
        return vllm.default_utilization()
    if engine == "sglang":
        return sglang.default_fraction(total, tp, pp)
    return trtllm.DEFAULT_FRACTION if engine == "trtllm" else ideal.DEFAULT_UTILIZATION


def kv_pool(engine: str, parts: BudgetParts, options: EngineOptions, model: Model | None = None) -> float:
    """Bytes per rank the engine gives the KV cache (llama.cpp: the room left for it beside its compute buffers at
    options' n_ctx, llamacpp.compute_budget, which needs `model`; tp > 1 refused, llamacpp's docstring)."""
    profile = _profile(engine)
    if engine == "llamacpp":
        llamacpp.refuse_tp(options.tp)
        if model is None:
            raise SpecError("--engine: llamacpp's room needs the model (its compute buffers follow its shapes)")
        compute = llamacpp.compute_budget(model, options, options.model_len(model), parts.activations)
        return parts.total - parts.weights - compute - parts.non_torch
    return profile.budget(parts, options)


def capacity(model: Model, engine: str, options: EngineOptions, parts: BudgetParts | None = None) -> Capacity:
    """The engine's KV pool, the tokens it logs, concurrency at max_model_len and the longest request that
    fits; options.kv_memory_bytes (e.g. a logged "Available KV cache memory") replaces the budget."""
    profile = _profile(engine)
    rules: list[str] = []
    if options.kv_memory_bytes is not None:
        pool = options.kv_memory_bytes
        rules.append(f"budget: {pool / GIB:g} GiB given (--kv-memory-gib / --kv-cache-memory-bytes) replaces the "
                     "engine's budget rule")
    elif parts is not None:
        pool = kv_pool(engine, parts, options, model)
        rules.append(_BUDGET_RULES[engine])
    else:
        raise SpecError("--kv-memory-gib: needed when no hardware is given to estimate the budget")
    if model.linear_parallel and engine != "ideal":
        raise SpecError(f"--engine: {engine}'s layout of a parallel attention + Mamba hybrid ({model.name}) is not "
                        "modelled; use --engine ideal")
    if engine == "llamacpp":  # its compute buffers grow with n_ctx (the KQ mask): the search re-budgets them
        return llamacpp.capacity(model, options, pool, rules,
                                 None if options.kv_memory_bytes is not None or parts is None else parts.activations)
    return profile.capacity(model, options, pool, rules)
