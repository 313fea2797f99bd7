"""Speed of the serving simulator at scale (issue 33's targets: 1,000,000 requests <= 60 s on one core; a fleet of
32 replicas x 100,000 requests <= 60 s).

    python benchmarks/bench_serving_scale.py single 20000      # one replica, N requests (a day at ~12 req/s)
    python benchmarks/bench_serving_scale.py fleet 32 2000     # R replicas x N requests each, least-outstanding
    ... single 20000 --python                                 # the Python record loop (serving.kernel off)
    ... single 20000 --reference                              # the Python loop on StepModel's numpy step times
    ... --engine vllm                                          # vLLM's scheduling profile (admission lag on)
    ... --max-concurrency 64 [--think-s 1.0]                   # a closed loop of N clients (Poisson arrivals kept)
    ... --prefix system:1024:4                                 # shared prefixes (serving.prefix), cache on
    ... fleet 32 2000 --router prefix-aware                   # the fleet's router (default least-outstanding)
    ... --speculative draft=Llama-3.2-1B:3:0.7 | eagle:3:0.7   # speculative decoding (serving.speculative)
    ... --session-turns 4 [--think-s 5]                        # chat sessions of T turns (serving.clients)
    ... single 20000 --disaggregate 1:1                        # P prefill and D decode replicas (serving.disagg)
    ... single 20000 --pp 2 [--tp 2] [--micro-batches 2]       # pipeline / tensor parallelism of each replica

Workload: Llama-3.1-8B on one H200, bf16 KV, ShareGPT-like lengths (lognormal means 1024 / 256 tokens), Poisson at
~60 % of one replica's saturation (12 req/s per replica). Prints wall seconds, CPU seconds (time.process_time: the
machine is shared), engine records (steps or decode blocks evaluated), requests and records per second, and the
extrapolation to the targets at that speed. By default runs take serving.kernel (the compiled record loop; its
compile is cached by numba after the first run on a machine: the CPU seconds include loading it and compiling the
step law); --python and --reference take the Python loop. With --prefix every prompt carries the shared prefix
(serving.prefix.parse_prefix, seed 0) and the engine's prefix cache is on (every engine profile's default); the
line adds the cache's hit rate. With --speculative every decode step is a verify step with its draft's passes (one
replica or a fleet through serving.kernel: kernel_spec in kernel_single's or kernel_loop's loop; --python for the
Python loop); the line adds the TPOT p50 (the same figure through either loop). With --session-turns T the requests
are chats of T turns (serving.prefix.sessions: a turn's prompt carries the conversation so far, the cache may hold
it), turn j + 1 sent --think-s after turn j finishes. With --disaggregate P:D (single only) a prefill pool of P
replicas and a decode pool of D, the KV moving over the H200's own scale-out link (the CLI's default,
serving.disagg.KvLink.between).
Results are in benchmarks/serving_scale.md.
"""

from __future__ import annotations

import os
import sys
import time

import numpy as np

from roofline.catalogue import load_hardware, load_model
from roofline.engines.scheduling import scheduling
from roofline.methods import parse_method
from roofline.serving.clients import Clients
from roofline.serving.disagg import Disaggregated, KvLink
from roofline.serving.fleet import Fleet
from roofline.serving.prefix import parse_prefix, sessions
from roofline.serving.requests import LengthDist, poisson_requests
from roofline.serving.simulate import Simulator
from roofline.serving.speculative import Speculative
from roofline.specs import Workload

PROMPT, OUTPUT = "lognormal:mean=1024,sigma=0.8,max=8192", "lognormal:mean=256,sigma=0.8,max=2048"
RATE_PER_REPLICA = 12.0


def _load() -> str:
    """The machine's 1-minute load average (the shared machine's contention during the run)."""
    try:
        return f"{os.getloadavg()[0]:.1f}"
    except OSError:
        return "?"


def _option(name: str, default: str | None = None) -> str | None:
    """The value after `name` on the command line, else `default`."""
    return sys.argv[sys.argv.index(name) + 1] if name in sys.argv else default


def _sim(max_tokens: int) -> Simulator:
    wl = Workload(context_tokens=max_tokens, prefill_chunk_tokens=8192, tp=int(_option("--tp", "1")),
                  pp=int(_option("--pp", "1")), micro_batches=int(_option("--micro-batches", "1")),
                  batch=int(_option("--micro-batches", "1")))
    python = "--python" in sys.argv or "--reference" in sys.argv
    hw = load_hardware("H200")
    engine = _option("--engine")
    profile = scheduling(engine, hw, "api", 1, context_len=max_tokens) if engine else None
    spec = _option("--speculative")
    return Simulator(load_model("Llama-3.1-8B"), hw, wl, parse_method("bf16"), max_tokens=max_tokens,
                     fast="--reference" not in sys.argv, kernel=False if python else None, engine=profile,
                     speculative=Speculative.parse(spec) if spec else None)


def _clients() -> Clients | None:
    conc, turns = _option("--max-concurrency"), _option("--session-turns")
    think = float(_option("--think-s", "0"))
    if turns:
        return Clients(think_s=think, session_turns=int(turns))
    return Clients(max_concurrency=int(conc), think_s=think) if conc else None


