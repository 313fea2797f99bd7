"""The Fleet page's answer: how many replicas behind which router serve a target rate at an SLO, and what a million
output tokens costs there (roofline.serving.fleet underneath).

One replica's largest rate at the SLO (serving.search.max_rate_at_slo) gives the independent-replicas estimate
ceil(target / that rate); the fleet is then simulated behind the router at each size the bisection tries
(serving.fleet.size_fleet), and once more at the answer and one replica fewer so the page shows both sides of the
line. The trust line is the plan's (roofline.trust: where the device's ceilings come from, the method's kernels)
plus what the fleet model itself has not been compared with.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from roofline import report as fmt
from roofline.methods import parse_method
from roofline.serving.engined import workload_simulator
from roofline.serving.fleet import ROUTERS, Fleet, size_fleet
from roofline.serving.requests import LengthDist, poisson_requests
from roofline.serving.search import max_rate_at_slo
from roofline.serving.simulate import Simulator, Slo
from roofline.specs import Hardware, Model, Workload

FLEET_TRUST = ("fleet: replicas are copies of the single-replica simulator behind the router; routing and queueing "
               "across replicas not compared with a measured fleet")


def _at(sim: Simulator, requests, replicas: int, router: str, slo: Slo) -> dict[str, Any]:
    """p99 TTFT and TPOT, throughput and requests per replica of the fleet of `replicas` serving `requests`."""
    run = Fleet(sim, replicas, router).run(requests)
    trace = run.trace
    tpot = trace.tpot_s
    ttft_p99 = float(np.percentile(trace.ttft_s, 99))
    tpot_p99 = float(np.percentile(tpot, 99)) if len(tpot) else 0.0
    return {"replicas": replicas, "ttft_p99_s": ttft_p99, "tpot_p99_s": tpot_p99,
            "meets_slo": ttft_p99 <= slo.ttft_s and tpot_p99 <= slo.tpot_s,
            "output_tokens_per_s": trace.output_tokens_per_s,
            "requests_per_replica": np.bincount(run.routed, minlength=replicas).tolist()}


def fleet_answer(model: Model, hardware: Hardware, workload: Workload, spec: str, prompt_tokens: int,
                 output_tokens: int, requests: int, slo: Slo, target_rate: float, router: str,
                 usd_per_gpu_hour: float | None, seed: int = 0) -> dict[str, Any]:
    """{"replicas", "gpus", "usd_per_million_output_tokens", "per_replica_rate_per_s", "at" (the fleet at the answer),
    "fewer" (one replica fewer, or None), "reason" (why no size meets the SLO, or None), "trust"} for `requests`
    Poisson requests of fixed lengths arriving at `target_rate` per second."""
    if router not in ROUTERS:
        raise ValueError(f"router: {router!r} is not one of {', '.join(ROUTERS)}")
    if not (target_rate > 0 and math.isfinite(target_rate)):
        raise ValueError(f"target rate: {target_rate} must be a positive finite number of requests per second")
    base = poisson_requests(target_rate, requests, LengthDist.parse(str(prompt_tokens), "prompt tokens"),
                            LengthDist.parse(str(output_tokens), "output tokens"), seed)
    sim = workload_simulator(model, hardware, workload, parse_method(spec), prompt_tokens + output_tokens)
    sim.check(base, "prompt tokens", "output tokens")
    one = max_rate_at_slo(sim, base, slo, iterations=5)
    start = math.ceil(target_rate / one["rate_per_s"]) if one["rate_per_s"] else 1
    sizing = size_fleet(sim, base, slo, router, target_rate, workload.tp * workload.pp, usd_per_gpu_hour, start)
    n = sizing["replicas"]
    # the rows at the answer and one fewer replay the requests size_fleet judged: scaled to the target rate (the
    # Poisson draw's own n / last arrival is not the target: 0.86 of it for 300 requests at seed 0)
    at_target = base.at_rate(target_rate)
    out = {"method": spec, "router": router, "target_rate_per_s": target_rate, "replicas": n,
           "gpus": sizing.get("gpus"), "usd_per_million_output_tokens": sizing.get("usd_per_million_output_tokens"),
           "per_replica_rate_per_s": one["rate_per_s"], "estimate_replicas": start, "reason": sizing["reason"],
           "at": _at(sim, at_target, n, router, slo) if n else None,
           "fewer": _at(sim, at_target, n - 1, router, slo) if n and n > 1 else None,
           "trust": trust_line(spec, hardware, workload.engine, model)}
    return out


def trust_line(spec: str, hardware: Hardware, engine: str = "ideal", model: Model | None = None) -> str:
    """The ceilings' source and bands under the fleet's engine (a real engine's runs where they validate it, as the
    Plan page and `roofline plan --engine` cite them), the method's kernels (roofline.trust) and the fleet's own
    caveat."""
    from roofline.trust import ceilings_trust, method_trust

    ceilings = ceilings_trust(hardware, engine=engine, model=model)["text"]
    return "; ".join([ceilings, method_trust(spec, hardware)["text"], FLEET_TRUST])


def fleet_table(answer: dict[str, Any]) -> list[dict[str, str]]:
    """The page's rows: the fleet at the answer and at one replica fewer (text cells, roofline.report's units)."""
    rows = []
    for label, at in (("answer", answer["at"]), ("one fewer", answer["fewer"])):
        if at is None:
            continue
        rows.append({"fleet": label, "replicas": fmt.count(at["replicas"]), "TTFT p99": fmt.ms(at["ttft_p99_s"]),
                     "TPOT p99": fmt.ms(at["tpot_p99_s"]), "meets the SLO": "yes" if at["meets_slo"] else "no",
                     "output tokens/s": fmt.rate(at["output_tokens_per_s"]),
                     "requests per replica": f"{min(at['requests_per_replica'])}-{max(at['requests_per_replica'])}"})
    return rows
