"""What the dashboard explores around one scenario, from the compiled planners (roofline.planner.plan.method_planner):
sweeps of TPOT, tokens/s and max batch over context or batch, the fit solver (weight dtype, fewest GPUs, largest
context and batch under a TPOT target), two pinned scenarios side by side, and the memory-quality-TPOT front.

Every function takes specs (pydantic, frozen) and SPEC strings and returns plain rows; nothing here draws.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from roofline.errors import RooflineError, one_line
from roofline.methods import parse_method
from roofline.planner.inversions import max_batch_for_tpot, max_context_for_tpot
from roofline.specs import Hardware, Model, Workload

GIB = 1 << 30
SWEEP_POINTS = 48
MAX_SWEEP_BATCH = 4096


def _planner(model: Model, hardware: Hardware, workload: Workload, spec: str, flavour: str = "scalar"):
    from roofline.planner.plan import method_planner

    return method_planner(model, hardware, workload, parse_method(spec), flavour=flavour)


def sweep_axis(model: Model, workload: Workload, axis: str) -> np.ndarray:
    """The x values of a sweep: contexts from 128 up to the model's max positions (its last point, never past it),
    or batches from 1 to 4,096, geometric, integers, the scenario's own value included."""
    if axis == "context":
        hi = model.max_position_embeddings
        values = np.geomspace(min(128, hi), hi, SWEEP_POINTS)
        own = workload.context_tokens if workload.context_tokens <= hi else None
    elif axis == "batch":
        values = np.geomspace(1, MAX_SWEEP_BATCH, SWEEP_POINTS)
        own = workload.batch
    else:
        raise ValueError(f"axis: {axis!r} is not 'context' or 'batch'")
    extra = [own] if own else []
    return np.unique(np.concatenate([np.round(values), extra]).astype(np.int64))


def sweep(model: Model, hardware: Hardware, workload: Workload, specs: Sequence[str], axis: str) -> list[dict]:
    """One row per (method, x): TPOT (decode step, s), tokens/s, max batch at that context and whether the
    scenario's batch fits, over context at the scenario's batch or over batch at its context
    (MethodPlanner.grid; pp > 1 plans each point, the grid covering pp = 1). A method that cannot be planned
    (no room for the weights) has no rows."""
    xs = sweep_axis(model, workload, axis)
    batch, context = (workload.batch, xs) if axis == "context" else (xs, workload.context_tokens)
    rows = []
    for spec in specs:
        try:
            grid = _grid(model, hardware, workload, spec, batch, context)
        except (RooflineError, ValueError):
            continue
        for i, x in enumerate(xs):
            rows.append({"method": spec, axis: int(x), "tpot_s": float(grid["decode_step_s"][i]),
                         "tokens_per_s": float(grid["tokens_per_s"][i]), "max_batch": int(grid["max_batch"][i]),
                         "fits": bool(grid["fits"][i])})
    return rows


def _grid(model, hardware, workload, spec, batch, context) -> dict[str, np.ndarray]:
    if workload.pp == 1:
        planner = _planner(model, hardware, workload, spec, "vector")
        if planner.budget(workload).kv_pool <= 0:
            raise RooflineError(f"{spec}: no room for the KV cache")
        return {k: np.broadcast_to(v, np.broadcast(batch, context).shape)
                for k, v in planner.grid(batch, context).items()}
    planner = _planner(model, hardware, workload, spec)
    out: dict[str, list] = {"decode_step_s": [], "tokens_per_s": [], "max_batch": [], "fits": []}
    for b, c in np.broadcast(batch, context):
        r = planner.point(workload.model_copy(update={"batch": int(b), "context_tokens": int(c),
                                                      "generated_tokens": min(workload.generated_tokens, int(c) - 1),
                                                      "prompt_tokens": None})).data
        for key, value in (("decode_step_s", r["tpot_s"]), ("tokens_per_s", r["tokens_per_s"]),
                           ("max_batch", r["max_batch"]), ("fits", r["fits"])):
            out[key].append(value)
    return {k: np.asarray(v) for k, v in out.items()}


def sweep_kept(model: Model, hardware: Hardware, workload: Workload, specs: Sequence[str], axis: str) -> list[dict]:
    """sweep(), kept by content (numbers.codegen.cached_json: memory, then disk; the key covers roofline's sources,
    the specs and the arguments): the dashboard's Sweeps page and its warm-up share the rows, so a first visit
    reads them instead of loading every method's vector kernels (~0.3 s)."""
    from roofline.numbers import codegen

    key = codegen.content_key("app-sweep", model, hardware, workload, list(specs), axis)
    return codegen.cached_json(key, lambda: sweep(model, hardware, workload, specs, axis))


def sweep_marks(model: Model, plan: Mapping[str, Any], axis: str) -> list[dict]:
    """The vertical lines of a sweep: the model's max positions (context axis) and, per method, where the
    scenario stops fitting (max context at its batch, or max batch at its context) when it is finite."""
    marks = [{"method": "", "x": model.max_position_embeddings, "label": f"{model.name} max positions"}
             ] if axis == "context" else []
    for r in plan["results"]:
        x = r["max_context"] if axis == "context" else r["max_batch"]
        limit = model.max_position_embeddings if axis == "context" else MAX_SWEEP_BATCH
        if x != math.inf and 0 < x <= limit:
            marks.append({"method": r["method"], "x": int(x), "label": f"{r['method']}: fit boundary"})
    return marks


