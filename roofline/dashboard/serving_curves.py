"""Latency against request rate per method, for the dashboard's Serving page (roofline.serving underneath).

For each method the same requests (common random numbers) are replayed at rates from 5 % to 120 % of the larger of
the replica's saturated rate (every request at once) and the largest rate that meets the SLO
(serving.search.max_rate_at_slo; a finite run whose batch grows with the rate can meet it past the first): TTFT and
TPOT p99 at each rate, and that largest rate, inside the curve; each rate's tensor-core clock (serving.clock: burst
while the run's GEMM duty is at most 0.5, else the power-capped sustained rate); under an engine whose profile has
the API server's costs, each rate's API-loop load (roofline.engines.timing 25.: past 90 % busy the TTFT is a floor).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from roofline.engines.timing import API_LOOP_WARN, api_server_load
from roofline.methods import parse_method
from roofline.serving.engined import workload_simulator
from roofline.serving.requests import LengthDist, poisson_requests
from roofline.serving.search import max_rate_at_slo
from roofline.serving.simulate import Slo
from roofline.specs import Hardware, Model, Workload

FRACTIONS = (0.05, 0.2, 0.4, 0.6, 0.8, 0.9, 1.0, 1.2)  # of max(saturated rate, max rate at the SLO)


def latency_vs_rate(model: Model, hardware: Hardware, workload: Workload, specs: list[str], prompt_tokens: int,
                    output_tokens: int, requests: int, slo: Slo, seed: int = 0) -> dict[str, Any]:
    """{"rows": [{method, rate_per_s, ttft_p99_s, tpot_p99_s, meets_slo, tensor_clock, api_loop_load}], "max_rate":
    {method: rate or None},
    "reasons": {method: why no rate meets the SLO}} for `requests` Poisson requests of fixed lengths."""
    base = poisson_requests(1.0, requests, LengthDist.parse(str(prompt_tokens), "prompt tokens"),
                            LengthDist.parse(str(output_tokens), "output tokens"), seed)
    rows, best, reasons = [], {}, {}
    for spec in specs:
        sim = workload_simulator(model, hardware, workload, parse_method(spec), prompt_tokens + output_tokens)
        sim.check(base, "prompt tokens", "output tokens")
        # the curve spans the answer: fractions of the larger of the saturated rate (every request at once) and the
        # max rate at the SLO, which a finite run of growing batches can put past it (search.max_rate_at_slo)
        found = max_rate_at_slo(sim, base, slo, iterations=5)
        top = max(found["saturated_rate_per_s"], found["rate_per_s"] or 0.0)
        for fraction in FRACTIONS:
            trace = sim.run(base.at_rate(top * fraction))
            ttft = float(np.percentile(trace.ttft_s, 99))
            tpot = float(np.percentile(trace.tpot_s, 99)) if len(trace.tpot_s) else 0.0
            api = api_server_load(workload.engine, workload.host_speed, trace.output_tokens_per_s)
            rows.append({"method": spec, "rate_per_s": top * fraction, "ttft_p99_s": ttft, "tpot_p99_s": tpot,
                         "meets_slo": ttft <= slo.ttft_s and tpot <= slo.tpot_s,
                         "tensor_clock": (trace.gemm_clock or {}).get("clock", "sustained"),
                         "api_loop_load": api["load"] if api else None})
        best[spec] = found["rate_per_s"]
        if found["reason"]:
            reasons[spec] = found["reason"]
    return {"rows": rows, "max_rate": best, "reasons": reasons}


def api_loop_floor(rows: list[dict[str, Any]]) -> dict[str, float]:
    """Per method, the lowest rate on the curve whose API-loop load is past roofline.engines.timing.API_LOOP_WARN
    (there and above the curve's TTFT is a floor); methods that never pass it are left out."""
    out: dict[str, float] = {}
    for r in rows:
        load = r.get("api_loop_load")
        if load is not None and load >= API_LOOP_WARN:
            out[r["method"]] = min(out.get(r["method"], r["rate_per_s"]), r["rate_per_s"])
    return out
