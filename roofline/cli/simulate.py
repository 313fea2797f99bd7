"""`roofline simulate`: serve a request stream on one replica (continuous batching, chunked prefill, paged KV
pool) and report latency percentiles, throughput, goodput, the largest rate at an SLO, GPUs and cost."""

from __future__ import annotations

import argparse
import json
import math
import sys
from typing import Any

import numpy as np

from roofline import report as display

SIMULATE_HELP = "request-level serving simulation: latency percentiles, goodput, max rate at an SLO"


DEFAULT_REQUESTS = 1000


def add_simulate_parser(sub, positive_int, positive_float) -> None:
    from roofline.cli import add_host_speed, add_kv_cache_memory, bounded_int

    p = sub.add_parser("simulate", help=SIMULATE_HELP)
    p.add_argument("--model", required=True, help="catalogue name, YAML spec or HF config.json")
    p.add_argument("--hardware", required=True, help="catalogue name or YAML spec")
    p.add_argument("--method", action="append", required=True, help="KV method SPEC; repeat to compare")
    src = p.add_mutually_exclusive_group(required=True)
    src.add_argument("--rate", type=_rate, help="Poisson arrivals, requests per second (inf: all at time 0)")
    src.add_argument("--trace", help="CSV of arrival_s,prompt_tokens,output_tokens rows")
    p.add_argument("--prefix", help="shared prompt content: system:TOKENS[:COUNT] (system prompts prepended), "
                                    "hit:RATE (that share of each prompt is shared), tree:FxT[,FxT...] (levels of "
                                    "fan-out F and T tokens)")
    p.add_argument("--prefix-caching", choices=("on", "off"), help="automatic prefix caching (default: the engine's)")
    p.add_argument("--dataset", choices=("sharegpt", "alpaca", "agentic-claude", "agentic-codex"),
                   help="prompt and output lengths from a dataset's published statistics (serving.datasets)")
    p.add_argument("--prompt-tokens", help="DIST: N, uniform:LO:HI, lognormal:mean=M,sigma=S[,max=N]")
    p.add_argument("--output-tokens", help="DIST, as --prompt-tokens (default 512)")
    p.add_argument("--requests", type=positive_int,
                   help="requests to simulate (default 1000; with --trace, every row unless this says fewer)")
    p.add_argument("--max-concurrency", type=positive_int,
                   help="at most N requests outstanding (vLLM benchmark_serving --max-concurrency); a closed loop "
                        "of N clients with --rate inf")
    p.add_argument("--think-time-s", type=float, default=0.0,
                   help="seconds between a completion and the next send on that slot or session (default 0)")
    p.add_argument("--session-turns", type=positive_int, default=1,
                   help="chat sessions of T turns: each turn's prompt holds the conversation so far, the next turn "
                        "is sent think time after the answer")
    p.add_argument("--slo-ttft-ms", type=float, help="SLO: TTFT p99 in ms (with --slo-tpot-ms)")
    p.add_argument("--slo-tpot-ms", type=float, help="SLO: TPOT p99 in ms (with --slo-ttft-ms)")
    p.add_argument("--no-search", action="store_true", help="skip the max-rate search under the SLO")
    p.add_argument("--target-rate", type=positive_float, help="requests/s to serve: GPUs needed")
    p.add_argument("--usd-per-gpu-hour", type=positive_float, help="price: cost per million output tokens")
    p.add_argument("--speculative", help="speculative decoding METHOD:K:ACCEPTANCE[,...]: eagle:3:0.8, mtp:1:0.9, "
                                         "draft=Llama-3.2-1B:4:0.8,0.7,0.6,0.5 (acceptance per draft position)")
    p.add_argument("--disaggregate", help="P:D: P prefill replicas and D decode replicas (the decode pool is "
                                          "--hardware / --tp; the prefill pool --prefill-hardware / --prefill-tp)")
    p.add_argument("--prefill-hardware", help="the prefill pool's GPU (default: --hardware)")
    p.add_argument("--prefill-tp", type=positive_int, help="the prefill pool's tensor parallelism (default: --tp)")
    p.add_argument("--kv-link-bytes-per-s", type=positive_float,
                   help="KV transfer link per GPU between the pools (default: the slower scale-out link)")
    p.add_argument("--replicas", type=positive_int, default=1, help="replicas behind a router (default 1)")
    p.add_argument("--router", choices=("round-robin", "least-outstanding", "prefix-aware"),
                   help="how the fleet routes each request (default least-outstanding)")
    p.add_argument("--cache-threshold", type=float,
                   help="prefix-aware: the cached prefix's share of the prompt above which its replica wins, else the "
                        "replica with the smallest router tree (SGLang router's --cache-threshold, default 0.3)")
    p.add_argument("--balance-abs-threshold", type=int,
                   help="prefix-aware: route to the least-loaded replica when max - min outstanding exceeds this and "
                        "--balance-rel-threshold holds (SGLang router's, default 64)")
    p.add_argument("--balance-rel-threshold", type=float,
                   help="prefix-aware: ... and max outstanding exceeds min x this (SGLang router's, default 1.5)")
    p.add_argument("--size-fleet", action="store_true",
                   help="with --target-rate and an SLO: the fewest replicas behind --router that meet it, simulated")
    p.add_argument("--tp", type=positive_int, default=1, help="tensor-parallel GPUs per replica")
    p.add_argument("--pp", type=positive_int, default=1, help="pipeline stages per replica")
    p.add_argument("--micro-batches", type=positive_int,
                   help="micro-batches a step splits into through the pipeline (default pp, as `plan`)")
    p.add_argument("--engine", choices=("ideal", "vllm", "sglang", "trtllm", "llamacpp"), default="ideal",
                   help="whose scheduler and memory conventions (roofline.engines.scheduling); default ideal")
    p.add_argument("--weight-dtype", help="as `plan`'s: bf16 (default: a quantized checkpoint's stored widths, a .gguf "
                   "file's own type), fp16, fp8, int8, int4, fp4, mxfp4, nvfp4, or a llama-quantize file type under "
                   "--engine llamacpp (gguf:Q4_K_M ...)")
    p.add_argument("--entry-point", choices=("api", "offline"), default="api",
                   help="vLLM's defaults differ: 'api' (vllm serve) or 'offline' (the LLM class)")
    p.add_argument("--no-async-scheduling", action="store_true",
                   help="vLLM's --no-async-scheduling (the default before 0.14): each step's host work after its GPU "
                        "work, not under it, and no admission lag")
    add_host_speed(p)
    p.add_argument("--cache-ram", type=int, metavar="MIB",
                   help="llama-server's host prompt cache (--cache-ram, default 8192 MiB): each finished request's KV "
                        "is saved to host memory before the next request starts (~1.8 GB/s on the H200 host, the "
                        "server's loop waiting: roofline.engines.timing 18.); 0 turns it off; llamacpp only")
    p.add_argument("--kv-unified", action="store_true",
                   help="llama-server's -kvu: one KV stream for all slots. With --max-num-seqs N (its -np N) the "
                        "server keeps one stream a slot unless -kvu is given, and then splits a step at every break in "
                        "consecutive slot ids (roofline.engines.timing 20.); its default 4 slots share one stream; "
                        "llamacpp only")
    p.add_argument("--max-num-seqs", type=positive_int, help="running-sequence cap (default: the engine's)")
    p.add_argument("--max-num-batched-tokens", type=positive_int, help="token budget per step (default: the engine's)")
    p.add_argument("--utilization", type=float, help="fraction of device memory usable (default 0.90)")
    add_kv_cache_memory(p)
    p.add_argument("--cold-start", action="store_true",
                   help="a freshly started server: each eager step at a new fused-MoE specialisation first compiles "
                        "the Triton kernel (~1.1 s a key on the H200 host, roofline.engines.first_use); MoE models on "
                        "vllm / sglang, one replica; with --disaggregate (vLLM), each new (prefill, decode) pair's "
                        "first KV load waits for the NixlConnector's handshake (~1.35 s); default: steady state")
    p.add_argument("--compiled-tokens", type=positive_int, nargs="+", metavar="N",
                   help="with --cold-start: the server already ran eager steps of these many tokens in earlier "
                        "traffic (a previous run's first_use tokens), so their fused-MoE keys are compiled")
    p.add_argument("--seed", type=bounded_int(2 ** 64 - 1, minimum=0), default=0,
                   help="random seed of arrivals and lengths (a whole number >= 0, as numpy's default_rng takes)")
    p.add_argument("--json", action="store_true")
    p.set_defaults(func=cmd_simulate)


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


