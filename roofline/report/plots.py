"""Static charts of a plan: the device roofline with each method's ops, and the memory of one GPU.

The charts only draw (STYLE 14): the numbers come from `op_points` (Roofline.evaluate of the phase graph
the planner times) and `memory_segments` (the plan's memory breakdown), both tested without a display.
Figures are `matplotlib.figure.Figure` objects on the Agg canvas; pyplot and its global state are not used.
"""

from __future__ import annotations

import math
import os
import uuid
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from roofline.costmodel import Roofline
from roofline.errors import RooflineError
from roofline.methods import MethodConfig, parse_method
from roofline.planner.phases import PhaseModel
from roofline.report import GIB, tb_per_s, tflops
from roofline.specs import Hardware, Model, Workload

if TYPE_CHECKING:  # matplotlib is imported where a figure is drawn: op_points and memory_segments (the dashboard's
    from matplotlib.figure import Figure  # Roofline and Plan pages) do not need its ~0.9 s import

CEILING_DTYPES = ("fp32", "bf16", "fp8")  # drawn when the device has a dense peak for them
ATTENTION_OPS = ("attention", "attn_qk", "attn_pv", "attn_softmax")
KINDS = {"attention": ("o", "attention"), "matmul": ("s", "weight GEMMs"),
         "vector": ("^", "elementwise (norm, RoPE, add)"), "method": ("D", "method op / KV write")}
SUBTITLE = ("ops left of a ridge point are memory-bound (time = bytes / bandwidth); "
            "right of it, compute-bound at that dtype's peak")
# (key, legend label, colour): the order the segments stack from the left
SEGMENTS = (
    ("weights", "weights", "#7f7f7f"),
    ("kv_data", "KV data", "#1f77b4"),
    ("kv_metadata", "KV metadata (scales, zeros)", "#6baed6"),
    ("kv_window", "fp16 windows + sinks", "#9467bd"),
    ("kv_outliers", "outliers", "#e377c2"),
    ("kv_workspace", "KV workspace", "#c5b0d5"),
    ("method_params", "method parameters", "#8c564b"),
    ("activations", "activations (prefill peak)", "#ff7f0e"),
    ("reserve", "runtime reserve", "#d62728"),
    ("free", "free KV pool", "#d9f0d3"),
    ("held_back", "held back (1 - gpu_memory_utilization)", "#f0f0f0"),
)


def _op_kind(row: dict) -> str:
    if row["name"] in ATTENTION_OPS:
        return "attention"
    if row["source"] != "model" or row["name"] == "kv_update":
        return "method"
    return "matmul" if row["matmul_flops"] > 0 else "vector"


def op_points(model: Model, hardware: Hardware, workload: Workload, method: MethodConfig,
              phase: str = "decode") -> list[dict[str, Any]]:
    """One point per op of `phase` that does arithmetic, at (B, L, P) = (batch, context, prompt).

    intensity = (matmul + vector FLOPs) / bytes and flops_per_s = FLOPs / time (achieved, per instance),
    both from Roofline.evaluate on the graph the planner times (PhaseModel: same tp and dtypes).
    Ops without FLOPs (embedding, cache copies, all-reduces) have no place on a roofline and are left out.
    """
    if phase not in ("decode", "prefill"):
        raise ValueError(f"phase: {phase!r} is not 'decode' or 'prefill'")
    phases = PhaseModel.build(model, hardware, workload, method)
    rows = phases.rows(phase, workload.batch, workload.context_tokens if phase == "decode" else workload.prompt)
    groups: dict[str, set[str]] = {}
    for row in rows:
        groups.setdefault(row["name"], set()).add(row["group"])
    label = method.label()
    points = []
    for row in rows:
        if row["flops"] <= 0 or row["bytes"] <= 0 or row["time_s"] <= 0:
            continue
        op = row["name"] if len(groups[row["name"]]) == 1 else f"{row['name']} [{row['group']}]"
        points.append({"label": f"{label}: {op}", "method": label, "op": op, "kind": _op_kind(row),
                       "intensity": row["intensity_flops_per_byte"], "flops_per_s": row["flops"] / row["time_s"],
                       "bound": row["bound"], "time_s": row["time_s"], "count": row["count"]})
    return points


