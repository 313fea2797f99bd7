"""`roofline simulate`: serve a request stream on one replica (continuous batching, chunked prefill, paged KV
pool) and report latency percentiles, throughput, goodput, the largest rate at an SLO, GPUs and cost."""

from __future__ import annotations

import argparse
import json
import math
import sys
from typing import Any

from roofline import report as display

SIMULATE_HELP = "request-level serving simulation: latency percentiles, goodput, max rate at an SLO"


DEFAULT_REQUESTS = 1000


def add_simulate_parser(sub, positive_int, positive_float) -> None:
    p = sub.add_parser("simulate", help=SIMULATE_HELP)
    p.add_argument("--model", required=True, help="catalogue name, YAML spec or HF config.json")
    p.add_argument("--hardware", required=True, help="catalogue name or YAML spec")
    p.add_argument("--method", action="append", required=True, help="KV method SPEC; repeat to compare")
    src = p.add_mutually_exclusive_group(required=True)
    src.add_argument("--rate", type=float, help="Poisson arrivals, requests per second")
    src.add_argument("--trace", help="CSV of arrival_s,prompt_tokens,output_tokens rows")
    p.add_argument("--prompt-tokens", default="4096", help="DIST: N, uniform:LO:HI, lognormal:mean=M,sigma=S[,max=N]")
    p.add_argument("--output-tokens", default="512", help="DIST, as --prompt-tokens")
    p.add_argument("--requests", type=positive_int,
                   help="requests to simulate (default 1000 with --rate; with --trace every row, and a trace longer "
                   "than an explicit --requests is refused, never cut)")
    p.add_argument("--slo-ttft-ms", type=float, help="SLO: TTFT p99 in ms (with --slo-tpot-ms)")
    p.add_argument("--slo-tpot-ms", type=float, help="SLO: TPOT p99 in ms (with --slo-ttft-ms)")
    p.add_argument("--no-search", action="store_true", help="skip the max-rate search under the SLO")
    p.add_argument("--target-rate", type=positive_float, help="requests/s to serve: GPUs needed")
    p.add_argument("--usd-per-gpu-hour", type=positive_float, help="price: cost per million output tokens")
    p.add_argument("--tp", type=positive_int, default=1, help="tensor-parallel GPUs per replica")
    p.add_argument("--pp", type=positive_int, default=1, help="pipeline stages per replica")
    p.add_argument("--max-num-seqs", type=positive_int, default=256, help="running-sequence cap (vLLM 256)")
    p.add_argument("--max-num-batched-tokens", type=positive_int, default=8192, help="token budget per step")
    p.add_argument("--utilization", type=float, help="fraction of device memory usable (default 0.90)")
    p.add_argument("--seed", type=int, default=0, help="random seed of arrivals and lengths")
    p.add_argument("--json", action="store_true")
    p.set_defaults(func=cmd_simulate)


def _inputs(args: argparse.Namespace):
    from roofline.errors import SpecError
    from roofline.serving.requests import LengthDist, load_trace, poisson_requests
    from roofline.serving.simulate import Slo

    if (args.slo_ttft_ms is None) != (args.slo_tpot_ms is None):
        missing = "--slo-tpot-ms" if args.slo_tpot_ms is None else "--slo-ttft-ms"
        raise SpecError(f"{missing}: an SLO needs both --slo-ttft-ms and --slo-tpot-ms")
    slo = None if args.slo_ttft_ms is None else Slo(args.slo_ttft_ms / 1e3, args.slo_tpot_ms / 1e3)
    if args.trace:
        from roofline.report.bounds import check_trace_file, check_trace_rows

        check_trace_file(args.trace)
        requests = load_trace(args.trace)
        check_trace_rows(args.trace, len(requests.arrival_s), args.requests)
    else:
        prompt = LengthDist.parse(args.prompt_tokens, "--prompt-tokens")
        output = LengthDist.parse(args.output_tokens, "--output-tokens")
        requests = poisson_requests(args.rate, args.requests or DEFAULT_REQUESTS, prompt, output, args.seed)
    return requests, slo


