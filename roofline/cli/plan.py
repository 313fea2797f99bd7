"""`roofline plan`: the capacity plan table (and --json, --plot, --fewest-gpus, --tpot-target-ms)."""

from __future__ import annotations

import argparse
import math
from typing import Any

from roofline import report as display
from roofline.catalogue import kernel_profiles
from roofline.report.bounds import PLANNER_WEIGHT_DTYPES as WEIGHT_DTYPES

PLAN_HELP = "capacity plan per method (no arguments: the embedded default scenario, all presets)"


def add_plan_parser(sub) -> None:
    """Register `roofline plan`."""
    from roofline.cli import MAX_BATCH, MAX_CONTEXT, bounded_int
    from roofline.report.answer import CONSTRAINTS

    context, batch = bounded_int(MAX_CONTEXT), bounded_int(MAX_BATCH)
    p = sub.add_parser("plan", help=PLAN_HELP)
    add_scenario_flags(p, context, batch)
    p.add_argument("--all-methods", action="store_true",
                   help="every preset that applies to the model, beside any --method (the default without --method)")
    p.add_argument("--best-by", choices=tuple(CONSTRAINTS), default="tokens",
                   help="rank the rows that fit by: tokens (most tok/s, default), context (longest), batch (most "
                   "sequences) or gpus (fewest, with --fewest-gpus)")
    p.add_argument("--notes", action="store_true", help="print every note (default: grouped, the first few)")
    p.add_argument("--plot", metavar="DIR", help="write roofline and memory charts (PNG and SVG) into DIR, a folder "
                   "you name (created if missing; never the file-system root)")
    p.add_argument("--json", action="store_true")
    p.set_defaults(func=cmd_plan)


def add_scenario_flags(p: argparse.ArgumentParser, context, batch) -> None:
    """The model, hardware, methods and workload flags `plan` and `best` share."""
    from roofline.cli import MAX_CONTEXT, add_host_speed, add_kv_cache_memory, bounded_float, bounded_int, positive_int

    p.add_argument("--model", help="catalogue name, YAML spec or HF config.json (default Llama-3.1-8B)")
    p.add_argument("--name", help="the model's name when --model is a config.json (default: its _name_or_path, "
                   "else the folder holding it)")
    p.add_argument("--hardware", help="catalogue name or YAML spec (default H100-SXM)")
    p.add_argument("--method", action="append", help="method SPEC; repeat to compare (default: all presets)")
    p.add_argument("--batch", type=batch, help="concurrent sequences B (default 16)")
    p.add_argument("--context", type=context, help="tokens per sequence L (default 32768)")
    p.add_argument("--prompt", type=context, help="prompt tokens P (default L - generated)")
    p.add_argument("--generated", type=bounded_int(MAX_CONTEXT, minimum=0),
                   help="generated tokens T for the averaged TPOT (default 1024)")
    p.add_argument("--tp", type=positive_int, default=1, help="tensor-parallel GPUs")
    p.add_argument("--pp", type=positive_int, default=1, help="pipeline stages")
    p.add_argument("--micro-batches", type=batch, help="micro-batches through the pipeline (default pp)")
    p.add_argument("--utilization", type=float, help="fraction of device memory usable (default 0.90)")
    add_kv_cache_memory(p)
    p.add_argument("--reserve-gib", type=float, help="runtime reserve in GiB (default 1, +0.5 with >1 GPU)")
    p.add_argument("--prefill-chunk", type=context, help="chunked-prefill tokens (default 8192)")
    p.add_argument("--ep", type=positive_int, default=1,
                   help="expert-parallel replicas of tp x pp GPUs, each serving its own batch and holding 1/ep of "
                   "the routed experts; all-to-all dispatch and combine per MoE layer (default 1; MoE models only)")
    p.add_argument("--weight-dtype", help="bf16 (default), fp16, fp8, int8, int4, fp4, mxfp4, nvfp4 (on an "
                   "unquantized model fp8 ... nvfp4 are planned as an engine stores them: the linear matrices in the "
                   "dtype's usual format with its scales, the embedding, LM head and norms at bf16), or a "
                   "llama-quantize file type under --engine llamacpp: gguf:Q8_0, gguf:Q6_K, gguf:Q5_K_M, gguf:Q4_K_M, "
                   "gguf:Q4_0, ... "
                   "(each tensor at the type llama-quantize gives it)")
    p.add_argument("--expert-weight-dtype", choices=WEIGHT_DTYPES,
                   help="storage dtype of the routed experts (default: --weight-dtype); gpt-oss ships mxfp4 experts")
    p.add_argument("--engine", choices=("ideal", "vllm", "sglang", "trtllm", "llamacpp"),
                   help="size the KV pool by this engine's rules and page size (default ideal; see `capacity`)")
    add_host_speed(p)
    add_ceilings_fusion(p)
    p.add_argument("--kernel-profile", choices=tuple(kernel_profiles.PROFILES), default=kernel_profiles.DEFAULT,
                   help="decode kernel a quantized cache is read by (roofline.catalogue.kernel_profiles; default "
                   f"{kernel_profiles.DEFAULT})")
    p.add_argument("--fewest-gpus", action="store_true", help="also: fewest GPUs of this kind that fit")
    p.add_argument("--tpot-target-ms", type=bounded_float(1e9), help="also: largest context / batch under this TPOT")


