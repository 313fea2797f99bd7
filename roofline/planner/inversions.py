"""Inversions of the plan: the largest context or batch under a TPOT target.

The step is the plan's own (MethodPlanner.step_time), so the answer and the table agree, pp > 1 included. TPOT
grows with L and B up to the residual windows' sawtooth (a window flushes every R tokens), so the bisection's
answer is exact to within one window of tokens where the target falls inside a sawtooth tooth.
"""

from __future__ import annotations

import math

from roofline.methods import MethodConfig
from roofline.planner.plan import MAX_SEARCH_CONTEXT, largest_true, method_planner
from roofline.specs import Hardware, Model, Workload


def _step(model: Model, hardware: Hardware, workload: Workload, method: MethodConfig):
    """(batch, context) -> TPOT: the plan's own step time (MethodPlanner.step_time: pipeline and attention
    imbalance included), so an inversion and the plan table agree."""
    return method_planner(model, hardware, workload, method).step_time


def max_context_for_tpot(model: Model, hardware: Hardware, workload: Workload, method: MethodConfig,
                         target_s: float) -> float:
    """Largest L with decode step(B, L) <= target (0 if even L = 1 misses; inf if it never does)."""
    step = _step(model, hardware, workload, method)
    ok = lambda n: float(step(workload.batch, n)) <= target_s  # noqa: E731
    if ok(MAX_SEARCH_CONTEXT):
        return math.inf
    return largest_true(ok, 1, MAX_SEARCH_CONTEXT)


def max_batch_for_tpot(model: Model, hardware: Hardware, workload: Workload, method: MethodConfig,
                       target_s: float, limit: int = 1 << 20) -> int:
    """Largest B with decode step(B, L) <= target at the workload's context (memory not considered)."""
    step = _step(model, hardware, workload, method)
    return largest_true(lambda n: float(step(n, workload.context_tokens)) <= target_s, 1, limit)