def tpot_limits(model: Model, hardware: Hardware, workload: Workload, spec: str, target_s: float) -> dict:
    """Largest context at the batch and largest batch at the context whose decode step stays <= target_s: the
    CLI's `--tpot-target-ms` answers (planner.inversions, the plan's own step); context inf when it never misses."""
    method = parse_method(spec)
    return {"tpot_target_s": target_s,
            "max_context": max_context_for_tpot(model, hardware, workload, method, target_s),
            "max_batch": max_batch_for_tpot(model, hardware, workload, method, target_s)}


def fit_solver(model: Model, hardware: Hardware, workload: Workload, specs: Sequence[str],
               tpot_target_s: float | None = None) -> list[dict]:
    """Per method, what makes the scenario fit: whether it fits as set, the weight dtypes that fit on its tp x pp
    (planner.parallel.fits), the fewest GPUs of this kind and their tp x pp (planner.parallel.fewest_gpus, as
    `roofline plan --fewest-gpus`), and under a TPOT target the largest context and batch on that layout
    (as `--tpot-target-ms`)."""
    from roofline.dashboard.share import WEIGHT_DTYPES
    from roofline.methods import parse_method
    from roofline.planner.parallel import fewest_gpus

    rows = []
    for spec in specs:
        method = parse_method(spec)
        row: dict[str, Any] = {"method": spec, "fits": fits_on(model, hardware, workload, spec)}
        row["weight dtypes that fit"] = [d for d in WEIGHT_DTYPES if _fits_dtype(model, hardware, workload, spec, d)]
        try:
            fewest = fewest_gpus(model, hardware, workload, method,
                                 fits_fn=lambda trial: fits_on(model, hardware, trial, spec))  # noqa: B023
            row["fewest"] = {k: fewest[k] for k in ("gpus", "tp", "pp", "nodes")}
            layout = fewest["workload"] if not row["fits"] else workload
        except RooflineError as err:
            row["fewest"] = {"error": one_line(str(err))}
            layout = None
        if tpot_target_s and layout is not None:
            row["sla"] = tpot_limits(model, hardware, layout, spec, tpot_target_s)
        rows.append(row)
    return rows


def fits_on(model: Model, hardware: Hardware, workload: Workload, spec: str) -> bool:
    """Whether the workload's batch at its context fits (planner.parallel.fits' rule, on the compiled capacity
    kernel: weights, reserve and activations leave a KV pool that holds batch x KV bytes per sequence)."""
    planner = _planner(model, hardware, workload, spec)
    pool = planner.budget(workload).kv_pool
    return pool > 0 and workload.batch * float(planner.capacity.per_sequence(workload.context_tokens)) <= pool


def _fits_dtype(model, hardware, workload, spec, dtype) -> bool:
    if dtype in ("fp8", "fp4") and not hardware.has_dtype(dtype):
        return False
    return fits_on(model, hardware, workload.model_copy(update={"weight_dtype": dtype}), spec)


def diff_rows(plan_a: Mapping[str, Any], plan_b: Mapping[str, Any]) -> list[dict]:
    """Scenario A against B, one row per method planned in either: capacity, TPOT and tokens/s of each, and B's
    change relative to A (None where a side lacks the method or A's value is zero or unbounded)."""
    a = {r["method"]: r for r in plan_a["results"]}
    b = {r["method"]: r for r in plan_b["results"]}
    rows = []
    for method in dict.fromkeys([*a, *b]):
        ra, rb = a.get(method), b.get(method)
        row: dict[str, Any] = {"method": method}
        for key in ("max_context", "max_batch", "tpot_s", "tokens_per_s"):
            va = None if ra is None else ra[key]
            vb = None if rb is None else rb[key]
            row[f"A {key}"], row[f"B {key}"] = va, vb
            finite = va not in (None, 0) and vb is not None and math.isfinite(va) and math.isfinite(vb)
            row[f"change {key}"] = (vb - va) / va if finite else None
        rows.append(row)
    return rows


def pareto_rows(plan: Mapping[str, Any], benchmark: str, tpot_slo_s: float | None) -> list[dict]:
    """Each planned method's KV bytes per sequence, max context and TPOT on the scenario beside the paper's quality
    figure for the same SPEC in `benchmark` (None when the paper has none: never invented), whether it meets the
    TPOT SLO, and whether it is on the front: no other method with a figure that meets the SLO needs at most its
    memory and has at least its quality (strictly better in one)."""
    from roofline.analysis.quality import for_benchmark
    from roofline.methods import parse_method

    figures = {}
    for f in for_benchmark(benchmark):
        if f.spec:
            figures.setdefault(parse_method(f.spec).label(), f)
    rows = []
    for r in plan["results"]:
        f = figures.get(parse_method(r["method"]).label())
        rows.append({"method": r["method"], "kv_bytes_per_sequence": r["kv_bytes_per_sequence"],
                     "max_context": r["max_context"], "tpot_s": r["tpot_s"],
                     "quality": None if f is None else f.value, "metric": None if f is None else f.metric,
                     "higher_is_better": None if f is None else f.higher_is_better,
                     "paper_row": None if f is None else f.method,
                     "meets_slo": tpot_slo_s is None or r["tpot_s"] <= tpot_slo_s})
    candidates = [r for r in rows if r["quality"] is not None and r["meets_slo"]]
    for r in rows:
        r["on_front"] = r in candidates and not any(_dominates(o, r) for o in candidates if o is not r)
    return rows


def _dominates(o: dict, r: dict) -> bool:
    sign = 1 if o["higher_is_better"] else -1
    better_q, same_q = sign * (o["quality"] - r["quality"]) > 0, o["quality"] == r["quality"]
    less_mem, same_mem = o["kv_bytes_per_sequence"] < r["kv_bytes_per_sequence"], \
        o["kv_bytes_per_sequence"] == r["kv_bytes_per_sequence"]
    return (better_q or same_q) and (less_mem or same_mem) and (better_q or less_mem)
