"""`roofline plan`'s text: the answer line, the memory line, the ceilings and their trust, the ranked table (rows
that do not fit last, greyed on a terminal, never ranked), a short legend and the notes grouped."""

from __future__ import annotations

import math
import os
import sys
from typing import Any

from roofline import report as display
from roofline.report.answer import group_notes, headline, methods_label, misses_lines, note_kind, ordered
from roofline.report.display import host_text

LEGEND = (
    "legend: # = rank among the rows that fit (* = best by {by}); fits = B sequences of L tokens fit in memory "
    "within the model's positions (no: not ranked)\n"
    "  bits = KV bits stored per cached value, metadata and fp16 windows included (-: no layer caches K/V); "
    "KV/seq/GPU = one sequence's cache at L on one GPU (state: a state-space model's fixed state)\n"
    "  max ctx@B = longest context holding B sequences (^ = capped at the model's positions); max B@L = most "
    "sequences at L\n"
    "  TTFT = prefill of the whole batch (all B prompts together), not one request's; TPOT@L = one decode-only "
    "step at L (the inter-token latency at L with no prompt in the step); TPOT avg = the mean such step over the "
    "generated tokens (vLLM's TPOT, first token excluded, with no other request's prompt in the steps; served: "
    "`roofline simulate`)\n"
    "  bound = what limits the decode step (memory: HBM bandwidth; compute: FLOPs; issue: instruction issue; "
    "shared-memory: on-chip bandwidth) and the op taking most of it\n"
    "  trust = {trust}; kern = the method's kernels' error (n/v: never timed, not validated)")
TRUST_LEGEND = {None: "the ceilings' source and the real decoders' decode error there",
                "vllm": "the ceilings' source and vllm's decode-step error (its run on this device, else the "
                        "published vllm runs' TPOT on this GPU; n/v: neither)",
                "engine": "the ceilings' source and {engine}'s decode-step error (its runs on this device)"}
NOTES_SHOWN = 8
BY_TEXT = {"tokens": "tok/s", "context": "max context", "batch": "max batch", "gpus": "fewest GPUs"}


def _ctx(n: float) -> str:
    return "unbounded" if n == math.inf else f"{int(n):,}"


def _bits(r: dict[str, Any]) -> str:
    bits = r["effective_bits"]
    return "-" if bits is None or (isinstance(bits, float) and math.isnan(bits)) else f"{bits:.2f}"


def _kv(r: dict[str, Any]) -> str:
    kv = r["kv_bytes_per_sequence"]
    return display.gib(kv) + (" state" if _bits(r) == "-" else "")


def _decode_cells(r: dict[str, Any]) -> list[str]:
    """TPOT@L, TPOT avg, tok/s, tok/s@maxB and the bound; '-' for each when the plan has no decode step."""
    d = r["decode"]
    if d is None:
        return ["-"] * 5
    return [display.seconds(r["tpot_s"]), display.seconds(r["tpot_avg_s"]), f"{r['tokens_per_s']:,.0f}",
            f"{r['tokens_per_s_max_batch']:,.0f}", f"{d['bound']} ({d['dominant_op']} {d['dominant_share']:.0%})"]


def _row(r: dict[str, Any]) -> list[str]:
    capped = _ctx(r["max_context_capped"]) + ("^" if r["max_context_capped_by"] != "memory" else "")
    rank = "-" if not r.get("rank") else f"{r['rank']}" + ("*" if r["rank"] == 1 else "")
    return [rank, r["method"], "yes" if r["verdict"]["fits"] else "no", _bits(r), _kv(r), capped,
            f"{r['max_batch']:,}", display.seconds(r["ttft_s"]), *_decode_cells(r),
            r.get("trust", {}).get("text", "-")]


HEADERS = ["#", "method", "fits", "bits", "KV/seq/GPU", "max ctx@B", "max B@L", "TTFT (batch)", "TPOT@L",
           "TPOT avg", "tok/s", "tok/s@maxB", "bound (top op)", "trust"]


def _grey(text: str, dim: list[bool]) -> str:
    """Dims the rows that do not fit when stdout is a colour terminal (NO_COLOR unset)."""
    if not (sys.stdout.isatty() and "NO_COLOR" not in os.environ):
        return text
    lines = text.split("\n")
    for i, flag in enumerate(dim, start=2):  # header and rule first
        if flag:
            lines[i] = f"\x1b[2m{lines[i]}\x1b[0m"
    return "\n".join(lines)


def memory_line(result: dict[str, Any]) -> str:
    """Per-GPU memory as the plan counts it: the capacity CUDA reports (the datasheet's, as `list hardware` shows,
    when no driver figure is known), the usable fraction, and what sits beside the KV pool."""
    w, first = result["workload"], result["results"][0]["memory"]
    cap, datasheet = first["capacity_bytes"], result.get("datasheet_memory_bytes")
    where = (f"{display.gib(cap)} as CUDA reports it (datasheet {display.gib(datasheet)}, as `list hardware` shows)"
             if datasheet and datasheet != cap else f"{display.gib(cap)}")
    beside = (f"weights {display.gib(first['weights_bytes'])}, activations {display.gib(first['activations_bytes'])}, "
              f"reserve {display.gib(first['reserve_bytes'])}")
    if w.get("kv_cache_memory_bytes") is not None:  # the user's pool: the usable fraction sizes nothing
        return (f"memory per GPU: {where}; KV pool {display.gib(w['kv_cache_memory_bytes'])} as given "
                f"(--kv-cache-memory-bytes); {beside}")
    usable = display.gib(first["usable_bytes"])
    util = w["gpu_memory_utilization"]
    util = f"{util}" if util is not None else f"{first['usable_bytes'] / cap:.3g} (default)"
    return f"memory per GPU: {where} x {util} usable = {usable}; {beside}"