def _rate(text: str) -> float:
    """--rate as a float, where `inf` is asked for by name: a literal past the float range (1e400) is not read
    as 'every request at time 0'; the range rule itself is serving.requests.poisson_requests'."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text[:40]!r} is not a number of requests per second") from None
    if math.isinf(value) and text.strip().lower().lstrip("+") not in ("inf", "infinity"):
        raise argparse.ArgumentTypeError(f"{text[:40]} is beyond a float's range; give a finite rate, or inf for "
                                         f"every request at time 0")
    return value


def cmd_simulate(args: argparse.Namespace) -> int:
    from roofline.catalogue import load_hardware, load_model
    from roofline.catalogue.loading import validate
    from roofline.cli.simulate_checks import check_engine_limits, check_flags, check_horizon, check_speculative
    from roofline.cli.simulate_inputs import inputs, length_fields
    from roofline.methods import parse_method
    from roofline.report.bounds import check_parallel, check_unique_methods, check_weight_dtype
    from roofline.serving.search import fleet, max_rate_at_slo
    from roofline.specs import Workload

    check_flags(args)
    model, hardware = load_model(args.model), load_hardware(args.hardware)
    check_parallel(model, args.tp, args.pp)
    if args.weight_dtype is None:  # a .gguf --model: its file type (gguf_file.file_weight_dtype), as plan's
        from roofline.gguf_file import file_weight_dtype

        args.weight_dtype = file_weight_dtype(args.model)
    check_weight_dtype(model, args.weight_dtype, args.engine)
    check_speculative(args, model)
    check_unique_methods(args.method)
    methods = [parse_method(s) for s in args.method]
    requests, slo, notes = inputs(args)
    from roofline.stored_bytes import stored_widths, uncounted_towers

    if towers := uncounted_towers(model):  # the pool the simulation sizes is high by the tower left out
        notes = [*notes, f"warning: {towers}"]
    clients = _clients(args)
    check_horizon(args, requests)
    rule = _router_rule(args)
    requests.check_positions(model.max_position_embeddings, *length_fields(args))
    profile = _engine_profile(args, hardware, requests)
    check_engine_limits(args, profile)
    micro = args.micro_batches or args.pp  # a step of fewer sequences runs min(micro, sequences) (PhaseModel.pipeline)
    data: dict[str, Any] = {"context_tokens": max(requests.max_tokens, 2), "tp": args.tp, "pp": args.pp,
                            "micro_batches": micro, "batch": micro,  # the simulation sets each step's batch
                            "prefill_chunk_tokens": profile.max_num_batched_tokens, "engine": args.engine,
                            "page_tokens": profile.page_tokens, "host_speed": args.host_speed,
                            **({"weight_dtype": args.weight_dtype} if args.weight_dtype else {})}
    if args.utilization is not None:
        data["gpu_memory_utilization"] = args.utilization
    if args.kv_cache_memory_bytes is not None:
        data["kv_cache_memory_bytes"] = args.kv_cache_memory_bytes
    # a quantized checkpoint's weights at the widths it stores, as `plan` and `capacity` count them
    workload, _ = stored_widths(model, validate(Workload, data, "workload"))
    results = []
    for method in methods:
        sim = _simulator(args, model, hardware, workload, method, profile, requests.max_tokens)
        result = {"method": method.label(), "model": model.name, "hardware": hardware.name, "tp": args.tp,
                  "pp": args.pp, "weight_dtype": workload.weight_dtype,
                  "expert_weight_dtype": workload.expert_weight_dtype, "engine": _engine_json(sim.engine),
                  "clients": _clients_json(clients), "notes": notes, "speculative": _spec_json(sim),
                  **_serve(args, sim, requests, clients, slo, rule)}
        if args.pp > 1:
            result["micro_batches"] = micro
        if slo is None or args.no_search:
            search = {"rate_per_s": None, "reason": "no SLO given" if slo is None else "--no-search"}
        elif args.disaggregate:  # the search replays one aggregated replica (serving.search), not the P:D pools
            search = {"rate_per_s": None, "reason": "--disaggregate: the max-rate search runs aggregated replicas, "
                      "not P:D pools; not searched"}
        elif not math.isfinite(requests.offered_rate):
            search = {"rate_per_s": None, "reason": "every request arrives at time 0 (--rate inf): no rate to scale"}
        else:
            search = max_rate_at_slo(sim, requests, slo, clients)
        result["max_rate_at_slo"] = search["rate_per_s"]
        result["max_rate_reason"] = search["reason"]
        result["max_rate_search"] = search
        tokens_at_max = (search["rate_per_s"] * float(requests.output_tokens.mean())
                         if search["rate_per_s"] else None)
        result["fleet"] = fleet(search["rate_per_s"], args.tp * args.pp, args.target_rate, args.usd_per_gpu_hour,
                                tokens_at_max)
        if args.size_fleet:
            result["fleet_sizing"] = _size_fleet(args, sim, requests, slo, clients, result["fleet"].get("replicas"),
                                                  rule)
        result["api_server"] = _api_server(args, result)
        result["trust"] = _trust(hardware, args.engine, model, bool(args.disaggregate), args.pp)
        results.append(result)
    out = results[0] if len(results) == 1 else {"results": results}
    if args.json:
        print(json.dumps(_strict(out), indent=2, allow_nan=False))
    else:
        print(_text(results))
    return 0


def _router_rule(args: argparse.Namespace):
    """The prefix-aware router's thresholds (serving.router.CacheAware); a bad value is an input error."""
    from roofline.errors import SpecError
    from roofline.serving.router import CacheAware

    try:
        return CacheAware(args.cache_threshold, args.balance_abs_threshold, args.balance_rel_threshold)
    except ValueError as exc:
        raise SpecError(str(exc)) from None


