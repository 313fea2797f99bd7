"""Vega-Lite charts of numbers roofline.report.dashboard computed: these functions only arrange and draw them.

Each chart is a plain Vega-Lite dict with its tables as Arrow IPC bytes under "datasets" (what Streamlit sends as
is), built in well under a millisecond: Altair's import (~0.9 s), its pandas frames and its schema validation
(0.1-0.3 s per chart and re-render) were most of a re-render's server time. Vega-Lite renders in the browser.
The Sweeps, Pareto, Roofline and Validation charts are static SVGs (roofline_app.svgchart), which the browser draws
without the Vega bundle (0.5-0.8 s of JS on the first Vega chart of a session on the 2-core box).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

BOUND_COLOURS = {"domain": ["memory", "compute", "communication"], "range": ["#1f77b4", "#d62728", "#2ca02c"]}
KIND_LABELS = {"attention": "attention", "matmul": "weight GEMM", "vector": "elementwise", "method": "method op"}
DASHES = {"fp32": [2, 2], "bf16": [1, 0], "fp8": [6, 3], "memory": [1, 0]}
WIDTH = 820  # px of a single chart; side-by-side panels share it
SCHEME = {"scheme": "category10"}
SCHEMA = "https://vega.github.io/schema/vega-lite/v6.4.1.json"
VIEW = {"view": {"continuousWidth": 300, "continuousHeight": 300}}
SWEEP_METRICS = {"tpot_s": ("TPOT (ms)", 1e3, True), "tokens_per_s": ("tokens/s", 1.0, True),
                 "max_batch": ("max batch that fits", 1.0, True)}


class Tables:
    """The named datasets of one chart: `ref(rows)` stores a table as Arrow IPC bytes and returns the layer's `data`
    reference. Names are positional ("data-0", ...), so a re-render with new numbers sends the same spec and the
    browser swaps the tables inside the drawn view instead of compiling and embedding the chart again (Streamlit's
    frontend re-embeds only when the spec text changes). Data-dependent text therefore stays out of the specs."""

    def __init__(self) -> None:
        self.datasets: dict[str, bytes] = {}

    def ref(self, rows: Sequence[dict]) -> dict:
        import pyarrow as pa

        from roofline_app import arrow

        rows = list(rows)
        table = arrow.table(rows) if rows else None
        if table is None:
            table = pa.Table.from_pylist(rows)
        sink = pa.BufferOutputStream()
        with pa.ipc.new_stream(sink, table.schema) as writer:
            writer.write_table(table)
        name = f"data-{len(self.datasets)}"
        self.datasets[name] = sink.getvalue().to_pybytes()
        return {"name": name}

    def spec(self, body: dict) -> dict:
        return {"config": VIEW, **body, "datasets": self.datasets, "$schema": SCHEMA}


def q(field: str, title: Any = ..., **kw) -> dict:
    """A quantitative channel (title omitted: Vega-Lite's default; None: no title)."""
    return {"field": field, "type": "quantitative", **({} if title is ... else {"title": title}), **kw}


def n(field: str, title: Any = ..., **kw) -> dict:
    """A nominal channel."""
    return {"field": field, "type": "nominal", **({} if title is ... else {"title": title}), **kw}


def _title(text: str, subtitle: str) -> dict:
    return {"text": text, "anchor": "start", "fontSize": 15, "subtitle": subtitle, "subtitleFontSize": 12}


def capacity_chart(rows: Sequence[dict], max_positions: int) -> dict:
    """Max context at the batch, drawn up to the model's max positions (a longer one is labelled, never drawn
    past it; unbounded likewise), and max batch at the context."""
    t = Tables()
    data = t.ref([{"method": r["method"], "max batch at context": r["max batch at context"],
                   "context shown": min(r["max context at batch"], max_positions),
                   "context label": _context_label(r["max context at batch"], max_positions)} for r in rows])
    y = n("method", None, sort=[r["method"] for r in rows])
    x_ctx = q("context shown", "max context at the batch (tokens)", axis={"format": "~s"})
    # the model's max positions live in the data, never in the spec: a new model swaps the tables inside the drawn
    # view instead of re-embedding the chart (Streamlit re-embeds when the spec text changes); an invisible tick at
    # 1.45 x max positions keeps room for the labels right of the bars
    limit = t.ref([{"x": max_positions, "room": max_positions * 1.45,
                    "max positions": f"model max positions {max_positions:,}"}])
    ctx = {"layer": [
        {"data": data, "mark": {"type": "bar", "color": "#1f77b4"},
         "encoding": {"x": x_ctx, "y": y, "tooltip": [n("method"), n("context label", "max context")]}},
        {"data": limit, "mark": {"type": "rule", "color": "black", "strokeDash": [4, 3]},
         "encoding": {"x": q("x"), "tooltip": [n("max positions")]}},
        {"data": limit, "mark": {"type": "tick", "opacity": 0}, "encoding": {"x": q("room")}},
        {"data": data, "mark": {"type": "text", "align": "left", "dx": 3, "fontSize": 11},
         "encoding": {"x": q("context shown"), "y": y, "text": n("context label")}}],
        "title": _title("Longest context", "every sequence of the batch; dashed: the model's max positions (its "
                                           "number: the caption above)"), "width": WIDTH // 2 - 40}
    bat = {"layer": [
        {"mark": {"type": "bar", "color": "#ff7f0e"},
         "encoding": {"x": q("max batch at context", "max batch at the context"), "y": y,
                      "tooltip": [n("method"), q("max batch at context", format=",")]}},
        {"mark": {"type": "text", "align": "left", "dx": 3},
         "encoding": {"x": q("max batch at context"), "y": y, "text": q("max batch at context", format=",")}}],
        "data": data, "title": _title("Largest batch", "sequences at the scenario's context"), "width": WIDTH // 2 - 40}
    return t.spec({"hconcat": [ctx, bat]})


def _context_label(v: float, max_positions: int) -> str:
    if not math.isfinite(v):
        return f"unbounded (model max {max_positions:,})"
    return f"{int(v):,} > model max {max_positions:,}" if v > max_positions else f"{int(v):,}"


def memory_chart(rows: Sequence[dict], capacity_gib: float, usable_gib: float) -> dict:
    """Stacked bars of one GPU's memory by segment, with the usable and total capacity as rules."""
    t = Tables()
    segments = {r["segment"]: r for r in sorted(rows, key=lambda r: r["order"])}
    rank = {m: i for i, m in enumerate(dict.fromkeys(r["method"] for r in rows))}  # bars in the plan's order
    bars = {"data": t.ref([{**r, "rank": rank[r["method"]]} for r in rows]), "mark": {"type": "bar"}, "encoding": {
        "y": n("label", None, sort={"field": "rank", "op": "min", "order": "ascending"}, axis={"labelLimit": 320}),
        "x": q("GiB", "memory on one GPU (GiB)", aggregate="sum"),
        "color": n("segment", "segment", sort=list(segments), legend={"orient": "right", "labelLimit": 320},
                   scale={"domain": list(segments), "range": [r["colour"] for r in segments.values()]}),
        "order": q("order"),
        "tooltip": [n("label"), n("segment"), q("GiB", format=",.2f")]}}
    rules = {"data": t.ref([{"GiB": capacity_gib, "line": "capacity"}, {"GiB": usable_gib, "line": "usable"}]),
             "mark": {"type": "rule", "color": "black"}, "encoding": {
                 "x": q("GiB"), "strokeDash": n("line", legend=None, scale={"range": [[1, 0], [5, 3]]}),
                 "tooltip": [n("line"), q("GiB", format=",.1f")]}}
    sub = f"KV at the scenario's batch and context; solid: capacity {capacity_gib:,.1f} GiB, dashed: usable"
    height = max(300, 34 * len(rank))  # room for the legend's eleven segments
    return t.spec({"layer": [bars, rules], "height": height, "title": _title("Memory per GPU", sub),
                   "width": WIDTH - 260})


def latency_chart(rows: Sequence[dict]) -> dict:
    """TTFT and TPOT per method, TPOT coloured by what bounds the decode step."""
    t = Tables()
    data = t.ref([{k: r[k] for k in ("method", "TPOT (ms)", "TTFT (s)", "bound", "dominant op")} for r in rows])
    y = n("method", None, sort=[r["method"] for r in rows])
    tpot = {"mark": {"type": "bar"}, "encoding": {
        "x": q("TPOT (ms)", "time per output token (ms)"), "y": y,
        "color": n("bound", "decode bound", scale=BOUND_COLOURS, legend={"orient": "bottom"}),
        "tooltip": [n("method"), q("TPOT (ms)", format=",.2f"), n("bound"), n("dominant op")]},
        "title": _title("Decode step (TPOT)", "one step for the whole batch at the context"), "width": WIDTH // 2 - 60}
    ttft = {"mark": {"type": "bar", "color": "#7f7f7f"}, "encoding": {
        "x": q("TTFT (s)", "time to first token (s)"), "y": y,
        "tooltip": [n("method"), q("TTFT (s)", format=",.3f")]},
        "title": _title("Prefill (TTFT)", "the batch's prompts prefilled together"), "width": WIDTH // 2 - 60}
    return t.spec({"hconcat": [tpot, ttft], "data": data})


def _ceiling_rows(data: dict, x_lo: float, x_hi: float) -> tuple[list[dict], list[dict]]:
    bw = data["bandwidth_bytes_per_s"]
    top = max(c["ridge_flops_per_byte"] for c in data["ceilings"])
    measured = " (measured)" if data["measured"] else ""
    lines = [{"line": f"memory bandwidth {bw / 1e12:,.2f} TB/s{measured}", "x": x, "y": bw * x} for x in (x_lo, top)]
    ridges = []
    for c in data["ceilings"]:
        name = f"{c['dtype']} dense peak"
        lines += [{"line": name, "x": c["ridge_flops_per_byte"], "y": c["peak_flops_per_s"]},
                  {"line": name, "x": x_hi, "y": c["peak_flops_per_s"]}]
        ridges.append({"x": c["ridge_flops_per_byte"], "y": c["peak_flops_per_s"], "x_end": x_hi,
                       "label": f"{c['dtype']} {c['peak_flops_per_s'] / 1e12:,.0f} TFLOP/s{measured}, "
                                f"ridge {c['ridge_flops_per_byte']:,.0f} FLOP/B"})
    return lines, ridges


KIND_SHAPES = {"attention": "circle", "matmul": "square", "vector": "triangle", "method": "diamond"}


def roofline_chart(data: dict, axes: dict) -> str:
    """Log-log roofline: bandwidth slope, one ceiling per dense dtype peak (dashes by dtype) with its ridge point
    (diamond), and every method's decode ops (colour: method, shape: op kind); `axes`
    (report.rooflinepage.roofline_axes) holds the domains fixed over every slider context. A static SVG (svgchart;
    each op's <title> holds what the Op table has)."""
    from roofline_app import svgchart

    x_lo, x_hi, y_lo, y_hi = axes["x_lo"], axes["x_hi"], axes["y_lo"], axes["y_hi"]
    rows, ridges = _ceiling_rows(data, x_lo, x_hi)
    lines = []
    for name in dict.fromkeys(r["line"] for r in rows):
        pts = [(r["x"], r["y"]) for r in rows if r["line"] == name]
        first = name.split()[0]  # a dtype, or "memory"
        label = next((r["label"] for r in ridges if r["label"].startswith(first + " ")), name)
        lines.append(svgchart.Line(pts, "black", label, {"fp32": "2 2", "fp8": "6 3"}.get(first, "none")))
    diamonds = svgchart.Series("ridge points", [svgchart.Point(r["x"], r["y"], True, r["label"], "diamond", 4.5)
                                                for r in ridges], joined=False, colour="black")
    methods: dict[str, list] = {}
    for p in data["points"]:
        methods.setdefault(p["method"], []).append(svgchart.Point(
            p["intensity"], p["flops_per_s"], False,
            f"{p['method']} · {p['op']} ({KIND_LABELS[p['kind']]}): {p['bound']}-bound, {p['intensity']:,.1f} "
            f"FLOP/byte, {p['flops_per_s']:.3g} FLOP/s, {p['time_s']:.3g} s per instance x {p['count']:,}",
            KIND_SHAPES[p["kind"]], 5.0))
    series = [svgchart.Series(m, pts, joined=False) for m, pts in methods.items()] + [diamonds]
    sub = (f"{data['hardware']}, decode at batch {data['batch']} and the slider's context: ops left of a ridge point "
           "are memory-bound, right of it compute-bound")
    return svgchart.line_chart(
        series, title="Roofline", subtitle=sub, x_title="arithmetic intensity (FLOP/byte, log)",
        y_title="attainable / achieved throughput (FLOP/s, log)", x_log=True, y_log=True, lines=lines,
        x_domain=(x_lo, x_hi), y_domain=(y_lo, y_hi), width=WIDTH + 300, height=560, legend_width=380,
        notes=[f"{KIND_SHAPES[k]}: {v}" for k, v in KIND_LABELS.items()])


def validation_chart(rows: Sequence[dict]) -> str:
    """Predicted against measured time per case (log-log, the same range on both axes) with the y = x line, one
    colour per kernel family: a static SVG (svgchart; each case's <title> holds its numbers)."""
    from roofline_app import svgchart

    shown = [r for r in rows if r["predicted (ms)"] and r["measured (ms)"]]
    lo = min(min(r["predicted (ms)"], r["measured (ms)"]) for r in shown) / 1.5
    hi = max(max(r["predicted (ms)"], r["measured (ms)"]) for r in shown) * 1.5
    families: dict[str, list] = {}
    for r in shown:
        families.setdefault(r["family"], []).append(svgchart.Point(
            r["measured (ms)"], r["predicted (ms)"], True,
            f"{r['family']} · {r['case']}: measured {r['measured (ms)']:.4f} ms, predicted "
            f"{r['predicted (ms)']:.4f} ms, APE {r['APE (%)']:.1f} %", r=3.5))
    return svgchart.line_chart(
        [svgchart.Series(f, pts, joined=False) for f, pts in families.items()], title="Predicted against measured",
        subtitle="dashed: y = x (a perfect prediction); above it the model predicts more time than measured",
        x_title="measured (ms, log)", y_title="predicted (ms, log)", x_log=True, y_log=True,
        lines=[svgchart.Line([(lo, lo), (hi, hi)], "gray", "y = x", "5 3")], x_domain=(lo, hi), y_domain=(lo, hi),
        width=WIDTH + 120)


def sweep_chart(rows: Sequence[dict], marks: Sequence[dict], axis: str, metric: str, slo_s: float | None) -> str:
    """One line per method of `metric` against `axis` (log-log), points where the scenario's batch does not fit
    hollow, dashed vertical rules at each method's fit boundary (its colour) and at the model's max positions
    (black), the TPOT target as a red dashed rule: a static SVG (svgchart; each point's <title> holds its values)."""
    from roofline_app import svgchart

    title, factor, log_y = SWEEP_METRICS[metric]
    unit = "tokens" if axis == "context" else "seqs"
    series: dict[str, list] = {}
    for r in rows:
        value = r[metric] * factor
        series.setdefault(r["method"], []).append(svgchart.Point(
            r[axis], value, r["fits"], f"{r['method']}: {axis} {r[axis]:,} {unit}, {title} {value:,.4g}"
                                       f"{'' if r['fits'] else ' (the batch does not fit)'}"))
    vrules = [svgchart.Rule(m["x"], m["method"] or "black", m["label"]) for m in marks]
    hrules = ([svgchart.Rule(slo_s * 1e3, "#d62728", f"TPOT target {slo_s * 1e3:g} ms")]
              if slo_s is not None and metric == "tpot_s" else [])
    return svgchart.line_chart(
        [svgchart.Series(name, points) for name, points in series.items()], title=f"{title} against {axis}",
        subtitle="dashed: each method's fit boundary (its colour), the model's max positions (black); hollow "
                 "points: the batch does not fit", x_title=f"{axis} ({unit}, log)",
        y_title=f"{title}{', log' if log_y else ''}", x_log=True, y_log=log_y, vrules=vrules, hrules=hrules,
        width=WIDTH + 120)


def pareto_chart(rows: Sequence[dict], metric: str, higher_is_better: bool) -> str:
    """Paper quality (y) against KV GiB per sequence on the scenario (x, log), radius by TPOT, a cross where the
    SLO is missed, the front joined by a dashed line: a static SVG (svgchart; each point's <title> and the page's
    table hold the values). Only methods with a figure are drawn (the others are listed apart)."""
    from roofline_app import svgchart

    shown = [r for r in rows if r["quality"] is not None]
    tpots = [r["tpot_s"] for r in shown]
    lo, hi = min(tpots), max(tpots)

    def radius(tpot: float) -> float:  # area from 60 to 600 px^2 over the TPOT range, as Vega's size scale had it
        area = 60 + (540 * (tpot - lo) / (hi - lo) if hi > lo else 0)
        return math.sqrt(area / math.pi)

    series = [svgchart.Series(r["method"], [svgchart.Point(
        r["kv_bytes_per_sequence"] / (1 << 30), r["quality"], True,
        f"{r['method']} ({r['paper_row']}): {metric} {r['quality']:g}, KV "
        f"{r['kv_bytes_per_sequence'] / (1 << 30):,.3f} GiB per sequence, TPOT {r['tpot_s'] * 1e3:,.2f} ms, "
        f"{'meets' if r['meets_slo'] else 'misses'} the SLO", "circle" if r["meets_slo"] else "cross",
        radius(r["tpot_s"]))], joined=False) for r in shown]
    front = sorted((r["kv_bytes_per_sequence"] / (1 << 30), r["quality"]) for r in shown if r["on_front"])
    return svgchart.line_chart(
        series, title="Memory, quality and TPOT", subtitle="dashed: the front (no method with a figure is smaller "
        "and better); radius: TPOT; x: cross misses the SLO", x_title="KV cache per sequence on this scenario "
        "(GiB, log)", y_title=f"{metric} (paper; {'higher' if higher_is_better else 'lower'} is better)",
        x_log=True, y_log=False, y_zero=False, lines=[svgchart.Line(front, "black", "the front")] if front else [],
        width=WIDTH + 120)


def serving_chart(rows: Sequence[dict], ttft_slo_s: float, tpot_slo_s: float) -> dict:
    """TTFT p99 and TPOT p99 against the request rate, one line per method, each with its SLO as a rule."""
    t = Tables()
    data = t.ref([{"method": r["method"], "rate_per_s": r["rate_per_s"], "meets_slo": r["meets_slo"],
                   "ttft_p99_ms": r["ttft_p99_s"] * 1e3, "tpot_p99_ms": r["tpot_p99_s"] * 1e3} for r in rows])
    panels = []
    for field, title, slo in (("ttft_p99_ms", "TTFT p99 (ms)", ttft_slo_s), ("tpot_p99_ms", "TPOT p99 (ms)",
                                                                            tpot_slo_s)):
        lines = {"data": data, "mark": {"type": "line", "point": True}, "encoding": {
            "x": q("rate_per_s", "requests/s"), "y": q(field, title, scale={"type": "log"}),
            "color": n("method", scale=SCHEME),
            "tooltip": [n("method"), q("rate_per_s"), q(field), n("meets_slo")]}}
        rule = {"data": t.ref([{"slo": slo * 1e3}]), "mark": {"type": "rule", "color": "black", "strokeDash": [6, 3]},
                "encoding": {"y": q("slo")}}
        panels.append({"layer": [lines, rule], "width": WIDTH // 2 - 40, "height": 300,
                       "title": f"{title}; dashed: SLO"})
    return t.spec({"hconcat": panels})
