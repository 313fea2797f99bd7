"""The tensor cores' clock of a serving run: burst or power-capped, from the run's own GEMM duty.

The planner prices every GEMM and prefill attention at the sustained, power-capped rate (Roofline.steady_state:
hardware `sustained_gemm_flops_per_s`): steady-state serving with steps back to back. micro6
(validate/notes/2026-11-29-micro6-duty.md; one H200, Llama-3.1-8B's 1,024-token gate-up GEMM) measured when that
holds: 25 ms GEMM bursts ran at 768-775 TFLOP/s (the burst rate) whenever 25, 75 or 225 ms of idle or memory-bound
work (a device copy, as decode steps are) separated them, duty 0.5 or less, and at 657-658 (the sustained rate, the
board at its 700 W cap) only back to back, settling there within ~100-150 ms. A lightly loaded server's prefills are
such bursts between memory-bound decode steps.

The law, for one run: its GEMM duty is the time its tensor cores would be busy at the sustained rate, over its wall
time, first arrival to last finish:
    duty = tokens processed x GEMM s a token / wall,
GEMM s a token the decode graph's GEMM and MoE-expert FLOPs of one token at each op's sustained rate (the step
model's own ceilings). A run whose duty is at most BURST_DUTY (0.5: the highest duty micro6 found at the burst rate)
runs at the burst clock, and Simulator.run runs it again on a twin with the burst rates (costmodel.device
burst_options); above it the sustained rate stands, also between 0.5 and 1, which micro6 did not measure (the
conservative side: the planner promises no more than the capped board gives). What this leaves out: a burst of
back-to-back compute longer than ~150 ms inside a light run (a wave of arrivals) runs capped there; the rule sees
the run's mean only."""

from __future__ import annotations

import numpy as np
import sympy as sp

BURST_DUTY = 0.5  # micro6: bursts at duty 0.5 (25 ms on, 25 ms off) ran at 768-770 TFLOP/s, back to back at 657-658


def gemm_s_per_token(phases) -> float:
    """Seconds of one token's GEMM FLOPs (weights x activations, MoE experts included: kind 'gemm') at the
    step model's tensor-core rate for each op's dtype, from the decode graph at batch 1 (its FLOPs do not depend
    on the context). 0 when the graph has no GEMM or the device no rate for it."""
    from roofline.units import B, L

    roof = phases.roofline
    total = 0.0
    for op in phases.decode.ops:
        if op.kind != "gemm":
            continue
        flops = float(sp.sympify(op.matmul_flops).subs({B: 1, L: 1})) * op.count
        rate = roof.tensor_rate(op)
        total += flops / rate if rate else 0.0
    return total


def gemm_duty(steps: np.ndarray, sent_s: np.ndarray, finish_s: np.ndarray, s_per_token: float) -> float:
    """The run's GEMM duty: tokens processed (the step records' last column) x `s_per_token` over its wall time
    (first arrival to last finish); 0 for an empty run."""
    if not len(steps) or not len(finish_s):
        return 0.0
    wall = float(np.max(finish_s) - np.min(sent_s))
    return float(steps[:, 6].sum()) * s_per_token / wall if wall > 0 else float("inf")
