"""Tensor parallelism on one host: NCCL all-reduce and the tp decode step (validate/clients/tp.py) against the
all-reduce model on the hardware's scale-up link.

All-reduce model (roofline.costmodel.collectives, NCCL's tuner; ring over n GPUs of S bytes):
    t = min over p in (LL, LL128, Simple) of [ latency_p(n) + 2 (n - 1) / n x S / (link.bytes_per_s x factor_p) ]
latency_p(n) = NCCL's base + 2 (n - 1) hop latencies of the link's class, factor 0.5 / 0.92 / 1 (LL capped per
architecture). link.bytes_per_s is the measured bus bandwidth 2 (n - 1) / n x S / t of the largest size
(validate/clients/tpfit.py calibrate: Simple's asymptote, read off one measurement, nothing fitted).
Pure Python (no torch).
"""

from __future__ import annotations

import statistics
from typing import Any

TP_DECODE_TARGET_APE = 10.0
ALLREDUCE_TARGET_APE = 15.0


def nccl_allreduce(hardware, size_bytes: int, gpus: int) -> tuple[float, str]:
    """(seconds, protocol) of one all-reduce of `size_bytes` over `gpus` GPUs on `hardware`'s scale-up link as one
    node of a CUDA graph (the measurement captures 20 per graph): the decode graph's own all-reduce op time
    (Roofline: the formula above plus the graph's per-kernel time), and the protocol NCCL's tuner would pick."""
    from roofline.costmodel import roofline_for
    from roofline.costmodel.collectives import ll_max_bw, nccl_hw, protocol_times, ring_latencies
    from roofline.costmodel.ops import Op

    link = hardware.scale_up
    hw = nccl_hw(link.kind, scale_out=False)
    times = protocol_times(size_bytes, gpus, link.bytes_per_s, ring_latencies(hw, gpus),
                           ll_max_bw(hardware.architecture, hw))
    proto = min(times, key=lambda p: float(times[p]))
    op = Op("allreduce", "comm", 1, comm_bytes=size_bytes)
    return float(roofline_for(hardware, tp=gpus).op_times(op).total), proto


def predictions(hardware, sizes: list[int], shapes: list[tuple[int, int]], gpus: int) -> dict[str, Any]:
    """All-reduce times per size from the scale-up link, and tp decode steps (compiled client, fusion 'full',
    measured ceilings) per (batch, context) of Llama-3.1-8B."""
    from roofline.validation.clients import predict_case

    link = hardware.scale_up
    ar = []
    for s in sizes:
        t, proto = nccl_allreduce(hardware, s, gpus)
        ar.append({"bytes": s, "time_s": t, "protocol": proto})
    steps = []
    for b, n in shapes:
        params = {"model": "Llama-3.1-8B", "client": "compiled", "phase": "decode", "batch": b, "context": n,
                  "tp": gpus}
        p = predict_case(params, hardware)
        steps.append({"batch": b, "context": n, "time_s": p["time_s"], "comm_s": p["by_bound_s"].get(
            "communication", 0.0), "kernels": p["kernels"]})
    return {"link": link.model_dump(), "allreduce": ar, "decode": steps}


def _ape(predicted: float, measured: float) -> float:
    return 100.0 * abs(predicted - measured) / measured


def compare(results: dict, hardware) -> dict[str, Any]:
    """Per all-reduce size and per tp decode case: measured, predicted (the hardware's link and ceilings), APE;
    median / worst APE of each against its target."""
    from roofline.validation.clients import predict_case

    link = hardware.scale_up
    ar, dec = [], []
    for case in results["cases"]:
        if case.get("ms") is None:
            continue
        p = case["params"]
        if case["family"] == "allreduce":
            pred, proto = nccl_allreduce(hardware, p["bytes"], p["gpus"])
            ar.append({"bytes": p["bytes"], "measured_ms": case["ms"], "predicted_ms": pred * 1e3,
                       "protocol": proto, "ape": _ape(pred, case["ms"] * 1e-3)})
        elif case["family"] == "client_tp":
            pred = predict_case(p, hardware)
            dec.append({"name": case["name"], "batch": p["batch"], "context": p["context"], "measured_ms": case["ms"],
                        "predicted_ms": pred["time_s"] * 1e3,
                        "comm_ms": pred["by_bound_s"].get("communication", 0.0) * 1e3,
                        "ape": _ape(pred["time_s"], case["ms"] * 1e-3)})

    def summary(rows, target):
        apes = [r["ape"] for r in rows]
        return {"n": len(apes), "median_ape": statistics.median(apes) if apes else None,
                "worst_ape": max(apes) if apes else None, "target_ape": target,
                "within_target": sum(a <= target for a in apes)}

    return {"hardware": hardware.name, "link": link.model_dump(), "allreduce": ar, "decode": dec,
            "summary": {"allreduce": summary(ar, ALLREDUCE_TARGET_APE),
                        "decode": summary(dec, TP_DECODE_TARGET_APE)}}


def compare_text(report: dict) -> str:
    """The comparison as two small tables."""
    link = report["link"]
    lines = [f"{report['hardware']} scale-up link: {link['bytes_per_s'] / 1e9:.1f} GB/s bus bandwidth, {link['kind']} "
             "(NCCL tuner model: min over LL / LL128 / Simple of latency + bytes / bandwidth)", "",
             f"{'all-reduce bytes':>16} {'measured us':>12} {'predicted us':>13} {'protocol':>9} {'APE %':>7}"]
    lines += [f"{r['bytes']:>16,} {r['measured_ms'] * 1e3:>12.1f} {r['predicted_ms'] * 1e3:>13.1f} "
              f"{r['protocol']:>9} {r['ape']:>7.1f}" for r in report["allreduce"]]
    lines += ["", f"{'tp decode case':<28} {'measured ms':>12} {'predicted ms':>13} {'of which comm':>14} {'APE %':>7}"]
    lines += [f"{r['name']:<28} {r['measured_ms']:>12.3f} {r['predicted_ms']:>13.3f} {r['comm_ms']:>14.3f} "
              f"{r['ape']:>7.1f}" for r in report["decode"]]
    for key, s in report["summary"].items():
        if s["n"]:
            lines.append(f"{key}: median APE {s['median_ape']:.1f} %, worst {s['worst_ape']:.1f} % "
                         f"({s['within_target']}/{s['n']} within {s['target_ape']:g} %)")
    return "\n".join(lines)
