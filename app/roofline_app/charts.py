"""Charts of numbers roofline.dashboard.appdata computed, as static SVG documents (roofline_app.svgchart) that the
pages show with st.image: these functions only arrange and draw them.

The browser decodes an SVG image in milliseconds. Vega-Lite views (what these charts were) cost it the Vega bundle
(775 kB of JS, 0.5-0.8 s on the first chart of a session on the 2-core box) and 0.3-0.8 s of compiling and drawing
per view; whichever page drew the first chart missed its 1 s target. Each mark's <title> holds its exact values (a
tooltip where the image is opened on its own); every page's table and CSV/JSON downloads hold the same numbers.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from roofline_app import svgchart

BOUND_COLOURS = {"memory": "#1f77b4", "compute": "#d62728", "communication": "#2ca02c", "shared-memory": "#9467bd",
                 "issue": "#ff7f0e"}  # what bounds a decode step (costmodel); any other bound is grey
KIND_LABELS = {"attention": "attention", "matmul": "weight GEMM", "vector": "elementwise", "method": "method op"}
KIND_SHAPES = {"attention": "circle", "matmul": "square", "vector": "triangle", "method": "diamond"}
WIDTH = 820  # px of a single chart; side-by-side panels share it
SWEEP_METRICS = {"tpot_s": ("TPOT (ms)", 1e3, True), "tokens_per_s": ("tokens/s", 1.0, True),
                 "max_batch": ("max batch that fits", 1.0, True)}


def capacity_chart(rows: Sequence[dict], max_positions: int) -> tuple[str, str]:
    """Max context at the batch, drawn up to the model's max positions (a longer one is labelled, never drawn
    past it; unbounded likewise), and max batch at the context: two panels."""
    def short(v: float) -> str:  # the text right of a bar; the tip has the whole label
        return "unbounded" if not math.isfinite(v) else f"{int(v):,}" + (" (past max)" if v > max_positions else "")

    ctx = [svgchart.Bar(r["method"], [(min(r["max context at batch"], max_positions), "#1f77b4",
                                       f"{r['method']}: max context "
                                       f"{_context_label(r['max context at batch'], max_positions)}")],
                        short(r["max context at batch"])) for r in rows]
    bat = [svgchart.Bar(r["method"], [(r["max batch at context"], "#ff7f0e",
                                       f"{r['method']}: max batch {r['max batch at context']:,}")],
                        f"{r['max batch at context']:,}") for r in rows]
    return (svgchart.bar_chart(ctx, title="Longest context", subtitle="every sequence of the batch; dashed: the "
                               "model's max positions", x_title="max context at the batch (tokens)",
                               rules=[svgchart.Rule(max_positions, "black", f"model max positions {max_positions:,}")],
                               room=1.5, width=WIDTH // 2 + 40),
            svgchart.bar_chart(bat, title="Largest batch", subtitle="sequences at the scenario's context",
                               x_title="max batch at the context", room=1.2, width=WIDTH // 2 + 40))


def _context_label(v: float, max_positions: int) -> str:
    if not math.isfinite(v):
        return f"unbounded (model max {max_positions:,})"
    return f"{int(v):,} > model max {max_positions:,}" if v > max_positions else f"{int(v):,}"


def memory_chart(rows: Sequence[dict], capacity_gib: float, usable_gib: float) -> str:
    """Stacked bars of one GPU's memory by segment (the plan's order), with the total (solid) and usable (dashed)
    capacity as rules."""
    labels = list(dict.fromkeys(r["label"] for r in rows))
    segments = {r["segment"]: r["colour"] for r in sorted(rows, key=lambda r: r["order"])}
    bars = [svgchart.Bar(label, [(r["GiB"], r["colour"], f"{label}: {r['segment']} {r['GiB']:,.2f} GiB")
                                 for r in sorted((r for r in rows if r["label"] == label), key=lambda r: r["order"])])
            for label in labels]
    sub = f"KV at the scenario's batch and context; solid: capacity {capacity_gib:,.1f} GiB, dashed: usable"
    return svgchart.bar_chart(bars, title="Memory per GPU", subtitle=sub, x_title="memory on one GPU (GiB)",
                              rules=[svgchart.Rule(capacity_gib, "black", f"capacity {capacity_gib:,.1f} GiB", "none"),
                                     svgchart.Rule(usable_gib, "black", f"usable {usable_gib:,.1f} GiB")],
                              legend=[(c, name) for name, c in segments.items()], width=WIDTH + 200,
                              label_width=260, room=1.02, legend_width=300)


def latency_chart(rows: Sequence[dict]) -> tuple[str, ...]:
    """TPOT per method coloured by what bounds the decode step, and TTFT: two panels; TTFT alone for a plan that
    generates no token (no decode step: TPOT None)."""
    ttft = [svgchart.Bar(r["method"], [(r["TTFT (s)"], "#7f7f7f", f"{r['method']}: TTFT {r['TTFT (s)']:,.3f} s")],
                         f"{r['TTFT (s)']:,.3f} s") for r in rows]
    ttft_chart = svgchart.bar_chart(ttft, title="Prefill (TTFT)", subtitle="the batch's prompts prefilled together",
                                    x_title="time to first token (s)", room=1.25, width=WIDTH // 2 + 40)
    if any(r["TPOT (ms)"] is None for r in rows):
        return (ttft_chart,)
    tpot = [svgchart.Bar(r["method"], [(r["TPOT (ms)"], BOUND_COLOURS.get(r["bound"], "#7f7f7f"),
                                        f"{r['method']}: TPOT {r['TPOT (ms)']:,.2f} ms, {r['bound']}-bound, "
                                        f"dominant op {r['dominant op']}")], f"{r['TPOT (ms)']:,.2f} ms")
            for r in rows]
    bounds = [(BOUND_COLOURS.get(b, "#7f7f7f"), f"{b}-bound") for b in dict.fromkeys(r["bound"] for r in rows)]
    return (svgchart.bar_chart(tpot, title="Decode step (TPOT)", subtitle="one step for the whole batch at the "
                               "context", x_title="time per output token (ms)", legend=bounds, room=1.25,
                               width=WIDTH // 2 + 140, legend_width=130), ttft_chart)


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


def roofline_chart(data: dict, axes: dict) -> str:
    """Log-log roofline: bandwidth slope, one ceiling per dense dtype peak (dashes by dtype) with its ridge point
    (diamond), and every method's decode ops (colour: method, shape: op kind); `axes`
    (dashboard.rooflinepage.roofline_axes) holds the domains fixed over every slider context. A static SVG (svgchart;
    each op's <title> holds what the Op table has)."""
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
            KIND_SHAPES[p["kind"]], 5.0, p["op"]))
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


