"""A real vLLM step's GPU time op by op against roofline's op graph for the same case.

python -m validate.engines.attribute PROF_JSON --model M [--hardware H200] [--engine vllm] [--case B|P] [--json]

PROF_JSON is prof.py's output: per case the kernels by name with their seconds and calls (per decode step,
differenced between N and 1 output tokens; or the whole batch-1 prefill). The prediction is the planner's: the rows
of PhaseModel (Roofline.evaluate per op: time per instance x count) under the engine's profile, for decode at the
batch the engine runs (its CUDA-graph size, EngineTiming.padded) and the mean context of the measured steps
(P + N/2: contexts P+1 .. P+N-1, each op affine in L), for prefill at (1, P) as predict.py's prefill_time.

Each kernel is mapped to an op by name (kernel_names.RULES, each rule cited there). GEMM kernels carry no op in their
names (cuBLAS picks a tile per shape), so they are placed by calls and time per call (assign_gemms): an op runs
`count` GEMMs a step, the steady kernels (one shape in every layer) pair with the per-layer GEMM ops in order of time
per call, the rest go to the nearest op by time per call among those with calls left. A split-K reduce kernel is
shared among the ops of the step's splitK GEMM kernels by their calls. Calls are printed beside times: where a row's
measured calls differ from its predicted count, one kernel serves several ops (the same cuBLAS tile for two shapes)
or a step ran at another batch (a mixed prefill step inside the differenced decode steps), and the row's split is
not the op's alone; the GEMM family total is exact either way. Kernels no rule names are listed as unmapped, with
the profile's unlisted remainder (prof.py keeps its top 60 kernels).
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from pathlib import Path

from validate.engines.kernel_names import GEMM_OPS, NORM_OPS, classify

NON_GEMM_OPS = ("attention", "experts", "shared_experts_act", "attention_reduce")  # matmul ops that are not GEMMs


class AttributeInputError(ValueError):
    """A profile, a case or a model the tool cannot read; its message names the field and the rule."""


def gemm_ops(rows: list[dict]) -> dict[str, dict]:
    """The graph's GEMM ops (weights x activations: matmul FLOPs and weight bytes, not attention or the fused MoE
    law), each with its predicted seconds per call."""
    return {r["name"]: r for r in rows if r["matmul_flops"] > 0 and r["traffic"].get("weights", 0) > 0
            and r["name"] not in NON_GEMM_OPS}


def nearest_gemm(per_call_s: float, ops: dict[str, dict]) -> str:
    """The GEMM op whose predicted time per call is nearest to `per_call_s` in log distance."""
    return min(ops, key=lambda n: abs(math.log(per_call_s / max(ops[n]["time_s"], 1e-12))))


def assign_gemms(kernels: dict[str, dict], ops: dict[str, dict]) -> dict[str, str]:
    """Each GEMM kernel's op. An op runs `count` GEMMs a step, so an op takes a kernel only while it has at least
    half the kernel's calls left ("room"). The steady kernels (calls >= half the largest op count: one shape's GEMM
    in every layer of the steps) are matched in order of time per call to the ops in order of predicted time per call
    (monotone: the slowest steady kernel to the slowest op with room, and so on); the rest (a step at another batch,
    a once-a-step GEMM), largest time first, each to the nearest op with room by time per call (log distance), or
    the nearest of all when none has room."""
    left = {n: float(r["count"]) for n, r in ops.items()}
    steady_calls = 0.5 * max(left.values())
    per_call = {n: v["s"] / v["calls"] for n, v in kernels.items()}
    steady = sorted((n for n, v in kernels.items() if v["calls"] >= steady_calls), key=lambda n: -per_call[n])
    order = sorted(ops, key=lambda n: -ops[n]["time_s"])
    out = {}
    for name in steady:
        calls = kernels[name]["calls"]
        op = next((o for o in order if left[o] >= 0.5 * calls), None) or nearest_gemm(per_call[name], ops)
        order = order[order.index(op):] if op in order else order
        left[op] -= calls
        out[name] = op
    for name in sorted(set(kernels) - set(steady), key=lambda n: -kernels[n]["s"]):
        room = {n: r for n, r in ops.items() if left[n] >= 0.5 * kernels[name]["calls"]}
        op = nearest_gemm(per_call[name], room or ops)
        left[op] -= kernels[name]["calls"]
        out[name] = op
    return out


def _target(name: str, v: dict, rows_by_name: dict, gemms: dict, placed: dict) -> tuple[str, str, bool]:
    """(target row, kind, inferred) of one kernel: an op of the graph, 'norm' (the norms and the residual adds vLLM
    fuses with them), '(kind)' for work the graph has no op for, or '?' (unmapped)."""
    rule = classify(name)
    if rule is None:
        return "?", "unmapped", False
    if rule.ops == GEMM_OPS:
        if rule.kind == "gemm_splitk_reduce" or not gemms:
            return f"({rule.kind})", rule.kind, False
        if v["calls"] <= 0.05:  # a difference of ~0 calls: no time per call to place it by
            return "(gemm, calls ~ 0)", rule.kind, False
        return placed[name], rule.kind, False
    if rule.ops == ("norm",):
        return ("norm" if any(n in rows_by_name for n in NORM_OPS) else "(norm)"), rule.kind, rule.inferred
    op = next((o for o in rule.ops if o in rows_by_name), None)
    return (op or f"({rule.kind})"), rule.kind, rule.inferred


def split_k_share(assigned: dict[str, list], gemms: dict) -> dict[str, float]:
    """Each GEMM op's share of the step's split-K reduce kernels: its splitK GEMM kernels' calls over all splitK
    calls (cuBLASLt launches one reduce after each split-K GEMM)."""
    calls = {op: sum(c for k, c in assigned.get(op, []) if "splitK" in k) for op in gemms}
    total = sum(calls.values())
    return {op: c / total for op, c in calls.items() if c > 0} if total > 0 else {}


def attribute(kernels: dict[str, dict], rows: list[dict]) -> dict:
    """Measured seconds and calls per target row beside the predicted ones. `kernels`: {name: {'s', 'calls'}} of one
    step; `rows`: the planner's op rows (name, count, time_s per instance, matmul_flops, traffic)."""
    rows_by_name = {r["name"]: r for r in rows}
    gemms = gemm_ops(rows)
    out: dict[str, dict] = {}
    assigned: dict[str, list] = {}
    unmapped, reduces = [], []
    placed = assign_gemms({n: v for n, v in kernels.items() if (r := classify(n)) is not None and r.kind == "gemm"
                           and v["calls"] > 0.05}, gemms) if gemms else {}
    for name, v in kernels.items():
        target, kind, inferred = _target(name, v, rows_by_name, gemms, placed)
        if target == "?":
            unmapped.append({"kernel": name, "s": v["s"], "calls": v["calls"]})
            continue
        if kind == "gemm_splitk_reduce" and gemms:
            reduces.append((name, v))
            continue
        row = out.setdefault(target, {"measured_s": 0.0, "calls": 0.0, "kernels": [], "inferred": False})
        row["measured_s"] += v["s"]
        row["calls"] += v["calls"]
        row["kernels"].append(name)
        row["inferred"] |= inferred
        if kind == "gemm":
            assigned.setdefault(target, []).append((name, v["calls"]))
    share = split_k_share(assigned, gemms)
    for name, v in reduces:
        for op, f in (share or {"(gemm_splitk_reduce)": 1.0}).items():
            row = out.setdefault(op, {"measured_s": 0.0, "calls": 0.0, "kernels": [], "inferred": False})
            row["measured_s"] += v["s"] * f
            row["kernels"].append(name)
    return {"rows": _with_predictions(out, rows_by_name, gemms), "unmapped": unmapped,
            "gemm_family": _family(out, gemms)}


