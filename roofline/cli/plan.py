"""`roofline plan`: the capacity plan table (and --json, --plot, --fewest-gpus, --tpot-target-ms)."""

from __future__ import annotations

import argparse
import math
from typing import Any

from roofline import report as display

PLAN_HELP = "capacity plan per method (no arguments: the embedded default scenario, all presets)"


def add_plan_parser(sub, positive_int, positive_float) -> None:
    p = sub.add_parser("plan", help=PLAN_HELP)
    p.add_argument("--model", help="catalogue name, YAML spec or HF config.json (default Llama-3.1-8B)")
    p.add_argument("--hardware", help="catalogue name or YAML spec (default H100-SXM)")
    p.add_argument("--method", action="append", help="method SPEC; repeat to compare (default: all presets)")
    p.add_argument("--batch", type=positive_int, help="concurrent sequences B (default 16)")
    p.add_argument("--context", type=positive_int, help="tokens per sequence L (default 32768)")
    p.add_argument("--prompt", type=positive_int, help="prompt tokens P (default L - generated)")
    p.add_argument("--generated", type=int, help="generated tokens T for the averaged TPOT (default 1024)")
    p.add_argument("--tp", type=positive_int, default=1, help="tensor-parallel GPUs")
    p.add_argument("--pp", type=positive_int, default=1, help="pipeline stages")
    p.add_argument("--micro-batches", type=positive_int, help="micro-batches through the pipeline (default pp)")
    p.add_argument("--utilization", type=float, help="fraction of device memory usable (default 0.90)")
    p.add_argument("--reserve-gib", type=float, help="runtime reserve in GiB (default 1, +0.5 with >1 GPU)")
    p.add_argument("--prefill-chunk", type=positive_int, help="chunked-prefill tokens (default 8192)")
    p.add_argument("--weight-dtype", help="bf16 (default), fp16, fp8, int8, int4, fp4")
    p.add_argument("--fewest-gpus", action="store_true", help="also: fewest GPUs of this kind that fit")
    p.add_argument("--tpot-target-ms", type=positive_float, help="also: largest context / batch under this TPOT")
    p.add_argument("--plot", metavar="DIR", help="write roofline and memory charts (PNG and SVG) into DIR")
    p.add_argument("--json", action="store_true")
    p.set_defaults(func=cmd_plan)


def _workload(args: argparse.Namespace):
    from roofline.catalogue.loading import validate
    from roofline.planner.plan import DEFAULT_SCENARIO
    from roofline.specs import Workload

    data: dict[str, Any] = {"batch": args.batch or DEFAULT_SCENARIO["batch"],
                            "context_tokens": args.context or DEFAULT_SCENARIO["context_tokens"],
                            "tp": args.tp, "pp": args.pp}
    generated = args.generated if args.generated is not None else min(DEFAULT_SCENARIO["generated_tokens"],
                                                                       data["context_tokens"] - 1)
    data["generated_tokens"] = generated
    optional = {"prompt_tokens": args.prompt, "gpu_memory_utilization": args.utilization,
                "prefill_chunk_tokens": args.prefill_chunk, "weight_dtype": args.weight_dtype,
                "micro_batches": args.micro_batches or (min(args.pp, data["batch"]) if args.pp > 1 else None),
                "runtime_reserve_bytes": None if args.reserve_gib is None else _gib_to_bytes(args.reserve_gib)}
    data.update({k: v for k, v in optional.items() if v is not None})
    return validate(Workload, data, "workload")


def _gib_to_bytes(gib: float) -> int:
    from roofline.errors import SpecError

    if not gib >= 0 or math.isinf(gib):
        raise SpecError(f"--reserve-gib: {gib} must be a finite number >= 0")
    return int(gib * display.GIB)


def cmd_plan(args: argparse.Namespace) -> int:
    from roofline.catalogue import load_hardware, load_model
    from roofline.methods import parse_method, presets
    from roofline.planner import plan
    from roofline.planner.plan import DEFAULT_SCENARIO

    model = load_model(args.model or DEFAULT_SCENARIO["model"])
    hardware = load_hardware(args.hardware or DEFAULT_SCENARIO["hardware"])
    workload = _workload(args)
    specs = args.method or sorted(presets())
    methods = [parse_method(s) for s in specs]
    if args.fewest_gpus:
        result = _plan_on_fewest_gpus(model, hardware, workload, methods)
    else:
        result = plan(model, hardware, workload, methods)
    if args.tpot_target_ms:
        _sla(result, model, hardware, workload, methods, args.tpot_target_ms / 1e3)
    if args.plot:
        from roofline.report.plots import write_plots

        result["plots"] = [str(p) for p in write_plots(result, model, hardware, workload, methods, args.plot)]
    if args.json:
        import json

        print(json.dumps(result, indent=2, default=_json_default))
    else:
        print(plan_text(result))
    return 0


