"""The Roofline page's data: the device's ceilings and every method's decode ops at a context, fixed axes over every
context the slider offers, what the methods' own ops do between the slider's ends (the caption says it from these
numbers), and the closed-form limits with the verdict of the same quantity the chart shows.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from typing import Any

from roofline.dashboard.appdata import workload_from
from roofline.errors import RooflineError, one_line
from roofline.specs import Hardware, Model, Workload

OWN_KINDS = ("attention", "method")  # the ops a compression method changes (report.plots._op_kind)


def context_options(current: int) -> list[int]:
    """Contexts for the roofline slider: powers of two from 128 to 1Mi tokens, plus the scenario's own."""
    return sorted({1 << n for n in range(7, 21)} | {int(current)})


def roofline_data(model: Model, hardware: Hardware, workload: Workload, specs: Iterable[str],
                  context: int) -> dict[str, Any]:
    """The device ceilings (dense peaks, ridge points, bandwidth: Roofline of the scenario's tp) and every
    method's decode ops at `context` (roofline.report.plots.op_points)."""
    from roofline.costmodel import Roofline
    from roofline.methods import parse_method
    from roofline.report.plots import CEILING_DTYPES, op_points

    at = workload_from({**workload.model_dump(), "context_tokens": context, "prompt_tokens": None,
                        "generated_tokens": min(workload.generated_tokens, context - 1)})
    roof = Roofline(hardware, tp=workload.tp)
    ceilings = [{"dtype": d, "peak_flops_per_s": roof.matmul_peak(d), "ridge_flops_per_byte": roof.ridge_point(d)}
                for d in CEILING_DTYPES if hardware.has_dtype(d)]
    points = [p for s in specs for p in op_points(model, hardware, at, parse_method(s), "decode")]
    return {"hardware": hardware.name, "bandwidth_bytes_per_s": roof.bandwidth(), "ceilings": ceilings,
            "measured": roof.measured is not None, "points": points, "context": context, "batch": at.batch}


def limits_rows(model: Model, hardware: Hardware, workload: Workload, specs: Iterable[str],
                context: int) -> list[dict[str, Any]]:
    """The closed-form limits beside the roofline: XQuant's remat limit l* (compute_for_memory.remat_limit at the
    scenario's batch: the whole decode step, weights included, stays memory-bound up to l*) beside the bound of the
    method's own ops as the chart plots them (the fused remat op alone has no weights to amortize, so it can be
    compute-bound while the step is not), and AQUA-KV's model/predictor FLOP ratio at `context` (analysis.limits)."""
    from roofline.analysis.compute_for_memory import remat_limit
    from roofline.methods import parse_method

    points = kept("roofline_data", model, hardware, workload, specs, context)["points"]
    rows = []
    for spec in specs:
        config = parse_method(spec)
        try:
            if config.method == "xquant":
                lim = remat_limit(model, hardware, config.bits, workload.batch, workload.compute_dtype)
                step = "memory-bound" if context <= lim["limit_tokens"] else "compute-bound"
                rows.append({"method": spec, "limit": "whole decode step (weights + remat) memory-bound up to l*",
                             "value": lim["limit_tokens"], "unit": "tokens",
                             "at this context": f"step {step}; {_own_ops(points, spec)}",
                             "detail": f"{lim['formula']}; ridge {lim['ridge_flops_per_byte']:,.0f} FLOP/B, "
                                       f"batch {workload.batch}"})
            elif config.method == "aquakv":
                ratio = _overhead_ratio(model, config, context)
                reach = _overhead_reach(model, config, 500)
                rows.append({"method": spec, "limit": "model FLOPs / predictor FLOPs per new token",
                             "value": ratio, "unit": "x", "at this context": f"{ratio:,.0f}x",
                             "detail": f"paper claims >= 500x; reached from {reach}"})
        except (RooflineError, ValueError) as err:
            rows.append({"method": spec, "limit": "not computable", "value": None, "unit": "",
                         "at this context": "", "detail": one_line(str(err))})
    return rows


def _overhead_ratio(model: Model, config, context: int) -> float:
    """analysis.limits.predictor_overhead_ratio with the model's FLOPs per token compiled once per model
    (roofline.numbers.codegen; a substitution into the symbolic graph cost ~0.1 s per slider step)."""
    from roofline.analysis.compute_for_memory import model_flops_per_token
    from roofline.methods.aquakv import predictor_flops_per_token
    from roofline.numbers import codegen

    def build():
        from roofline.units import L

        return [L], {"flops": model_flops_per_token(model)}, {}

    fns, _ = codegen.compiled(codegen.content_key("model-flops-per-token", model), build)
    return float(fns["flops"](context)) / predictor_flops_per_token(model, config)


def _overhead_reach(model: Model, config, target: float) -> str:
    """analysis.limits.context_for_overhead_ratio as the limits row states it, once per model and config (kept by
    content: the bisection's 31 substitutions do not depend on the context, the device or the workload)."""
    from roofline.analysis.compute_for_memory import context_for_overhead_ratio
    from roofline.numbers import codegen

    def compute() -> str:
        try:
            return f"{context_for_overhead_ratio(model, config, target):,} tokens"
        except ValueError as err:
            return one_line(str(err))

    return codegen.cached_json(codegen.content_key("aquakv-overhead-reach", model, config, target), compute)


