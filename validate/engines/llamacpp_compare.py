"""llama.cpp run against roofline's prediction written before it: measured, predicted and APE per case.

python -m validate.engines.llamacpp_compare RESULTS_DIR --predicted PRED.json [--out REPORT.json]

RESULTS_DIR is what llamacpp_run.sh wrote (mem-cC-npN.log, batched.log, bench-pp.json, bench-tg.json,
serve-RUN.json); a case the folder lacks is listed as not measured. Measured figures:
  memory   the start-up log's KV buffers (all devices), its cells, model buffers (all devices: llama.cpp keeps the
           token embeddings in host memory, the rest on the GPU) and compute buffers (all devices)
  batched  T_TG / TG (the mean decode step) and T_PP (the prefill of PL prompts together)
  bench    llama-bench's mean over its repetitions: the prefill's seconds, the decode's seconds / n_gen
  served   the client's p50 TTFT and TPOT, p50 end to end, output tokens per second
APE = |predicted - measured| / measured; the summary gives its median and 90th percentile per family.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from pathlib import Path

from validate import stored
from validate.engines.llamacpp_logs import batched_rows, bench_entries, served_summary, server_memory


def ape(measured: float | None, predicted: float | None) -> float | None:
    if not measured or predicted is None:
        return None
    return abs(predicted - measured) / measured


def row(family: str, case: str, measured, predicted) -> dict:
    return {"family": family, "case": case, "measured": measured, "predicted": predicted,
            "ape": ape(measured, predicted)}


def memory_rows(res: Path, pred: dict) -> list[dict]:
    out = []
    for p in pred["memory"]:
        case = f"c{p['c']}-np{p['np']}"
        log = res / f"mem-{case}.log"
        m = server_memory(log.read_text(errors="replace")) if log.is_file() else {}
        kv = sum(m.get("kv_buffer_bytes", {}).values()) or None
        out += [row("memory", f"{case} KV bytes", kv, p["kv_bytes"]),
                row("memory", f"{case} KV cells", m.get("kv", {}).get("cells"), p["cells"]),
                row("memory", f"{case} weight bytes", sum(m.get("model_buffer_bytes", {}).values()) or None,
                    p["weights_bytes"]),
                row("memory", f"{case} compute bytes", sum(m.get("compute_buffer_bytes", {}).values()) or None,
                    p["compute_bytes"])]
    return out


def step_rows(res: Path, pred: dict) -> list[dict]:
    log = res / "batched.log"
    rows = {(r["pp"], r["pl"]): r for r in batched_rows(log.read_text(errors="replace"))} if log.is_file() else {}
    out = []
    for p in pred["batched"]:
        r = rows.get((p["pp"], p["pl"]))
        case = f"pp{p['pp']} B{p['pl']}"
        out += [row("decode", case, r["t_tg_s"] / r["tg"] if r else None, p["decode_step_s"]),
                row("prefill", f"{case} (B x pp)", r["t_pp_s"] if r else None, p["prefill_s"])]
    for name, key in (("bench-pp.json", "prefill"), ("bench-tg.json", "tg")):
        f = res / name
        entries = bench_entries(f.read_text()) if f.is_file() and f.stat().st_size else []
        for p in pred[key]:
            if key == "prefill":
                e = next((e for e in entries if e["n_prompt"] == p["n_prompt"] and e["n_gen"] == 0), None)
                out.append(row("prefill", f"llama-bench pp{p['n_prompt']}", e and e["avg_s"], p["prefill_s"]))
            else:
                e = next((e for e in entries if e["n_gen"] == p["n_gen"] and e["n_depth"] == p["n_depth"]), None)
                out.append(row("decode", f"llama-bench tg{p['n_gen']} @ d{p['n_depth']}",
                               e and e["avg_s"] / e["n_gen"], p["decode_step_s"]))
    return out


def served_rows(res: Path, pred: dict) -> list[dict]:
    out = []
    for name, p in pred["served"].items():
        f = res / f"serve-{name}.json"
        s = served_summary(json.loads(stored.read_text(f))) if stored.exists(f) else {}
        for key in ("ttft_s", "tpot_s", "e2e_s"):
            out.append(row("served", f"{name} {key} p50", s.get(key, {}).get("p50"), p.get(key, {}).get("p50")))
        out.append(row("served", f"{name} output tok/s", s.get("throughput_tokens_per_s"),
                       p.get("throughput_tokens_per_s")))
        if s.get("failed"):
            out.append(row("served", f"{name} failed requests", s["failed"], 0))
    return out


def summary(rows: list[dict]) -> dict:
    out = {}
    for fam in dict.fromkeys(r["family"] for r in rows):
        apes = sorted(r["ape"] for r in rows if r["family"] == fam and r["ape"] is not None)
        out[fam] = {"cases": len(apes), "median_ape": statistics.median(apes) if apes else None,
                    "p90_ape": apes[min(len(apes) - 1, int(0.9 * len(apes)))] if apes else None}
    return out


def fmt(v) -> str:
    if v is None:
        return "-"
    return f"{v:.4g}" if isinstance(v, float) else str(v)


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("results", type=Path)
    p.add_argument("--predicted", type=Path, required=True)
    p.add_argument("--out", type=Path)
    a = p.parse_args()
    if not a.results.is_dir():
        print(f"llamacpp_compare: RESULTS_DIR: {a.results} must be a folder llamacpp_run.sh wrote", file=sys.stderr)
        raise SystemExit(2)
    pred = json.loads(a.predicted.read_text())
    rows = memory_rows(a.results, pred) + step_rows(a.results, pred) + served_rows(a.results, pred)
    print(f"{'family':8} {'case':34} {'measured':>12} {'predicted':>12} {'APE %':>8}")
    for r in rows:
        e = "-" if r["ape"] is None else f"{100 * r['ape']:.1f}"
        print(f"{r['family']:8} {r['case']:34} {fmt(r['measured']):>12} {fmt(r['predicted']):>12} {e:>8}")
    summ = summary(rows)
    for fam, s in summ.items():
        med = "-" if s["median_ape"] is None else f"{100 * s['median_ape']:.1f}%"
        p90 = "-" if s["p90_ape"] is None else f"{100 * s['p90_ape']:.1f}%"
        print(f"{fam}: {s['cases']} measured cases, median APE {med}, p90 {p90}")
    if a.out:
        a.out.write_text(json.dumps({"rows": rows, "summary": summ}, indent=1) + "\n")


if __name__ == "__main__":
    main()