def _rule_json(args: argparse.Namespace, rule) -> dict[str, Any] | None:
    """The thresholds the prefix-aware router ran with (None for the other routers)."""
    if args.router != "prefix-aware":
        return None
    return {"cache_threshold": rule.cache_threshold, "balance_abs_threshold": rule.balance_abs_threshold,
            "balance_rel_threshold": rule.balance_rel_threshold}


def _serve(args: argparse.Namespace, sim, requests, clients, slo, rule) -> dict[str, Any]:
    """The run's summary: one replica, or --replicas behind --router (serving.fleet)."""
    from roofline.serving.fleet import Fleet
    from roofline.serving.metrics import decode_only_step, summarize

    if args.disaggregate:
        return _disaggregated(args, sim, requests, clients, slo)
    if args.replicas == 1:
        trace = sim.run(requests, _progress(), clients)
        return {**summarize(trace, slo), "decode_only_step": decode_only_step(trace, sim.phases)}
    run = Fleet(sim, args.replicas, args.router, rule).run(requests, clients)
    out = summarize(run.trace, slo)
    out["replicas"] = {"count": args.replicas, "router": args.router, "router_thresholds": _rule_json(args, rule),
                       "requests": np.bincount(run.routed, minlength=args.replicas).tolist(),
                       "kv_max_utilization": [float(t.steps[:, 4].max() / t.kv_capacity_bytes) if len(t.steps)
                                              else 0.0 for t in run.replicas]}
    return out


