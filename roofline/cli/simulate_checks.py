"""`roofline simulate`'s flags checked against each other before anything runs: a flag the run would not read is
refused in one line naming it and the flag it needs (never silently ignored), and so is a combination the simulator
cannot run honestly.

- --think-time-s is the pause of a --max-concurrency slot or a --session-turns session (serving.clients); open-loop
  arrivals have none.
- --prefill-hardware, --prefill-tp and --kv-link-bytes-per-s describe the prefill pool and its link: --disaggregate.
- --cache-threshold and the --balance-*-threshold flags are the prefix-aware router's (serving.router); --router
  routes between --replicas (or the pools of --disaggregate, or the fleets --size-fleet tries).
- --micro-batches split a step through the pipeline: --pp > 1.
- --entry-point offline is vLLM's LLM class (roofline.engines.scheduling.vllm); the other engines have one default.
- --disaggregate with --size-fleet: the fleet sizing replays aggregated replicas (serving.fleet), not P:D pools.
- vLLM refuses max_num_batched_tokens < max_num_seqs ("must be greater than or equal to max_num_seqs":
  vllm-project/vllm vllm/config/scheduler.py SchedulerConfig._verify_args at f0de1a604cad003379e5bb4dfc3cc5d2a1f25fa8,
  lines 249-285): a run of a configuration the engine would not start is refused as the engine refuses it.
- llama.cpp's server (--engine llamacpp) has no tensor parallelism and no prefill/decode disaggregation
  (roofline.engines.llamacpp): --tp > 1 and --disaggregate are refused with it.
- --speculative mtp drafts with the MTP module the target's checkpoint ships (vLLM builds the draft from the target's
  own weights: SpeculativeConfig.hf_config_override, vllm/config/speculative.py at 002e77c1); a model with none
  (Model.mtp_layers 0: Llama, Mistral, Qwen3, ...) is refused.
"""

from __future__ import annotations

import argparse

from roofline.errors import SpecError

# Replicas per fleet or pool: each is a simulator's state; on the project's 2-core machine 16,384 replicas took 9 s
# and 0.5 GB to set up and 65,536 took 18 s and 1.4 GB for five requests, while 1,048,576 (--replicas' type bound)
# never ended. 4,096 is the planner's bound on GPUs (roofline.planner.parallel.MAX_GPUS).
MAX_REPLICAS = 4096
ROUTER_DEFAULTS = {"router": "least-outstanding", "cache_threshold": 0.3, "balance_abs_threshold": 64,
                   "balance_rel_threshold": 1.5}  # serving.router.CacheAware's defaults (SGLang's RouterArgs)


def check_flags(args: argparse.Namespace) -> None:
    """Refuses flags the run would ignore and combinations it cannot simulate; fills the router's defaults."""
    clients = args.max_concurrency is not None or args.session_turns > 1
    if args.think_time_s and not clients:
        raise SpecError("--think-time-s: is the pause of a --max-concurrency slot or a --session-turns session; "
                        "open-loop arrivals (--rate / --trace alone) have none")
    if not args.disaggregate:
        for flag, value in (("--prefill-hardware", args.prefill_hardware), ("--prefill-tp", args.prefill_tp),
                            ("--kv-link-bytes-per-s", args.kv_link_bytes_per_s)):
            if value is not None:
                raise SpecError(f"{flag}: describes the prefill pool of --disaggregate P:D; give --disaggregate")
    if args.replicas > MAX_REPLICAS:
        raise SpecError(f"--replicas: {args.replicas:,} is over {MAX_REPLICAS:,} replicas, the most a fleet "
                        "simulates (size larger fleets from --target-rate and the max rate at the SLO)")
    _check_router(args)
    if args.micro_batches is not None and args.pp == 1:
        raise SpecError("--micro-batches: split a step through the pipeline's stages; give --pp > 1")
    if getattr(args, "no_async_scheduling", False) and args.engine != "vllm":
        raise SpecError(f"--no-async-scheduling: is vLLM's flag (asynchronous scheduling, on by default since 0.14); "
                        f"--engine {args.engine} has no such switch")
    if getattr(args, "kv_unified", False) and args.engine != "llamacpp":
        raise SpecError(f"--kv-unified: is llama-server's -kvu; --engine {args.engine} has no such flag")
    cache_ram = getattr(args, "cache_ram", None)
    if cache_ram is not None and args.engine != "llamacpp":
        raise SpecError(f"--cache-ram: is llama-server's host prompt cache; --engine {args.engine} has no such cache")
    if cache_ram is not None and cache_ram < 0:
        raise SpecError(f"--cache-ram: {cache_ram} MiB; give 0 (off) or a size in MiB")
    if args.entry_point == "offline" and args.engine != "vllm":
        raise SpecError(f"--entry-point: offline is vLLM's LLM class; --engine {args.engine} has one set of "
                        "defaults")
    if getattr(args, "compiled_tokens", None) and not getattr(args, "cold_start", False):
        raise SpecError("--compiled-tokens: names what a fresh server compiled in earlier traffic; give --cold-start "
                        "(a server in steady state has compiled every key)")
    if getattr(args, "cold_start", False):
        if args.engine not in ("vllm", "sglang"):
            raise SpecError(f"--cold-start: is the first use of vLLM's or SGLang's fused-MoE Triton kernel "
                            f"(engines.first_use); --engine {args.engine} compiles nothing on first use")
        if args.disaggregate and args.engine != "vllm":
            raise SpecError(f"--cold-start: a fresh --disaggregate pair's first KV connector handshake is measured "
                            f"for vLLM's NixlConnector only; --engine {args.engine}'s is not covered")
        for flag, given in (("--replicas", args.replicas > 1), ("--speculative", bool(args.speculative)),
                            ("--size-fleet", args.size_fleet)):
            if given:
                raise SpecError(f"--cold-start: simulates one fresh server's compiles; {flag} is not covered")
    if args.engine == "llamacpp":
        from roofline.engines.llamacpp import refuse_tp

        refuse_tp(args.tp)
        if args.disaggregate:
            raise SpecError("--disaggregate: llama.cpp's server has no prefill/decode disaggregation (one process "
                            "runs both); simulate --replicas N for several servers")
    if args.disaggregate and args.size_fleet:
        raise SpecError("--size-fleet: sizes a fleet of aggregated replicas; it does not size --disaggregate pools")


