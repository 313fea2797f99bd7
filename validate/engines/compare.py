"""A real engine's run against roofline: capacity against its start-up log, decode steps and prefills against the
prediction committed before the run, and against the current model (with the engine's time profile).

python -m validate.engines.compare RESULTS_DIR [--predicted FILE] [--hardware H200] [--out REPORT.txt] [--json]
The cases file is $ROOFLINE_ENGINE_CASES (default cases.json), as for the run.
"""

from __future__ import annotations

import argparse
import json
import re
import statistics
from pathlib import Path

from roofline.trust.engines import _is_moe
from validate import stored
from validate.engines.predict import CASES, capacity_from_log, predict, serve_runs, simulate, util_of

# the engine profile's own microbenchmarks (validate/engines/derive.py): the tiny model and the narrow models of the
# eager-step law (models.py NARROW), in-sample, never judged
MICRO_MODELS = ("tiny-llama", "tiny-llama-32", "tiny-qwen3moe-48", "tiny-dsv2-27")
# decode cases whose attention kernels were profiled in the engine (prof.py, run 2) to derive attn_decode_program:
# in-sample for that figure, never judged (model, B, P)
PROFILED = {("Llama-3.1-8B", 256, 256), ("Llama-3.1-8B", 128, 256), ("Llama-3.1-8B", 32, 256)}
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


# a timed case whose reps disagree by more than this (the slower over the faster) held a stall (vLLM's jit_monitor
# logs "Triton kernel JIT compilation during inference" there: runs 3 and 9's Qwen3-30B-A3B B = 16, 2.2-2.4 s reps
# beside 1.09 s); with fewer than three reps the median is their mean and carries it (lat.py takes three since run 9)
STALL_RATIO = 1.5


def not_judged(name: str, meas: dict, case: dict, phase: str) -> str:
    """Why a step row is not judged ('' where it is), each reason a fact the run recorded, never the row's error:
    the engine profile's own microbenchmark or a case profiled in the engine (in-sample); an MoE model timed with
    dummy weights and no routing simulation (lat.json's `moe_routing_simulation` empty or absent: the random router
    sends every token to the same few experts, runs 1 and 2, which is not the traffic the planner models; run 3's
    note); a median of fewer than three reps that disagree by more than STALL_RATIO (a stall inside one rep)."""
    if name in MICRO_MODELS:
        return "the engine profile's own microbenchmark"
    if phase == "decode" and (name, case["B"], case["P"]) in PROFILED:
        return "profiled in the engine (attn_decode_program's input)"
    if _is_moe(name) is True and not meas.get("moe_routing_simulation"):
        return "MoE on dummy weights without routing simulation (collapsed routing)"
    for timed in ((case.get("t_outN"), case.get("t_out1")) if phase == "decode" else (case,)):
        reps = (timed or {}).get("times_s", [])
        if 1 < len(reps) < 3 and max(reps) / min(reps) > STALL_RATIO:
            return (f"{len(reps)} reps disagree {max(reps) / min(reps):.2f}x "
                    f"({' / '.join(f'{t:.3f}' for t in reps)} s): a stall inside a rep")
    return ""


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
                                   "before_s": p["decode_step_s"], "now_s": c["decode_step_s"],
                                   "why_not": (why := not_judged(name, meas, m, "decode")), "judged": not why})
        for m, p, c in zip(meas["prefill"], pre["prefill"], cur["prefill"], strict=False):
            rows["prefill"].append({"model": name, "P": m["P"], "measured_s": m["median_s"],
                                    "before_s": p["prefill_s"], "now_s": c["prefill_s"],
                                    "why_not": (why := not_judged(name, meas, m, "prefill")), "judged": not why})
        log = parse_log((results / f"{name}-lat.log").read_text(errors="replace"))
        if log:
            spec = CASES["models"][name]
            row = {"model": name, "run": "offline", "max_model_len": spec["max_model_len"], "now": cur["capacity"][0],
                   "gpu_memory_utilization": util_of(spec), "log": log,
                   "predicted": pre["capacity"][0], "rule_from_logged_budget": capacity_from_log(
                       name, spec["max_model_len"], log["kv_gib"], meas.get("engine", {}).get(
                           "max_num_batched_tokens", 16384), spec.get("tp", 1), spec.get("pp", 1))}
            rows["capacity"].append(row)
    serve = CASES.get("serve")
    server_log = results / f"{serve['model']}-server.log" if serve else None
    # a served model with no offline entry in the cases file (run 9) has no committed server capacity: no row
    if server_log is not None and stored.exists(server_log) and serve["model"] in predicted["models"]:
        log = parse_log(stored.read_text(server_log, errors="replace"))
        if log:
            rows["capacity"].append({
                "model": serve["model"], "run": "server", "max_model_len": serve["max_model_len"],
                "gpu_memory_utilization": serve["gpu_memory_utilization"], "log": log,
                "predicted": predicted["models"][serve["model"]]["capacity"][1],
                "now": current[serve["model"]]["capacity"][1],
                "rule_from_logged_budget": capacity_from_log(serve["model"], serve["max_model_len"], log["kv_gib"],
                                                             8192, serve.get("tp", 1), serve.get("pp", 1))})
    return rows


