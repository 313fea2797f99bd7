"""TensorRT-LLM: how the KV cache manager sizes the paged pool ("max tokens in paged KV cache").

Rules, each read from TensorRT-LLM's source (file @ commit, function; research notes in docs/engines.md):
- budget (PyTorch backend): avail = (device total - peak memory of the profiling run + temporary KV) x
  free_gpu_memory_fraction (default 0.9) (tensorrt_llm/_torch/pyexecutor/_util.py@0004396,
  KvCacheCreator._cal_max_memory; get_fraction_from_executor_config). The C++ runtime likewise takes
  free memory x fraction (cpp/tensorrt_llm/batch_manager/kvCacheManager.cpp calculateFreeMemBytes).
  Note: the fraction applies to what is left after weights and activations, unlike vLLM's.
- bytes per token: 2 x H_kv/tp (>= 1) x head_dim x bytes x layers; MLA kv_factor 1 with head_dim
  kv_lora_rank + qk_rope_head_dim, replicated; fp8 KV 1 byte (get_cache_size_per_token, 2025 _util.py).
  Every attention layer counts at full context (sliding-window layers included: VSWA pools are split by
  calculateWindowSizeToShare, not modelled here).
- tokens: max_tokens = floor(avail / bytes per token), blocks = ceil(max_tokens / tokens_per_block), logged
  tokens = blocks x tokens_per_block, i.e. rounded up (BaseKVCacheManager::calculateMaxNumBlocks,
  KVCacheManager::allocatePools; issue TRT-LLM#224, maintainer: "rounded up to the next multiple of block
  size"). tokens_per_block default 32 (llm_args.py KvCacheConfig); TensorRT-engine builds used 64.
- Mamba hybrids use CppMambaHybridCacheManager (not analysed): refused.
"""

from __future__ import annotations

from roofline.engines.base import (
    BudgetParts,
    Capacity,
    EngineOptions,
    check_heads,
    kv_heads_per_rank,
    largest_fitting,
    model_dtype_bytes,
    refuse,
    stage_kinds,
)
from roofline.specs import Model
from roofline.units import ceildiv

KV_DTYPES = {"auto": None, "fp8": 1}
DEFAULT_FRACTION = 0.9
DEFAULT_TOKENS_PER_BLOCK = 32
SRC = "cpp/tensorrt_llm/batch_manager/kvCacheManager.cpp"


def budget(parts: BudgetParts, opts: EngineOptions) -> float:
    """(total - weights - activations - non-torch) x free_gpu_memory_fraction."""
    fraction = opts.gpu_memory_utilization or DEFAULT_FRACTION
    return (parts.total - parts.weights - parts.activations - parts.non_torch) * fraction


def _token_bytes(model: Model, opts: EngineOptions, rules: list[str]) -> float:
    if opts.kv_cache_dtype not in KV_DTYPES:
        raise refuse("--kv-cache-dtype", f"TensorRT-LLM has no KV dtype {opts.kv_cache_dtype!r}; valid: auto, fp8")
    b = KV_DTYPES[opts.kv_cache_dtype] or model_dtype_bytes()
    if model.mla is not None:
        width = model.mla.kv_lora_rank + model.mla.qk_rope_head_dim
        rules.append(f"trtllm: MLA kv_factor 1, head_dim {width} x {b} B, replicated per rank "
                     "(_util.py get_cache_size_per_token)")
        return width * b
    heads = kv_heads_per_rank(model, opts.tp)
    rules.append(f"trtllm: 2 x {heads} KV heads/rank x {model.head_dim} x {b} B per layer "
                 "(_util.py get_cache_size_per_token)")
    return 2 * heads * model.head_dim * b


def capacity(model: Model, opts: EngineOptions, avail: float, rules: list[str]) -> Capacity:
    """TensorRT-LLM's paged pool for `avail` bytes (already times the fraction) per rank."""
    check_heads(model, opts.tp, "TensorRT-LLM")
    if model.linear_attention is not None:
        raise refuse("--engine", "trtllm: hybrid recurrent models use CppMambaHybridCacheManager, not modelled")
    if model.sparse_attention is not None:
        raise refuse("--engine", "trtllm: the DeepSeek-V3.2 indexer cache layout was not read; not modelled")
    tpb = opts.block_size or DEFAULT_TOKENS_PER_BLOCK
    if tpb & (tpb - 1):
        raise refuse("--block-size", f"TensorRT-LLM tokens_per_block must be a power of two, got {tpb}")
    layers = sum(stage_kinds(model, opts.pp).values())
    per_token = _token_bytes(model, opts, rules) * layers
    if any(k != "full" for k, _ in stage_kinds(model, opts.pp)):
        rules.append("trtllm: windowed layers counted at full context (kv_size_per_token; VSWA split not modelled)")
    max_tokens = int(max(avail, 0) // per_token)
    blocks = ceildiv(max_tokens, tpb)
    rules.append(f"trtllm: blocks = ceil(floor(avail / {per_token:,.0f} B) / {tpb}); logged tokens = blocks x "
                 f"{tpb} ({SRC} calculateMaxNumBlocks, allocatePools)")
    length = opts.model_len(model)
    per_request = ceildiv(length, tpb)
    return Capacity(
        engine="trtllm", bytes_per_token=per_token, kv_pool_bytes=avail, pool_tokens=blocks * tpb,
        max_concurrency=blocks / per_request * opts.dp, fits=per_request <= blocks,
        max_model_len_that_fits=largest_fitting(lambda n: ceildiv(n, tpb) <= blocks), rules=rules,
        details={"tokens_per_block": tpb, "blocks": blocks, "max_model_len": length})