def _ceilings(roof: Roofline) -> list[tuple[str, float, float]]:
    """(dtype, peak FLOP/s, ridge FLOP/byte) of the dtypes the device has, lowest peak first."""
    hw = roof.hardware
    out = [(d, roof.matmul_peak(d), roof.ridge_point(d)) for d in CEILING_DTYPES if hw.has_dtype(d)]
    return sorted(out, key=lambda c: c[1])


def _limits(points, ceilings, bandwidth) -> tuple[tuple[float, float], tuple[float, float]]:
    xs = [p["intensity"] for p in points if p["intensity"] > 0] + [c[2] for c in ceilings]
    ys = [p["flops_per_s"] for p in points if p["flops_per_s"] > 0] + [c[1] for c in ceilings]
    x_lo = 10 ** math.floor(math.log10(min(xs) / 3))
    x_hi = 10 ** math.ceil(math.log10(max(xs) * 20))  # room for the ceiling labels right of the ridges
    y_lo = 10 ** math.floor(math.log10(min(min(ys), bandwidth * x_lo) / 2))
    y_hi = 10 ** math.ceil(math.log10(max(ys) * 3))
    return (x_lo, x_hi), (y_lo, y_hi)


def roofline_figure(hardware: Hardware, points: Sequence[dict], title: str | None = None, *,
                    roofline: Roofline | None = None) -> Figure:
    """Log-log roofline of `hardware`: one ceiling per dense peak (fp32, bf16, fp8 where present), the
    bandwidth slope, each ridge point (peak / bandwidth) marked, and `points` coloured by method, marked
    by op kind. Ceilings are the effective ones of `roofline` (default Roofline(hardware): measured derates
    when the spec has them), the same ones the points were timed against."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    roof = roofline or Roofline(hardware)
    ceilings, bw = _ceilings(roof), roof.bandwidth()
    fig = Figure(figsize=(11, 6.5), layout="constrained")
    FigureCanvasAgg(fig)
    ax = fig.add_subplot()
    (x_lo, x_hi), (y_lo, y_hi) = _limits(points, ceilings, bw)
    ax.set(xscale="log", yscale="log", xlim=(x_lo, x_hi), ylim=(y_lo, y_hi),
           xlabel="arithmetic intensity (FLOP/byte)", ylabel="attainable / achieved throughput (FLOP/s)")
    ax.grid(True, which="major", alpha=0.3)
    ax.grid(True, which="minor", alpha=0.08)
    measured = " (measured)" if roof.measured is not None else ""
    top_ridge = ceilings[-1][2]
    ax.plot([x_lo, top_ridge], [bw * x_lo, bw * top_ridge], color="black", lw=1.6, gid="bandwidth")
    styles = {"fp32": ":", "bf16": "-", "fp8": "--"}
    for dtype, peak, ridge in ceilings:
        ax.plot([ridge, x_hi], [peak, peak], color="black", lw=1.6, ls=styles.get(dtype, "-"), gid=f"ceiling-{dtype}")
        ax.plot([ridge], [peak], marker="D", ms=7, color="black", ls="none", gid=f"ridge-{dtype}")
        ax.annotate(f"{dtype} dense {tflops(peak)}{measured}", (x_hi, peak), xytext=(-4, 3),
                    textcoords="offset points", ha="right", va="bottom", fontsize=9)
        # above-left of the diamond: the empty triangle over the slope, clear of the ceiling labels
        ax.annotate(f"{dtype} ridge {ridge:,.0f} FLOP/B", (ridge, peak), xytext=(-7, 3),
                    textcoords="offset points", ha="right", va="bottom", fontsize=8.5, color="0.25")
    _draw_points(ax, points)
    _label_attention(ax, points)
    _legends(ax, points)
    fig.suptitle(title or f"Roofline: {hardware.name}", fontsize=13)
    ax.set_title(SUBTITLE, fontsize=9, color="0.3")
    _slope_label(fig, ax, bw, x_lo, f"memory bandwidth {tb_per_s(bw)}{measured}")
    return fig


def _slope_label(fig, ax, bw, x_lo, text) -> None:
    """The bandwidth label along the slope, just under it (ops sit on the line), at its left end; the
    line's on-screen angle is known once the layout is done."""
    from matplotlib.transforms import offset_copy

    fig.draw_without_rendering()
    x0 = x_lo * 1.3
    (ax0, ay0), (ax1, ay1) = ax.transData.transform([(x0, bw * x0), (x0 * 10, bw * x0 * 10)])
    angle = math.atan2(ay1 - ay0, ax1 - ax0)
    gap = 9  # points, perpendicular to the line
    under = offset_copy(ax.transData, fig=fig, x=gap * math.sin(angle), y=-gap * math.cos(angle), units="points")
    ax.text(x0, bw * x0, text, rotation=math.degrees(angle), rotation_mode="anchor", ha="left", va="top",
            fontsize=9, transform=under)


