"""A real engine's run against roofline: capacity against its start-up log, decode steps and prefills against the
prediction committed before the run, and against the current model (with the engine's time profile).

python -m validate.engines.compare RESULTS_DIR [--predicted FILE] [--hardware H200] [--out REPORT.txt] [--json]
"""

from __future__ import annotations

import argparse
import json
import re
import statistics
from pathlib import Path

from validate.engines.predict import CASES, capacity_from_log, predict

LOG = {"kv_gib": r"Available KV cache memory: ([\d.,]+) GiB", "pool_tokens": r"GPU KV cache size: ([\d,]+) tokens",
       "max_concurrency": r"Maximum concurrency for [\d,]+ tokens per request: ([\d.,]+)x",
       # gpu_worker.py: the CUDA-graph memory estimate, as the utilization it is equivalent to without it
       "cudagraph_equiv_util": r"equivalent to --gpu-memory-utilization=([\d.]+) without",
       "weights_gib": r"Model loading took ([\d.]+) GiB"}


def parse_log(text: str) -> dict:
    """The engine's start-up memory lines (vLLM 0.24: gpu_worker.py, v1/core/kv_cache_utils.py)."""
    out = {}
    for key, rx in LOG.items():
        m = re.findall(rx, text)
        if m:
            out[key] = float(m[-1].replace(",", ""))
    return out


def from_log(text: str) -> dict:
    """The cases a timed-out lat.py run printed before its limit ("decode B=.. P=.. step=.. ms")."""
    dec = [{"B": int(b), "P": int(p), "decode_step_s": float(t) * 1e-3}
           for b, p, t in re.findall(r"decode B=(\d+) P=(\d+) step=([\d.]+) ms", text)]
    pre = [{"P": int(p), "median_s": float(t) * 1e-3} for p, t in re.findall(r"prefill P=(\d+) ([\d.]+) ms", text)]
    return {"decode": dec, "prefill": pre, "recovered_from_log": True}


def ape(pred: float, meas: float) -> float:
    """Absolute percentage error of `pred` against `meas`, %."""
    return abs(pred / meas - 1) * 100


def _signed(pred: float, meas: float) -> float:
    return (pred / meas - 1) * 100


def compare(results: Path, predicted: dict, current: dict, hardware: str) -> dict:
    rows = {"decode": [], "prefill": [], "capacity": []}
    for name in CASES["models"]:
        lat = results / f"{name}-lat.json"
        log_file = results / f"{name}-lat.log"
        if lat.is_file():
            meas = json.loads(lat.read_text())
        elif log_file.is_file():
            meas = from_log(log_file.read_text(errors="replace"))  # a run stopped by its time limit
        else:
            continue
        pre, cur = predicted["models"][name], current[name]
        for m, p, c in zip(meas["decode"], pre["decode"], cur["decode"], strict=False):
            rows["decode"].append({"model": name, "B": m["B"], "P": m["P"], "measured_s": m["decode_step_s"],
                                   "before_s": p["decode_step_s"], "now_s": c["decode_step_s"]})
        for m, p, c in zip(meas["prefill"], pre["prefill"], cur["prefill"], strict=False):
            rows["prefill"].append({"model": name, "P": m["P"], "measured_s": m["median_s"],
                                    "before_s": p["prefill_s"], "now_s": c["prefill_s"]})
        log = parse_log((results / f"{name}-lat.log").read_text(errors="replace"))
        if log:
            spec = CASES["models"][name]
            row = {"model": name, "run": "offline", "max_model_len": spec["max_model_len"],
                   "gpu_memory_utilization": CASES["gpu_memory_utilization"], "log": log,
                   "predicted": pre["capacity"][0], "rule_from_logged_budget": capacity_from_log(
                       name, spec["max_model_len"], log["kv_gib"])}
            rows["capacity"].append(row)
    serve = CASES["serve"]
    server_log = results / f"{serve['model']}-server.log"
    if server_log.is_file():
        log = parse_log(server_log.read_text(errors="replace"))
        if log:
            rows["capacity"].append({
                "model": serve["model"], "run": "server", "max_model_len": serve["max_model_len"],
                "gpu_memory_utilization": serve["gpu_memory_utilization"], "log": log,
                "predicted": predicted["models"][serve["model"]]["capacity"][1],
                "rule_from_logged_budget": capacity_from_log(serve["model"], serve["max_model_len"], log["kv_gib"])})
    return rows


def summary(rows: dict) -> dict:
    """Median and worst APE per phase, for the prediction before the run and the current model."""
    out = {}
    for phase in ("decode", "prefill"):
        for which in ("before_s", "now_s"):
            errs = [ape(r[which], r["measured_s"]) for r in rows[phase]]
            if errs:
                out[f"{phase}_{which[:-2]}"] = {"median_ape": statistics.median(errs), "worst_ape": max(errs),
                                               "cases": len(errs)}
    return out


def report(rows: dict) -> str:
    lines = ["phase    model              B      P   measured ms   before ms (err %)   now ms (err %)"]
    for phase in ("decode", "prefill"):
        for r in rows[phase]:
            m = r["measured_s"]
            lines.append(f"{phase:8s} {r['model']:18s} {r.get('B', 1):4d} {r['P']:6d} {m * 1e3:11.3f} "
                         f"{r['before_s'] * 1e3:10.3f} ({_signed(r['before_s'], m):+6.1f}) "
                         f"{r['now_s'] * 1e3:9.3f} ({_signed(r['now_s'], m):+6.1f})")
    lines.append("")
    lines.append("capacity: model, run, max_model_len, util | logged KV GiB, pool tokens, max conc | predicted pool "
                 "tokens (err %), max conc | rule on the logged budget: pool tokens (err %)")
    for r in rows["capacity"]:
        lg, p, b = r["log"], r["predicted"], r["rule_from_logged_budget"]
        lines.append(f"  {r['model']:18s} {r['run']:8s} {r['max_model_len']:6d} {r['gpu_memory_utilization']:.2f} | "
                     f"{lg.get('kv_gib', 0):7.2f} {lg.get('pool_tokens', 0):10,.0f} {lg.get('max_concurrency', 0):7.2f}"
                     f" | {p['pool_tokens']:10,} ({_signed(p['pool_tokens'], lg['pool_tokens']):+.2f}) "
                     f"{p['max_concurrency']:7.2f} | {b['pool_tokens']:10,} "
                     f"({_signed(b['pool_tokens'], lg['pool_tokens']):+.2f})")
    lines.append("")
    for k, v in summary(rows).items():
        lines.append(f"{k:16s} median APE {v['median_ape']:5.1f} %  worst {v['worst_ape']:5.1f} %  "
                     f"({v['cases']} cases)")
    return "\n".join(lines)


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("results", type=Path)
    p.add_argument("--predicted", type=Path, default=Path("validate/results/engines/h200-vllm-predicted.json"))
    p.add_argument("--hardware", default="H200")
    p.add_argument("--out", type=Path)
    p.add_argument("--json", action="store_true")
    a = p.parse_args()
    rows = compare(a.results, json.loads(a.predicted.read_text()), predict(a.hardware), a.hardware)
    text = json.dumps({"rows": rows, "summary": summary(rows)}, indent=1) if a.json else report(rows)
    if a.out:
        a.out.write_text(text + "\n")
    print(text)


if __name__ == "__main__":
    main()
