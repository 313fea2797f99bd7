"""Real decoder clients (validate/clients/) predicted from the specs alone, and compared with their runs.

A client case names a catalogue model (optionally with fewer layers), a client form and a phase:
    compiled   torch.compile + CUDA graph          -> fusion "full"
    eager      eager layer + CUDA graph            -> fusion "none"
    hf-static  transformers + StaticCache          -> fusion "none"
decode: one step of B sequences at context L; prefill: B prompts of P tokens in one pass (no chunking).
The prediction is the roofline graph of the bf16 baseline cache at that fusion level, timed by the
hardware's ceilings ("measured": its calibrated section; "datasheet": peaks only). Nothing of a client's own
timing enters its prediction: the measured ceilings come from microbenchmarks (validate/clients/micro.py
and the kernel families).

Report: absolute percentage error per case; median, p90 and worst per (client, phase) and per model.
"""

from __future__ import annotations

import statistics
from typing import Any

CLIENT_FUSION = {"compiled": "full", "eager": "none", "hf-static": "none"}
TARGETS = {("compiled", "decode"): (5.0, 10.0), ("eager", "decode"): (8.0, None), ("compiled", "prefill"): (10.0, None),
           ("eager", "prefill"): (10.0, None)}
CI_DECODE_MEDIAN_APE = 7.0


def _model(params: dict[str, Any]):
    from roofline.catalogue import load_model

    model = load_model(params["model"])
    layers = params.get("layers")
    if layers and layers != model.num_layers:
        model = model.model_copy(update={"num_layers": int(layers), "name": f"{model.name}-{layers}L"})
    return model


def predict_case(params: dict[str, Any], hardware, ceilings: str = "measured", fusion: str | None = None) -> dict:
    """{"time_s", "bound", "dominant_op", "kernels"} of one client case from the specs alone."""
    from roofline.costmodel import RooflineOptions, build_graph, roofline_for
    from roofline.methods import parse_method
    from roofline.units import B, L, P

    if ceilings not in ("measured", "datasheet"):
        raise ValueError(f"ceilings: {ceilings!r} is not 'measured' or 'datasheet'")
    fusion = fusion or CLIENT_FUSION[params["client"]]
    phase = params["phase"]
    tp = int(params.get("tp", 1))
    graph = build_graph(_model(params), parse_method("bf16"), phase, fusion=fusion, tp=tp)
    roof = roofline_for(hardware, tp=tp, options=RooflineOptions(use_measured=ceilings == "measured"))
    n = params["context"] if phase == "decode" else params["prompt"]
    rows = roof.evaluate(graph, {B: params["batch"], L: n, P: n})
    total = sum(r["count"] * r["time_s"] for r in rows)
    top = max(rows, key=lambda r: r["count"] * r["time_s"])
    by_bound: dict[str, float] = {}
    for r in rows:
        by_bound[r["bound"]] = by_bound.get(r["bound"], 0.0) + r["count"] * r["time_s"]
    return {"time_s": total, "bound": max(by_bound, key=by_bound.get), "dominant_op": top["name"],
            "kernels": sum(r["count"] * op.kernels for r, op in zip(rows, graph.ops, strict=True)),
            "by_bound_s": by_bound}


def _ape(predicted: float, measured: float) -> float:
    return 100.0 * abs(predicted - measured) / measured


def _summary(apes: list[float]) -> dict:
    ordered = sorted(apes)
    return {"n": len(ordered), "median_ape": statistics.median(ordered),
            "p90_ape": ordered[min(len(ordered) - 1, int(0.9 * len(ordered)))], "worst_ape": ordered[-1]}


def compare(results: dict, hardware, ceilings: str = "measured") -> dict:
    """Per case: measured ms, predicted ms, signed error and APE; summaries per (client, phase) and model."""
    rows = []
    for case in results["cases"]:
        if case.get("family") != "client" or case.get("ms") is None:
            continue
        p = case["params"]
        pred = predict_case(p, hardware, ceilings)
        measured_s = case["ms"] * 1e-3
        rows.append({"name": case["name"], "model": p["model"], "client": p["client"], "phase": p["phase"],
                     "batch": p["batch"], "tokens": p.get("context", p.get("prompt")), "measured_s": measured_s,
                     "predicted_s": pred["time_s"], "error_pct": 100 * (pred["time_s"] - measured_s) / measured_s,
                     "ape": _ape(pred["time_s"], measured_s), "bound": pred["bound"],
                     "kernels_predicted": pred["kernels"], "kernels_measured": case.get("kernels")})
    groups: dict[str, list[float]] = {}
    for r in rows:
        groups.setdefault(f"{r['client']}/{r['phase']}", []).append(r["ape"])
        groups.setdefault(f"{r['client']}/{r['phase']}/{r['model']}", []).append(r["ape"])
    return {"device": results["env"].get("device"), "hardware": hardware.name, "ceilings": ceilings,
            "cases": rows, "summary": {k: _summary(v) for k, v in sorted(groups.items())}}


def targets(report: dict) -> list[dict]:
    """The issue's targets per (client, phase): median APE (and worst where one is set), met or missed."""
    out = []
    for (client, phase), (median_max, worst_max) in TARGETS.items():
        s = report["summary"].get(f"{client}/{phase}")
        if s is None:
            continue
        met = s["median_ape"] <= median_max and (worst_max is None or s["worst_ape"] <= worst_max)
        out.append({"client": client, "phase": phase, "median_ape": s["median_ape"], "worst_ape": s["worst_ape"],
                    "median_max": median_max, "worst_max": worst_max, "met": met})
    return out


def render(report: dict) -> str:
    """Text table of a comparison (cases, then summaries)."""
    lines = [f"{report['device']} vs {report['hardware']} ({report['ceilings']} ceilings)",
             f"{'case':58} {'meas ms':>9} {'pred ms':>9} {'err %':>7} {'kern m/p':>10} bound"]
    for r in report["cases"]:
        kern = f"{r['kernels_measured'] or '-'}/{r['kernels_predicted']}"
        lines.append(f"{r['name']:58} {r['measured_s'] * 1e3:9.3f} {r['predicted_s'] * 1e3:9.3f} "
                     f"{r['error_pct']:+7.1f} {kern:>10} {r['bound']}")
    lines.append("")
    for key, s in report["summary"].items():
        if key.count("/") == 1:
            lines.append(f"{key:24} n={s['n']:3d} median APE {s['median_ape']:5.1f} %  p90 {s['p90_ape']:5.1f} %  "
                         f"worst {s['worst_ape']:5.1f} %")
    for t in targets(report):
        worst = f", worst <= {t['worst_max']:g} %" if t["worst_max"] is not None else ""
        lines.append(f"target {t['client']}/{t['phase']}: median <= {t['median_max']:g} %{worst}: "
                     f"{'met' if t['met'] else 'MISSED'} ({t['median_ape']:.1f} / {t['worst_ape']:.1f} %)")
    return "\n".join(lines)