def _own_ops(points: Sequence[dict], spec: str) -> str:
    """'fused op attention: 4,926 FLOP/B, compute-bound (on the chart)' for the method's own ops at the context."""
    own = [p for p in points if p["method"] == spec and p["kind"] in OWN_KINDS]
    return "; ".join(f"op {p['op']} on the chart: {p['intensity']:,.0f} FLOP/B, {p['bound']}-bound" for p in own)


def roofline_axes(model: Model, hardware: Hardware, workload: Workload, specs: Sequence[str]) -> dict[str, float]:
    """Log-axis domains covering every op of `specs` at every slider context and every ceiling, so the axes stay
    put while the slider moves: {"x_lo", "x_hi", "y_lo", "y_hi"} (powers of ten)."""
    xs, ys = [], []
    data = None
    for context in context_options(workload.context_tokens):
        data = roofline_data(model, hardware, workload, tuple(specs), context)  # kept only as the page asks
        xs += [p["intensity"] for p in data["points"]]
        ys += [p["flops_per_s"] for p in data["points"]]
    xs += [c["ridge_flops_per_byte"] for c in data["ceilings"]]
    ys += [c["peak_flops_per_s"] for c in data["ceilings"]]
    x_lo = 10 ** math.floor(math.log10(min(xs) / 2))
    x_hi = 10 ** math.ceil(math.log10(max(xs) * 30))  # room for the ceiling labels right of the ridges
    y_lo = 10 ** math.floor(math.log10(min(min(ys), data["bandwidth_bytes_per_s"] * x_lo) / 2))
    return {"x_lo": x_lo, "x_hi": x_hi, "y_lo": y_lo, "y_hi": 10 ** math.ceil(math.log10(max(ys) * 3))}


def own_op_movement(model: Model, hardware: Hardware, workload: Workload, specs: Sequence[str]) -> list[dict]:
    """Each method's own ops (attention, method ops) at the slider's two ends: intensity and bound at each, so the
    caption states what moving the slider does instead of promising it."""
    options = context_options(workload.context_tokens)
    ends = [roofline_data(model, hardware, workload, tuple(specs), c)["points"] for c in (options[0], options[-1])]
    rows = []
    for p in ends[0]:
        if p["kind"] not in OWN_KINDS:
            continue
        q = next((q for q in ends[1] if q["method"] == p["method"] and q["op"] == p["op"]), None)
        if q is not None:
            rows.append({"method": p["method"], "op": p["op"], "from_context": options[0], "to_context": options[-1],
                         "from_intensity": p["intensity"], "to_intensity": q["intensity"],
                         "from_bound": p["bound"], "to_bound": q["bound"]})
    return rows


def movement_caption(rows: Sequence[dict]) -> str:
    """One sentence per op that the slider moves by more than 10 % or across a ridge; the others said to stay."""
    moving, still = [], []
    for r in rows:
        ratio = r["to_intensity"] / r["from_intensity"]
        if r["from_bound"] != r["to_bound"] or not 1 / 1.1 <= ratio <= 1.1:
            moving.append(f"{r['method']} {r['op']}: {r['from_intensity']:,.0f} -> {r['to_intensity']:,.0f} FLOP/B "
                          + (f"({r['from_bound']}-bound at both ends)" if r["from_bound"] == r["to_bound"]
                             else f"({r['from_bound']}-bound -> {r['to_bound']}-bound)"))
        else:
            still.append(f"{r['method']} {r['op']}")
    ends = f"from {rows[0]['from_context']:,} to {rows[0]['to_context']:,} tokens" if rows else ""
    text = f"Moving the slider {ends}: " + ("; ".join(moving) if moving else "no method op changes by more than 10 %")
    if still:
        text += ". Within 10 % over the whole range: " + ", ".join(still)
    return text + "."


KEPT = ("roofline_data", "limits_rows", "roofline_axes", "own_op_movement")


def kept(name: str, model: Model, hardware: Hardware, workload: Workload, specs: Sequence[str], *context: int) -> Any:
    """`name(model, hardware, workload, specs, *context)` (one of KEPT) once per content (numbers.codegen.cached_json:
    memory, then disk; the key covers roofline's sources, the specs and the arguments): the dashboard's Roofline page
    and its warm-up process share the entries, so a first visit or a slider step reads JSON instead of evaluating
    every op and the AQUA-KV bisection (sympy substitutions)."""
    from roofline.numbers import codegen

    if name not in KEPT:
        raise ValueError(f"name: {name!r} is not one of {', '.join(KEPT)}")
    fn = globals()[name]
    key = codegen.content_key(f"app-roofline-{name}", model, hardware, workload, list(specs), *context)
    return codegen.cached_json(key, lambda: fn(model, hardware, workload, tuple(specs), *context))