def _disaggregated(args: argparse.Namespace, sim, requests, clients, slo) -> dict[str, Any]:
    """Prefill and decode pools (serving.disagg): the decode pool is `sim`, the prefill pool its own."""
    from roofline.catalogue import load_hardware
    from roofline.cli.simulate_checks import MAX_REPLICAS as MAX_COUNT
    from roofline.errors import SpecError
    from roofline.serving.disagg import Disaggregated, KvLink
    from roofline.serving.metrics import summarize
    from roofline.serving.simulate import Simulator

    try:
        p_rep, d_rep = (int(x) for x in args.disaggregate.split(":"))
        if not (1 <= p_rep <= MAX_COUNT and 1 <= d_rep <= MAX_COUNT):  # as --replicas (1e9 pools never ended)
            raise ValueError
    except ValueError:
        raise SpecError(f"--disaggregate: {args.disaggregate!r} is not P:D with P, D from 1 to {MAX_COUNT:,} "
                        "replicas") from None
    if not clients.open_loop or requests.prefix is not None or args.replicas != 1:
        raise SpecError("--disaggregate: open-loop arrivals only, without --prefix, --session-turns, "
                        "--max-concurrency or --replicas (the pools are sized by P:D)")
    hw = load_hardware(args.prefill_hardware) if args.prefill_hardware else sim.hardware
    wl = sim.workload.model_copy(update={"tp": args.prefill_tp or args.tp})
    prefill = Simulator(sim.model, hw, wl, sim.method, max_tokens=sim.max_tokens, engine=sim.engine)
    try:
        link = (KvLink(args.kv_link_bytes_per_s, 5e-6) if args.kv_link_bytes_per_s
                else KvLink.between(hw, sim.hardware))
    except ValueError as err:
        raise SpecError(str(err)) from None
    if sim.first_use() is not None:  # the prefill pool runs the same model on the same engine
        raise SpecError("--cold-start: with --disaggregate a fresh pair's KV connector handshake is simulated; the "
                        f"pools' fused-MoE compiles ({sim.model.name}'s routed experts) are not covered")
    pools = Disaggregated(prefill, sim, p_rep, d_rep, link, args.router)
    run = pools.run(requests)
    return {**summarize(run.trace, slo), "disaggregated": pools.summary(run)}


