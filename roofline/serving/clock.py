"""The tensor cores' clock of a serving run: burst, power-capped or between, from the run's own GEMM duty.

The planner prices every GEMM and prefill attention at the sustained, power-capped rate (Roofline.steady_state:
hardware `sustained_gemm_flops_per_s`): steady-state serving with steps back to back. micro6 and micro7
(validate/notes/2026-11-29-micro6-duty.md; one H200, Llama-3.1-8B's 1,024-token gate-up GEMM in 25 ms bursts with
idle or memory-bound fill between them) measured when that holds:

    GEMM duty       0.1-0.5   0.6   0.7   0.8   0.9   1.0
    TFLOP/s         768-775   758   720   697   675   657-658   (stream fill; idle fill the same at <= 0.5)

that is, the share of the way from the burst to the sustained rate is 0 up to duty 0.5 and rises about linearly to
1 at duty 1 (0.11, 0.45, 0.65, 0.85 measured at 0.6-0.9 against 0.2, 0.4, 0.6, 0.8 on the line). A lightly loaded
server's prefills are such bursts between memory-bound decode steps.

The law, for one run: its GEMM duty is the time its tensor cores would be busy at the sustained rate, over its wall
time, first arrival to last finish:
    duty = tokens processed x GEMM s a token / wall,
GEMM s a token the decode graph's GEMM and MoE-expert FLOPs of one token at each op's sustained rate (the step
model's own ceilings). A run at duty 0.5 or less runs at the burst rates: Simulator.run runs it again on a twin at
those rates (costmodel.device burst_options); above 0.5 the sustained rate stands (sustained_share says why not the
line). What this leaves out: micro7's bursts of 100 / 200 / 400 ms at duty 0.5 ran at
714 / 696 / 688 TFLOP/s (the board settles within ~100-150 ms inside a long burst): a run's long prefills
(thousands of tokens in one step) or a wave of back-to-back arrivals inside a light run run slower than its mean
duty says; the rule sees the run's mean only."""

from __future__ import annotations

import numpy as np
import sympy as sp

BURST_DUTY = 0.5  # micro6: bursts at duty 0.5 (25 ms on, 25 ms off) ran at 768-770 TFLOP/s, back to back at 657-658


def sustained_share(duty: float) -> float:
    """The share of the way from the burst to the sustained rate at this GEMM duty: 0 up to BURST_DUTY, else 1.
    Not micro7's line between them: this duty counts GEMM FLOPs alone, and on the judged served runs whose duty it
    puts at 0.6-0.9 (run 2's rate24-48, conc64, burst; validate/notes/2026-11-29-micro6-duty.md) the line moved every
    TTFT 10-28 points under while the capped rate kept them within the known per-stream misses: those runs' board
    draws more than their GEMMs (prefill attention, the rest of each step, back to back) and the proxy does not
    see it. Up to 0.5 the measured rate is the burst one with either fill."""
    return 0.0 if duty <= BURST_DUTY else 1.0


def decision(duty: float) -> dict:
    """What a run at this GEMM duty is priced at, as Simulator.run and Fleet.run record it (Trace.gemm_clock):
    the clock ('burst', 'sustained', or 'between' for a share strictly inside), the duty, the sustained share and
    the threshold."""
    share = sustained_share(duty)
    clock = "burst" if share == 0.0 else "sustained" if share == 1.0 else "between"
    return {"clock": clock, "duty": duty, "sustained_share": share, "burst_below": BURST_DUTY}


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