def _progress():
    """A one-line progress bar on stderr when it is a terminal (nothing otherwise)."""
    if not sys.stderr.isatty():
        return None
    last = [-1]

    def show(done: int, total: int) -> None:
        pct = 100 * done // total
        if pct != last[0]:
            last[0] = pct
            bar = "#" * (pct // 4)
            end = "\n" if done == total else ""
            print(f"\rsimulating [{bar:<25}] {pct:3d}% ({done:,}/{total:,} requests)", end=end,
                  file=sys.stderr, flush=True)
    return show


def cmd_simulate(args: argparse.Namespace) -> int:
    from roofline.catalogue import load_hardware, load_model
    from roofline.catalogue.loading import validate
    from roofline.methods import parse_method
    from roofline.serving.metrics import summarize
    from roofline.serving.scheduler import SchedulerConfig
    from roofline.serving.search import fleet, max_rate_at_slo
    from roofline.serving.simulate import Simulator
    from roofline.specs import Workload

    model, hardware = load_model(args.model), load_hardware(args.hardware)
    methods = [parse_method(s) for s in args.method]
    requests, slo = _inputs(args)
    requests.check_positions(model.max_position_embeddings, "--prompt-tokens", "--output-tokens")
    data: dict[str, Any] = {"context_tokens": max(requests.max_tokens, 2), "tp": args.tp, "pp": args.pp,
                            "prefill_chunk_tokens": args.max_num_batched_tokens}
    if args.utilization is not None:
        data["gpu_memory_utilization"] = args.utilization
    workload = validate(Workload, data, "workload")
    config = SchedulerConfig(args.max_num_batched_tokens, args.max_num_seqs)
    results = []
    for method in methods:
        sim = Simulator(model, hardware, workload, method, config, max_tokens=requests.max_tokens)
        result = {"method": method.label(), "model": model.name, "hardware": hardware.name, "tp": args.tp,
                  "pp": args.pp, **summarize(sim.run(requests, _progress()), slo)}
        if slo is None or args.no_search:
            search = {"rate_per_s": None, "reason": "no SLO given" if slo is None else "--no-search"}
        else:
            search = max_rate_at_slo(sim, requests, slo)
        result["max_rate_at_slo"] = search["rate_per_s"]
        result["max_rate_reason"] = search["reason"]
        result["max_rate_search"] = search
        tokens_at_max = (search["rate_per_s"] * float(requests.output_tokens.mean())
                         if search["rate_per_s"] else None)
        result["fleet"] = fleet(search["rate_per_s"], args.tp * args.pp, args.target_rate, args.usd_per_gpu_hour,
                                tokens_at_max)
        results.append(result)
    out = results[0] if len(results) == 1 else {"results": results}
    if args.json:
        print(json.dumps(_strict(out), indent=2, allow_nan=False))
    else:
        print(_text(results))
    return 0


def _strict(value: Any) -> Any:
    """JSON without Infinity or NaN: non-finite floats become null."""
    if isinstance(value, dict):
        return {k: _strict(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_strict(v) for v in value]
    if isinstance(value, float) and not math.isfinite(value):
        return None
    return value


def _ms(p: dict[str, float | None], key: str) -> str:
    return "-" if p[key] is None else display.seconds(p[key])


def _text(results: list[dict[str, Any]]) -> str:
    r0 = results[0]
    head = (f"{r0['model']} on {r0['hardware']} (tp {r0['tp']}, pp {r0['pp']}): {r0['requests']:,} requests, "
            f"offered {r0['offered_rate_per_s']:.3g} req/s\n")
    rows = []
    for r in results:
        rate = r["max_rate_at_slo"]
        rows.append([r["method"], _ms(r["ttft_s"], "p50"), _ms(r["ttft_s"], "p99"), _ms(r["tpot_s"], "p50"),
                     _ms(r["tpot_s"], "p99"), _ms(r["e2e_s"], "p99"), f"{r['throughput_tokens_per_s']:,.0f}",
                     "-" if r["goodput_requests_per_s"] is None else f"{r['goodput_requests_per_s']:.3g}",
                     f"{r['kv_pool']['max_utilization']:.0%}", r["preemptions"],
                     f"{rate:.3g}" if rate else "-"])
    text = head + display.table(["method", "TTFT p50", "TTFT p99", "TPOT p50", "TPOT p99", "E2E p99", "out tok/s",
                                 "goodput req/s", "KV max", "preempt", "max req/s @SLO"], rows)
    notes = [f"{r['method']}: {r['max_rate_reason']}" for r in results if r["max_rate_reason"]]
    for r in results:
        f = r["fleet"]
        if f.get("gpus"):
            notes.append(f"{r['method']}: {f['gpus']} GPUs ({f['replicas']} replicas) for {f['target_rate_per_s']:g} "
                         "req/s")
        if f.get("usd_per_million_output_tokens"):
            notes.append(f"{r['method']}: ${f['usd_per_million_output_tokens']:.3f} per million output tokens "
                         "at the max rate")
    return text + ("\n\n" + "\n".join(notes) if notes else "")
