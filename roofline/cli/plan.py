"""`roofline plan`: the capacity plan table (and --json, --plot, --fewest-gpus, --tpot-target-ms)."""

from __future__ import annotations

import argparse
import math
from typing import Any

from roofline import report as display

WEIGHT_DTYPES = ("fp32", "bf16", "fp16", "fp8", "int8", "int4", "fp4", "mxfp4", "nvfp4")
PLAN_HELP = "capacity plan per method (no arguments: the embedded default scenario, all presets)"


def add_plan_parser(sub) -> None:
    from roofline.cli import MAX_BATCH, MAX_CONTEXT, bounded_float, bounded_int, positive_int

    context, batch = bounded_int(MAX_CONTEXT), bounded_int(MAX_BATCH)
    p = sub.add_parser("plan", help=PLAN_HELP)
    p.add_argument("--model", help="catalogue name, YAML spec or HF config.json (default Llama-3.1-8B)")
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
    p.add_argument("--reserve-gib", type=float, help="runtime reserve in GiB (default 1, +0.5 with >1 GPU)")
    p.add_argument("--prefill-chunk", type=context, help="chunked-prefill tokens (default 8192)")
    p.add_argument("--ep", type=positive_int, default=1,
                   help="expert-parallel replicas of tp x pp GPUs, each serving its own batch and holding 1/ep of "
                   "the routed experts; all-to-all dispatch and combine per MoE layer (default 1; MoE models only)")
    p.add_argument("--weight-dtype", choices=WEIGHT_DTYPES,
                   help="bf16 (default), fp16, fp8, int8, int4, fp4, mxfp4, nvfp4")
    p.add_argument("--expert-weight-dtype", choices=WEIGHT_DTYPES,
                   help="storage dtype of the routed experts (default: --weight-dtype); gpt-oss ships mxfp4 experts")
    p.add_argument("--engine", choices=("ideal", "vllm", "sglang", "trtllm", "llamacpp"),
                   help="size the KV pool by this engine's rules and page size (default ideal; see `capacity`)")
    add_ceilings_fusion(p)
    p.add_argument("--fewest-gpus", action="store_true", help="also: fewest GPUs of this kind that fit")
    p.add_argument("--tpot-target-ms", type=bounded_float(1e9), help="also: largest context / batch under this TPOT")
    p.add_argument("--plot", metavar="DIR", help="write roofline and memory charts (PNG and SVG) into DIR")
    p.add_argument("--json", action="store_true")
    p.set_defaults(func=cmd_plan)


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
                "prefill_chunk_tokens": args.prefill_chunk, "weight_dtype": args.weight_dtype,
                "expert_weight_dtype": args.expert_weight_dtype,
                "micro_batches": args.micro_batches or (min(args.pp, data["batch"]) if args.pp > 1 else None),
                "runtime_reserve_bytes": None if args.reserve_gib is None else _gib_to_bytes(args.reserve_gib),
                **_engine_fields(args.engine)}
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


def cmd_plan(args: argparse.Namespace) -> int:
    from roofline.catalogue import load_hardware, load_model
    from roofline.catalogue.ceilings import ceilings_label, with_ceilings
    from roofline.planner import plan
    from roofline.planner.plan import DEFAULT_SCENARIO

    if args.plot:  # refuse an unusable output path before any planning
        from roofline.report.plots import output_dir

        output_dir(args.plot)
    model = load_model(args.model or DEFAULT_SCENARIO["model"])
    hardware = with_ceilings(load_hardware(args.hardware or DEFAULT_SCENARIO["hardware"]), args.ceilings)
    workload = _workload(args)
    from roofline.catalogue.hf_quant import stored_widths

    workload, quantization = stored_widths(model, workload)
    methods, skipped = _methods(args.method, model)
    if args.fewest_gpus:
        result = _plan_on_fewest_gpus(model, hardware, workload, methods)
    else:
        result = plan(model, hardware, workload, methods)
    result.update(ceilings=ceilings_label(hardware, args.ceilings), fusion=workload.fusion)
    _annotate(result, model)
    if quantization is not None:
        result["quantization"] = quantization
    result["skipped"] = skipped
    if args.tpot_target_ms:
        _sla(result, model, hardware, workload, methods, args.tpot_target_ms / 1e3)
    if args.plot:
        from roofline.report.plots import write_plots

        result["plots"] = [str(p) for p in write_plots(result, model, hardware, workload, methods, args.plot)]
    if args.json:
        print(display.to_json(result))
    else:
        print(plan_text(result))
    return 0


