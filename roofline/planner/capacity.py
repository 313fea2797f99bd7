"""How much fits: KV bytes per sequence on the fullest GPU, its parts, the largest batch at a context and the
largest context at a batch, against the memory budget's KV pool.

The per-sequence bytes are the method's cache expressions (planner.memory.sequence_kv_expr), compiled once per
(model, method, tp, pp, page size) into numeric functions of L (roofline.numbers.codegen, cached by content); the
searches run on those functions, each with an iteration bound.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from functools import cached_property
from typing import Any

from roofline.costmodel.blocks import Shard
from roofline.costmodel.graph import method_cache
from roofline.kv.layout import PARTS
from roofline.lazy import np, sp
from roofline.methods import MethodConfig, build_cache
from roofline.numbers import codegen
from roofline.planner.memory import MemoryBudget, memory_budget, sequence_kv_expr
from roofline.specs import Hardware, Model, Workload
from roofline.units import lambdify as compile_expr
from roofline.units import window_occupancy

MAX_SEARCH_CONTEXT = 1 << 34  # past this a cache that still fits is reported as unbounded (windows, eviction)


def largest_true(predicate: Callable[[int], bool], lo: int, hi: int) -> int:
    """Largest integer n in [lo, hi] with predicate(n), for a predicate true up to some n then false;
    lo - 1 if predicate(lo) is false. At most log2(hi - lo) + 1 evaluations."""
    if not predicate(lo):
        return lo - 1
    while lo < hi:
        mid = (lo + hi + 1) // 2
        lo, hi = (mid, hi) if predicate(mid) else (lo, mid - 1)
    return lo


def _largest_fitting(kernel: CapacityKernel, fits: Callable[[int], bool], share: float) -> int:
    """largest_true(fits, 1, MAX_SEARCH_CONTEXT), started from where the cache's long-context slope says the
    answer lies (per_sequence is non-decreasing and affine past its windows, up to page rounding). The line
    through two page-aligned points meets the budget inside the answer's page, so the page start below the guess
    is the answer when it fits and one token more does not (two evaluations); otherwise bracketed by doubling
    steps around the guess, then bisected: a dozen evaluations instead of 35, same answer."""
    lo, hi = 1 << 20, 1 << 21
    at_lo, at_hi = kernel.anchors
    slope = (at_hi - at_lo) / (hi - lo)
    if slope <= 0:
        return largest_true(fits, 1, MAX_SEARCH_CONTEXT)
    guess = int(min(max((share - at_lo) / slope + lo, 1), MAX_SEARCH_CONTEXT))
    aligned = guess - guess % kernel.page
    if aligned >= 1 and fits(aligned) and not fits(aligned + 1):
        return aligned
    step = 64
    if fits(guess):
        low, high = guess, min(guess + step, MAX_SEARCH_CONTEXT)
        while high < MAX_SEARCH_CONTEXT and fits(high):
            low, step = high, step * 2
            high = min(high + step, MAX_SEARCH_CONTEXT)
        return largest_true(fits, low, high)
    low, high = max(guess - step, 1), guess - 1
    while low > 1 and not fits(low):
        high, step = low - 1, step * 2
        low = max(low - step, 1)
    return largest_true(fits, low, high)


@dataclass(frozen=True)
class CapacityKernel:
    """Compiled memory side of one (model, method, tp, pp, page size): functions of the context L."""

    per_sequence: Callable  # L -> KV bytes of one sequence on the fullest GPU (pages, head and layer share)
    parts: Callable  # L (already paged) -> [bytes per part of PARTS, workspace] of one sequence, whole model
    effective_bits: Callable  # L -> bits per cached element, everything included
    asymptotic_bits: float
    fixed_total: float  # method parameters (predictors, SVD factors, codebooks), whole model
    heads: float  # this GPU's share of the KV heads
    share: float  # ... times its share of the layers (pipeline stage)
    state_share: float = 1.0  # this GPU's share of the recurrent state times its share of the layers
    page: int = 1  # tokens per KV page (per_sequence rounds L up to it)

    @cached_property
    def anchors(self) -> tuple[float, float]:
        """per_sequence at 2^20 and 2^21 tokens (page-aligned): the long-context line the searches start from."""
        return float(self.per_sequence(1 << 20)), float(self.per_sequence(1 << 21))

    @cached_property
    def ends(self) -> tuple[float, float]:
        """per_sequence at 1 token and at MAX_SEARCH_CONTEXT: nothing fits, or the cache stops growing."""
        return float(self.per_sequence(1)), float(self.per_sequence(MAX_SEARCH_CONTEXT))

    def kv_parts(self, context: int, seqs: int, page_tokens: int) -> dict[str, float]:
        """Per-GPU KV bytes of `seqs` sequences at `context`, by part (reserved, paged); the workspace (one layer's
        scratch, memory.sequence_kv_expr) is whole on every pipeline stage."""
        paged = -(-context // page_tokens) * page_tokens
        *parts, workspace = self.parts(paged)
        out = {p: float(v) * (self.state_share if p == "state" else self.share) * seqs
               for p, v in zip(PARTS, parts, strict=True)}
        out["workspace"] = float(workspace) * self.heads * seqs
        return {k: v for k, v in out.items() if v}


def capacity_kernel(model: Model, workload: Workload, method: MethodConfig, flavour: str = "scalar") -> CapacityKernel:
    """The compiled memory side (cached by content; the method's cache is built only on a miss)."""
    shard = Shard.of(model, workload.tp)
    heads, stage = shard.kv_share, -(-model.num_layers // workload.pp) / model.num_layers
    share, state_share = heads * stage, float(shard.state_fraction) * stage

    def build():
        from roofline.units import L

        cache = method_cache(method, model)
        reserved = cache.reserved_parts()
        parts = [reserved.get(p, sp.Integer(0)) for p in PARTS] + [window_occupancy(cache.workspace_bytes, "peak")]
        exprs = {"per_sequence": sequence_kv_expr(model, workload, cache), "parts": parts,
                 "effective_bits": cache.effective_bits()}
        meta = {"asymptotic_bits": float(cache.asymptotic_bits()), "fixed_total": float(cache.fixed_total)}
        return [L], exprs, meta

    key = codegen.content_key("capacity", model, method, workload.tp, workload.pp, workload.page_tokens)
    fns, meta = codegen.compiled(key, build, flavour)
    return CapacityKernel(fns["per_sequence"], fns["parts"], fns["effective_bits"], meta["asymptotic_bits"],
                          meta["fixed_total"], heads, share, state_share, workload.page_tokens)


def capacity(kernel: CapacityKernel, budget: MemoryBudget, batch: int, context: int) -> dict[str, Any]:
    """Max batch at `context`, max context at `batch` (inf when the cache stops growing), and whether it fits."""
    pool = budget.kv_pool
    need = float(kernel.per_sequence(context))
    max_batch = int(pool // need) if pool > 0 and need > 0 else 0
    fits = lambda n: batch * float(kernel.per_sequence(n)) <= pool  # noqa: E731
    at_one, at_max = kernel.ends
    if pool <= 0 or not batch * at_one <= pool:
        max_context = 0
    elif batch * at_max <= pool:
        max_context = math.inf
    else:
        max_context = _largest_fitting(kernel, fits, pool / batch)
    return {"kv_bytes_per_sequence": need, "kv_bytes": need * batch, "max_batch": max_batch,
            "max_context": max_context, "fits": max_batch >= batch}


def max_context_by_bits(model: Model, hardware: Hardware, workload: Workload, method: MethodConfig,
                        bits_values) -> np.ndarray:
    """Max context at the workload's batch for each bit-width (the method's bits symbol substituted)."""
    from roofline.units import BITS, L
    cache = build_cache(method, model, bits=BITS)
    budget = memory_budget(model, hardware, workload, cache)
    expr = sequence_kv_expr(model, workload, cache)
    out = []
    for value in bits_values:
        per_seq = compile_expr([L], expr.subs(BITS, sp.nsimplify(value)))
        fits = lambda n: workload.batch * float(per_seq(n)) <= budget.kv_pool  # noqa: E731, B023
        out.append(largest_true(fits, 1, MAX_SEARCH_CONTEXT) if budget.kv_pool > 0 else 0)
    return np.asarray(out, dtype=float)


# the plan's rows whose cache vLLM itself stores (its --kv-cache-dtype), the others it does not run
VLLM_CACHES = {"bf16": "auto", "fp16": "float16", "fp8": "fp8"}


def engine_sequences(model: Model, workload: Workload, label: str, pool: float, context: int) -> dict | None:
    """Under --engine vllm, for a row whose cache vLLM stores (VLLM_CACHES) and a model with sliding or chunked
    layers: the requests of `context` tokens vLLM runs at once in this pool (engines.vllm.sequences_at_once: running
    ones hold their window, the last is admitted with its prompt's blocks free, each windowed group capped at
    window + max_num_batched_tokens) and the 'Maximum concurrency' its start-up log gives (every request at that
    cap); None elsewhere (no window: the plan's own max batch is the engine's floor of it)."""
    from roofline.engines import EngineOptions
    from roofline.engines import capacity as engine_capacity
    from roofline.errors import SpecError

    if workload.engine != "vllm" or label not in VLLM_CACHES or pool <= 0:
        return None
    if not any(a.kind in ("sliding", "chunked") for a in model.attention):
        return None
    options = EngineOptions(tp=workload.tp, pp=workload.pp, kv_cache_dtype=VLLM_CACHES[label], max_model_len=context,
                            kv_memory_bytes=pool, max_num_batched_tokens=workload.prefill_chunk_tokens)
    try:
        got = engine_capacity(model, "vllm", options)
    except SpecError:  # a layout the engine model refuses: the plan keeps its own figure
        return None
    return {"sequences_at_once": got.details["sequences_at_once"], "logged_max_concurrency": got.max_concurrency}
