"""The offline prefill case at the clock it runs at: lat.py's and lat_sglang.py's prefill, the median of three
generate(out=1) calls of one prompt back to back, after decode cases whose GEMMs are memory-bound.

The planner prices GEMMs and prefill attention at the sustained, power-capped rate (Roofline.steady_state): steps back
to back, the board settled. From idle the board settles within ~100-150 ms. micro6 and micro7
(validate/notes/2026-11-29-micro6-duty.md) timed back-to-back GEMMs from 2 s idle in 50 ms windows: 758, 708, 660,
655 ... TFLOP/s and 743, 693, 668, 663 ... (`settle`). So the median call, the second, runs the part of that curve
between one call's time T and 2 T:
- a short prompt, near the burst rate;
- a long one, at the sustained rate.

The law: share(t) of the way from the burst to the sustained rate in window i = (r_0 - r_i) / (r_0 - r_settled),
clipped to [0, 1]. r_0 is the first window, r_settled the median of the windows from 0.15 s on, and the two series
are pooled by window. The case is priced at costmodel.device.burst_options(share = the mean share over [T, 2 T]),
T the case's prefill at the steady state. The H200 alone has the series; another device keeps the steady state.
"""

from __future__ import annotations

import json
import statistics
from functools import cache
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1] / "results" / "engines"
SETTLE = {"H200": (ROOT / "nvidia-h200-vllm-2026-11-29-micro6" / "micro6.json",
                   ROOT / "nvidia-h200-vllm-2026-11-29-micro7" / "micro7.json")}
SETTLED_FROM_S = 0.15  # micro6's note: settled within ~100-150 ms (three 50 ms windows)


@cache
def settling(hardware_name: str) -> tuple[tuple[float, float], ...]:
    """((window end s, share), ...): the share of the way from the burst to the sustained rate in each 50 ms window
    of back-to-back GEMMs from idle, the device's committed series pooled by window; () without them."""
    series = [json.loads(p.read_text())["settle"] for p in SETTLE.get(hardware_name, ())]
    if not series:
        return ()
    out = []
    for i in range(min(len(s) for s in series)):
        ends, rates = zip(*(s[i] for s in series), strict=True)
        out.append((statistics.mean(ends), statistics.mean(rates)))
    first = out[0][1]
    settled = statistics.median(r for t, r in out if t > SETTLED_FROM_S)
    return tuple((t, min(1.0, max(0.0, (first - r) / (first - settled)))) for t, r in out)


def share_between(curve: tuple[tuple[float, float], ...], start: float, end: float) -> float:
    """The mean share over [start, end] s of busy time: each window's share over its span, 1 past the last window."""
    total, begin = 0.0, 0.0
    for t, share in curve:
        total += share * max(0.0, min(end, t) - max(start, begin))
        begin = t
    total += max(0.0, end - max(start, begin))
    return total / (end - start)


def lone_prefill_s(model, hardware, workload, prompt: int, method=None) -> float:
    """Seconds of one prompt's prefill as the offline case times it (PhaseModel.prefill_time at B 1): at the share of
    the burst-to-sustained way the median (second) call runs at, where the device has a settling curve."""
    from roofline.costmodel.device import burst_options, roofline_for
    from roofline.engines.timing import engine_options
    from roofline.methods.registry import parse_method
    from roofline.planner.phases import PhaseModel

    method = method or parse_method("bf16")
    steady = float(PhaseModel.build(model, hardware, workload, method).prefill_time(1, prompt))
    curve = settling(hardware.name)
    share = share_between(curve, steady, 2 * steady) if curve else 1.0
    options = burst_options(hardware, engine_options(workload.engine, hardware), share) if share < 1.0 else None
    if options is None:
        return steady
    roof = roofline_for(hardware, tp=workload.tp, options=options)
    return float(PhaseModel.build(model, hardware, workload, method, roofline=roof).prefill_time(1, prompt))
