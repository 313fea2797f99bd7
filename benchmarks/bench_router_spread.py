"""A fleet question on a shared-prefix workload: how each router spreads the load and what TTFT it gives.

    python benchmarks/bench_router_spread.py [REPLICAS [REQUESTS [RATE_PER_REPLICA [PROMPTS]]]]   # 8 6000 12 1

Workload: bench_serving_scale.py's (Llama-3.1-8B on one H200 per replica, bf16 KV, vLLM's profile, ShareGPT-like
lengths: lognormal means 1024 / 256 tokens), every prompt behind one of PROMPTS 1,024-token system prompts
(serving.prefix system:1024:PROMPTS, seed 0), Poisson at RATE_PER_REPLICA x REPLICAS req/s. Prints, per router, the
requests each replica received, TTFT p50 / p99, TPOT p99 and the fleet's prefix-cache hit rate. It calls only
Fleet(sim, n, router), so it also runs on a checkout from before serving.router (the old prefix-aware rule).
Results: benchmarks/serving_scale.md.
"""

from __future__ import annotations

import sys

import numpy as np

from roofline.catalogue import load_hardware, load_model
from roofline.engines.scheduling import scheduling
from roofline.methods import parse_method
from roofline.serving.fleet import Fleet
from roofline.serving.prefix import parse_prefix
from roofline.serving.requests import LengthDist, poisson_requests
from roofline.serving.simulate import Simulator
from roofline.specs import Workload

PROMPT, OUTPUT = "lognormal:mean=1024,sigma=0.8,max=8192", "lognormal:mean=256,sigma=0.8,max=2048"


def _sim(max_tokens: int) -> Simulator:
    """One replica: Llama-3.1-8B, bf16 KV, one H200, vLLM's scheduling profile (bench_serving_scale's)."""
    hw = load_hardware("H200")
    wl = Workload(context_tokens=max_tokens, prefill_chunk_tokens=8192)
    return Simulator(load_model("Llama-3.1-8B"), hw, wl, parse_method("bf16"), max_tokens=max_tokens,
                     engine=scheduling("vllm", hw, "api", 1, context_len=max_tokens))


def main() -> None:
    args = sys.argv[1:]
    replicas = int(args[0]) if args else 8
    n = int(args[1]) if len(args) > 1 else 6000
    per = float(args[2]) if len(args) > 2 else 12.0
    prompts = int(args[3]) if len(args) > 3 else 1
    base = poisson_requests(per * replicas, n, LengthDist.parse(PROMPT, "p"), LengthDist.parse(OUTPUT, "o"), 0)
    reqs, _ = parse_prefix(f"system:1024:{prompts}", base, 0)
    sim = _sim(reqs.max_tokens)
    print(f"{replicas} replicas, {n} requests at {per * replicas:g} req/s, {prompts} 1,024-token system prompt(s), "
          "vllm")
    for router in ("least-outstanding", "prefix-aware", "round-robin"):
        run = Fleet(sim, replicas, router).run(reqs)
        t = run.trace
        counts = np.bincount(run.routed, minlength=replicas)
        spread = (counts.tolist() if replicas <= 8
                  else f"min {counts.min()}, max {counts.max()}, idle {(counts == 0).sum()}")
        print(f"{router:18s} requests per replica {spread}; TTFT p50 {np.percentile(t.ttft_s, 50) * 1e3:.0f} ms, "
              f"p99 {np.percentile(t.ttft_s, 99) * 1e3:.0f} ms; TPOT p99 {np.percentile(t.tpot_s, 99) * 1e3:.1f} ms; "
              f"hit rate {t.prefix_cache['hit_rate']:.1%}")


if __name__ == "__main__":
    main()
