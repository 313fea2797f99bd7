"""The dashboard's tables as text with units (GiB, ms, tok/s, thousands separators): one formatter per table, so the
app never formats a number itself (STYLE 14). Raw rows stay in dashboard.appdata / dashboard.explore for downloads.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

from roofline import report as fmt


def context_text(n: float, max_positions: int | None = None) -> str:
    """A context length; past the model's max positions it says so instead of promising it."""
    if n == math.inf:
        return "unbounded"
    text = f"{int(n):,}"
    if max_positions is not None and n > max_positions:
        return f">= {max_positions:,} (model max)"
    return text


def host_text(engine: str, host_speed: float) -> str:
    """'host 2x the vllm profile's (its host work / 2)' for a host other than the engine profile's own
    (roofline.engines.timing mechanism 11: the CLI's --host-speed, the dashboard's box), '' at 1."""
    return "" if host_speed == 1.0 else f"host {host_speed:g}x the {engine} profile's (its host work / {host_speed:g})"


def _bound(d: Mapping[str, Any] | None) -> str:
    """The decode step's bound and top op; '-' for a plan with no decode step (report.answer.drop_decode)."""
    return "-" if d is None else f"{d['bound']} ({d['dominant_op']} {d['dominant_share']:.0%})"


def summary_table(plan: Mapping[str, Any], max_positions: int, errors: Sequence[Mapping[str, Any]] = ()
                  ) -> list[dict[str, str]]:
    """The Plan page's table: one row per method, every cell text with its unit; `errors` (one per result, from
    roofline.trust, one per result) adds a column of each row's error text."""
    rows = []
    for i, r in enumerate(plan["results"]):
        d = r["decode"]
        bits = r["effective_bits"]  # NaN (null in JSON) when no layer caches K/V: a pure state-space model
        row = {"method": r["method"], "bits": "-" if bits is None or math.isnan(bits) else f"{bits:.2f}",
               "KV / seq": fmt.gib(r["kv_bytes_per_sequence"]),
               "max context @ batch": context_text(r["max_context"], max_positions),
               "max batch @ context": fmt.count(r["max_batch"]) + ("" if r["fits"] else " (< batch)"),
               "TTFT": fmt.seconds(r["ttft_s"]), "TPOT": fmt.ms(r["tpot_s"]), "TPOT avg": fmt.ms(r["tpot_avg_s"]),
               "tokens/s": fmt.rate(r["tokens_per_s"]), "bound (top op)": _bound(d)}
        if errors:
            row["TPOT error"] = errors[i]["text"]
        rows.append(row)
    return rows


def answer_tables(plan: Mapping[str, Any], max_positions: int) -> tuple[list[dict[str, str]], list[dict[str, str]]]:
    """The Plan page's tables after report.answer.rank and trust.plan_trust: the rows that fit, best first (rank,
    the numbers, trust beside them), and the rows that do not fit (never ranked) with why."""
    from roofline.report.answer import ordered

    ranked, misses = [], []
    for r in ordered(list(plan["results"])):
        d = r["decode"]
        bits = r["effective_bits"]
        row = {"#": f"{r['rank']}" + (" (best)" if r["rank"] == 1 else "") if r["rank"] else "-",
               "method": r["method"], "fits": "yes" if r["verdict"]["fits"] else "no: " + r["verdict"]["why"],
               "bits": "-" if bits is None or math.isnan(bits) else f"{bits:.2f}",
               "KV / seq": fmt.gib(r["kv_bytes_per_sequence"]),
               "max context @ batch": context_text(r["max_context"], max_positions),
               "max batch @ context": fmt.count(r["max_batch"]),
               "TTFT (whole batch)": fmt.seconds(r["ttft_s"]), "TPOT": fmt.ms(r["tpot_s"]),
               "TPOT avg": fmt.ms(r["tpot_avg_s"]), "tokens/s": fmt.rate(r["tokens_per_s"]),
               "bound (top op)": _bound(d),
               "trust": r.get("trust", {}).get("text", "-")}
        (ranked if r["rank"] else misses).append(row)
    return ranked, misses


def warning_lines(plan: Mapping[str, Any]) -> list[str]:
    """The plan's warnings, each text once, with the methods it concerns ('all methods' when every one)."""
    seen: dict[str, list[str]] = {}
    for r in plan["results"]:
        for w in r["warnings"]:
            seen.setdefault(w, []).append(r["method"])
    n = len(plan["results"])
    return [f"{text} ({'all methods' if len(ms) == n and n > 1 else ', '.join(ms)})" for text, ms in seen.items()]