def _predicted(target: str, rows_by_name: dict) -> tuple[float, float]:
    """(predicted seconds, predicted calls) of a target row."""
    names = [n for n in NORM_OPS if n in rows_by_name] if target == "norm" else [target]
    rs = [rows_by_name[n] for n in names if n in rows_by_name]
    # a residual add runs inside vLLM's fused_add_rms_norm: it adds time, not calls
    calls = sum(r["count"] for r in rs if target != "norm" or "residual" not in r["name"])
    return sum(r["time_s"] * r["count"] for r in rs), float(calls)


def _with_predictions(out: dict, rows_by_name: dict, gemms: dict) -> list[dict]:
    """Every target row and every graph op (one with no kernel shows measured 0), with its error."""
    covered = set(NORM_OPS) if "norm" in out else set()
    result = []
    for target in list(out) + [n for n in rows_by_name if n not in out and n not in covered]:
        if target in covered and target not in out:
            continue
        m = out.get(target, {"measured_s": 0.0, "calls": 0.0, "kernels": [], "inferred": False})
        pred_s, pred_calls = _predicted(target, rows_by_name)
        result.append({"op": target, "gemm": target in gemms, "measured_s": m["measured_s"], "predicted_s": pred_s,
                       "error": (pred_s / m["measured_s"] - 1) if m["measured_s"] > 0 and pred_s > 0 else None,
                       "measured_calls": m["calls"], "predicted_calls": pred_calls, "kernels": m["kernels"],
                       "inferred": m["inferred"]})
    return sorted(result, key=lambda r: -max(r["measured_s"], r["predicted_s"]))


