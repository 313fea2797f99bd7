"""What a simulation reports: latency percentiles, throughput, goodput under an SLO, the KV pool over time,
and Little's law on the simulated queue. All in SI units (seconds, bytes, per second); JSON-strict (no NaN)."""

from __future__ import annotations

from typing import Any

import numpy as np

from roofline.serving.simulate import Slo, Trace

PERCENTILES = (50, 90, 99)
TIMELINE_POINTS = 100


def percentiles(values: np.ndarray) -> dict[str, float | None]:
    """p50 / p90 / p99 and the mean (None when there are no values)."""
    if not len(values):
        return {f"p{p}": None for p in PERCENTILES} | {"mean": None}
    ps = np.percentile(values, PERCENTILES)
    return {f"p{p}": float(v) for p, v in zip(PERCENTILES, ps, strict=True)} | {"mean": float(np.mean(values))}


def littles_law(trace: Trace) -> dict[str, float]:
    """Mean requests in the system, from the engine's own per-step counts (time-weighted over the run, idle
    time counting zero), against arrival rate x mean time in system from the requests' timestamps.
    They agree when the scheduler loses no request and the clock is consistent; requests arriving during
    a step are counted from the next step's start, an error of about half a step per request."""
    steps = trace.steps
    in_system = steps[:, 2] + steps[:, 3]
    horizon = trace.horizon_s
    mean_in_system = float((in_system * steps[:, 1]).sum() / horizon)
    rate = len(trace.requests) / horizon
    return {"mean_in_system": mean_in_system, "arrival_rate_per_s": rate,
            "mean_time_in_system_s": float(np.mean(trace.e2e_s)),
            "rate_x_time": rate * float(np.mean(trace.e2e_s))}


def timeline(trace: Trace, points: int = TIMELINE_POINTS) -> dict[str, list[float]]:
    """The pool's use, running and waiting requests and preemptions so far, at up to `points` step starts."""
    steps = trace.steps
    pick = np.unique(np.linspace(0, len(steps) - 1, min(points, len(steps))).astype(int))
    rows = steps[pick]
    return {"t_s": rows[:, 0].tolist(), "kv_utilization": (rows[:, 4] / trace.kv_capacity_bytes).tolist(),
            "running": rows[:, 2].astype(int).tolist(), "waiting": rows[:, 3].astype(int).tolist(),
            "preemptions": rows[:, 5].astype(int).tolist()}


def summarize(trace: Trace, slo: Slo | None) -> dict[str, Any]:
    """Everything `roofline simulate` reports for one run."""
    req, horizon = trace.requests, trace.horizon_s
    steps = trace.steps
    busy = float(steps[:, 1].sum())
    kv_use = steps[:, 4] / trace.kv_capacity_bytes
    out: dict[str, Any] = {
        "requests": len(req),
        "offered_rate_per_s": req.offered_rate,
        "ttft_s": percentiles(trace.ttft_s), "tpot_s": percentiles(trace.tpot_s), "e2e_s": percentiles(trace.e2e_s),
        "throughput_tokens_per_s": trace.output_tokens_per_s,
        "throughput_total_tokens_per_s": float((req.output_tokens.sum() + req.prompt_tokens.sum()) / horizon),
        "requests_per_s": len(req) / horizon,
        "duration_s": horizon,
        "busy_fraction": busy / horizon,
        "kv_pool": {"capacity_bytes": trace.kv_capacity_bytes,
                    "mean_utilization": float((kv_use * steps[:, 1]).sum() / busy) if busy else 0.0,
                    "max_utilization": float(kv_use.max()) if len(kv_use) else 0.0},
        "preemptions": trace.preemptions,
        "prefix_cache": trace.prefix_cache,
        "gemm_clock": trace.gemm_clock,
        "first_use": trace.first_use,
        "max_running": int(steps[:, 2].max()) if len(steps) else 0,
        "littles_law": littles_law(trace),
        "timeline": timeline(trace),
    }
    if slo is None:
        out.update(goodput_requests_per_s=None, goodput_reason="no SLO given (--slo-ttft-ms and --slo-tpot-ms)")
    else:
        meets = trace.meets(slo)
        out.update(goodput_requests_per_s=float(meets.sum() / horizon), slo_attainment=float(meets.mean()),
                   slo={"ttft_s": slo.ttft_s, "tpot_s": slo.tpot_s})
    return out


def decode_only_step(trace: Trace, phases) -> dict[str, Any] | None:
    """What `roofline plan` calls TPOT, at this run's operating point: one decode-only step (phases.decode_time) at
    the time-weighted mean of running requests and the mean context while decoding (prompt + half the output).
    The served TPOT (finish - first token over the output) is larger by the steps that also carry other requests'
    prefill chunks (mixed steps under chunked prefill); None for a run with no step."""
    steps = trace.steps
    busy = float(steps[:, 1].sum())
    if not len(steps) or busy <= 0:
        return None
    batch = max(1, round(float((steps[:, 2] * steps[:, 1]).sum() / busy)))
    req = trace.requests
    context = max(1, round(float(np.mean(req.prompt_tokens) + np.mean(req.output_tokens) / 2)))
    return {"batch": batch, "context_tokens": context, "step_s": float(phases.decode_time(batch, context))}