def _size_fleet(args: argparse.Namespace, sim, requests, slo, clients, start: int | None, rule) -> dict[str, Any]:
    """The fewest replicas meeting the SLO at --target-rate (fleet simulated at each size), GPUs and cost."""
    from roofline.errors import SpecError
    from roofline.serving.fleet import size_fleet

    if args.target_rate is None or slo is None:
        raise SpecError("--size-fleet: needs --target-rate and an SLO (--slo-ttft-ms, --slo-tpot-ms)")
    if not math.isfinite(requests.offered_rate):
        raise SpecError("--size-fleet: needs arrivals to scale to --target-rate; every request arrives at time 0 "
                        "(--rate inf, or a trace whose rows all arrive at 0)")
    return size_fleet(sim, requests, slo, args.router, args.target_rate, args.tp * args.pp, args.usd_per_gpu_hour,
                      start or 1, clients, rule)


def _clients(args: argparse.Namespace):
    """How requests are released (serving.clients): open loop, a concurrency cap, or chat sessions."""
    from roofline.errors import SpecError
    from roofline.serving.clients import Clients

    try:
        return Clients(args.max_concurrency, args.think_time_s, args.session_turns)
    except ValueError as err:
        raise SpecError(str(err)) from None


def _clients_json(clients) -> dict[str, Any]:
    return {"max_concurrency": clients.max_concurrency, "think_time_s": clients.think_s,
            "session_turns": clients.session_turns}


def _api_server(args: argparse.Namespace, result: dict[str, Any]) -> dict[str, Any] | None:
    """The API server's one loop at the run's streamed tokens a second, per replica (roofline.engines.timing 25.,
    api_server_load); None where the engine's profile has no such figures, or for --disaggregate (a proxy and the
    decode servers stream)."""
    from roofline.engines.timing import api_server_load

    if args.disaggregate:
        return None
    return api_server_load(args.engine, args.host_speed, result["throughput_tokens_per_s"] / args.replicas)


def _trust(hardware, engine: str, model, disaggregated: bool = False, pp: int = 1) -> dict[str, Any]:
    """roofline.trust.serving_trust of the device as the simulator uses it: the serving figures' bands (the engine's
    runs; a --disaggregate run's, the pairs') and the text the notes open with; at pp > 1 the pipeline's caveat."""
    from roofline.trust import pipeline_caveat, serving_trust

    return pipeline_caveat(serving_trust(hardware, engine, model, disaggregated), pp)


