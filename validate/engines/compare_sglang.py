"""SGLang run 1 (one H200) against roofline: the prediction committed before the run (h200-sglang-run1-predicted.json,
validate/engines/predict_sglang.py) beside the run's own files.

python -m validate.engines.compare_sglang [RUN_DIR] [--predicted P.json] [--out REPORT]
Writes nvidia-h200-sglang-2026-11-30-run1-summary.txt by default. The report is not in validate.engines.compare's row
format (its name ends in -summary.txt, out of the trust bands' glob): SGLang has no time profile yet, so these rows
judge the GPU work alone under SGLang's scheduling rules, not a profile.
"""

from __future__ import annotations

import argparse
import json
import re
import statistics
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2] / "validate" / "results" / "engines"
RUN = ROOT / "nvidia-h200-sglang-2026-11-30-run1"
# (phase, lat_sglang.py's measured key, predict_sglang.py's key): the step rows of the report
PHASES = (("decode", "decode_step_s", "decode_step_s"), ("prefill", "median_s", "prefill_s"))
SERVED = (("TTFT p50", "median_ttft_ms", "ttft_s", "p50"), ("TTFT p99", "p99_ttft_ms", "ttft_s", "p99"),
          ("TPOT p50", "median_tpot_ms", "tpot_s", "p50"), ("TPOT p99", "p99_tpot_ms", "tpot_s", "p99"))


def err(model: float, measured: float) -> float:
    """The model's signed error against the measurement, %."""
    return (model / measured - 1) * 100


def pool_tokens(log: str) -> int:
    """SGLang's logged max_total_num_tokens (the start-up line)."""
    return int(re.findall(r"max_total_num_tokens=(\d+)", log)[-1])


def report(run: Path, predicted: dict) -> list[str]:
    """The report's lines."""
    lines = [f"SGLang run 1: {run.name} against roofline's prediction committed before it "
             f"({predicted['git_sha'][:7]}, {predicted['date']}; GPU work alone under SGLang's rules)", ""]
    steps: dict[str, list[float]] = {"decode": [], "prefill": []}
    lines.append("phase    model          B      P  measured ms  predicted ms  err %")
    for name, pred in predicted["models"].items():
        lat = json.loads((run / f"{name}-lat.json").read_text())
        tiny = name.startswith("tiny-")
        for phase, measured, predicted_key in PHASES:
            for m, p in zip(lat[phase], pred[phase], strict=True):
                t, tp = m[measured] * 1e3, p[predicted_key] * 1e3
                if not tiny:
                    steps[phase].append(err(tp, t))
                lines.append(f"{phase:<8} {name:<12} {m.get('B', 1):>3} {m['P']:>6} {t:11.3f} {tp:13.3f} "
                             f"{err(tp, t):+6.1f}" + (" *" if tiny else ""))
    lines.append("(* the tiny model: its GPU work is ~0.1 ms, so its step is SGLang's own host cost; not judged)")
    for phase, errs in steps.items():
        lines.append(f"{phase}: median APE {statistics.median(abs(e) for e in errs):.1f} %, worst "
                     f"{max(errs, key=abs):+.1f} % ({len(errs)} cases)")
    lines += ["", "capacity (max_total_num_tokens): logged, predicted (err %)"]
    for name, pred in predicted["models"].items():
        logged = json.loads((run / f"{name}-lat.json").read_text())["server_info"]["max_total_num_tokens"]
        p = pred["capacity"]["pool_tokens"]
        lines.append(f"  {name:<12} offline Engine {logged:>12,} {p:>12,} ({err(p, logged):+.3f} %)")
    served = predicted["serve"]
    logged = pool_tokens((run / "Llama-3.1-8B-server.log").read_text())
    p = predicted["models"]["Llama-3.1-8B"]["capacity"]["pool_tokens"]
    lines.append(f"  Llama-3.1-8B launch_server  {logged:>12,} {p:>12,} ({err(p, logged):+.3f} %)")
    lines += ["", "served (sglang.bench_serving, random-ids 1,024 in / 256 out): measured, predicted (err %)"]
    for key, pred in served.items():
        m = json.loads((run / f"Llama-3.1-8B-{key}.jsonl").read_text().splitlines()[-1])
        row = [f"  {key:<7}"]
        for label, mk, pk, q in SERVED:
            row.append(f"{label} {m[mk]:8.2f} ms: {pred[pk][q] * 1e3:8.2f} ({err(pred[pk][q] * 1e3, m[mk]):+6.1f} %)")
        row.append(f"out tok/s {m['output_throughput']:8.1f}: {pred['throughput_tokens_per_s']:8.1f} "
                   f"({err(pred['throughput_tokens_per_s'], m['output_throughput']):+6.1f} %)")
        lines.append(row[0] + ("\n" + " " * 10).join(row[1:]))
    return lines


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("run", type=Path, nargs="?", default=RUN)
    p.add_argument("--predicted", type=Path, default=ROOT / "h200-sglang-run1-predicted.json")
    p.add_argument("--out", type=Path, default=ROOT / "nvidia-h200-sglang-2026-11-30-run1-summary.txt")
    a = p.parse_args()
    text = "\n".join(report(a.run, json.loads(a.predicted.read_text()))) + "\n"
    a.out.write_text(text)
    print(text, end="")


if __name__ == "__main__":
    main()
