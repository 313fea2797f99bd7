"""The 'ideal' profile: the planner's own memory model (roofline.planner.memory), as a capacity report.

Budget: total x utilization - weights - activations at the prefill peak - runtime reserve; KV bytes per
sequence from the model's exact accounting (sliding and chunked layers capped at their window, recurrent
state per sequence, the DSA indexer) on this rank's share of KV heads, rounded up to pages of 16 tokens.
"""

from __future__ import annotations

from roofline.accounting import kv_bytes, kv_bytes_per_token, state_bytes_per_sequence
from roofline.costmodel.blocks import Shard
from roofline.engines.base import BudgetParts, Capacity, EngineOptions, largest_fitting, refuse
from roofline.specs import Model

KV_DTYPES = {"auto": "bf16", "bf16": "bf16", "fp16": "fp16", "fp8": "fp8"}
DEFAULT_UTILIZATION = 0.90
PAGE = 16


def budget(parts: BudgetParts, opts: EngineOptions) -> float:
    """total x utilization - weights - activations - runtime reserve (planner.memory.memory_budget)."""
    util = opts.gpu_memory_utilization or DEFAULT_UTILIZATION
    return parts.total * util - parts.weights - parts.activations - parts.non_torch


def capacity(model: Model, opts: EngineOptions, pool: float, rules: list[str]) -> Capacity:
    """Sequences of max_model_len that fit in `pool` bytes per rank, pages of 16 tokens."""
    if opts.kv_cache_dtype not in KV_DTYPES:
        raise refuse("--kv-cache-dtype", f"ideal takes {', '.join(KV_DTYPES)}")
    dtype = KV_DTYPES[opts.kv_cache_dtype]
    try:
        shard = Shard.of(model, opts.tp)
    except ValueError as err:
        raise refuse("--tp", str(err)) from None
    stage = -(-model.num_layers // opts.pp) / model.num_layers
    share = shard.kv_share * stage
    # recurrent state: its own head split (accounting.state_heads_per_rank), not the KV heads'
    state = float(state_bytes_per_sequence(model)) * (float(shard.state_fraction) * stage - share)
    page = opts.block_size or PAGE

    def need(n: int) -> float:
        return float(kv_bytes(model, dtype, -(-n // page) * page)) * share + state

    length = opts.model_len(model)
    per_token = float(kv_bytes_per_token(model, dtype)) * share
    concurrency = max(pool, 0) / need(length)
    state_share = float(shard.state_fraction) * stage
    held = f"KV x this rank's share {share:.4g}" + (f", recurrent state x its own share {state_share:.4g}"
                                                     if state_bytes_per_sequence(model) else "")
    rules.append(f"ideal: exact {dtype} cache bytes per sequence, {held}, pages of {page} "
                 "(planner.memory.sequence_kv_expr)")
    tokens = int(max(pool, 0) // per_token) // page * page if per_token else int(concurrency * length)
    return Capacity(engine="ideal", bytes_per_token=per_token, kv_pool_bytes=pool, pool_tokens=tokens,
                    max_concurrency=concurrency * opts.dp, fits=concurrency >= 1,
                    max_model_len_that_fits=largest_fitting(lambda n: need(n) <= pool), rules=rules,
                    details={"page_size": page, "max_model_len": length})
