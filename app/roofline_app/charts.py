"""Altair charts of numbers roofline.report.dashboard computed: these functions only arrange and draw them.

Vega-Lite renders in the browser, so a re-render costs the server a JSON spec, not a rasterized figure.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import altair as alt
import pandas as pd

BOUND_COLOURS = alt.Scale(domain=["memory", "compute", "communication"], range=["#1f77b4", "#d62728", "#2ca02c"])
KIND_LABELS = {"attention": "attention", "matmul": "weight GEMM", "vector": "elementwise", "method": "method op"}
DASHES = {"fp32": [2, 2], "bf16": [1, 0], "fp8": [6, 3], "memory": [1, 0]}
WIDTH = 820  # px of a single chart; side-by-side panels share it
SCHEME = alt.Scale(scheme="category10")


def _title(text: str, subtitle: str) -> alt.TitleParams:
    return alt.TitleParams(text, subtitle=subtitle, anchor="start", fontSize=15, subtitleFontSize=12)


def capacity_chart(rows: Sequence[dict], max_positions: int) -> alt.HConcatChart:
    """Max context at the batch, drawn up to the model's max positions (a longer one is labelled, never drawn
    past it; unbounded likewise), and max batch at the context."""
    df = pd.DataFrame(rows)
    mc = df["max context at batch"]
    df["context shown"] = [min(v, max_positions) for v in mc]
    df["context label"] = ["unbounded (model max " + f"{max_positions:,})" if not math.isfinite(v) else
                           f"{int(v):,} > model max {max_positions:,}" if v > max_positions else f"{int(v):,}"
                           for v in mc]
    order = list(df["method"])
    base = alt.Chart(df).encode(y=alt.Y("method:N", sort=order, title=None))
    x_ctx = alt.X("context shown:Q", title="max context at the batch (tokens)", axis=alt.Axis(format="~s"),
                  scale=alt.Scale(domain=[0, max_positions * 1.45]))
    ctx = base.mark_bar(color="#1f77b4").encode(x=x_ctx, tooltip=["method", alt.Tooltip("context label:N",
                                                                                          title="max context")])
    rule = alt.Chart(pd.DataFrame({"x": [max_positions]})).mark_rule(strokeDash=[4, 3], color="black").encode(x="x:Q")
    ctx = (ctx + rule + base.mark_text(align="left", dx=3, fontSize=11).encode(x="context shown:Q",
                                                                               text="context label:N")).properties(
        width=WIDTH // 2 - 40, title=_title("Longest context", "every sequence of the batch; dashed: the model's "
                                            f"max positions ({max_positions:,})"))
    bat = base.mark_bar(color="#ff7f0e").encode(x=alt.X("max batch at context:Q", title="max batch at the context"),
                                                 tooltip=["method", alt.Tooltip("max batch at context:Q", format=",")])
    bat = (bat + base.mark_text(align="left", dx=3).encode(x="max batch at context:Q",
                                                           text=alt.Text("max batch at context:Q", format=","))
           ).properties(width=WIDTH // 2 - 40, title=_title("Largest batch", "sequences at the scenario's context"))
    return alt.hconcat(ctx, bat)


def memory_chart(rows: Sequence[dict], capacity_gib: float, usable_gib: float) -> alt.LayerChart:
    """Stacked bars of one GPU's memory by segment, with the usable and total capacity as rules."""
    df = pd.DataFrame(rows)
    segments = df.drop_duplicates("segment").sort_values("order")
    colour = alt.Scale(domain=list(segments["segment"]), range=list(segments["colour"]))
    bars = alt.Chart(df).mark_bar().encode(
        y=alt.Y("label:N", sort=list(dict.fromkeys(df["label"])), title=None, axis=alt.Axis(labelLimit=320)),
        x=alt.X("sum(GiB):Q", title="memory on one GPU (GiB)"),
        color=alt.Color("segment:N", scale=colour, sort=list(segments["segment"]), title="segment",
                        legend=alt.Legend(orient="right", labelLimit=320)),
        order=alt.Order("order:Q"),
        tooltip=["label", "segment", alt.Tooltip("GiB:Q", format=",.2f")])
    lines = pd.DataFrame({"GiB": [capacity_gib, usable_gib], "line": ["capacity", "usable"]})
    rules = alt.Chart(lines).mark_rule(color="black").encode(
        x="GiB:Q", strokeDash=alt.StrokeDash("line:N", scale=alt.Scale(range=[[1, 0], [5, 3]]), legend=None),
        tooltip=["line", alt.Tooltip("GiB:Q", format=",.1f")])
    sub = f"KV at the scenario's batch and context; solid: capacity {capacity_gib:,.1f} GiB, dashed: usable"
    height = max(300, 34 * df["label"].nunique())  # room for the legend's eleven segments
    return (bars + rules).properties(width=WIDTH - 260, height=height, title=_title("Memory per GPU", sub))