def _methods(points) -> list[str]:
    return list(dict.fromkeys(p["method"] for p in points))


def _draw_points(ax, points) -> None:
    """Hollow markers, earlier methods larger, so ops two methods share show as concentric rings."""
    methods = _methods(points)
    colours = {m: f"C{i % 10}" for i, m in enumerate(methods)}
    for i, method in enumerate(methods):
        size = 45 + 35 * (len(methods) - 1 - i)
        for kind, (marker, _) in KINDS.items():
            mine = [p for p in points if p["method"] == method and p.get("kind", "matmul") == kind]
            if mine:
                ax.scatter([p["intensity"] for p in mine], [p["flops_per_s"] for p in mine], s=size,
                           marker=marker, facecolors="none", edgecolors=colours[method], linewidths=1.6,
                           zorder=3, gid=f"points-{method}-{kind}")


def _label_attention(ax, points) -> None:
    """Name the attention points (the ops a KV method changes) from a column in the empty lower right,
    highest point first. The column stands right of the points when they lie left of it (leader lines from
    the labels' left ends), else left of them (from the right ends), so no line crosses a label."""
    colours = {m: f"C{i % 10}" for i, m in enumerate(_methods(points))}
    attention = sorted((p for p in points if p.get("kind") == "attention"), key=lambda p: -p["flops_per_s"])
    if not attention:
        return
    to_axes = ax.transScale + ax.transLimits  # data -> axes fraction, before any layout
    xs = sorted(to_axes.transform((p["intensity"], p["flops_per_s"]))[0] for p in attention)
    right_of_points = xs[-1] < 0.55
    x_text, ha, relpos = (0.62, "left", (0.0, 0.5)) if right_of_points else (xs[0] - 0.06, "right", (1.0, 0.5))
    step = min(0.055, 0.42 / len(attention))
    for i, p in enumerate(attention):
        ax.annotate(p["label"], (p["intensity"], p["flops_per_s"]), xytext=(x_text, 0.44 - i * step),
                    textcoords="axes fraction", fontsize=8.5, color=colours[p["method"]], va="center", ha=ha,
                    arrowprops=dict(arrowstyle="-", color=colours[p["method"]], lw=0.8, shrinkA=2, shrinkB=5,
                                    relpos=relpos, alpha=0.8))