def add_ceilings_fusion(p: argparse.ArgumentParser) -> None:
    """--ceilings and --fusion, shared by `plan` and `kv`."""
    p.add_argument("--ceilings", choices=("measured", "datasheet"), default="measured",
                   help="measured (default): the device's measured section, else an estimate from measured devices "
                   "of its architecture and memory generation, else the datasheet; datasheet: peaks only")
    p.add_argument("--fusion", choices=("none", "typical", "full"), default="typical",
                   help="kernels per op: none (eager PyTorch), typical (vLLM/SGLang, default), full (torch.compile)")


def _workload(args: argparse.Namespace):
    from roofline.catalogue.loading import validate
    from roofline.planner.plan import DEFAULT_SCENARIO
    from roofline.specs import Workload

    data: dict[str, Any] = {"batch": args.batch or DEFAULT_SCENARIO["batch"],
                            "context_tokens": args.context or DEFAULT_SCENARIO["context_tokens"],
                            "tp": args.tp, "pp": args.pp, "ep": args.ep, "fusion": args.fusion}
    generated = args.generated if args.generated is not None else min(DEFAULT_SCENARIO["generated_tokens"],
                                                                       data["context_tokens"] - 1)
    data["generated_tokens"] = generated
    optional = {"prompt_tokens": args.prompt, "gpu_memory_utilization": args.utilization,
                "kv_cache_memory_bytes": args.kv_cache_memory_bytes,
                "prefill_chunk_tokens": args.prefill_chunk, "weight_dtype": args.weight_dtype,
                "expert_weight_dtype": args.expert_weight_dtype,
                "micro_batches": args.micro_batches or (min(args.pp, data["batch"]) if args.pp > 1 else None),
                "runtime_reserve_bytes": None if args.reserve_gib is None else _gib_to_bytes(args.reserve_gib),
                **_engine_fields(args.engine), "host_speed": args.host_speed if args.host_speed != 1.0 else None}
    data.update({k: v for k, v in optional.items() if v is not None})
    return validate(Workload, data, "workload")


MAX_RESERVE_GIB = 1 << 20


def _engine_fields(engine: str | None) -> dict[str, Any]:
    if engine is None:
        return {}
    from roofline.engines import PAGE_TOKENS

    return {"engine": engine, "page_tokens": PAGE_TOKENS[engine]}


def _gib_to_bytes(gib: float) -> int:
    from roofline.errors import SpecError

    if not 0 <= gib <= MAX_RESERVE_GIB:
        raise SpecError(f"--reserve-gib: {gib} must be a number in 0 .. {MAX_RESERVE_GIB:,}")
    return int(gib * display.GIB)


def build_plan(args: argparse.Namespace) -> tuple[dict[str, Any], Any, Any]:
    """The plan of `_build_plan` under the chosen kernel profile (roofline.catalogue.kernel_profiles)."""
    with kernel_profiles.use(getattr(args, "kernel_profile", kernel_profiles.DEFAULT)):
        return _build_plan(args)