def _methods(requested: list[str] | None, model) -> tuple[list, list[dict[str, str]]]:
    """The methods to plan: every requested SPEC (one that does not apply to the model is an error), or
    every preset that applies to it, with each skipped preset and its reason (e.g. AQUA-KV on MLA)."""
    from roofline.errors import SpecError
    from roofline.methods import applies, parse_method, presets

    if requested:
        return [parse_method(s) for s in requested], []
    methods, skipped = [], []
    for name in sorted(presets()):
        method = parse_method(name)
        reason = applies(method, model)
        if reason is not None:
            skipped.append({"method": name, "reason": reason.removeprefix(f"method {name!r} on {model.name}: ")})
            continue
        methods.append(method)
    if not methods:
        raise SpecError(f"method: no preset applies to {model.name} ({skipped[0]['reason']})")
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
    what memory holds (the plan's max_context / max_batch); `*_bound` says which limit binds."""
    from roofline.planner.inversions import max_batch_for_tpot, max_context_for_tpot

    for row, method in zip(result["results"], methods, strict=True):
        fit = row.get("fewest_gpus")
        w = workload.model_copy(update={"tp": fit["tp"], "pp": fit["pp"]}) if fit else workload
        ctx_tpot = max_context_for_tpot(model, hardware, w, method, target)
        batch_tpot = max_batch_for_tpot(model, hardware, w, method, target)
        ctx_mem, batch_mem = row["max_context"], row["max_batch"]
        row["sla"] = {"tpot_target_s": target,
                      "max_context": min(ctx_tpot, ctx_mem), "max_context_tpot": ctx_tpot,
                      "max_context_bound": "memory" if ctx_mem < ctx_tpot else "tpot",
                      "max_batch": min(batch_tpot, batch_mem), "max_batch_tpot": batch_tpot,
                      "max_batch_bound": "memory" if batch_mem < batch_tpot else "tpot"}


LEGEND = ("legend: KV/seq/GPU = KV cache of one sequence at L on one GPU; max ctx@B = longest context that "
          "holds B sequences (^ = capped at the model's max_position_embeddings; JSON max_context has the memory "
          "bound); max B@L = most sequences at L; TTFT = prefill of the batch; TPOT@L = decode step at L, TPOT avg "
          "= its mean over the generated tokens; tok/s at B and at max B; ! = B sequences at L do not fit")


def _ctx(n: float) -> str:
    return "unbounded" if n == math.inf else f"{int(n):,}"


def _row(r: dict[str, Any]) -> list[str]:
    d = r["decode"]
    capped = _ctx(r["max_context_capped"]) + ("^" if r["max_context_capped_by"] != "memory" else "")
    return [r["method"] + ("" if r["fits"] else " !"), f"{r['effective_bits']:.2f}",
            display.gib(r["kv_bytes_per_sequence"]), capped, f"{r['max_batch']:,}", display.seconds(r["ttft_s"]),
            display.seconds(r["tpot_s"]), display.seconds(r["tpot_avg_s"]), f"{r['tokens_per_s']:,.0f}",
            f"{r['tokens_per_s_max_batch']:,.0f}", f"{d['bound']} ({d['dominant_op']} {d['dominant_share']:.0%})"]


def _notes(r: dict[str, Any], batch: int, common: set[str] = frozenset(), ep: int = 1) -> list[str]:
    notes, limits, name = [], r["limits"], r["method"]
    if "remat_limit_tokens" in limits:
        limit = limits["remat_limit_tokens"]
        where = "at any context" if limit == math.inf else f"up to {round(limit):,} tokens"
        notes.append(f"{name}: remat stays memory-bound {where} at batch {batch}")
    notes += [f"{name}: {note}" for note in r.get("notes", ())]
    if ep > 1:
        d = r["decode"]
        notes.append(f"{name}: communication {display.seconds(d['comm_s'])} of the decode step (expert all-to-all "
                     f"over ep {ep}, dispatch and combine per MoE layer, plus any tp all-reduce); tok/s per replica")
    if "fewest_gpus" in r:
        f = r["fewest_gpus"]
        replicas = f", ep {ep}" if ep > 1 else ""
        notes.append(f"{name}: fewest GPUs that fit: {f['gpus']} (tp {f['tp']}, pp {f['pp']}{replicas})")
    if "sla" in r:
        s = r["sla"]
        notes.append(f"{name}: TPOT <= {s['tpot_target_s'] * 1e3:g} ms up to context {_ctx(s['max_context'])} "
                     f"({s['max_context_bound']}-bound) at batch {batch}, batch {s['max_batch']:,} "
                     f"({s['max_batch_bound']}-bound) at this context")
    return notes + [f"{name}: warning: {msg}" for msg in r["warnings"] if msg not in common]


def _ep_label(w: dict[str, Any]) -> str:
    ep, experts = w.get("ep", 1), w.get("expert_weight_dtype")
    return (f", ep {ep}: batch per replica" if ep > 1 else "") + (f"; experts {experts}" if experts else "")


def plan_text(result: dict[str, Any]) -> str:
    """The plan as a text table with its legend, notes, warnings and skipped presets."""
    w = result["workload"]
    first = result["results"][0]["memory"]
    prompt = w["prompt_tokens"] or w["context_tokens"] - w["generated_tokens"]
    where = (f"the fewest {result['hardware']} GPUs per method" if "fewest_gpus" in result["results"][0]
             else f"{result['gpus']} x {result['hardware']} (tp {w['tp']}, pp {w['pp']}{_ep_label(w)})")
    head = (f"{result['model']} on {where}: "
            f"batch {w['batch']}, context {w['context_tokens']:,}, prompt {prompt:,}, "
            f"generated {w['generated_tokens']:,}\n"
            f"memory per GPU: {display.gib(first['capacity_bytes'])} x {w['gpu_memory_utilization']} usable; weights "
            f"{display.gib(first['weights_bytes'])}, activations {display.gib(first['activations_bytes'])}, "
            f"reserve {display.gib(first['reserve_bytes'])}\n")
    headers = ["method", "bits", "KV/seq/GPU", "max ctx@B", "max B@L", "TTFT", "TPOT@L", "TPOT avg", "tok/s",
               "tok/s@maxB", "bound (top op)"]
    rows = result["results"]
    # a warning every method shares (e.g. the context past the model's positions) is said once
    common = set.intersection(*(set(r["warnings"]) for r in rows)) if len(rows) > 1 else set()
    notes = [f"warning: {msg}" for msg in sorted(common)]
    notes += [n for r in rows for n in _notes(r, w["batch"], common, w.get("ep", 1))]
    notes += [f"skipped {s['method']}: {s['reason']}" for s in result.get("skipped", ())]
    if "ceilings" in result:
        head += f"ceilings: {result['ceilings']}; fusion: {result.get('fusion', w.get('fusion', 'typical'))}\n"
    text = head + "\n" + display.table(headers, [_row(r) for r in result["results"]]) + "\n" + LEGEND
    if notes:
        text += "\n\n" + "\n".join(notes)
    if "plots" in result:
        text += "\n\nwrote " + ", ".join(result["plots"])
    return text
