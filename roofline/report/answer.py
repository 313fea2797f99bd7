"""The answer first: a fits / does-not-fit verdict per plan row, a ranking of the rows that fit by the user's
constraint, the best row, and the plan's notes grouped (one line per distinct text, with the methods it concerns).

Shared by `roofline plan` / `roofline best` (cli) and the dashboard, so both say the same thing: a row that does not
fit is never ranked and never the best.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from typing import Any

# constraint -> (what it maximizes, label); `gpus` minimizes the GPUs of the fit solver, tokens/s breaking ties
CONSTRAINTS = {
    "tokens": "most tokens/s at the batch and context",
    "context": "longest context that holds the batch (capped at the model's positions)",
    "batch": "most sequences at the context",
    "gpus": "fewest GPUs that hold the batch at the context (then most tokens/s)",
}


def verdict(row: Mapping[str, Any], max_positions: int, context: int, batch: int) -> dict[str, Any]:
    """{"fits", "why"} of one plan row: B sequences of L tokens fit in memory and L is within the model's
    positions (a context past them is not a fit: the model was not trained that long)."""
    if context > max_positions:
        return {"fits": False, "why": f"context {context:,} is past the model's {max_positions:,} positions"}
    if not row["fits"]:
        return {"fits": False, "why": f"at most {row['max_batch']:,} of {batch:,} sequences fit at {context:,}"}
    return {"fits": True, "why": f"{batch:,} x {context:,} tokens fit (up to {row['max_batch']:,} sequences)"}


# A plan of generated_tokens 0 has no decode phase: the figures of the decode step are null with this reason (the
# planner's row keeps the step at L, which such a workload never runs) and `tokens` ranks by the prefill instead
NO_DECODE = "generated_tokens 0: no decode step (the prompts are prefilled and nothing is generated)"
DECODE_KEYS = ("decode_step_s", "tpot_s", "tpot_avg_s", "tokens_per_s", "tokens_per_s_max_batch", "bound", "decode",
               "engine_step", "benchmark_latency")
PREFILL_ONLY_BY = "shortest prefill of the batch (generated 0: no decode step)"


def prefill_only(result: Mapping[str, Any]) -> bool:
    return result["workload"].get("generated_tokens") == 0


def drop_decode(result: dict[str, Any]) -> None:
    """Each row's decode figures set to None, with `decode_reason`, when the plan generates no token."""
    if not prefill_only(result):
        return
    for row in result["results"]:
        row.update({key: None for key in DECODE_KEYS if key in row}, decode_reason=NO_DECODE)


def _key(row: Mapping[str, Any], by: str) -> tuple:
    # no decode step: the shorter prefill of the batch ranks first
    tokens = row["tokens_per_s"] if row["tokens_per_s"] is not None else -row["ttft_s"]
    if by == "context":
        return (row.get("max_context_capped", row["max_context"]), tokens)
    if by == "batch":
        return (row["max_batch"], tokens)
    if by == "gpus":
        return (-row.get("fewest_gpus", {}).get("gpus", math.inf), tokens)
    return (tokens,)


def rank(result: dict[str, Any], model, by: str = "tokens") -> dict[str, Any] | None:
    """Adds `verdict` and `rank` (1 = best; None for a row that does not fit) to every row of a plan result and
    `answer` = {"by", "best", "fits", "rows"} to the result; returns the best row (None when none fits). A plan
    of no generated token first loses its decode figures (drop_decode)."""
    if by not in CONSTRAINTS:
        raise ValueError(f"by: {by!r} is not one of {', '.join(CONSTRAINTS)}")
    drop_decode(result)
    w = result["workload"]
    rows = result["results"]
    for row in rows:
        row["verdict"] = verdict(row, model.max_position_embeddings, w["context_tokens"], w["batch"])
    fitting = sorted((r for r in rows if r["verdict"]["fits"]), key=lambda r: _key(r, by), reverse=True)
    for row in rows:
        row["rank"] = None
    for i, row in enumerate(fitting, 1):
        row["rank"] = i
    best = fitting[0] if fitting else None
    by_text = PREFILL_ONLY_BY if by == "tokens" and prefill_only(result) else CONSTRAINTS[by]
    result["answer"] = {"by": by, "by_text": by_text, "best": best["method"] if best else None,
                        "fits": len(fitting), "rows": len(rows)}
    return best