def notes_lines(result: dict[str, Any], notes: list[tuple[str, str]], common: list[str], show_all: bool) -> list[str]:
    """The notes grouped by text; without --notes, the ones the table already says (fit, positions) are left out
    and at most NOTES_SHOWN groups are printed, with a count of the rest."""
    groups = group_notes(notes)
    n = len(result["results"])
    shown = groups if show_all else [g for g in groups if note_kind(g[0]) == "note"]
    lines = [f"warning: {msg}" for msg in common]
    lines += [f"{methods_label(ms, n)}: {text}" for text, ms in shown[: None if show_all else NOTES_SHOWN]]
    hidden = len(groups) - (len(shown) if show_all else min(len(shown), NOTES_SHOWN))
    if hidden:
        lines.append(f"({hidden} more note{'s' if hidden > 1 else ''}, on fits and position caps the table shows: "
                     f"--notes prints them all)")
    lines += [f"skipped {s['method']}: {s['reason']}" for s in result.get("skipped", ())]
    return lines


def plan_text(result: dict[str, Any], row_notes, show_all_notes: bool = False) -> str:
    """The plan as text: answer, memory, ceilings and trust, the table, the legend and the grouped notes;
    `row_notes(row, common)` gives one row's (method, text) notes."""
    w = result["workload"]
    prompt = w["prompt_tokens"] or w["context_tokens"] - w["generated_tokens"]
    where = (f"the fewest {result['hardware']} GPUs per method" if "fewest_gpus" in result["results"][0]
             else f"{result['gpus']} x {result['hardware']} (tp {w['tp']}, pp {w['pp']}{layout_label(w)})")
    head = (f"{result['model']} on {where}: batch {w['batch']}, context {w['context_tokens']:,}, prompt {prompt:,}, "
            f"generated {w['generated_tokens']:,}" + (" (prefill only: no decode step)" if not w["generated_tokens"]
                                                      else "") + f"\n{headline(result)}\n")
    head += "".join(f"{line}\n" for line in misses_lines(result["results"], result.get("max_positions")))
    head += memory_line(result) + "\n"
    if missing := result.get("encoders", {}).get("uncounted"):  # a wrapper's tower left out of the weights above
        head += f"warning: {missing}\n"
    if engine := _engine_sequences_line(result):
        head += engine + "\n"
    if what_if := (result.get("quantization") or {}).get("what_if"):  # an unquantized model at a quantized dtype
        head += f"weights: {what_if}\n"
    if reads := (result.get("quantization") or {}).get("decode_reads"):  # a mixed checkpoint read at one width
        head += f"warning: {reads}\n"
    if "ceilings" in result:
        head += (f"ceilings: {result['ceilings']}; fusion: {result.get('fusion', w.get('fusion', 'typical'))}"
                 + (f"; kernel profile: {result['kernel_profile']}" if result.get("kernel_profile") else "")
                 + (f"; {host}" if (host := host_text(w["engine"], w.get("host_speed", 1.0))) else "") + "\n")
    if "trust" in result:
        head += f"trust: {result['trust']['text']}\n"
    rows = ordered(result["results"])
    all_rows = result["results"]
    common = sorted(set.intersection(*(set(r["warnings"]) for r in all_rows))) if len(all_rows) > 1 else []
    notes = [pair for r in all_rows for pair in row_notes(r, set(common))]
    table = display.table(HEADERS, [_row(r) for r in rows], align="rll" + "r" * 10 + "l")
    text = head + "\n" + _grey(table, [not r["verdict"]["fits"] for r in rows]) + "\n"
    engine = result.get("trust", {}).get("engine") if result.get("trust", {}).get("engine_validation") else None
    trust = TRUST_LEGEND[engine if engine in TRUST_LEGEND else "engine" if engine else None].format(engine=engine)
    by = "TTFT" if result["answer"]["by"] == "tokens" and not w["generated_tokens"] else BY_TEXT[result["answer"]["by"]]
    text += LEGEND.format(by=by, trust=trust)
    lines = notes_lines(result, notes, common, show_all_notes)
    if lines:
        text += "\n\n" + "\n".join(lines)
    if "plots" in result:
        text += "\n\nwrote " + ", ".join(result["plots"])
    return text


def _engine_sequences_line(result: dict[str, Any]) -> str | None:
    """The one line saying what max B@L is under vLLM for a windowed model (planner.capacity.engine_sequences)."""
    rows = [r for r in result["results"] if r.get("engine_sequences")]
    if not rows:
        return None
    ctx = result["workload"]["context_tokens"]
    runs = ", ".join(f"{r['engine_sequences']['sequences_at_once']:,} ({r['method']})" for r in rows)
    logged = ", ".join(f"{r['engine_sequences']['logged_max_concurrency']:,.2f}x ({r['method']})" for r in rows)
    return (f"max B@L under vllm: requests of {ctx:,} tokens it runs at once: {runs} (a running request holds only "
            f"its window; the last is admitted when its prompt's blocks are free); vLLM's start-up 'Maximum "
            f"concurrency' is {logged}: every request counted at window + max_num_batched_tokens")


def layout_label(w: dict[str, Any]) -> str:
    """The header's tail after "tp T, pp P": the expert-parallel replicas and the weights' dtypes other than bf16."""
    ep, weights, experts = w.get("ep", 1), w.get("weight_dtype", "bf16"), w.get("expert_weight_dtype")
    dtypes = ", ".join(([f"weights {weights}"] if weights != "bf16" else []) + ([f"experts {experts}"] if experts
                                                                                  else []))
    return (f", ep {ep}: batch per replica" if ep > 1 else "") + (f"; {dtypes}" if dtypes else "")
