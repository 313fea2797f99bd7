"""Runs 12 and 13 (two H200s of one host) against roofline: the prediction committed before each run and the model
as it stands, side by side (tp 2 capacity, decode and prefill; disaggregated serving).

python -m validate.engines.compare_x2 [--out FILE]   (default: nvidia-h200x2-vllm-2026-11-29-run12-13-compare.txt)
The model's column is recomputed here (validate.engines.predict's functions on run 12's and 13's cases files,
the served runs replayed at the send times each client recorded); the measured column is the runs' own files.
"""

from __future__ import annotations

import argparse
import importlib
import json
import os
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2] / "validate" / "results" / "engines"
RUNS = {run: (f"cases-{run}.json", ROOT / f"nvidia-h200x2-vllm-2026-11-29-{run}",
              ROOT / f"h200x2-vllm-{run}-predicted.json") for run in ("run12", "run13")}
SERVED = (("TTFT p50", "median_ttft_ms", "ttft_s", "p50"), ("TTFT p99", "p99_ttft_ms", "ttft_s", "p99"),
          ("TPOT p50", "median_tpot_ms", "tpot_s", "p50"), ("TPOT p99", "p99_tpot_ms", "tpot_s", "p99"))


def _predict_module(cases: str):
    """validate.engines.predict bound to `cases` (it reads $ROOFLINE_ENGINE_CASES at import)."""
    os.environ["ROOFLINE_ENGINE_CASES"] = cases
    import validate.engines.predict as predict

    return importlib.reload(predict)


def pct(model: float, measured: float) -> str:
    """The model's signed error against the measurement, in %."""
    return f"{(model / measured - 1) * 100:+.1f} %"


def steps(run: str, lines: list[str]) -> None:
    """tp 2 capacity, decode steps and prefills of a run's lat.py results."""
    cases, folder, before = RUNS[run]
    pred = _predict_module(cases)
    now, then = pred.predict("H200"), json.loads(before.read_text())["models"]
    for name in now:
        lat = json.loads((folder / "T" / f"{name}-lat.json").read_text())
        tp = lat["tp"]
        log = (folder / "T" / f"{name}-lat.log").read_text()
        tokens = next(int(x.split("GPU KV cache size: ")[1].split()[0].replace(",", ""))
                      for x in log.splitlines() if "GPU KV cache size:" in x)
        lines.append(f"\n{name}, tp {tp} (lat.py, {lat['vllm']}; fuse_allreduce_rms pass skipped: the carried "
                     "FlashInfer lacks its comm module)")
        cap_now, cap_then = now[name]["capacity"][0], then[name]["capacity"][0]
        lines.append(f"  capacity 'GPU KV cache size' {tokens:,} tokens: before {cap_then['pool_tokens']:,} "
                     f"({pct(cap_then['pool_tokens'], tokens)}), now {cap_now['pool_tokens']:,} "
                     f"({pct(cap_now['pool_tokens'], tokens)})")
        for m, b, n in zip(lat["decode"], then[name]["decode"], now[name]["decode"], strict=True):
            t = m["decode_step_s"]
            lines.append(f"  decode B={m['B']:>3} P={m['P']:>5}  measured {t * 1e3:7.3f} ms  before "
                         f"{b['decode_step_s'] * 1e3:7.3f} ({pct(b['decode_step_s'], t)})  now "
                         f"{n['decode_step_s'] * 1e3:7.3f} ({pct(n['decode_step_s'], t)})")
        for m, b, n in zip(lat["prefill"], then[name]["prefill"], now[name]["prefill"], strict=True):
            t = m["median_s"]
            lines.append(f"  prefill P={m['P']:>5}       measured {t * 1e3:7.2f} ms  before "
                         f"{b['prefill_s'] * 1e3:7.2f} ({pct(b['prefill_s'], t)})  now "
                         f"{n['prefill_s'] * 1e3:7.2f} ({pct(n['prefill_s'], t)})")


def served(run: str, lines: list[str]) -> None:
    """Disaggregated runs: the client's figures, the prediction before the run, the model now (replayed at the
    recorded send times)."""
    cases, folder, before = RUNS[run]
    pred = _predict_module(cases)
    d = pred.CASES["disagg"]
    then = json.loads(before.read_text())["disagg"]
    now = pred.pd_predictions("H200", folder)
    lines.append(f"\n{run}: disaggregated {d['model']}, {d['input_len']} in / {d['output_len']} out, 1 prefill + 1 "
                 f"decode server (NixlConnector), link {d.get('kv_link_bytes_per_s', 'the hardware default')}")
    for key in now:
        m = json.loads((folder / f"{d['model']}-{key}.json").read_text())
        row = [f"  {key:<10}"]
        for label, mk, pk, q in SERVED:
            meas = m[mk]
            row.append(f"{label} {meas:8.2f} ms: before {pct(then[key][pk][q] * 1e3, meas)}, now "
                       f"{pct(now[key][pk][q] * 1e3, meas)}")
        tput = m["output_throughput"]
        row.append(f"out tok/s {tput:8.1f}: before {pct(then[key]['throughput_tokens_per_s'], tput)}, now "
                   f"{pct(now[key]['throughput_tokens_per_s'], tput)}")
        lines.append(row[0] + ("\n" + " " * 14).join(row[1:]))


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--out", type=Path, default=ROOT / "nvidia-h200x2-vllm-2026-11-29-run12-13-compare.txt")
    a = p.parse_args()
    lines = ["Runs 12-13, 2 x NVIDIA H200 (NV18), vLLM 0.24.0, dummy weights: measured against roofline's prediction",
             "committed before each run ('before') and the model as it stands ('now'); signed error of the model."]
    steps("run12", lines)
    served("run12", lines)
    served("run13", lines)
    text = "\n".join(lines) + "\n"
    a.out.write_text(text)
    print(text, end="")


if __name__ == "__main__":
    main()