def summary(rows: dict) -> dict:
    """Median and worst APE per phase, for the prediction before the run and the current model."""
    out = {}
    for phase in ("decode", "prefill"):
        for which in ("before_s", "now_s"):
            errs = [ape(r[which], r["measured_s"]) for r in rows[phase] if r["judged"]]
            if errs:
                out[f"{phase}_{which[:-2]}"] = {"median_ape": statistics.median(errs), "worst_ape": max(errs),
                                               "cases": len(errs)}
    return out


def report(rows: dict) -> str:
    lines = ["phase    model              B      P   measured ms   before ms (err %)   now ms (err %)   "
             "(* not judged: why, below the rows)"]
    for phase in ("decode", "prefill"):
        for r in rows[phase]:
            m = r["measured_s"]
            lines.append(f"{phase:8s} {r['model']:18s} {r.get('B', 1):4d} {r['P']:6d} {m * 1e3:11.3f} "
                         f"{r['before_s'] * 1e3:10.3f} ({_signed(r['before_s'], m):+6.1f}) "
                         f"{r['now_s'] * 1e3:9.3f} ({_signed(r['now_s'], m):+6.1f})" + ("" if r["judged"] else " *"))
    reasons: dict[str, list[str]] = {}
    for phase in ("decode", "prefill"):
        for r in rows[phase]:
            if not r["judged"]:
                reasons.setdefault(r["why_not"], []).append(f"{phase} {r['model']} B {r.get('B', 1)} P {r['P']}")
    lines += [f"  * {why}: {', '.join(cases)}" for why, cases in reasons.items()]
    lines.append("")
    lines.append("capacity: model, run, max_model_len, util | logged KV GiB, max concurrency | max concurrency "
                 "predicted before the run (err %), now (err %), the rule on the logged budget (err %)")
    lines.append("  (vLLM 0.24 logs 'GPU KV cache size' as int(max concurrency x max_model_len), so concurrency is "
                 "the figure compared)")
    for r in rows["capacity"]:
        lg, p, n, b = r["log"], r["predicted"], r["now"], r["rule_from_logged_budget"]
        m = lg["max_concurrency"]
        lines.append(f"  {r['model']:18s} {r['run']:8s} {r['max_model_len']:6d} {r['gpu_memory_utilization']:.2f} | "
                     f"{lg.get('kv_gib', 0):7.2f} {m:9.2f} | {p['max_concurrency']:9.2f} "
                     f"({_signed(p['max_concurrency'], m):+6.2f}) {n['max_concurrency']:9.2f} "
                     f"({_signed(n['max_concurrency'], m):+6.2f}) {b['max_concurrency']:9.2f} "
                     f"({_signed(b['max_concurrency'], m):+6.2f})")
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
    serve = compare_serve(a.results, a.hardware) if "serve" in CASES else []
    slo = slo_rates(serve)
    text = (json.dumps({"rows": rows, "summary": summary(rows), "serve": serve, "slo_max_rate": slo}, indent=1)
            if a.json else report(rows) + "\n\n" + serve_report(serve) + "\n\n" + slo_report(slo))
    if a.out:
        a.out.write_text(text + "\n")
    print(text)



SERVE_METRICS = (("ttft_s", "p50", "median_ttft_ms"), ("ttft_s", "p99", "p99_ttft_ms"),
                 ("tpot_s", "p50", "median_tpot_ms"), ("tpot_s", "p99", "p99_tpot_ms"))