def ordered(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Rows by rank, then the rows that do not fit in their original order."""
    return sorted((r for r in rows if r.get("rank")), key=lambda r: r["rank"]) + [r for r in rows if not r.get("rank")]


_NUMBER = re.compile(r"\d[\d,.]*")


def group_notes(pairs: list[tuple[str, str]]) -> list[tuple[str, list[str]]]:
    """(text, methods) per distinct note text, in first-seen order: `pairs` are (method, text)."""
    groups: dict[str, list[str]] = {}
    for method, text in pairs:
        methods = groups.setdefault(text, [])
        if method not in methods:
            methods.append(method)
    return list(groups.items())


def note_kind(text: str) -> str:
    """A note's kind, for the short listing: 'positions' (a memory-bound context past the model's positions, which
    the table's ^ already says), 'fit' (a batch that does not fit, which the fits column says) or 'note'."""
    if "is beyond the model's" in text and "positions" in text:
        return "positions"
    if "does not fit: at most" in text:
        return "fit"
    return "note"


def methods_label(methods: list[str], total: int) -> str:
    """'all methods', or the methods' names (runs of a preset family's sizes kept as they are)."""
    return "all methods" if len(methods) == total and total > 1 else ", ".join(methods)


def misses_lines(rows: list[dict[str, Any]], positions: int | None = None) -> list[str]:
    """'does not fit' lines, one per distinct reason with the methods it concerns; a hint when the context is past
    the model's positions."""
    pairs = [(r["method"], r["verdict"]["why"]) for r in rows if not r["verdict"]["fits"]]
    out = [f"does not fit: {methods_label(ms, len(rows))} ({why})" for why, ms in group_notes(pairs)]
    if positions and any("positions" in why for _m, why in pairs):
        out.append(f"hint: the model was trained to {positions:,} positions; ask for --context {positions} or less")
    return out


def answer_plan(result: dict[str, Any], model, hardware, by: str = "tokens") -> dict[str, Any] | None:
    """Trust (roofline.trust.plan_trust) and verdict / rank (rank) added to a plan result in place, as `roofline
    plan` does; returns the best row."""
    from roofline.trust import plan_trust

    result.setdefault("fusion", result["workload"].get("fusion", "typical"))
    result.setdefault("max_positions", model.max_position_embeddings)
    plan_trust(result, hardware, model)
    return rank(result, model, by)


def headline(result: Mapping[str, Any]) -> str:
    """The verdict in one line: how many methods fit and the best by the constraint, with its figures."""
    a, rows = result["answer"], result["results"]
    if a["best"] is None:
        return f"answer: none of the {a['rows']} methods fits"
    best = next(r for r in rows if r["method"] == a["best"])
    ctx = best.get("max_context_capped", min(best["max_context"], result.get("max_positions", math.inf)))
    ctx_text = "unbounded" if ctx == math.inf else f"{int(ctx):,}"
    from roofline.report import seconds

    speed = (f"TTFT {seconds(best['ttft_s'])}, no decode" if best["tokens_per_s"] is None
             else f"{best['tokens_per_s']:,.0f} tok/s, TPOT {seconds(best['tpot_s'])}")
    kept, context = best.get("limits", {}).get("kept_tokens"), result["workload"]["context_tokens"]
    evicts = (f"; it evicts: attends to {kept:,} of the {context:,} tokens per layer, accuracy not modelled"
              if kept is not None and kept < context else "")
    return (f"answer: {a['fits']} of {a['rows']} methods fit; best by {a['by_text']}: {best['method']} "
            f"({speed}, max context {ctx_text}, max batch {best['max_batch']:,}{evicts})")