def _build_plan(args: argparse.Namespace) -> tuple[dict[str, Any], Any, Any]:
    """The plan result for the scenario flags (checked against the model first), with every row's verdict, rank,
    trust and benchmark-client latencies; returns (result, model, hardware)."""
    from roofline.catalogue import load_hardware, load_model
    from roofline.catalogue.ceiling_sources import ceilings_label, with_ceilings
    from roofline.planner import plan
    from roofline.planner.plan import DEFAULT_SCENARIO
    from roofline.report.answer import rank
    from roofline.report.bounds import check_expert_dtype, check_parallel, check_weight_dtype
    from roofline.trust import plan_trust

    model = load_model(DEFAULT_SCENARIO["model"] if args.model is None else args.model, name=args.name)
    check_parallel(model, args.tp, args.pp, args.ep)
    check_expert_dtype(model, args.expert_weight_dtype)
    if args.weight_dtype is None:  # a .gguf --model: its file type (gguf_file.file_weight_dtype)
        from roofline.gguf_file import file_weight_dtype

        args.weight_dtype = file_weight_dtype(args.model)
    check_weight_dtype(model, args.weight_dtype, args.engine, args.expert_weight_dtype)
    raw_hardware = load_hardware(DEFAULT_SCENARIO["hardware"] if args.hardware is None else args.hardware)
    hardware = with_ceilings(raw_hardware, args.ceilings)
    workload = _workload(args)
    if args.tpot_target_ms and not workload.generated_tokens:
        from roofline.errors import SpecError

        raise SpecError("--tpot-target-ms: a TPOT target needs decode steps, and --generated 0 generates none")
    from roofline.stored_bytes import stored_widths

    workload, quantization = stored_widths(model, workload)
    methods, skipped = _methods(args.method, model, getattr(args, "all_methods", False))
    if args.fewest_gpus:
        result = _plan_on_fewest_gpus(model, hardware, workload, methods)
    else:
        result = plan(model, hardware, workload, methods)
    result.update(ceilings=ceilings_label(hardware, args.ceilings), fusion=workload.fusion)
    profile = getattr(args, "kernel_profile", kernel_profiles.DEFAULT)
    if profile != kernel_profiles.DEFAULT:
        result["kernel_profile"] = profile
    _annotate(result, model)
    from roofline.planned_weights import checkpoint_notes

    result.update(checkpoint_notes(model, workload.weight_dtype, workload.expert_dtype, quantization))
    result["skipped"] = skipped
    if args.tpot_target_ms:
        _sla(result, model, hardware, workload, methods, args.tpot_target_ms / 1e3)
    result["datasheet_memory_bytes"] = raw_hardware.memory_bytes
    result["max_positions"] = model.max_position_embeddings
    result["tpot_definitions"] = TPOT_DEFINITIONS
    for row in result["results"]:
        row["benchmark_latency"] = {"vllm_tpot_s": row["tpot_avg_s"], "mean_itl_s": row["tpot_avg_s"],
                                    "last_itl_s": row["tpot_s"]}
    plan_trust(result, hardware, model)
    rank(result, model, getattr(args, "best_by", "tokens"))
    return result, model, hardware


# How the plan's latencies map onto the benchmark clients' (vLLM benchmarks/serve.py, calculate_metrics: TPOT =
# (latency - ttft) / (output_len - 1) per request, ITL = the gaps between successive output tokens).
TPOT_DEFINITIONS = {
    "tpot_s": "one decode step of the whole batch at context L (every sequence gets one token): the inter-token "
              "latency at L, the longest step of the generation",
    "tpot_avg_s": "the mean decode step while the context grows from the prompt P to L over the generated tokens",
    "vllm_tpot_s": "vLLM bench serve's TPOT: (end-to-end latency - TTFT) / (output tokens - 1), the first token "
                   "excluded; in a steady batch the mean decode step, tpot_avg_s",
    "mean_itl_s": "the benchmark clients' mean ITL (inter-token latency per token): the mean decode step, tpot_avg_s",
    "last_itl_s": "the last token's ITL: the step at context L, tpot_s",
    "ttft_s": "prefill of the whole batch (all B prompts together), not one request's time to first token",
}