def _engine_profile(args: argparse.Namespace, hardware, requests):
    """The engine's scheduler defaults for this GPU, with the flags the user gave (an omitted flag keeps the
    engine's own default)."""
    from roofline.engines.scheduling import UNIFIED_NOTE, scheduling

    overlap = False if getattr(args, "no_async_scheduling", False) else None  # vLLM's flag (check_flags)
    profile = scheduling(args.engine, hardware, args.entry_point, args.tp, context_len=max(requests.max_tokens, 2),
                         overlap=overlap, host_speed=args.host_speed)
    caching = None if args.prefix_caching is None else args.prefix_caching == "on"
    profile = profile.with_overrides(args.max_num_seqs, args.max_num_batched_tokens, caching)
    if args.engine == "llamacpp" and args.max_num_seqs is not None and not getattr(args, "kv_unified", False):
        from dataclasses import replace  # llama-server -np N without -kvu: one KV stream a slot (timing 20.)
        profile = replace(profile, slot_streams=True, notes=tuple(
            n.replace("-np 4 slots (unified KV)", f"-np {args.max_num_seqs} slots, one KV stream each (no -kvu): a "
                      "step splits into ubatches at each break in consecutive slot ids, each a pass over the weights; "
                      "a request takes the least recently used slot") for n in profile.notes if n != UNIFIED_NOTE))
    elif args.engine == "llamacpp" and args.max_num_seqs is not None:  # -np N -kvu
        from dataclasses import replace
        profile = replace(profile, notes=tuple(n.replace("-np 4 slots", f"-np {args.max_num_seqs} slots")
                                               for n in profile.notes))
    if getattr(args, "cache_ram", None) == 0:  # llama-server --cache-ram 0: no save before a new task
        from dataclasses import replace
        on, off = "the host prompt cache on (--cache-ram 8192 MiB", "the host prompt cache off (--cache-ram 0"
        profile = replace(profile, overheads=replace(profile.overheads, save_s=0.0, save_byte_s=0.0),
                          notes=tuple(n.replace(on, off) for n in profile.notes))
    if not profile.chunked_prefill and int(requests.prompt_tokens.max()) > profile.max_num_batched_tokens:
        from roofline.errors import SpecError
        raise SpecError(f"--max-num-batched-tokens: {args.engine} runs without chunked prefill, so a prompt of "
                        f"{int(requests.prompt_tokens.max()):,} tokens needs a step budget of at least that "
                        f"(it is {profile.max_num_batched_tokens:,})")
    return profile


def _simulator(args: argparse.Namespace, model, hardware, workload, method, profile, max_tokens: int):
    """The simulator of one method (serving.engined: SGLang's running-request cap follows its pool's tokens, known
    once the pool is sized, unless --max-num-seqs was given)."""
    from roofline.errors import SpecError
    from roofline.serving.engined import engine_simulator

    spec = None
    if args.speculative:
        from roofline.serving.speculative import Speculative
        spec = Speculative.parse(args.speculative)
    try:
        sim = engine_simulator(model, hardware, workload, method, max_tokens, profile, spec,
                               seqs_given=args.max_num_seqs is not None)
        sim.cold_start = args.cold_start
        sim.compiled_tokens = tuple(args.compiled_tokens or ())
        return sim
    except ValueError as err:  # a pool with no room names the flag that sized it (serving.pool.KVPool)
        if not str(err).startswith("kv pool:"):
            raise
        if spec is not None and spec.draft_model:
            raise SpecError(f"--speculative: the draft {spec.draft_model} leaves no room for KV pages on "
                            f"{hardware.name} beside {model.name} ({err})") from None
        raise SpecError(_no_room(args, model, hardware, err)) from None


def _no_room(args: argparse.Namespace, model, hardware, err: ValueError) -> str:
    """A pool with no room for KV pages, naming the flag most likely to make room: the step budget or sequence cap
    the user raised (the engine reserves their activations), the utilization the user lowered, else --tp."""
    given = [(f, v) for f, v in (("--max-num-batched-tokens", args.max_num_batched_tokens),
                                 ("--max-num-seqs", args.max_num_seqs), ("--utilization", args.utilization))
             if v is not None]
    flag = given[0][0] if given else "--tp"
    what = ", ".join(f"{f} {v}" for f, v in given)
    return (f"{flag}: {model.name} on {hardware.name} at tp {args.tp}, pp {args.pp}{', ' + what if what else ''} "
            f"leaves no room for KV pages: its weights and the engine's reserved activations fill the usable memory "
            f"({err}); raise --tp / --pp or give a larger GPU")


