"""`roofline plan`: for each method on (model, hardware, workload) — max context at the batch, max batch at
the context, the memory breakdown, TTFT, TPOT (at the context and averaged over the generation), tokens/s
at the batch and at max batch, bounds, and the method's own limits."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import sympy as sp

from roofline.kv.layout import PARTS
from roofline.methods import MethodConfig, build_cache
from roofline.planner.memory import MemoryBudget, memory_budget, sequence_kv_expr
from roofline.planner.phases import PhaseModel
from roofline.specs import Hardware, Model, Workload
from roofline.units import L, window_occupancy
from roofline.units import lambdify as compile_expr

MAX_SEARCH_CONTEXT = 1 << 34  # past this a cache that still fits is reported as unbounded (windows, eviction)

DEFAULT_SCENARIO = {"model": "Llama-3.1-8B", "hardware": "H100-SXM", "batch": 16, "context_tokens": 32_768,
                    "generated_tokens": 1024}


@dataclass
class MethodPlan:
    method: str
    family: str
    data: dict[str, Any] = field(default_factory=dict)
    warnings: list[str] = field(default_factory=list)

    def as_dict(self) -> dict[str, Any]:
        return {"method": self.method, "family": self.family, **self.data, "warnings": self.warnings}


def largest_true(predicate, lo: int, hi: int) -> int:
    """Largest integer n in [lo, hi] with predicate(n), for a predicate true up to some n then false;
    lo - 1 if predicate(lo) is false."""
    if not predicate(lo):
        return lo - 1
    while lo < hi:
        mid = (lo + hi + 1) // 2
        lo, hi = (mid, hi) if predicate(mid) else (lo, mid - 1)
    return lo


def _kv_parts(model: Model, workload: Workload, cache, context: int, seqs: int) -> dict[str, float]:
    """Per-GPU KV bytes of `seqs` sequences at `context`, by part (reserved, paged)."""
    from roofline.costmodel.blocks import Shard

    share = float(Shard.of(model, workload.tp).kv_fraction) * -(-model.num_layers // workload.pp) / model.num_layers
    paged = -(-context // workload.page_tokens) * workload.page_tokens
    parts = {p: float(v.subs(L, paged)) * share * seqs for p, v in cache.reserved_parts().items() if p in PARTS}
    workspace = float(window_occupancy(cache.workspace_bytes, "peak").subs(L, paged)) * share * seqs
    if workspace:
        parts["workspace"] = workspace
    return {k: v for k, v in parts.items() if v}


def _capacity(model, workload, cache, budget: MemoryBudget, batch: int, context: int) -> dict[str, Any]:
    per_seq = compile_expr([L], sequence_kv_expr(model, workload, cache))
    pool = budget.kv_pool
    need = float(per_seq(context))
    max_batch = int(pool // need) if pool > 0 and need > 0 else 0
    fits = lambda n: batch * float(per_seq(n)) <= pool  # noqa: E731
    if pool <= 0 or not fits(1):
        max_context = 0
    elif fits(MAX_SEARCH_CONTEXT):
        max_context = math.inf
    else:
        max_context = largest_true(fits, 1, MAX_SEARCH_CONTEXT)
    return {"kv_bytes_per_sequence": need, "kv_bytes": need * batch, "max_batch": max_batch,
            "max_context": max_context, "fits": max_batch >= batch}


def _method_limits(model, hardware, workload, method: MethodConfig, cache, context) -> dict[str, Any]:
    limits: dict[str, Any] = {"effective_bits": float(cache.effective_bits().subs(L, context)),
                              "asymptotic_bits": float(cache.asymptotic_bits())}
    if method.method == "xquant":
        from roofline.analysis.limits import remat_limit

        limits["remat_limit_tokens"] = remat_limit(model, hardware, method.bits, workload.batch,
                                                   workload.compute_dtype)["limit_tokens"]
    if method.method == "aquakv":
        from roofline.methods.aquakv import predictor_overhead_ratio

        limits["predictor_overhead_ratio"] = float(predictor_overhead_ratio(model, method, context))
    if method.method == "zack" or getattr(method, "reduce", None) is not None:
        zack = method if method.method == "zack" else method.reduce
        limits["zack_decode_imbalance"] = zack.imbalance(model, workload.batch, hardware.sm_count)
    return limits


def plan_method(model: Model, hardware: Hardware, workload: Workload, method: MethodConfig) -> MethodPlan:
    """Everything `roofline plan` reports for one method."""
    cache = build_cache(method, model)
    budget = memory_budget(model, hardware, workload, cache)
    result = MethodPlan(method.label(), method.family)
    if budget.kv_pool <= 0:
        raise_no_room(model, hardware, workload, budget)
    b, ctx, prompt, gen = workload.batch, workload.context_tokens, workload.prompt, workload.generated_tokens
    capacity = _capacity(model, workload, cache, budget, b, ctx)
    phases = PhaseModel.build(model, hardware, workload, method)
    tpot = phases.decode_time(b, ctx)
    tpot_avg = phases.average_decode_time(b, prompt, gen) if gen else tpot
    ttft = phases.prefill_time(b, prompt)
    mb = capacity["max_batch"]
    tpot_max_batch = phases.decode_time(mb, ctx) if mb else math.inf
    zack = method if method.method == "zack" else getattr(method, "reduce", None)
    if zack is not None:  # ZACK's heterogeneous heads: the attention kernel's SM imbalance (§5.3)
        tpot, tpot_avg, tpot_max_batch = (t * _attention_slowdown(phases, zack, model, hardware, n, ctx)
                                          for t, n in ((tpot, b), (tpot_avg, b), (tpot_max_batch, max(mb, 1))))
    decode = phases.dominant("decode", b, ctx)
    result.data = {
        **capacity,
        "effective_bits": float(cache.effective_bits().subs(L, ctx)),
        "memory": {**budget.as_dict(), "kv_parts_bytes": _kv_parts(model, workload, cache, ctx, b)},
        "prefill_s": ttft, "ttft_s": ttft,
        "decode_step_s": tpot, "tpot_s": tpot, "tpot_avg_s": tpot_avg,
        "tokens_per_s": b / tpot, "tokens_per_s_max_batch": mb / tpot_max_batch if mb else 0.0,
        "decode": decode, "prefill": phases.dominant("prefill", b, prompt), "bound": decode["bound"],
        "limits": _method_limits(model, hardware, workload, method, cache, ctx),
    }
    if not capacity["fits"]:
        result.warnings.append(f"batch {b} at context {ctx:,} does not fit: at most {mb} sequences")
    if ctx > model.max_position_embeddings:
        result.warnings.append(f"context {ctx:,} exceeds {model.name}'s max_position_embeddings "
                               f"{model.max_position_embeddings:,}")
    mc = capacity["max_context"]
    if mc != math.inf and mc > model.max_position_embeddings:
        result.warnings.append(f"max context {mc:,} is beyond the model's {model.max_position_embeddings:,} positions")
    return result


def _attention_slowdown(phases: PhaseModel, zack, model, hardware, batch, context) -> float:
    """Whole-step factor from ZACK's attention imbalance: the attention op's time x (makespan / ideal)."""
    from roofline.units import B

    imbalance = zack.imbalance(model, batch, hardware.sm_count)
    if imbalance <= 1:
        return 1.0
    rows = phases.roofline.evaluate(phases.decode, {B: batch, L: context})
    total = sum(r["count"] * r["time_s"] for r in rows)
    attn = sum(r["count"] * r["time_s"] for r in rows if r["name"] in ("attention", "attn_qk", "attn_pv"))
    return (total + attn * (imbalance - 1)) / total


def raise_no_room(model, hardware, workload, budget: MemoryBudget) -> None:
    from roofline.errors import RooflineError

    raise RooflineError(
        f"model: {model.name} does not fit on {hardware.name} with tp={workload.tp}, pp={workload.pp}: "
        f"weights {budget.weights / 2**30:.1f} GiB + reserve {budget.reserve / 2**30:.1f} GiB + activations "
        f"{budget.activations / 2**30:.1f} GiB exceed the usable {budget.usable / 2**30:.1f} GiB (not even context 1)"
    )


def plan(model: Model, hardware: Hardware, workload: Workload, methods: list[MethodConfig]) -> dict[str, Any]:
    """Plans for several methods on one scenario."""
    results = [plan_method(model, hardware, workload, m).as_dict() for m in methods]
    return {"model": model.name, "hardware": hardware.name, "workload": workload.model_dump(mode="json"),
            "gpus": workload.gpus, "ceilings": ceilings_label(hardware), "results": results}


def ceilings_label(hardware: Hardware) -> str:
    """Which ceilings the step times use: the measured section (device, date, source) or the datasheet."""
    m = hardware.measured
    if m is None:
        return "datasheet (no measured section for this device)"
    return f"measured on {m.device} ({m.date}, {m.source})"


def max_context_by_bits(model, hardware, workload, method: MethodConfig, bits_values) -> np.ndarray:
    """Max context at the workload's batch for each bit-width (the method's bits symbol substituted)."""
    from roofline.units import BITS

    cache = build_cache(method, model, bits=BITS)
    budget = memory_budget(model, hardware, workload, cache)
    expr = sequence_kv_expr(model, workload, cache)
    out = []
    for value in bits_values:
        per_seq = compile_expr([L], expr.subs(BITS, sp.nsimplify(value)))
        fits = lambda n: workload.batch * float(per_seq(n)) <= budget.kv_pool  # noqa: E731, B023
        out.append(largest_true(fits, 1, MAX_SEARCH_CONTEXT) if budget.kv_pool > 0 else 0)
    return np.asarray(out, dtype=float)
