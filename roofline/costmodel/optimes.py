"""An op's times by ceiling (OpTimes), the per-op row fields naming on-chip ceilings, and which ceiling binds
(binding_ceiling): what Roofline (costmodel.device) computes and the compiled kernels and reports read."""

from __future__ import annotations

from dataclasses import dataclass, field, fields

from roofline.lazy import sp

__all__ = ["CEILING_FIELDS", "OpTimes", "binding_ceiling"]


@dataclass(frozen=True)
class OpTimes:
    """An op's time by ceiling (s): compute (tensor + vector + integer, with `issue` the vector + integer part),
    DRAM, communication, shared memory, L2, Little's-law latency; `total` the overlap rule over them."""

    compute: sp.Expr
    memory: sp.Expr
    comm: sp.Expr
    total: sp.Expr
    shared: sp.Expr = field(default_factory=lambda: sp.S.Zero)
    l2: sp.Expr = field(default_factory=lambda: sp.S.Zero)
    latency: sp.Expr = field(default_factory=lambda: sp.S.Zero)
    issue: sp.Expr = field(default_factory=lambda: sp.S.Zero)

    def times(self, n) -> OpTimes:
        """The times of `n` such runs one after another (an op's passes: Op.passes)."""
        return OpTimes(*(getattr(self, f.name) * n for f in fields(self)))


# Extra per-op row entries (after the traffic classes) that name the binding ceiling.
CEILING_FIELDS = ("shared_s", "l2_s", "latency_s", "issue_s")


def binding_ceiling(compute: float, memory: float, shared: float = 0.0, l2: float = 0.0, latency: float = 0.0,
                    issue: float = 0.0) -> str:
    """The ceiling with the longest time: "memory" (DRAM), "compute" (tensor cores) or "issue" (vector and
    integer instructions, when they are most of the compute time), "shared-memory", "l2" or "latency" (Little's
    law: too few bytes in flight); ties go to memory."""
    best, value = "memory", memory
    on_cores = "issue" if issue > compute - issue else "compute"
    for name, t in ((on_cores, compute), ("shared-memory", shared), ("l2", l2), ("latency", latency)):
        if t > value:
            best, value = name, t
    return best