def _spec_json(sim) -> dict[str, Any] | None:
    spec = sim.speculative
    if spec is None:
        return None
    return {"method": spec.method, "draft_model": spec.draft_model, "tokens": spec.tokens,
            "acceptance": list(spec.acceptance), "expected_tokens_per_step": spec.expected_tokens(),
            "draft_weights_bytes": sim.draft.weights_bytes, "draft_pass_host_s": sim.draft.pass_host_s}


def _engine_json(engine) -> dict[str, Any]:
    """The scheduler the run used, as JSON."""
    return {"name": engine.engine, "max_num_seqs": engine.max_num_seqs,
            "max_num_batched_tokens": engine.max_num_batched_tokens, "chunked_prefill": engine.chunked_prefill,
            "mixed_steps": engine.mixed_steps, "preemption": engine.preemption, "pad_scope": engine.pad_scope,
            "capture_sizes_max": engine.capture_sizes[-1] if engine.capture_sizes else None,
            "page_tokens": engine.page_tokens, "prefix_caching": engine.prefix_caching, "host_speed": engine.host_speed,
            "slot_streams": engine.slot_streams, "notes": list(engine.notes)}


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
    from roofline.cli.plantext import layout_label  # the header's "; weights fp8", as plan's

    r0 = results[0]
    head = (f"{r0['model']} on {r0['hardware']} (tp {r0['tp']}, pp {r0['pp']}{layout_label(r0)}): "
            f"{r0['requests']:,} requests, offered {r0['offered_rate_per_s']:.3g} req/s\n")
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
    notes = list(r0["notes"]) + [f"{r['method']}: {r['max_rate_reason']}" for r in results if r["max_rate_reason"]]
    notes += _feature_notes(r0)
    if r0.get("trust"):
        notes.insert(0, f"trust: {r0['trust']['text']}")
    for r in results:
        if (api := r.get("api_server")) and api["load"] >= api["warn_at"]:
            notes.append(f"warning: {r['method']}: the API server's one loop is {api['load']:.0%} busy "
                         f"({api['tokens_per_s']:,.0f} streamed tok/s x {api['per_token_s'] * 1e6:.0f} us a token"
                         f"{' a replica' if r.get('replicas') else ''}); past {api['warn_at']:.0%} a new request waits "
                         "for the GIL that loop holds (vLLM 0.24 on the H200: tens to hundreds of ms at 64 streams), "
                         "which this simulation does not time: TTFT is a floor here (roofline.engines.timing 25.)")
    for r in results:
        if (step := r.get("decode_only_step")) and r["tpot_s"]["p50"] is not None:
            notes.append(f"{r['method']}: TPOT is served: a request's time between tokens, over every step it "
                         "decodes in, the steps carrying other requests' prefill chunks included; a decode-only step "
                         f"at this run's mean {step['batch']} running and {step['context_tokens']:,} tokens is "
                         f"{display.seconds(step['step_s'])} (`plan`'s TPOT at that batch and context)")
        if (clock := r.get("gemm_clock")) and clock["clock"] != "sustained":
            where = ("at the burst clock" if clock["clock"] == "burst" else
                     f"{clock['sustained_share']:.0%} of the way from the burst to the power-capped rate")
            notes.append(f"{r['method']}: GEMMs {where} (GEMM duty {clock['duty']:.2f}: the board is under its "
                         "power cap part of the time; docs/serving.md)")
        if (fresh := r.get("first_use")) is not None:
            notes.append(f"{r['method']}: a fresh server (--cold-start): {fresh['keys']} new fused-MoE kernel "
                         f"specialisations compiled in the run, {fresh['seconds']:.2f} s of stalls"
                         + (f" ({fresh['why']})" if "why" in fresh else "" if fresh["keys"] else
                            " (every eager step's key was compiled at start or in --compiled-tokens' traffic)"))
            if (shake := fresh.get("kv_handshake")) is not None:
                notes.append(f"{r['method']}: a fresh pair's KV connector handshakes: {shake['pairs']} (decode, "
                             f"prefill) replica pairs met, {display.seconds(shake['seconds_each'])} each; "
                             f"{shake['requests_waited']} requests waited for one, at most "
                             f"{display.seconds(shake['max_wait_s'])}" + (f" ({shake['why']})" if "why" in shake
                                                                          else ""))
        if r.get("prefix_cache"):
            notes.append(f"{r['method']}: prefix cache hit rate {r['prefix_cache']['hit_rate']:.1%} "
                         f"({r['prefix_cache']['workload']} workload)")
        if r.get("fleet_sizing"):
            z = r["fleet_sizing"]
            notes.append(f"{r['method']}: fewest replicas at {z['target_rate_per_s']:g} req/s ({z['router']}): "
                         + (f"{z['replicas']} ({z['gpus']} GPUs)" if z["replicas"] else str(z["reason"])))
        f = r["fleet"]
        if f.get("gpus"):
            notes.append(f"{r['method']}: {f['gpus']} GPUs ({f['replicas']} replicas) for {f['target_rate_per_s']:g} "
                         "req/s")
        if f.get("usd_per_million_output_tokens"):
            notes.append(f"{r['method']}: ${f['usd_per_million_output_tokens']:.3f} per million output tokens "
                         "at the max rate")
    return text + ("\n\n" + "\n".join(notes) if notes else "")


