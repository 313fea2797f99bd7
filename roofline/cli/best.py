"""`roofline best`: every method that applies, planned and compared; the best that fits for a constraint (most
tokens/s, longest context, most sequences, fewest GPUs), the runners-up, and the methods that do not fit."""

from __future__ import annotations

import argparse
from typing import Any

from roofline import report as display
from roofline.report.answer import misses_lines

HELP = "the best KV method that fits, for a constraint (--by tokens | context | batch | gpus), among all presets"
RUNNERS_UP = 5


def add_best_parser(sub) -> None:
    """Register `roofline best` (the plan's scenario flags, every preset by default, and --by)."""
    from roofline.cli import MAX_BATCH, MAX_CONTEXT, bounded_int
    from roofline.cli.plan import add_scenario_flags
    from roofline.report.answer import CONSTRAINTS

    p = sub.add_parser("best", help=HELP)
    add_scenario_flags(p, bounded_int(MAX_CONTEXT), bounded_int(MAX_BATCH))
    p.add_argument("--by", choices=tuple(CONSTRAINTS), default="tokens",
                   help="; ".join(f"{k}: {v}" for k, v in CONSTRAINTS.items()) + " (default tokens)")
    p.add_argument("--json", action="store_true")
    p.set_defaults(func=cmd_best, all_methods=True, notes=False, plot=None)


def _brief(r: dict[str, Any]) -> dict[str, Any]:
    keys = ("method", "rank", "tokens_per_s", "tpot_s", "ttft_s", "max_context_capped", "max_batch",
            "kv_bytes_per_sequence", "effective_bits", "verdict", "trust")
    out = {k: r[k] for k in keys if k in r}
    for key in ("fewest_gpus", "sla"):  # sla: under --tpot-target-ms (cli.plan._sla)
        if key in r:
            out[key] = r[key]
    if "kept_tokens" in r.get("limits", {}):  # an evicting method: what attention still sees (report.answer)
        out["kept_tokens"] = r["limits"]["kept_tokens"]
    return out


def best_result(result: dict[str, Any]) -> dict[str, Any]:
    """The plan reduced to the answer: the best row, the ranked rows, those that do not fit, the skipped presets."""
    rows = result["results"]
    ranked = sorted((r for r in rows if r["rank"]), key=lambda r: r["rank"])
    return {"model": result["model"], "hardware": result["hardware"], "workload": result["workload"],
            "by": result["answer"]["by"], "by_text": result["answer"]["by_text"],
            "best": _brief(ranked[0]) if ranked else None, "ranked": [_brief(r) for r in ranked],
            "not_fit": [{"method": r["method"], "why": r["verdict"]["why"]} for r in rows if not r["rank"]],
            "skipped": result.get("skipped", []), "trust": result.get("trust"), "ceilings": result.get("ceilings")}


def _header(b: dict[str, Any]) -> str:
    w = b["workload"]
    where = (f"the fewest {b['hardware']} GPUs per method" if b["by"] == "gpus"
             else f"{w['tp'] * w['pp']} x {b['hardware']}")
    return f"{b['model']} on {where}, batch {w['batch']}, context {w['context_tokens']:,}: best by {b['by_text']}"


def best_text(b: dict[str, Any]) -> str:
    """The answer in a few lines: the best, up to RUNNERS_UP runners-up, what does not fit and the trust line."""
    head = _header(b)
    if b["best"] is None:
        lines = [head, "answer: no method fits"]
    else:
        context = b["workload"]["context_tokens"]
        lines = [head, f"answer: {_line(b['best'], context)}", *_sla_lines(b["best"], b["workload"]["batch"])]
        for r in b["ranked"][1:1 + RUNNERS_UP]:
            lines += [f"  {r['rank']}. {_line(r, context)}", *_sla_lines(r, b["workload"]["batch"])]
        if len(b["ranked"]) > 1 + RUNNERS_UP:
            lines.append(f"  ... {len(b['ranked']) - 1 - RUNNERS_UP} more that fit (roofline plan shows them all)")
    lines += misses_lines(b["not_fit_rows"], b.get("max_positions"))
    lines += [f"skipped {s['method']}: {s['reason']}" for s in b["skipped"]]
    if b.get("trust"):
        lines.append(f"trust: {b['trust']['text']}")
    return "\n".join(lines)


def _sla_lines(r: dict[str, Any], batch: int) -> list[str]:
    """The row's answer under --tpot-target-ms (as `plan` prints it), indented under its line; none without."""
    from roofline.cli.plan import _sla_text

    return [f"     {_sla_text(r['sla'], batch)}"] if "sla" in r else []


def _line(r: dict[str, Any], context: int) -> str:
    gpus = f", {r['fewest_gpus']['gpus']} GPUs" if "fewest_gpus" in r else ""
    kept = r.get("kept_tokens")
    gpus += f", evicts: attends to {kept:,} of {context:,} tokens" if kept is not None and kept < context else ""
    speed = (f"TTFT {display.seconds(r['ttft_s'])}, no decode" if r["tokens_per_s"] is None
             else f"{r['tokens_per_s']:,.0f} tok/s, TPOT {display.seconds(r['tpot_s'])}")
    return (f"{r['method']}: {speed}, max context {r['max_context_capped']:,}, max batch {r['max_batch']:,}{gpus} "
            f"[{r['trust']['text']}]")


def cmd_best(args: argparse.Namespace) -> int:
    """`roofline best`: plan every method (--by gpus adds the fit solver), rank the rows that fit; 0 on success."""
    from roofline.cli.plan import build_plan

    args.best_by = args.by
    args.fewest_gpus = args.by == "gpus"
    result, _model, _hardware = build_plan(args)
    b = best_result(result)
    if args.json:
        print(display.to_json(b))
    else:
        rows = [{"method": r["method"], "verdict": r["verdict"]} for r in result["results"]]
        print(best_text({**b, "not_fit_rows": rows, "max_positions": _model.max_position_embeddings}))
    return 0
