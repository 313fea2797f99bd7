"""The issue's four validation targets, decided from a results file and its comparison (compare.py).

1. prediction error over the suite (ceilings excluded): median APE <= 5 %, 90th percentile <= 15 %;
2. memory-bound kernels at large shapes reach >= 85 % of the measured streaming bandwidth: per family, the
   compare report's kernel efficiency (its largest quarter of cases, physical work over measured time);
3. quantized attention at large shapes (batch >= 8, context >= 64K) against the bf16 kernel at the same
   batch, context and heads: speedup = t_bf16 / t_quant, byte ratio = bytes_bf16 / bytes_quant, and the
   speedup as a fraction of the byte ratio, >= 80 %;
4. XQuant: the measured crossover context (remat turns the step compute-bound) within 20 % of the model's,
   |measured / predicted - 1| <= 0.2, per batch (families.xquant.crossover).
Each target reads "met" or "missed", or "not measured" when the results lack the cases it needs.
"""

from __future__ import annotations

from roofline.validation.results_file import measured

SUITE_MEDIAN, SUITE_P90 = 5.0, 15.0
BANDWIDTH = 0.85
SPEEDUP_FRACTION = 0.8
CROSSOVER = 0.2
LARGE_BATCH, LARGE_CONTEXT = 8, 65536
_SHAPE = ("batch", "context", "num_heads", "num_kv_heads", "head_dim")


def _verdict(ok: bool | None) -> str:
    return "not measured" if ok is None else ("met" if ok else "missed")


def quant_speedups(results: dict) -> list[dict]:
    """Per large quantized case with a bf16 case of the same shape: speedup, byte ratio and their ratio."""
    bf16 = {tuple(r["params"][k] for k in _SHAPE): r for r in measured(results, "fp16_attention")
            if r["params"].get("dtype", "bf16") == "bf16"}
    out = []
    for row in measured(results, "quant_attention"):
        p = row["params"]
        ref = bf16.get(tuple(p[k] for k in _SHAPE))
        if ref is None or p["batch"] < LARGE_BATCH or p["context"] < LARGE_CONTEXT or not row.get("bytes"):
            continue
        speedup, ratio = ref["ms"] / row["ms"], ref["bytes"] / row["bytes"]
        out.append({"name": row["name"], "speedup": speedup, "byte_ratio": ratio, "fraction": speedup / ratio})
    return out


def targets(results: dict, report: dict, hardware) -> dict:
    """The four targets of the results file whose comparison is `report` (compare.compare)."""
    s = report["summary"]
    suite_ok = None if s["median_ape_pct"] is None else (s["median_ape_pct"] <= SUITE_MEDIAN
                                                          and s["p90_ape_pct"] <= SUITE_P90)
    efficiency = {name: fam["kernel_efficiency"] for name, fam in report["families"].items()
                  if name != "ceilings" and fam["kernel_efficiency"] is not None}
    speedups = quant_speedups(results)
    crossover, judged = {}, []
    if measured(results, "xquant"):
        from validate.model.compare import calibrated
        from validate.model.families.xquant import crossover as xquant_crossover

        crossover = xquant_crossover(results, calibrated(hardware, results))
    judged = [c for c in crossover.values() if c["ratio"] is not None]
    return {
        "suite": {"median_ape_pct": s["median_ape_pct"], "p90_ape_pct": s["p90_ape_pct"],
                  "verdict": _verdict(suite_ok)},
        "bandwidth": {"families": efficiency, "met_by": sorted(n for n, e in efficiency.items() if e >= BANDWIDTH),
                      "verdict": _verdict(all(e >= BANDWIDTH for e in efficiency.values()) if efficiency else None)},
        "quant_speedup": {"cases": speedups, "verdict": _verdict(
            all(c["fraction"] >= SPEEDUP_FRACTION for c in speedups) if speedups else None)},
        "xquant_crossover": {"batches": crossover, "verdict": _verdict(
            all(abs(c["ratio"] - 1) <= CROSSOVER for c in judged) if judged else None)},
    }


def render(t: dict) -> str:
    """The targets as text lines."""
    s = t["suite"]
    lines = ["targets",
             f"  suite APE median <= {SUITE_MEDIAN:g} %, p90 <= {SUITE_P90:g} %: {s['verdict']}"
             + (f" ({s['median_ape_pct']:.1f} %, {s['p90_ape_pct']:.1f} %)" if s["median_ape_pct"] is not None else "")]
    b = t["bandwidth"]
    lines.append(f"  kernels at large shapes >= {BANDWIDTH:.0%} of the measured ceilings: {b['verdict']} ("
                 + ", ".join(f"{n} {e:.0%}" for n, e in b["families"].items()) + ")")
    q = t["quant_speedup"]
    lines.append(f"  quantized speedup over bf16 >= {SPEEDUP_FRACTION:.0%} of the byte ratio (batch >= {LARGE_BATCH}, "
                 f"context >= {LARGE_CONTEXT}): {q['verdict']}")
    lines += [f"    {c['name']:<24} {c['speedup']:5.2f}x of {c['byte_ratio']:5.2f}x bytes = {c['fraction']:.0%}"
              for c in q["cases"]]
    x = t["xquant_crossover"]
    lines.append(f"  XQuant crossover within {CROSSOVER:.0%} of the model: {x['verdict']}")
    for b, c in x["batches"].items():
        if c["ratio"] is None:
            lines.append(f"    batch {b}: not judged: measured {c['measured'] or 'no memory-bound segment'}, predicted "
                         f"{c['predicted']} tokens (below the smallest context measured)")
        else:
            lines.append(f"    batch {b}: measured {c['measured']:.0f} tokens, predicted {c['predicted']}, "
                         f"ratio {c['ratio']:.3f}")
    return "\n".join(lines)
