"""The largest request rate that meets an SLO, GPUs for a target rate, and cost per million tokens.

Search: the same requests (lengths and the shape of the arrival pattern: common random numbers) are replayed
at each rate. The saturated run (everything at once) gives the requests per second the replica sustains; a
finite run may still meet the SLO a little above it, so the bracket doubles until a rate fails, then
bisection for at most `iterations` rounds keeps the largest rate whose TTFT p99 and TPOT p99 are within the
SLO. If even 1/1000 of the saturated rate misses the SLO (a lone request's prefill or decode step is too
slow), there is no such rate and the reason says which target failed. A rate found well past the saturated rate
(more than rel_tol over it: a short run whose requests all fit at once ends before any queue builds) is not one the
replica sustains: the answer is then the saturated rate, an upper bound, and the reason says so (the finite run's
rate stays in `finite_run_rate_per_s`).
Replicas are independent and take equal shares of a Poisson stream (a random split of a Poisson process is
Poisson), so GPUs for a target rate = ceil(target / max rate) x tp x pp.
"""

from __future__ import annotations

import functools
import math
from typing import Any

from roofline.serving.clients import Clients
from roofline.serving.requests import Requests
from roofline.serving.simulate import Simulator, Slo, Trace

SATURATED_RATE = 1e9  # requests/s: every request is there at once


def _run(sim: Simulator, clients: Clients | None, requests: Requests) -> Trace:
    return sim.run(requests, clients=clients)


def _p99(trace: Trace) -> tuple[float, float]:
    import numpy as np

    tpot = trace.tpot_s
    return float(np.percentile(trace.ttft_s, 99)), float(np.percentile(tpot, 99)) if len(tpot) else 0.0


def _verdict(trace: Trace, slo: Slo) -> tuple[bool, str]:
    ttft, tpot = _p99(trace)
    if ttft > slo.ttft_s:
        return False, f"TTFT p99 {ttft:.4g} s > {slo.ttft_s:.4g} s"
    if tpot > slo.tpot_s:
        return False, f"TPOT p99 {tpot:.4g} s > {slo.tpot_s:.4g} s"
    return True, ""


def max_rate_at_slo(sim: Simulator, requests: Requests, slo: Slo, clients: Clients | None = None,
                    iterations: int = 8, rel_tol: float = 0.02) -> dict[str, Any]:
    """{"rate_per_s": float | None, "reason": str | None, "saturated_rate_per_s", "runs"}; each run releases the
    requests through `clients` (open loop by default)."""
    run = functools.partial(_run, sim, clients)
    saturated = run(requests.at_rate(SATURATED_RATE))
    sat_rate = len(requests) / saturated.horizon_s
    runs = 1
    lo, hi = sat_rate / 1000, sat_rate
    ok, why = _verdict(run(requests.at_rate(lo)), slo)
    runs += 1
    if not ok:
        return {"rate_per_s": None, "reason": f"no rate meets the SLO: at {lo:.3g} req/s (1/1000 of saturation) "
                f"{why}", "saturated_rate_per_s": sat_rate, "runs": runs}
    for _ in range(iterations):  # a finite run can meet the SLO a little past the saturated rate
        ok, _ = _verdict(run(requests.at_rate(hi)), slo)
        runs += 1
        if not ok:
            break
        lo, hi = hi, 2 * hi
    for _ in range(iterations):
        if hi - lo <= rel_tol * hi:
            break
        mid = math.sqrt(lo * hi) if hi > 10 * lo else (lo + hi) / 2
        ok, _ = _verdict(run(requests.at_rate(mid)), slo)
        runs += 1
        lo, hi = (mid, hi) if ok else (lo, mid)
    if lo > sat_rate * (1 + rel_tol):  # the run ended before its queue built up: not a rate the replica sustains
        cap = clients.max_concurrency if clients is not None else None
        why = (f"the --max-concurrency {cap:,} clients hold the excess before sending it, and latencies start at the "
               "send, so no arrival rate misses the SLO once the saturated run meets it" if cap is not None else
               f"a run of {len(requests):,} requests ends before its queue builds (more --requests show the steady "
               "state)")
        return {"rate_per_s": sat_rate, "reason": f"capped at the saturated throughput {sat_rate:.3g} req/s: the SLO "
                f"held up to {lo:.3g} req/s only because {why}; no replica sustains more than its throughput",
                "saturated_rate_per_s": sat_rate, "runs": runs, "bracket_per_s": [lo, hi], "finite_run_rate_per_s": lo}
    return {"rate_per_s": lo, "reason": None, "saturated_rate_per_s": sat_rate, "runs": runs,
            "bracket_per_s": [lo, hi]}


def fleet(max_rate: float | None, gpus_per_replica: int, target_rate: float | None,
          usd_per_gpu_hour: float | None, output_tokens_per_s: float | None) -> dict[str, Any]:
    """GPUs for a target rate and cost per million output tokens at the max rate (null plus a reason)."""
    out: dict[str, Any] = {"gpus_per_replica": gpus_per_replica}
    if target_rate is not None:
        if max_rate:
            replicas = math.ceil(target_rate / max_rate)
            out.update(target_rate_per_s=target_rate, replicas=replicas, gpus=replicas * gpus_per_replica)
        else:
            out.update(target_rate_per_s=target_rate, replicas=None, gpus=None,
                       gpus_reason="no max rate at the SLO")
    if usd_per_gpu_hour is not None:
        if output_tokens_per_s:
            cost = usd_per_million_tokens(usd_per_gpu_hour, gpus_per_replica, output_tokens_per_s)
            out.update(usd_per_gpu_hour=usd_per_gpu_hour, usd_per_million_output_tokens=cost)
        else:
            out.update(usd_per_gpu_hour=usd_per_gpu_hour, usd_per_million_output_tokens=None,
                       cost_reason="no throughput at the SLO")
    return out


def usd_per_million_tokens(usd_per_gpu_hour: float, gpus: int, tokens_per_s: float) -> float:
    """Dollars per million tokens from `gpus` GPUs at `usd_per_gpu_hour` producing `tokens_per_s`:
    $/GPU-hour x GPUs / 3600 s/hour / tokens per second x 1e6."""
    return usd_per_gpu_hour * gpus / 3600 / tokens_per_s * 1e6