def fit_table(rows: Sequence[Mapping[str, Any]]) -> list[dict[str, str]]:
    """dashboard.explore.fit_solver as text: what fits, on how many GPUs, and what the TPOT target allows."""
    out = []
    for r in rows:
        f = r["fewest"]
        row = {"method": r["method"], "fits as set": "yes" if r["fits"] else "no",
               "weight dtypes that fit (this tp x pp)": ", ".join(r["weight dtypes that fit"]) or "none",
               "fewest GPUs (tp x pp)": f.get("error") or f"{f['gpus']:,} (tp {f['tp']} x pp {f['pp']}, "
                                                          f"{f['nodes']} node{'s' if f['nodes'] > 1 else ''})"}
        if "sla" in r:
            s = r["sla"]
            row[f"max context @ TPOT <= {s['tpot_target_s'] * 1e3:g} ms"] = fmt.count(s["max_context"])
            row[f"max batch @ TPOT <= {s['tpot_target_s'] * 1e3:g} ms"] = fmt.count(s["max_batch"])
        out.append(row)
    return out


def diff_table(rows: Sequence[Mapping[str, Any]]) -> list[dict[str, str]]:
    """dashboard.explore.diff_rows as text: A, B and B's change for capacity, TPOT and tokens/s."""
    show = {"max_context": ("max context", fmt.count), "max_batch": ("max batch", fmt.count),
            "tpot_s": ("TPOT", fmt.ms), "tokens_per_s": ("tokens/s", fmt.rate)}
    out = []
    for r in rows:
        row = {"method": r["method"]}
        for key, (label, f) in show.items():
            for side in ("A", "B"):
                value = r[f"{side} {key}"]
                row[f"{label} {side}"] = "-" if value is None else f(value)
            row[f"{label} change"] = fmt.signed_percent(r[f"change {key}"])
        out.append(row)
    return out


def pareto_table(rows: Sequence[Mapping[str, Any]]) -> list[dict[str, str]]:
    """dashboard.explore.pareto_rows as text."""
    return [{"method": r["method"], "KV / seq": fmt.gib(r["kv_bytes_per_sequence"]),
             "max context": fmt.count(r["max_context"]), "TPOT": fmt.ms(r["tpot_s"]),
             "quality (paper)": "no figure in this table" if r["quality"] is None else fmt.number(r["quality"]),
             "paper's row": r["paper_row"] or "-", "meets SLO": "yes" if r["meets_slo"] else "no",
             "on the front": "yes" if r["on_front"] else "no"} for r in rows]


def limits_table(rows: Sequence[Mapping[str, Any]]) -> list[dict[str, str]]:
    """dashboard.appdata.limits_rows with the value as text and its unit."""
    return [{"method": r["method"], "limit": r["limit"],
             "value": "-" if r["value"] is None else f"{fmt.number(r['value'], 1)} {r['unit']}".strip(),
             "at this context": r["at this context"], "detail": r["detail"]} for r in rows]


def points_table(points: Sequence[Mapping[str, Any]]) -> list[dict[str, str]]:
    """The roofline's op points as text."""
    return [{"method": p["method"], "op": p["op"], "kind": p["kind"], "intensity": fmt.flop_per_byte(p["intensity"]),
             "achieved": fmt.tflops(p["flops_per_s"]), "bound": p["bound"], "time": fmt.seconds(p["time_s"]),
             "count": fmt.count(p["count"])} for p in points]


def validation_table(rows: Sequence[Mapping[str, Any]]) -> list[dict[str, str]]:
    """dashboard.appdata.validation_rows as text."""
    def ms(v):
        return "-" if v is None else f"{v:,.4f} ms"

    return [{"family": r["family"], "case": r["case"], "measured": ms(r["measured (ms)"]),
             "predicted": ms(r["predicted (ms)"]), "APE": "-" if r["APE (%)"] is None else f"{r['APE (%)']:.1f} %",
             "bound": r["bound"] or "-", "bandwidth fraction": fmt.percent(r["bandwidth fraction"]),
             "achieved": "-" if r["achieved GB/s"] is None else f"{r['achieved GB/s']:,.1f} GB/s",
             "note": r["note"]} for r in rows]


def family_table(rows: Sequence[Mapping[str, Any]]) -> list[dict[str, str]]:
    """dashboard.appdata.family_rows as text."""
    def pct(v):
        return "-" if v is None else f"{v:.1f} %"

    return [{"family": r["family"], "cases": fmt.count(r["cases"]), "median APE": pct(r["median APE (%)"]),
             "p90 APE": pct(r["p90 APE (%)"]), "median bandwidth fraction": fmt.percent(r["median bandwidth fraction"]),
             "kernel efficiency": fmt.percent(r["kernel efficiency"])} for r in rows]


def serving_table(result: Mapping[str, Any]) -> list[dict[str, str]]:
    """The Serving page's largest request rate per method that meets the SLO (dashboard.serving_curves), or why none."""
    return [{"method": m, "max requests/s at the SLO": f"{r:,.2f} req/s" if r is not None else "none",
             "why not": result["reasons"].get(m, "")} for m, r in result["max_rate"].items()]