def cmd_plan(args: argparse.Namespace) -> int:
    """`roofline plan`: the answer line and ranked table (or --json); 0 on success."""
    from roofline.cli.plantext import plan_text

    if args.plot is not None:  # refuse an unusable output path before any planning
        from roofline.report.plots import output_dir

        output_dir(args.plot)
    result, model, hardware = build_plan(args)
    if args.plot:
        from roofline.report.plots import write_plots

        workload = _workload(args)
        methods, _ = _methods(args.method, model, args.all_methods)
        with kernel_profiles.use(args.kernel_profile):
            result["plots"] = [str(p) for p in write_plots(result, model, hardware, workload, methods, args.plot)]
    if args.json:
        print(display.to_json(result))
    else:
        batch, ep = result["workload"]["batch"], result["workload"].get("ep", 1)
        print(plan_text(result, lambda r, common: _notes(r, batch, common, ep), args.notes))
    return 0


def _methods(requested: list[str] | None, model, all_methods: bool = False) -> tuple[list, list[dict[str, str]]]:
    """The methods to plan: every requested SPEC and, with no SPEC or with --all-methods, every preset; one that
    does not apply to the model (e.g. AQUA-KV on MLA) is skipped with its reason. None applying is an error."""
    from roofline.errors import SpecError
    from roofline.methods import applies, parse_method, presets
    from roofline.report.bounds import check_unique_methods

    check_unique_methods(requested)
    names = list(requested or [])
    if all_methods or not names:
        names += [n for n in sorted(presets()) if n not in names]
    methods, skipped = [], []
    for name in names:
        method = parse_method(name)
        reason = applies(method, model)
        if reason is not None:
            skipped.append({"method": name, "reason": reason.removeprefix(f"method {name!r} on {model.name}: ")})
            continue
        methods.append(method)
    if not methods:
        raise SpecError(f"method: {'no preset' if not requested else 'no method asked for'} applies to {model.name} "
                        f"({skipped[0]['reason']})")
    return methods, skipped


def _unbounded_reason(model) -> str:
    if all(layer.kind != "full" for layer in model.attention):
        return "unbounded: all layers are sliding-window (the cache stops growing past the windows)"
    return "unbounded: the method's cache stops growing with the context (eviction budget or windows)"


def _annotate(result: dict[str, Any], model) -> None:
    """Per row: the memory-bound max context capped at the model's positions (`max_context` keeps the
    uncapped value; None with a reason when unbounded), and reasons for every other infinite figure."""
    positions = model.max_position_embeddings
    for row in result["results"]:
        mc = row["max_context"]
        row["max_context_capped"] = min(mc, positions)
        row["max_context_capped_by"] = "max_position_embeddings" if mc > positions else "memory"
        if mc == math.inf:
            row["max_context_reason"] = _unbounded_reason(model)
        if row["limits"].get("remat_limit_tokens") == math.inf:
            row["limits"]["remat_limit_tokens_reason"] = (
                "unbounded: remat never becomes compute-bound (its FLOPs per cached token stay under ridge x "
                "cache bytes per token" + ("; every layer is sliding-window)" if "sliding" in
                                           _unbounded_reason(model) else ")"))


def _plan_on_fewest_gpus(model, hardware, workload, methods) -> dict[str, Any]:
    """Each method planned on the fewest GPUs of this kind that hold its batch at the context."""
    from roofline.planner import plan_method
    from roofline.planner.parallel import fewest_gpus

    rows = []
    for method in methods:
        fit = fewest_gpus(model, hardware, workload, method)
        row = plan_method(model, hardware, fit["workload"], method).as_dict()
        row["fewest_gpus"] = {k: fit[k] for k in ("gpus", "tp", "pp", "nodes")}
        rows.append(row)
    return {"model": model.name, "hardware": hardware.name, "workload": workload.model_dump(mode="json"),
            "gpus": max(r["fewest_gpus"]["gpus"] for r in rows), "results": rows}