def _family(out: dict, gemms: dict) -> dict:
    """All GEMM kernels (splits and reduces included) against all GEMM ops: exact whatever the per-op split."""
    keys = [k for k in out if k in gemms or k.startswith("(gemm")]
    measured = sum(out[k]["measured_s"] for k in keys)
    predicted = sum(r["time_s"] * r["count"] for r in gemms.values())
    return {"measured_s": measured, "predicted_s": predicted,
            "error": predicted / measured - 1 if measured > 0 else None}


def load_cases(path: Path) -> list[dict]:
    """prof.py's cases; AttributeInputError when the file is not one."""
    try:
        doc = json.loads(path.read_text())
    except OSError as exc:
        raise AttributeInputError(f"PROF_JSON {path}: cannot read ({exc.strerror})") from None
    except json.JSONDecodeError as exc:
        raise AttributeInputError(f"PROF_JSON {path}: not JSON ({exc.msg}, line {exc.lineno})") from None
    cases = doc.get("cases") if isinstance(doc, dict) else None
    if not isinstance(cases, list) or not cases:
        raise AttributeInputError(f"PROF_JSON {path}: 'cases' must be a non-empty list (prof.py's output)")
    for i, c in enumerate(cases):
        ks = c.get("kernels") if isinstance(c, dict) else None
        if not isinstance(ks, dict) or not ("B" in c or "P" in c) or not all(
                isinstance(v, dict) and {"s", "calls"} <= set(v) for v in ks.values()):
            raise AttributeInputError(f"PROF_JSON {path}: cases[{i}] must have 'P' (and 'B' for decode) and "
                                      "'kernels' as {name: {'s', 'calls'}}")
    return cases


def predict_case(case: dict, model: str, hardware: str, engine: str, max_model_len: int) -> dict:
    """The planner's rows for one prof.py case and its step (wall) and GPU predictions, with the case's measured
    wall and kernel seconds: decode at the engine's padded batch and the steps' mean context, prefill at (1, P)."""
    from roofline.catalogue.loading import validate
    from roofline.catalogue.store import load_hardware, load_model
    from roofline.errors import SpecError
    from roofline.methods.registry import parse_method
    from roofline.planner.phases import PhaseModel
    from roofline.specs import Workload

    try:
        m, hw = load_model(model), load_hardware(hardware)
        wl = validate(Workload, {"batch": 1, "context_tokens": max_model_len, "engine": engine}, "workload")
    except (SpecError, KeyError, ValueError) as exc:
        raise AttributeInputError(f"--model / --hardware / --engine: {str(exc).splitlines()[0]}") from None
    pm = PhaseModel.build(m, hw, wl, parse_method("bf16"))
    if "B" in case:
        b, p, n = int(case["B"]), int(case["P"]), int(case.get("N", 2))
        rows = pm.rows("decode", pm.engine.padded(b), p + n / 2) + sampler_rows(pm, b)
        return {"phase": "decode", "label": f"decode B={b} P={p} N={n}", "rows": rows,
                "predicted_step_s": pm.average_decode_time(b, p + 1, n - 1), "run_batch": pm.engine.padded(b),
                "measured_wall_s": case.get("wall_step_s"), "measured_kernel_s": case.get("kernel_step_s")}
    p = int(case["P"])
    return {"phase": "prefill", "label": f"prefill P={p}", "rows": pm.rows("prefill", 1, p) + sampler_rows(pm, 1),
            "run_batch": 1,
            "predicted_step_s": pm.prefill_time(1, p), "measured_wall_s": case.get("wall_s"),
            "measured_kernel_s": case.get("kernel_s")}


def sampler_rows(pm, rows: int) -> list[dict]:
    """The engine's sampler over `rows` sequences as one pseudo-row 'sampler' (PhaseModel.sampler_s: engines.timing
    mechanism 9, GPU work the op graph has no op for); none where the engine's profile has no sampler law here."""
    s = pm.sampler_s(rows)
    return [{"name": "sampler", "count": 1, "time_s": s, "matmul_flops": 0.0, "traffic": {}}] if s else []


