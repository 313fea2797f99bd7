"""Inversions of the plan: the largest context or batch under a TPOT target, the bit-width a context
needs, and the context where two methods' decode steps cross.

Memory per sequence is linear in the bit-width at a fixed context, so the bits that fit are solved
symbolically; TPOT is monotone in L and B (residual windows at their mean fill), so the SLA inversions
bisect the compiled expression; a crossover is a sign change of the difference of two steps.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import sympy as sp

from roofline.costmodel import Roofline, build_graph
from roofline.methods import MethodConfig, build_cache
from roofline.planner.memory import memory_budget, sequence_kv_expr
from roofline.planner.plan import MAX_SEARCH_CONTEXT, largest_true
from roofline.specs import Hardware, Model, Workload
from roofline.units import BITS, B, L
from roofline.units import lambdify as compile_expr


def _decode_fn(model, hardware, workload, method):
    graph = build_graph(model, method, "decode", tp=workload.tp, weight_dtype=workload.weight_dtype,
                        compute_dtype=workload.compute_dtype, occupancy="mean")
    return compile_expr([B, L], Roofline(hardware, tp=workload.tp).time(graph))


def max_context_for_tpot(model: Model, hardware: Hardware, workload: Workload, method: MethodConfig,
                         target_s: float) -> float:
    """Largest L with decode step(B, L) <= target (0 if even L = 1 misses; inf if it never does)."""
    step = _decode_fn(model, hardware, workload, method)
    ok = lambda n: float(step(workload.batch, n)) <= target_s  # noqa: E731
    if ok(MAX_SEARCH_CONTEXT):
        return math.inf
    return largest_true(ok, 1, MAX_SEARCH_CONTEXT)


def max_batch_for_tpot(model: Model, hardware: Hardware, workload: Workload, method: MethodConfig,
                       target_s: float, limit: int = 1 << 20) -> int:
    """Largest B with decode step(B, L) <= target at the workload's context (memory not considered)."""
    step = _decode_fn(model, hardware, workload, method)
    return largest_true(lambda n: float(step(n, workload.context_tokens)) <= target_s, 1, limit)


def bits_to_fit(model: Model, hardware: Hardware, workload: Workload, method: MethodConfig) -> dict[str, Any]:
    """The highest bit-width of `method` whose cache still holds the batch at the context: solve
    B x kv_per_sequence(L, bits) = kv_pool for bits (linear), symbolically."""
    cache = build_cache(method, model, bits=BITS)
    budget = memory_budget(model, hardware, workload, cache)
    need = workload.batch * sequence_kv_expr(model, workload, cache).subs(L, workload.context_tokens)
    solutions = sp.solve(sp.Eq(need, sp.nsimplify(budget.kv_pool)), BITS)
    # no positive root: even codes of ~0 bits do not fit (full-precision windows and metadata alone exceed)
    bound = float(solutions[0]) if solutions else 0.0
    return {"method": method.label(), "max_bits": bound, "fits_at_configured_bits": float(
        need.subs(BITS, getattr(method, "bits", getattr(method, "k_bits", 16)))) <= budget.kv_pool,
        "kv_pool_bytes": budget.kv_pool, "expression": str(sp.nsimplify(need))}


def crossover_context(model: Model, hardware: Hardware, workload: Workload, first: MethodConfig,
                      second: MethodConfig, hi: int = 1 << 22) -> list[int]:
    """Contexts where the two methods' decode steps swap order (e.g. where XQuant's remat FLOPs stop
    paying against KIVI at the same bits): sign changes on a log grid, refined by bisection."""
    f1, f2 = _decode_fn(model, hardware, workload, first), _decode_fn(model, hardware, workload, second)
    diff = lambda n: float(f1(workload.batch, n)) - float(f2(workload.batch, n))  # noqa: E731
    grid = np.unique(np.geomspace(1, hi, 200).astype(np.int64))
    signs = np.sign([diff(int(n)) for n in grid])
    out = []
    for i in np.nonzero(signs[1:] != signs[:-1])[0]:
        lo, top = int(grid[i]), int(grid[i + 1])
        side = signs[i]
        out.append(largest_true(lambda n: np.sign(diff(n)) == side, lo, top) + 1)  # noqa: B023
    return out
