"""Speed of the serving simulator, and the capacity table of docs/serving.md.

    python benchmarks/bench_serving.py speed   # 10,000 requests simulated; one max-rate search
    python benchmarks/bench_serving.py table   # max req/s at TTFT p99 <= 2 s, TPOT p99 <= 50 ms

Targets (issue 17): 10,000 requests in <= 10 s, the max-rate search in <= 30 s, on a 2-core machine.
"""

from __future__ import annotations

import sys
import time

from roofline.catalogue import load_hardware, load_model
from roofline.methods import parse_method
from roofline.serving.requests import LengthDist, poisson_requests
from roofline.serving.scheduler import SchedulerConfig
from roofline.serving.search import max_rate_at_slo
from roofline.serving.simulate import Simulator, Slo
from roofline.specs import Workload

METHODS = ("bf16", "fp8", "kivi-2", "skvq-k2v2", "innerq-base", "xquant-2")
MIXES = (("4K-in/512-out", 4096, 512), ("32K-in/1K-out", 32768, 1024))
SETUPS = (("Llama-3.1-8B", 1), ("Llama-3.1-70B", 4))
SLO = Slo(ttft_s=2.0, tpot_s=0.050)


def simulator(model_name: str, tp: int, spec: str, max_tokens: int) -> Simulator:
    model, hardware = load_model(model_name), load_hardware("H100-SXM")
    workload = Workload(context_tokens=max_tokens, tp=tp, prefill_chunk_tokens=8192)
    return Simulator(model, hardware, workload, parse_method(spec), SchedulerConfig(), max_tokens=max_tokens)


def speed() -> None:
    reqs = poisson_requests(5.0, 10_000, LengthDist.parse("4096", "p"), LengthDist.parse("512", "o"), seed=0)
    t0 = time.perf_counter()
    sim = simulator("Llama-3.1-8B", 1, "bf16", reqs.max_tokens)
    t1 = time.perf_counter()
    trace = sim.run(reqs)
    t2 = time.perf_counter()
    print(f"build {t1 - t0:.2f} s; 10,000 requests (8B, bf16, 4K/512, 5 req/s): {t2 - t1:.2f} s, "
          f"{len(trace.steps):,} engine records")
    search_reqs = poisson_requests(1.0, 1000, LengthDist.parse("4096", "p"), LengthDist.parse("512", "o"), seed=0)
    t3 = time.perf_counter()
    result = max_rate_at_slo(sim, search_reqs, SLO)
    t4 = time.perf_counter()
    print(f"max-rate search (1,000 requests per run, {result['runs']} runs): {t4 - t3:.2f} s -> "
          f"{result['rate_per_s']:.3g} req/s")


def table(requests: int = 1000) -> None:
    print("| model (GPUs) | mix | " + " | ".join(METHODS) + " |")
    print("|---|---|" + "---|" * len(METHODS))
    for model_name, tp in SETUPS:
        for label, prompt, output in MIXES:
            cells = []
            for spec in METHODS:
                t0 = time.perf_counter()
                reqs = poisson_requests(1.0, requests, LengthDist.parse(str(prompt), "p"),
                                        LengthDist.parse(str(output), "o"), seed=0)
                sim = simulator(model_name, tp, spec, reqs.max_tokens)
                r = max_rate_at_slo(sim, reqs, SLO)
                cells.append("-" if r["rate_per_s"] is None else f"{r['rate_per_s']:.3g}")
                print(f"  {model_name} {label} {spec}: {cells[-1]} ({r['reason'] or ''}; sat "
                      f"{r['saturated_rate_per_s']:.3g}; {time.perf_counter() - t0:.1f} s)", file=sys.stderr)
            print(f"| {model_name} ({tp}x H100-SXM) | {label} | " + " | ".join(cells) + " |", flush=True)


if __name__ == "__main__":
    {"speed": speed, "table": table}[sys.argv[1] if len(sys.argv) > 1 else "speed"]()