def _legends(ax, points) -> None:
    from matplotlib.lines import Line2D

    methods = _methods(points)
    if not methods:
        return
    handles = [Line2D([], [], ls="none", marker="o", mfc="none", mec=f"C{i % 10}", mew=1.6, ms=8, label=m)
               for i, m in enumerate(methods)]
    first = ax.legend(handles=handles, title="method", loc="upper left", bbox_to_anchor=(1.01, 1.0),
                      fontsize=9, title_fontsize=9)
    ax.add_artist(first)
    kinds = list(dict.fromkeys(p.get("kind", "matmul") for p in points))
    handles = [Line2D([], [], ls="none", marker=KINDS[k][0], mfc="none", mec="0.2", mew=1.4, ms=8, label=KINDS[k][1])
               for k in KINDS if k in kinds]
    if handles:
        ax.legend(handles=handles, title="op", loc="lower left", bbox_to_anchor=(1.01, 0.0), fontsize=9,
                  title_fontsize=9)


def memory_segments(result: dict) -> dict[str, float]:
    """Bytes of one plan result's GPU by segment (SEGMENTS order); they sum to the capacity when the
    batch fits, and past it (free and held-back 0) when it does not.

    free = usable - (weights + KV at the batch and context + method params + activations + reserve);
    held back = capacity - usable (gpu_memory_utilization), less any overflow of the usable memory.
    """
    mem = result["memory"]
    kv = mem["kv_parts_bytes"]
    seg = {"weights": mem["weights_bytes"], "kv_data": kv.get("data", 0.0), "kv_metadata": kv.get("metadata", 0.0),
           "kv_window": kv.get("window", 0.0) + kv.get("sinks", 0.0), "kv_outliers": kv.get("outliers", 0.0),
           "kv_workspace": kv.get("workspace", 0.0), "method_params": mem["method_params_bytes"],
           "activations": mem["activations_bytes"], "reserve": mem["reserve_bytes"]}
    used = sum(seg.values())
    seg["free"] = max(mem["usable_bytes"] - used, 0.0)
    seg["held_back"] = max(mem["capacity_bytes"] - max(mem["usable_bytes"], used), 0.0)
    return {k: float(seg[k]) for k, _, _ in SEGMENTS}


def _bar_label(result: dict) -> str:
    return result["method"] if result.get("fits", True) else \
        f"{result['method']}\n(does not fit: max batch {result['max_batch']})"