def _check_router(args: argparse.Namespace) -> None:
    """The router's flags apply only where a router runs; unset ones take ROUTER_DEFAULTS."""
    routed = args.replicas > 1 or args.disaggregate or args.size_fleet
    if args.router is not None and not routed:
        raise SpecError(f"--router: {args.router} routes between --replicas N > 1 (or --disaggregate pools, "
                        "--size-fleet); one replica has no router")
    for name in ("cache_threshold", "balance_abs_threshold", "balance_rel_threshold"):
        flag = "--" + name.replace("_", "-")
        if getattr(args, name) is not None and args.router != "prefix-aware":
            raise SpecError(f"{flag}: a threshold of the prefix-aware router; give --router prefix-aware")
        if getattr(args, name) is not None and args.disaggregate:  # serving.disagg's fleets take the defaults
            raise SpecError(f"{flag}: the --disaggregate pools route with the router's default thresholds")
    for name, default in ROUTER_DEFAULTS.items():
        if getattr(args, name) is None:
            setattr(args, name, default)


MIN_KV_LINK_BYTES_PER_S = 1e6  # 1 MB/s, four orders below any datacenter NIC: below it a transfer outlasts the clock


def check_horizon(args: argparse.Namespace, requests) -> None:
    """Send times stay within serving.traces.MAX_ARRIVAL_S (the clock resolves a step there): think time adds up
    over one client's back-to-back requests (ceil(n / --max-concurrency) - 1 pauses) or one session's turns
    (turns - 1), after the last arrival (a bound from above).
    A --kv-link-bytes-per-s below MIN_KV_LINK_BYTES_PER_S is refused (1e-300 B/s left the pools no event: a
    RuntimeError traceback)."""
    from roofline.serving.traces import MAX_ARRIVAL_S

    if args.think_time_s:
        n = len(requests)
        pauses = (-(-n // args.max_concurrency) if args.max_concurrency is not None
                  else min(args.session_turns, n)) - 1
        last = float(requests.arrival_s[-1]) + pauses * args.think_time_s
        if last > MAX_ARRIVAL_S:
            raise SpecError(f"--think-time-s: {args.think_time_s:g} s, {pauses:,} times one after another, reaches "
                            f"{last:.3g} s, past the {MAX_ARRIVAL_S:.0e} s a simulated clock resolves to a step")
    link = args.kv_link_bytes_per_s
    if link is not None and link < MIN_KV_LINK_BYTES_PER_S:
        raise SpecError(f"--kv-link-bytes-per-s: {link:g} is below {MIN_KV_LINK_BYTES_PER_S:.0e} bytes/s (1 MB/s, "
                        "slower than any datacenter link)")


def check_engine_limits(args: argparse.Namespace, profile) -> None:
    """A vLLM configuration vLLM itself refuses (module docstring) is refused here, naming the flag given."""
    if args.engine == "vllm" and profile.max_num_batched_tokens < profile.max_num_seqs:
        flag = "--max-num-batched-tokens" if args.max_num_batched_tokens is not None else "--max-num-seqs"
        raise SpecError(f"{flag}: vLLM needs max_num_batched_tokens ({profile.max_num_batched_tokens:,}) >= "
                        f"max_num_seqs ({profile.max_num_seqs:,}) (SchedulerConfig refuses it)")


def check_speculative(args: argparse.Namespace, model) -> None:
    """--speculative mtp on a model whose checkpoint ships no MTP module (module docstring) is refused."""
    if args.speculative and args.speculative.strip().startswith("mtp:") and model.mtp_layers == 0:
        raise SpecError(f"--speculative: mtp drafts with the model's own MTP module and {model.name} has none "
                        "(Model.mtp_layers 0: its config.json names no num_nextn_predict_layers or "
                        "mtp_num_hidden_layers); use eagle:K:A or draft=MODEL:K:A")