def latency_chart(rows: Sequence[dict]) -> alt.HConcatChart:
    """TTFT and TPOT per method, TPOT coloured by what bounds the decode step."""
    df = pd.DataFrame(rows)
    base = alt.Chart(df).encode(y=alt.Y("method:N", sort=list(df["method"]), title=None))
    tpot = base.mark_bar().encode(
        x=alt.X("TPOT (ms):Q", title="time per output token (ms)"),
        color=alt.Color("bound:N", scale=BOUND_COLOURS, title="decode bound", legend=alt.Legend(orient="bottom")),
        tooltip=["method", alt.Tooltip("TPOT (ms):Q", format=",.2f"), "bound", "dominant op"]).properties(
        width=WIDTH // 2 - 60, title=_title("Decode step (TPOT)", "one step for the whole batch at the context"))
    ttft = base.mark_bar(color="#7f7f7f").encode(
        x=alt.X("TTFT (s):Q", title="time to first token (s)"),
        tooltip=["method", alt.Tooltip("TTFT (s):Q", format=",.3f")]).properties(
        width=WIDTH // 2 - 60, title=_title("Prefill (TTFT)", "the batch's prompts prefilled together"))
    return alt.hconcat(tpot, ttft)


def _ceiling_frames(data: dict, x_lo: float, x_hi: float) -> tuple[pd.DataFrame, pd.DataFrame]:
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
    return pd.DataFrame(lines), pd.DataFrame(ridges)


def roofline_chart(data: dict, axes: dict) -> alt.LayerChart:
    """Log-log roofline: bandwidth slope, one ceiling per dense dtype peak with its ridge point (diamond), and
    every method's decode ops (colour: method, shape: op kind); `axes` (report.rooflinepage.roofline_axes) holds the
    domains fixed over every slider context."""
    pts = pd.DataFrame(data["points"])
    pts["op kind"] = [KIND_LABELS[k] for k in pts["kind"]]
    x_lo, x_hi, y_lo, y_hi = axes["x_lo"], axes["x_hi"], axes["y_lo"], axes["y_hi"]
    lines, ridges = _ceiling_frames(data, x_lo, x_hi)
    width, height = WIDTH + 80, 560
    # the slope's on-screen angle: one decade of x and of y in pixels (Vega's angle turns clockwise)
    angle = -math.degrees(math.atan((height / math.log10(y_hi / y_lo)) / (width / math.log10(x_hi / x_lo))))
    x_scale = alt.Scale(type="log", domain=[x_lo, x_hi])
    y_scale = alt.Scale(type="log", domain=[y_lo, y_hi])
    x = alt.X("x:Q", scale=x_scale, title="arithmetic intensity (FLOP/byte)", axis=alt.Axis(format="~s"))
    y = alt.Y("y:Q", scale=y_scale, title="attainable / achieved throughput (FLOP/s)",
              axis=alt.Axis(format="~s"))
    dashes = alt.Scale(domain=list(dict.fromkeys(lines["line"])), range=[DASHES.get(n.split()[0], [1, 0])
                                                                           for n in dict.fromkeys(lines["line"])])
    roof = alt.Chart(lines).mark_line(color="black", strokeWidth=1.5).encode(
        x=x, y=y, detail="line:N", strokeDash=alt.StrokeDash("line:N", scale=dashes, legend=None), tooltip=["line"])
    slope = lines[lines["line"].str.startswith("memory")].iloc[:1].assign(x=lambda f: f["x"] * 1.5)
    slope = slope.assign(y=slope["x"] * data["bandwidth_bytes_per_s"])
    slope_label = alt.Chart(slope).mark_text(align="left", dy=14, fontSize=12, angle=angle % 360).encode(
        x=x, y=y, text="line:N")
    marks = alt.Chart(ridges).mark_point(shape="diamond", filled=True, color="black", size=80).encode(
        x=x, y=y, tooltip=["label"])
    labels = alt.Chart(ridges).mark_text(align="right", dx=-2, dy=-7, fontSize=12).encode(
        x=alt.X("x_end:Q", scale=x_scale), y=y, text="label")
    ops = alt.Chart(pts).mark_point(size=110, strokeWidth=2.2, filled=False).encode(
        x=alt.X("intensity:Q", scale=x_scale),
        y=alt.Y("flops_per_s:Q", scale=y_scale),
        color=alt.Color("method:N", title="method", sort=list(dict.fromkeys(pts["method"])), scale=SCHEME),
        shape=alt.Shape("op kind:N", title="op kind", scale=alt.Scale(
            domain=list(KIND_LABELS.values()), range=["circle", "square", "triangle-up", "diamond"])),
        tooltip=["method", "op", "bound", alt.Tooltip("intensity:Q", format=",.1f", title="FLOP/byte"),
                 alt.Tooltip("flops_per_s:Q", format=".3~s", title="FLOP/s"),
                 alt.Tooltip("time_s:Q", format=".3~s", title="time per instance (s)"), "count"])
    sub = (f"{data['hardware']}, decode at batch {data['batch']} and context {data['context']:,}: ops left of a "
           "ridge point are memory-bound, right of it compute-bound")
    return (roof + slope_label + marks + labels + ops).resolve_scale(color="independent").properties(
        width=width, height=height, title=_title("Roofline", sub))


def compare_chart(rows: Sequence[dict]) -> alt.HConcatChart:
    """Four small bar charts side by side: effective bits, compression, max context, TPOT."""
    df = pd.DataFrame(rows)
    df["max context shown"] = [v if math.isfinite(v) else None for v in df["max context at batch"]]
    panels = [("effective bits", "bits per K/V element"), ("compression vs 16-bit", "x smaller than 16-bit"),
              ("max context shown", "max context (tokens)"), ("TPOT (ms)", "TPOT (ms)")]
    charts = [alt.Chart(df).mark_bar().encode(
        y=alt.Y("method:N", sort=list(df["method"]), title=None, axis=alt.Axis(labels=i == 0)),
        x=alt.X(f"{col}:Q", title=title), color=alt.Color("family:N", title="family", scale=SCHEME),
        tooltip=["method", alt.Tooltip(f"{col}:Q", format=",.2f")]).properties(width=160, title=title)
        for i, (col, title) in enumerate(panels)]
    return alt.hconcat(*charts)


def quality_chart(rows: Sequence[dict], benchmark: str) -> alt.LayerChart:
    """The paper's quality (y) against the effective bits our model computes for the same configuration (x);
    points are named by the legend (colour and shape), not by labels that would overlap."""
    df = pd.DataFrame([r for r in rows if r["computed bits"] is not None])
    metric = rows[0]["metric"]
    better = "higher is better" if rows[0]["higher is better"] else "lower is better"
    x = alt.X("computed bits:Q", scale=alt.Scale(zero=False, padding=30),
              title="effective bits per K/V element (computed by roofline)")
    y = alt.Y("value:Q", scale=alt.Scale(zero=False, padding=30), title=f"{metric} (paper; {better})")
    chart = alt.Chart(df).mark_point(size=120, filled=True).encode(
        x=x, y=y, color=alt.Color("method:N", title="paper's row", scale=alt.Scale(scheme="tableau20"),
                                  legend=alt.Legend(labelLimit=260)),
        shape=alt.Shape("method:N", title="paper's row", legend=alt.Legend(labelLimit=260)),
        tooltip=["method", "value", "paper memory", "spec", alt.Tooltip("computed bits:Q", format=".3f")])
    baseline = rows[0]["baseline"]
    if baseline is not None:
        frame = pd.DataFrame({"value": [baseline], "label": [f"uncompressed: {baseline:g}"]})
        rule = alt.Chart(frame).mark_rule(strokeDash=[5, 3], color="gray").encode(y="value:Q", tooltip=["label"])
        text = alt.Chart(frame).mark_text(align="left", x=4, dy=-7, color="gray", fontSize=11).encode(
            y="value:Q", text="label:N")
        chart = chart + rule + text
    return chart.properties(width=WIDTH - 160, height=420, title=_title("Quality against memory", benchmark))


def validation_chart(rows: Sequence[dict]) -> alt.LayerChart:
    """Predicted against measured time per case (log-log) with the y = x line."""
    df = pd.DataFrame([r for r in rows if r["predicted (ms)"] and r["measured (ms)"]])
    lo = min(df["predicted (ms)"].min(), df["measured (ms)"].min()) / 1.5
    hi = max(df["predicted (ms)"].max(), df["measured (ms)"].max()) * 1.5
    scale = alt.Scale(type="log", domain=[lo, hi])
    diag = alt.Chart(pd.DataFrame({"t": [lo, hi]})).mark_line(color="gray", strokeDash=[5, 3]).encode(
        x=alt.X("t:Q", scale=scale, title="measured (ms)"), y=alt.Y("t:Q", scale=scale, title="predicted (ms)"))
    pts = alt.Chart(df).mark_point(size=70, filled=True).encode(
        x=alt.X("measured (ms):Q", scale=scale), y=alt.Y("predicted (ms):Q", scale=scale),
        color=alt.Color("family:N", title="kernel family"),
        tooltip=["family", "case", alt.Tooltip("measured (ms):Q", format=".4f"),
                 alt.Tooltip("predicted (ms):Q", format=".4f"), alt.Tooltip("APE (%):Q", format=".1f")])
    sub = "dashed: y = x (a perfect prediction); above it the model predicts more time than measured"
    return (diag + pts).properties(width=WIDTH, height=420, title=_title("Predicted against measured", sub))


SWEEP_METRICS = {"tpot_s": ("TPOT (ms)", 1e3, True), "tokens_per_s": ("tokens/s", 1.0, True),
                 "max_batch": ("max batch that fits", 1.0, True)}


def sweep_chart(rows: Sequence[dict], marks: Sequence[dict], axis: str, metric: str,
                slo_s: float | None) -> alt.LayerChart:
    """One line per method of `metric` against `axis` (log-log), points where the scenario's batch does not fit
    hollow, vertical rules at each method's fit boundary and at the model's max positions, the SLO as a rule."""
    title, scale, log_y = SWEEP_METRICS[metric]
    df = pd.DataFrame(rows)
    df["y"] = df[metric] * scale
    df = df[df["y"] > 0] if log_y else df
    df["fits"] = ["fits" if f else "does not fit" for f in df["fits"]]
    x = alt.X(f"{axis}:Q", scale=alt.Scale(type="log"), title=f"{axis} ({'tokens' if axis == 'context' else 'seqs'})",
              axis=alt.Axis(format="~s"))
    y = alt.Y("y:Q", scale=alt.Scale(type="log" if log_y else "linear"), title=title, axis=alt.Axis(format="~s"))
    colour = alt.Color("method:N", scale=SCHEME, sort=list(dict.fromkeys(df["method"])), title="method")
    line = alt.Chart(df).mark_line(strokeWidth=2).encode(x=x, y=y, color=colour)
    pts = alt.Chart(df).mark_point(size=28).encode(
        x=x, y=y, color=colour, fill=alt.condition("datum.fits == 'fits'", colour, alt.value("white")),
        tooltip=["method", alt.Tooltip(f"{axis}:Q", format=","), alt.Tooltip("y:Q", title=title, format=",.4~f"),
                 "fits"])
    chart = line + pts
    if marks:
        m = pd.DataFrame(marks)
        chart += alt.Chart(m).mark_rule(strokeDash=[4, 3]).encode(
            x=alt.X("x:Q"), color=alt.condition("datum.method == ''", alt.value("black"), colour), tooltip=["label"])
    if slo_s is not None and metric == "tpot_s":
        slo = pd.DataFrame({"y": [slo_s * 1e3], "label": [f"TPOT target {slo_s * 1e3:g} ms"]})
        chart += alt.Chart(slo).mark_rule(color="#d62728", strokeDash=[6, 3]).encode(y="y:Q", tooltip=["label"])
    sub = ("dashed: each method's fit boundary (its colour) and the model's max positions (black); hollow points: "
           "the batch does not fit")
    return chart.properties(width=WIDTH, height=420, title=_title(f"{title} against {axis}", sub))


def pareto_chart(rows: Sequence[dict], metric: str, higher_is_better: bool) -> alt.Chart:
    """Paper quality (y) against KV GiB per sequence on the scenario (x), size and tooltip TPOT; filled: meets the
    SLO; the front joined by a line. Only methods with a figure are drawn (the others are listed apart)."""
    df = pd.DataFrame([r for r in rows if r["quality"] is not None])
    df["KV GiB per sequence"] = df["kv_bytes_per_sequence"] / (1 << 30)
    df["TPOT (ms)"] = df["tpot_s"] * 1e3
    df["SLO"] = ["meets the SLO" if m else "misses the SLO" for m in df["meets_slo"]]
    x = alt.X("KV GiB per sequence:Q", scale=alt.Scale(type="log"), title="KV cache per sequence on this scenario "
              "(GiB, log)")
    y = alt.Y("quality:Q", scale=alt.Scale(zero=False, padding=20),
              title=f"{metric} (paper; {'higher' if higher_is_better else 'lower'} is better)")
    colour = alt.Color("method:N", scale=alt.Scale(scheme="tableau20"), title="method")
    pts = alt.Chart(df).mark_point(strokeWidth=2).encode(
        x=x, y=y, color=colour, shape=alt.Shape("SLO:N", scale=alt.Scale(domain=["meets the SLO", "misses the SLO"],
                                                                         range=["circle", "cross"])),
        size=alt.Size("TPOT (ms):Q", scale=alt.Scale(range=[60, 600]), title="TPOT (ms)"),
        tooltip=["method", "paper_row", alt.Tooltip("quality:Q"), alt.Tooltip("KV GiB per sequence:Q", format=",.3f"),
                 alt.Tooltip("TPOT (ms):Q", format=",.2f"), "SLO"])
    front = alt.Chart(df[df["on_front"]]).mark_line(color="black", strokeDash=[3, 2]).encode(
        x=x, y=y, order="KV GiB per sequence:Q")
    return (front + pts).properties(width=WIDTH - 120, height=420, title=_title(
        "Memory, quality and TPOT", "dashed: the front (no method with a figure is smaller and better); "
        "size: TPOT; x: cross misses the SLO"))


def serving_chart(rows: Sequence[dict], ttft_slo_s: float, tpot_slo_s: float) -> alt.HConcatChart:
    """TTFT p99 and TPOT p99 against the request rate, one line per method, each with its SLO as a rule."""
    frame = pd.DataFrame([{**r, "ttft_p99_ms": r["ttft_p99_s"] * 1e3, "tpot_p99_ms": r["tpot_p99_s"] * 1e3}
                          for r in rows])
    panels = []
    for field, title, slo in (("ttft_p99_ms", "TTFT p99 (ms)", ttft_slo_s), ("tpot_p99_ms", "TPOT p99 (ms)",
                                                                            tpot_slo_s)):
        lines = alt.Chart(frame).mark_line(point=True).encode(
            x=alt.X("rate_per_s:Q", title="requests/s"),
            y=alt.Y(f"{field}:Q", title=title, scale=alt.Scale(type="log")),
            color=alt.Color("method:N", scale=SCHEME), tooltip=["method", "rate_per_s", field, "meets_slo"])
        rule = alt.Chart(pd.DataFrame([{"slo": slo * 1e3}])).mark_rule(strokeDash=[6, 3], color="black").encode(
            y="slo:Q")
        panels.append((lines + rule).properties(width=WIDTH // 2 - 40, height=300, title=f"{title}; dashed: SLO"))
    return alt.hconcat(*panels)
