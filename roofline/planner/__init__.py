"""Capacity planning: memory budget, max context and batch, latency and throughput, parallelism,
inversions — per method, from the cost model."""

from roofline.planner.memory import MemoryBudget, memory_budget
from roofline.planner.plan import MethodPlan, plan, plan_method

__all__ = ["MemoryBudget", "MethodPlan", "memory_budget", "plan", "plan_method"]