def serving_chart(rows: Sequence[dict], ttft_slo_s: float, tpot_slo_s: float) -> tuple[str, str]:
    """TTFT p99 and TPOT p99 against the request rate, one line per method (hollow: misses the SLO), each panel with
    its SLO as a dashed rule."""
    panels = []
    for field, title, slo in (("ttft_p99_s", "TTFT p99 (ms)", ttft_slo_s), ("tpot_p99_s", "TPOT p99 (ms)",
                                                                           tpot_slo_s)):
        series: dict[str, list] = {}
        for r in rows:
            series.setdefault(r["method"], []).append(svgchart.Point(
                r["rate_per_s"], r[field] * 1e3, r["meets_slo"],
                f"{r['method']}: {r['rate_per_s']:,.2f} req/s, {title} {r[field] * 1e3:,.1f}"))
        panels.append(svgchart.line_chart(
            [svgchart.Series(m, pts) for m, pts in series.items()], title=title, subtitle="dashed: the SLO; hollow: "
            "misses it", x_title="requests/s", y_title=f"{title}, log", x_log=False, y_log=True,
            hrules=[svgchart.Rule(slo * 1e3, "black", f"SLO {slo * 1e3:g} ms")], width=WIDTH // 2 + 180))
    return panels[0], panels[1]