def report(case: dict, pred: dict) -> dict:
    """One case attributed: per-op rows, the GEMM family, unmapped kernels, and the step's totals (wall, all
    kernels, the listed ones, the predicted GPU sum and the predicted step)."""
    res = attribute(case["kernels"], pred["rows"])
    listed = sum(v["s"] for v in case["kernels"].values())
    gpu = sum(r["time_s"] * r["count"] for r in pred["rows"])
    kernel_s = pred["measured_kernel_s"]
    return {"case": pred["label"], "run_batch": pred["run_batch"], **res,
            "totals": {"measured_wall_s": pred["measured_wall_s"], "measured_kernel_s": kernel_s,
                       "listed_kernel_s": listed, "unlisted_kernel_s": (kernel_s - listed) if kernel_s else None,
                       "predicted_gpu_s": gpu, "predicted_step_s": pred["predicted_step_s"]}}


def _pct(e: float | None) -> str:
    """A signed percentage of 7 characters ('n/a' for none)."""
    return "    n/a" if e is None else f"{e * 100:+7.1f}"


def _per_call(s: float, calls: float) -> str:
    """Microseconds per call, 8 characters ('-' where the calls are ~0)."""
    return f"{s / calls * 1e6:8.1f}" if calls > 0.05 else f"{'-':>8s}"


def render(rep: dict) -> str:
    """The report as text: one line per op (measured us, predicted us, error, calls), then the unmapped kernels."""
    t = rep["totals"]
    lines = [f"== {rep['case']} (the GPU runs batch {rep['run_batch']})",
             f"   wall {t['measured_wall_s'] * 1e6:9.1f} us   kernels {t['measured_kernel_s'] * 1e6:9.1f} us   "
             f"predicted GPU {t['predicted_gpu_s'] * 1e6:9.1f} us "
             f"({_pct(t['predicted_gpu_s'] / t['measured_kernel_s'] - 1)} %)"
             f"   predicted step {t['predicted_step_s'] * 1e6:9.1f} us "
             f"({_pct(t['predicted_step_s'] / t['measured_wall_s'] - 1)} %)",
             f"   {'op':26s} {'measured us':>11s} {'predicted us':>12s} {'err %':>7s} {'calls':>7s} {'pred':>5s}"
             f" {'us/call':>8s} {'pred':>8s}"]
    for r in rep["rows"]:
        mark = " (inferred)" if r["inferred"] else ""
        lines.append(f"   {r['op'][:26]:26s} {r['measured_s'] * 1e6:11.1f} {r['predicted_s'] * 1e6:12.1f} "
                     f"{_pct(r['error'])} {r['measured_calls']:7.2f} {r['predicted_calls']:5.0f} "
                     f"{_per_call(r['measured_s'], r['measured_calls'])} "
                     f"{_per_call(r['predicted_s'], r['predicted_calls'])}"
                     f"{mark}")
    g = rep["gemm_family"]
    lines.append(f"   {'GEMM family (all)':26s} {g['measured_s'] * 1e6:11.1f} {g['predicted_s'] * 1e6:12.1f} "
                 f"{_pct(g['error'])}")
    un = sum(u["s"] for u in rep["unmapped"])
    lines.append(f"   unmapped kernels: {len(rep['unmapped'])}, {un * 1e6:.1f} us; kernel total less the listed "
                 f"kernels (prof.py keeps its top 60): {(t['unlisted_kernel_s'] or 0) * 1e6:.1f} us")
    lines += [f"     {u['s'] * 1e6:9.1f} us x{u['calls']:.2f} {u['kernel'][:100]}" for u in rep["unmapped"]]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    """The command line: each case's report as text or JSON; exit status 2 with one line on bad input."""
    ap = argparse.ArgumentParser(prog="python -m validate.engines.attribute", description=__doc__.split("\n")[0])
    ap.add_argument("prof", type=Path, help="prof.py's output JSON")
    ap.add_argument("--model", required=True, help="catalogue model name (roofline list models)")
    ap.add_argument("--hardware", default="H200")
    ap.add_argument("--engine", default="vllm")
    ap.add_argument("--max-model-len", type=int, default=4096, help="the run's max_model_len (prof.py: 4096)")
    ap.add_argument("--case", type=int, help="only the case of this batch (decode) or prompt length (prefill)")
    ap.add_argument("--json", action="store_true")
    a = ap.parse_args(argv)
    try:
        if a.max_model_len <= 0:
            raise AttributeInputError("--max-model-len must be a positive integer")
        cases = load_cases(a.prof)
        if a.case is not None:
            cases = [c for c in cases if c.get("B", c.get("P")) == a.case]
            if not cases:
                raise AttributeInputError(f"--case {a.case}: no case of that batch (decode) or prompt (prefill)")
        reports = [report(c, predict_case(c, a.model, a.hardware, a.engine, a.max_model_len)) for c in cases]
    except AttributeInputError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    print(json.dumps(reports, indent=1) if a.json else "\n\n".join(render(r) for r in reports))
    return 0


if __name__ == "__main__":
    sys.exit(main())