def _sla(result, model, hardware, workload, methods, target: float) -> None:
    """Largest context (at the batch) and batch (at the context) under the TPOT target, each capped by
    what memory holds (the plan's max_context / max_batch) and the context by the model's positions;
    `*_bound` says which limit binds."""
    from roofline.planner.inversions import max_batch_for_tpot, max_context_for_tpot

    for row, method in zip(result["results"], methods, strict=True):
        fit = row.get("fewest_gpus")
        w = workload.model_copy(update={"tp": fit["tp"], "pp": fit["pp"]}) if fit else workload
        ctx_tpot = max_context_for_tpot(model, hardware, w, method, target)
        batch_tpot = max_batch_for_tpot(model, hardware, w, method, target)
        ctx_mem, batch_mem, positions = row["max_context"], row["max_batch"], model.max_position_embeddings
        bound = ("positions" if positions < min(ctx_mem, ctx_tpot) else "memory" if ctx_mem < ctx_tpot else "tpot")
        row["sla"] = {"tpot_target_s": target,
                      "max_context": min(ctx_tpot, ctx_mem, positions), "max_context_tpot": ctx_tpot,
                      "max_context_bound": bound,
                      "max_batch": min(batch_tpot, batch_mem), "max_batch_tpot": batch_tpot,
                      "max_batch_bound": "memory" if batch_mem < batch_tpot else "tpot"}
        if not ctx_tpot or not batch_tpot:
            row["sla"]["unreachable"] = _unreachable(model, hardware, w, method, target, ctx_tpot, batch_tpot)


def _unreachable(model, hardware, workload, method, target: float, ctx_tpot: float, batch_tpot: int) -> str:
    """Why the TPOT target is missed: the step at batch 1 (at this context) or at context 1 (at this batch), and
    the fastest step of all (batch 1, context 1) when even that misses."""
    from roofline.planner.inversions import _step

    step = _step(model, hardware, workload, method)
    fastest = float(step(1, 1))
    if fastest > target:
        return (f"even one sequence at context 1 takes {display.seconds(fastest)} per step: the weights alone take "
                f"longer to read than the target")
    parts = []
    if not batch_tpot:
        parts.append(f"one sequence at context {workload.context_tokens:,} takes "
                     f"{display.seconds(float(step(1, workload.context_tokens)))}")
    if not ctx_tpot:
        parts.append(f"batch {workload.batch:,} at context 1 takes {display.seconds(float(step(workload.batch, 1)))}")
    return "; ".join(parts) + " per step"


def _notes(r: dict[str, Any], batch: int, common: set[str] = frozenset(), ep: int = 1) -> list[tuple[str, str]]:
    """(method, text) of one row's notes: remat limits, the method's own notes, communication, the fit solver's
    GPUs, the TPOT target's answer, and warnings not every row shares."""
    notes, limits, name = [], r["limits"], r["method"]
    if "remat_limit_tokens" in limits:
        limit = limits["remat_limit_tokens"]
        where = "at any context" if limit == math.inf else f"up to {round(limit):,} tokens"
        notes.append(f"remat stays memory-bound {where} at batch {batch}")
    notes += list(r.get("notes", ()))
    if ep > 1 and (d := r["decode"]) is not None:
        notes.append(f"communication {display.seconds(d['comm_s'])} of the decode step (expert all-to-all "
                     f"over ep {ep}, dispatch and combine per MoE layer, plus any tp all-reduce); tok/s per replica")
    if "fewest_gpus" in r:
        f = r["fewest_gpus"]
        replicas = f", ep {ep}" if ep > 1 else ""
        notes.append(f"fewest GPUs that fit: {f['gpus']} (tp {f['tp']}, pp {f['pp']}{replicas})")
    if "sla" in r:
        notes.append(_sla_text(r["sla"], batch))
    return [(name, n) for n in notes] + [(name, f"warning: {msg}") for msg in r["warnings"] if msg not in common]


def _sla_text(s: dict[str, Any], batch: int) -> str:
    target = f"TPOT <= {s['tpot_target_s'] * 1e3:g} ms"
    if s.get("unreachable"):
        return f"{target}: unreachable ({s['unreachable']})"
    return (f"{target} up to context {_ctx(s['max_context'])} ({s['max_context_bound']}-bound) at batch {batch}, "
            f"batch {s['max_batch']:,} ({s['max_batch_bound']}-bound) at this context")


def _ctx(n: float) -> str:
    return "unbounded" if n == math.inf else f"{int(n):,}"