def _mode(sim: Simulator) -> str:
    """What the run simulates: the engine profile (with vLLM's admission lag or not) and the clients."""
    clients = _clients()
    lag = ", admission lag" if sim.engine.admission_lag else ""
    spec = f", speculative {_option('--speculative')}" if sim.speculative else ""
    pools = f", disaggregated {_option('--disaggregate')}" if _option("--disaggregate") else ""
    w = sim.workload
    pools += f", tp {w.tp} pp {w.pp} micro-batches {w.micro_batches}" if w.tp * w.pp > 1 else ""
    if clients and clients.session_turns > 1:
        how = f"sessions of {clients.session_turns} turns, think {clients.think_s:g} s"
    elif clients:
        how = f"max-concurrency {clients.max_concurrency}, think {clients.think_s:g} s"
    else:
        how = "open loop"
    return f"engine {sim.engine.engine}{lag}{spec}{pools}; {how}"


def _requests(rate: float, n: int):
    reqs = poisson_requests(rate, n, LengthDist.parse(PROMPT, "p"), LengthDist.parse(OUTPUT, "o"), seed=0)
    spec, turns = _option("--prefix"), _option("--session-turns")
    if turns:
        return sessions(reqs, int(turns))[0]
    return parse_prefix(spec, reqs, 0)[0] if spec else reqs


def _hits(trace, sim: Simulator | None = None) -> str:
    """The prefix cache's hit rate, when the run kept one; with speculative decoding, the TPOT p50 (the same run
    through either loop gives the same figure: a check that the paths compared simulate the same thing)."""
    stats = trace.prefix_cache
    out = f"; prefix {stats['workload']} hit rate {stats['hit_rate']:.1%}" if stats else ""
    if sim is not None and sim.speculative is not None:
        out += f"; TPOT p50 {float(np.median(trace.tpot_s)) * 1e3:.4f} ms"
    return out


def single(n: int) -> None:
    reqs = _requests(RATE_PER_REPLICA, n)
    t0 = time.perf_counter()
    sim = _sim(reqs.max_tokens)
    t1, c1 = time.perf_counter(), time.process_time()
    trace = _disaggregated(sim, reqs) if _option("--disaggregate") else sim.run(reqs, clients=_clients())
    t2, c2 = time.perf_counter(), time.process_time()
    per = (c2 - c1) / n
    print(f"single ({_mode(sim)}): build {t1 - t0:.2f} s; {n:,} requests in {t2 - t1:.2f} s wall, {c2 - c1:.2f} s CPU "
          f"({n / (c2 - c1):,.0f} req per CPU-s, {len(trace.steps):,} records, {len(trace.steps) / (c2 - c1):,.0f} "
          f"records per CPU-s); 1,000,000 requests at this speed: {per * 1e6:,.0f} CPU-s{_hits(trace, sim)}; "
          f"load {_load()}")


def _disaggregated(sim: Simulator, reqs):
    """The run as --disaggregate P:D: `sim` is the decode pool, the prefill pool its twin (the CLI's pools with
    the same hardware and tp); the merged trace (its records: the decode pool's)."""
    p_rep, d_rep = (int(x) for x in _option("--disaggregate").split(":"))
    prefill = _sim(sim.max_tokens)
    pools = Disaggregated(prefill, sim, p_rep, d_rep, KvLink.between(sim.hardware, sim.hardware))
    return pools.run(reqs).trace


def fleet(replicas: int, per_replica: int) -> None:
    n = replicas * per_replica
    reqs = _requests(RATE_PER_REPLICA * replicas, n)
    sim = _sim(reqs.max_tokens)
    t1, c1 = time.perf_counter(), time.process_time()
    router = _option("--router", "least-outstanding")
    run = Fleet(sim, replicas, router).run(reqs, _clients())
    t2, c2 = time.perf_counter(), time.process_time()
    per = (c2 - c1) / n
    print(f"fleet ({_mode(sim)}, {router}): {replicas} replicas x {per_replica:,} requests in {t2 - t1:.2f} s wall, "
          f"{c2 - c1:.2f} s CPU "
          f"({n / (c2 - c1):,.0f} req per CPU-s, {len(run.trace.steps):,} records); 32 x 100,000 at this speed: "
          f"{per * 3.2e6:,.0f} CPU-s{_hits(run.trace, sim)}; load {_load()}")


if __name__ == "__main__":
    options = ("--engine", "--max-concurrency", "--think-s", "--prefix", "--router", "--speculative",
               "--session-turns", "--disaggregate", "--pp", "--tp", "--micro-batches")
    valued = {sys.argv.index(o) + 1 for o in options if o in sys.argv}
    args = [a for k, a in enumerate(sys.argv[1:], 1) if not a.startswith("--") and k not in valued]
    what = args[0] if args else "single"
    if what == "single":
        single(int(args[1]) if len(args) > 1 else 20000)
    else:
        fleet(int(args[1]) if len(args) > 1 else 32, int(args[2]) if len(args) > 2 else 2000)