def _feature_notes(r: dict[str, Any]) -> list[str]:
    """One line per serving feature the run used: engine, clients, speculative decoding, replicas, pools."""
    e, c = r["engine"], r["clients"]
    out = [f"engine {e['name']}: {e['max_num_seqs']} sequences, {e['max_num_batched_tokens']} tokens a step"
           + ("" if e["chunked_prefill"] else ", no chunked prefill") + ("" if e["mixed_steps"] else
                                                                         ", prefill and decode in separate steps")
           + (f"; host {e['host_speed']:g}x its time profile's (host work / {e['host_speed']:g})"
              if e.get("host_speed", 1.0) != 1.0 else "")
           + ("; one KV stream a slot (-np without -kvu): a step splits into ubatches at each break in consecutive "
              "slot ids, each a pass over the weights, and a split step rebuilds the server's graph (roofline.engines."
              "timing 20., 21.; --kv-unified: one stream)" if e.get("slot_streams") else "")]
    if c["max_concurrency"] or c["session_turns"] > 1:
        who = (f"at most {c['max_concurrency']} outstanding" if c["max_concurrency"]
               else f"sessions of {c['session_turns']} turns")
        out.append(f"clients: {who}, think time {c['think_time_s']:g} s")
    if r.get("speculative"):
        sp = r["speculative"]
        floor = sp.get("draft_pass_host_s") or 0.0
        out.append(f"speculative {sp['method']}: {sp['tokens']} drafts, {sp['expected_tokens_per_step']:.2f} tokens "
                   "per step expected" + (f"; each draft pass takes at least {floor * 1e3:.2f} ms of the drafter's "
                                          "host work (vLLM's proposer, measured)" if floor else ""))
    if r.get("replicas"):
        out.append(f"{r['replicas']['count']} replicas ({r['replicas']['router']}): "
                   f"{', '.join(str(n) for n in r['replicas']['requests'])} requests")
    if r.get("disaggregated"):
        d = r["disaggregated"]
        out.append(f"prefill pool {d['prefill']['replicas']} x {d['prefill']['hardware']} tp {d['prefill']['tp']}, "
                   f"decode pool {d['decode']['replicas']} x {d['decode']['hardware']} tp {d['decode']['tp']}; KV "
                   f"transfer p50 {display.seconds(d['transfer_s']['p50'])}"
                   + (f" (the engine's KV connector {display.seconds(d['connector_s_mean'])} of it, mean"
                      + (f"; its post, {display.seconds(d['post_s_mean'])}, is host work of the decode step that "
                         + ("posts the load; the request runs its last token once a later step reports the load "
                            "done (vLLM's WAITING_FOR_REMOTE_KVS: two scheduler hops)" if d.get("hops")
                            else "admits the request") if d.get("post_s_mean") else "") + ")"
                      if d.get("connector_s_mean") else ""))
    return out