def _json_default(value):
    if isinstance(value, float) and math.isinf(value):
        return "inf"
    return str(value)


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
    from roofline.planner.inversions import max_batch_for_tpot, max_context_for_tpot

    for row, method in zip(result["results"], methods, strict=True):
        fit = row.get("fewest_gpus")
        w = workload.model_copy(update={"tp": fit["tp"], "pp": fit["pp"]}) if fit else workload
        row["sla"] = {"tpot_target_s": target,
                      "max_context": max_context_for_tpot(model, hardware, w, method, target),
                      "max_batch": max_batch_for_tpot(model, hardware, w, method, target)}


def _ctx(n: float) -> str:
    return "unbounded" if n == math.inf else f"{int(n):,}"


def plan_text(result: dict[str, Any]) -> str:
    w = result["workload"]
    first = result["results"][0]["memory"]
    prompt = w["prompt_tokens"] or w["context_tokens"] - w["generated_tokens"]
    where = (f"the fewest {result['hardware']} GPUs per method" if "fewest_gpus" in result["results"][0]
             else f"{result['gpus']} x {result['hardware']} (tp {w['tp']}, pp {w['pp']})")
    head = (f"{result['model']} on {where}: "
            f"batch {w['batch']}, context {w['context_tokens']:,}, prompt {prompt:,}, "
            f"generated {w['generated_tokens']:,}\n"
            f"memory per GPU: {display.gib(first['capacity_bytes'])} x {w['gpu_memory_utilization']} usable; weights "
            f"{display.gib(first['weights_bytes'])}, activations {display.gib(first['activations_bytes'])}, "
            f"reserve {display.gib(first['reserve_bytes'])}\n")
    headers = ["method", "bits", "KV/seq", "max ctx@B", "max B@L", "TTFT", "TPOT@L", "TPOT avg", "tok/s",
               "tok/s@maxB", "bound (top op)"]
    rows = []
    notes = []
    for r in result["results"]:
        d = r["decode"]
        rows.append([r["method"], f"{r['effective_bits']:.2f}", display.gib(r["kv_bytes_per_sequence"]),
                     _ctx(r["max_context"]), f"{r['max_batch']:,}", display.seconds(r["ttft_s"]),
                     display.seconds(r["tpot_s"]), display.seconds(r["tpot_avg_s"]), f"{r['tokens_per_s']:,.0f}",
                     f"{r['tokens_per_s_max_batch']:,.0f}",
                     f"{d['bound']} ({d['dominant_op']} {d['dominant_share']:.0%})"])
        limits = r["limits"]
        if "remat_limit_tokens" in limits:
            notes.append(f"{r['method']}: remat stays memory-bound up to {_ctx(round(limits['remat_limit_tokens']))}"
                         f" tokens at batch {w['batch']}")
        if "predictor_overhead_ratio" in limits:
            notes.append(f"{r['method']}: model FLOPs per token / predictor FLOPs = "
                         f"{limits['predictor_overhead_ratio']:,.0f}x")
        if "fewest_gpus" in r:
            f = r["fewest_gpus"]
            notes.append(f"{r['method']}: fewest GPUs that fit: {f['gpus']} (tp {f['tp']}, pp {f['pp']})")
        if "sla" in r:
            s = r["sla"]
            notes.append(f"{r['method']}: TPOT <= {s['tpot_target_s'] * 1e3:g} ms up to context "
                         f"{_ctx(s['max_context'])} at batch {w['batch']}, batch {s['max_batch']:,} at this context")
        notes += [f"{r['method']}: warning: {msg}" for msg in r["warnings"]]
    if "ceilings" in result:
        head += f"ceilings: {result['ceilings']}\n"
    text = head + "\n" + display.table(headers, rows)
    if notes:
        text += "\n\n" + "\n".join(notes)
    if "plots" in result:
        text += "\n\nwrote " + ", ".join(result["plots"])
    return text