def memory_figure(plan: dict) -> Figure:
    """Stacked horizontal bars, one per method in `plan` (roofline.planner.plan's dict), of one GPU's memory
    in GiB by segment, KV at the plan's batch and context; vertical lines at the usable memory and the
    capacity; segments wider than 4% of the capacity carry their size."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    results = plan["results"]
    segs = [memory_segments(r) for r in results]
    capacity = results[0]["memory"]["capacity_bytes"]
    usable = results[0]["memory"]["usable_bytes"]
    fig = Figure(figsize=(11, 1.6 + 0.75 * len(results)), layout="constrained")
    FigureCanvasAgg(fig)
    ax = fig.add_subplot()
    ys = list(range(len(results)))[::-1]
    left = [0.0] * len(results)
    for key, name, colour in SEGMENTS:
        widths = [s[key] / GIB for s in segs]
        if not any(widths):
            continue
        bars = ax.barh(ys, widths, left=left, height=0.6, color=colour, edgecolor="white", linewidth=0.6,
                       label=name, gid=f"segment-{key}")
        for bar, r in zip(bars, results, strict=True):
            bar.set_gid(f"segment-{key}-{r['method']}")
        texts = [f"{w:.1f}" if w >= 0.04 * capacity / GIB else "" for w in widths]
        ax.bar_label(bars, labels=texts, label_type="center", fontsize=8, color="black")
        left = [a + w for a, w in zip(left, widths, strict=True)]
    ax.axvline(capacity / GIB, color="black", lw=1.5, gid="capacity")
    ax.axvline(usable / GIB, color="black", lw=1, ls="--", gid="usable")
    ax.set_yticks(ys, [_bar_label(r) for r in results])
    ax.set_xlabel("memory on one GPU (GiB)")
    longest = max(sum(s.values()) for s in segs) / GIB
    ax.set_xlim(0, max(capacity / GIB, longest) * 1.02)
    ax.set_ylim(-0.6, len(results) - 0.4)
    ax.legend(loc="upper left", bbox_to_anchor=(1.01, 1.0), fontsize=8.5, title="segment", title_fontsize=9)
    wl = plan["workload"]
    fig.suptitle(f"Memory per GPU: {plan['model']} on {plan['hardware']}, batch {wl['batch']} at context "
                 f"{wl['context_tokens']:,}" + (f" ({plan['gpus']} GPUs)" if plan.get("gpus", 1) > 1 else ""),
                 fontsize=12)
    ax.set_title(f"solid line: capacity {capacity / GIB:,.1f} GiB; dashed: usable {usable / GIB:,.1f} GiB "
                 f"(gpu_memory_utilization {usable / capacity:.2f})", fontsize=9, color="0.3")
    return fig


def output_dir(out_dir: str | os.PathLike) -> Path:
    """`out_dir` as an existing directory: created (with parents) if missing; refused, never written
    through, when it is empty, the file-system root, a file, a device such as /dev/null, or a link to one."""
    out = Path(out_dir)
    if not str(out_dir).strip():
        raise RooflineError("--plot: name a folder for the charts")
    try:
        if out.resolve() == Path(out.resolve().anchor):
            raise RooflineError(f"--plot: {str(out)[:200]!r} is the file-system root; name a folder of its own for "
                                f"the charts")
        if out.exists() or out.is_symlink():
            if not out.is_dir():
                raise RooflineError(f"--plot: {out} exists and is not a directory")
        else:
            out.mkdir(parents=True)
    except (OSError, ValueError) as err:
        raise RooflineError(f"--plot: cannot create {str(out)[:200]!r}: {getattr(err, 'strerror', None) or err}") \
            from None
    return out


def _save_all(figures: dict[str, Figure], out_dir: Path) -> list[Path]:
    """Render every file to a temporary name beside its target, then rename them all into place: a
    failure while rendering leaves the old files (or none), never a half-written one."""
    temps: list[tuple[Path, Path]] = []
    try:
        for name, fig in figures.items():
            for fmt in ("png", "svg"):
                target = out_dir / f"{name}.{fmt}"
                tmp = out_dir / f".{target.name}.{os.getpid()}.{uuid.uuid4().hex}.tmp"
                # os.open with 0o666 keeps the umask's permissions (mkstemp would leave the file 0600)
                fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666)
                temps.append((tmp, target))
                with os.fdopen(fd, "wb") as fh:
                    fig.savefig(fh, format=fmt, dpi=150, metadata={"Date": None} if fmt == "svg" else None)
        for tmp, target in temps:
            if target.is_dir():
                raise RooflineError(f"--plot: {target} is a directory; not replaced")
            os.replace(tmp, target)
    except OSError as err:
        raise RooflineError(f"--plot: cannot write into {out_dir}: {err.strerror or err}") from None
    finally:
        for tmp, _ in temps:
            tmp.unlink(missing_ok=True)
    return [target for _, target in temps]


def write_plots(plan: dict, model: Model, hardware: Hardware, workload: Workload,
                methods: Sequence[MethodConfig | str], out_dir: str | os.PathLike) -> list[Path]:
    """roofline.png/.svg (every method's decode ops on one roofline) and memory.png/.svg (from `plan`)
    in `out_dir` (created if missing); returns the four paths. A path that is not a directory, or one that
    cannot be created or written, is one RooflineError line; each file is written atomically."""
    out = output_dir(out_dir)
    configs = [parse_method(m) if isinstance(m, str) else m for m in methods]
    points = [p for m in configs for p in op_points(model, hardware, workload, m, "decode")]
    title = (f"Decode roofline: {model.name} on {hardware.name}, batch {workload.batch} at context "
             f"{workload.context_tokens:,}" + (f", tp={workload.tp}" if workload.tp > 1 else ""))
    figures = {"roofline": roofline_figure(hardware, points, title, roofline=Roofline(hardware, tp=workload.tp)),
               "memory": memory_figure(plan)}
    return _save_all(figures, out)