def compare_serve(results: Path, hardware: str) -> list[dict]:
    """The served runs against `roofline simulate --engine vllm` of the same settings (predict.serve_runs: the
    client's recorded send times for a Poisson run, the acceptance the engine measured for a speculative one)."""
    s = CASES["serve"]
    rows = []
    for name, flags in serve_runs(results):
        f = results / f"{s['model']}-{name}.json"
        if not stored.exists(f):
            continue
        meas = json.loads(stored.read_text(f))
        sim = simulate(flags, hardware)
        if "error" in sim:
            rows.append({"run": name, "error": sim["error"]})
            continue
        row = {"run": name}
        for key, q, mkey in SERVE_METRICS:
            row[f"{key[:-2]}_{q}"] = {"measured_s": meas[mkey] * 1e-3, "predicted_s": sim[key][q]}
        row["output_tokens_per_s"] = {"measured": meas["output_throughput"],
                                      "predicted": sim["throughput_tokens_per_s"]}
        rows.append(row)
    return rows


def serve_report(rows: list[dict]) -> str:
    lines = ["serving (Llama-3.1-8B, vllm serve, random prompts; rates replayed at the client's send times): "
             "measured / predicted (err %)",
             "run       TTFT p50 ms            TTFT p99 ms            TPOT p50 ms          TPOT p99 ms          "
             "output tok/s"]
    for r in rows:
        if "error" in r:
            lines.append(f"{r['run']:8s}  simulate failed: {r['error']}")
            continue
        cells = []
        for key in ("ttft_p50", "ttft_p99", "tpot_p50", "tpot_p99"):
            m, p = r[key]["measured_s"], r[key]["predicted_s"]
            cells.append(f"{m * 1e3:8.1f} / {p * 1e3:8.1f} ({_signed(p, m):+5.0f})")
        m, p = r["output_tokens_per_s"]["measured"], r["output_tokens_per_s"]["predicted"]
        cells.append(f"{m:6.0f} / {p:6.0f} ({_signed(p, m):+5.1f})")
        lines.append(f"{r['run']:8s}  " + "  ".join(cells))
    return "\n".join(lines)



# SLOs on p99 TTFT and TPOT (seconds): the max Poisson rate meeting each, from the measured runs and from their
# simulations at the same send times
SLOS = ((0.5, 0.05), (0.2, 0.025))


def _crossing(rates: list[float], values: list[float], limit: float) -> float | None:
    """The rate at which `values` (one per rate, ascending rates) first exceeds `limit`, by linear interpolation
    between the two runs around it; None when no run exceeds it (the max rate is past the runs)."""
    for (r0, v0), (r1, v1) in zip(zip(rates, values, strict=True), zip(rates[1:], values[1:], strict=True),
                                  strict=False):
        if v0 <= limit < v1:
            return r0 + (r1 - r0) * (limit - v0) / (v1 - v0)
        if v0 > limit:
            return r0 if r0 == rates[0] else None
    return None


def slo_rates(rows: list[dict]) -> list[dict]:
    """Per SLO, the max rate meeting it (p99 TTFT and p99 TPOT under their limits), measured and predicted: each
    p99 interpolated linearly between the Poisson runs around its crossing; the smaller crossing binds."""
    runs = sorted((float(r["run"][4:]), r) for r in rows if r["run"].startswith("rate") and "error" not in r)
    rates = [x for x, _ in runs]
    out = []
    for ttft, tpot in SLOS:
        row = {"ttft_p99_s": ttft, "tpot_p99_s": tpot}
        for side, key in (("measured", "measured_s"), ("predicted", "predicted_s")):
            cross = [_crossing(rates, [r[q][key] for _, r in runs], lim)
                     for q, lim in (("ttft_p99", ttft), ("tpot_p99", tpot))]
            known = [c for c in cross if c is not None]
            row[side] = min(known) if known else None
        out.append(row)
    return out


def slo_report(slo: list[dict]) -> str:
    lines = ["max Poisson rate at an SLO (p99 TTFT and TPOT), interpolated between the runs: measured / predicted "
             "(err %)"]
    for r in slo:
        m, p = r["measured"], r["predicted"]
        err = f"{_signed(p, m):+5.1f}" if m and p else "  n/a"
        lines.append(f"  TTFT p99 <= {r['ttft_p99_s'] * 1e3:4.0f} ms, TPOT p99 <= {r['tpot_p99_s'] * 1e3:3.0f} ms: "
                     f"{m if m is None else round(m, 1)} / {p if p is None else round(p, 1)} req/s ({err})")
    return "\n".join(lines)


if __name__ == "__main__":
    main()
