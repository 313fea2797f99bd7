"""Inversions of the plan: the largest context or batch under a TPOT target, the bit-width a context
needs, and the context where two methods' decode steps cross.

Memory per sequence is linear in the bit-width at a fixed context, so the bits that fit are solved
symbolically; TPOT is monotone in L and B (residual windows at their mean fill), so the SLA inversions
bisect the compiled expression; a crossover is a sign change of the difference of two steps.
"""

from __future__ import annotations

import math

from roofline.costmodel import Roofline, build_graph
from roofline.methods import MethodConfig
from roofline.planner.plan import MAX_SEARCH_CONTEXT, largest_true
from roofline.specs import Hardware, Model, Workload
from roofline.units import B, L
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
