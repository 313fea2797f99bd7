"""Runs 12, 13, 14 and 17 (two H200s of one host) against roofline: the prediction committed before each run and the
model as it stands, side by side (tp 2 capacity, decode and prefill; disaggregated serving).

python -m validate.engines.compare_x2 [--dir DIR]   (writes nvidia-h200-vllm-2026-11-29-run12-13-x2-compare.txt and
-run14-x2-compare.txt there, and run 17's nvidia-h200x2-vllm-2026-11-30-run17-pd-compare.txt, which has no step
or capacity rows and so is named out of the trust bands' glob; default validate/results/engines)
Its step and capacity rows are in validate.engines.compare's format, so the H200 vLLM trust bands
(roofline.trust.engines) pool them with the one-GPU runs'; the disaggregated runs are reported in their own lines,
which the bands do not read (a pair of servers is not one engine's serving).
The model's column is recomputed here (validate.engines.predict's functions on run 12's and 13's cases files,
the served runs replayed at the send times each client recorded); the measured column is the runs' own files.
"""

from __future__ import annotations

import argparse
import importlib
import json
import os
import statistics
from pathlib import Path

from validate import stored

ROOT = Path(__file__).resolve().parents[2] / "validate" / "results" / "engines"
DATES = {"run12": "2026-11-29", "run13": "2026-11-29", "run14": "2026-11-29", "run17": "2026-11-30"}
RUNS = {run: (f"cases-{run}.json", ROOT / f"nvidia-h200x2-vllm-{date}-{run}",
              ROOT / f"h200x2-vllm-{run}-predicted.json") for run, date in DATES.items()}
# (phase, lat.py's measured key, predict.py's key): the step rows of the report
PHASES = (("decode", "decode_step_s", "decode_step_s"), ("prefill", "median_s", "prefill_s"))
NARROW = "tiny-"  # run 14's narrow models (the host's own cost at tp 1 and tp 2): rows marked '*', not judged
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


def _logged(log: str, key: str) -> float:
    """A number the engine's start-up log states after `key` (the first such line)."""
    line = next(x for x in log.splitlines() if key in x)
    return float(line.split(key)[1].split()[0].replace(",", "").rstrip("x"))


def table(run: str, lines: list[str]) -> None:
    """The run's steps and capacity in validate.engines.compare's row format (what roofline.trust.engines reads
    into the H200 vLLM bands): measured, before the run (err %), now (err %)."""
    cases, folder, before = RUNS[run]
    pred = _predict_module(cases)
    now, then = pred.predict("H200"), json.loads(before.read_text())["models"]
    lines.append("\nphase    model                  B      P   measured ms   before ms (err %)   now ms (err %)")
    caps, errors = [], {"decode": [], "prefill": []}  # per phase: (before, now) signed errors, %
    for name in now:
        lat = json.loads((folder / "T" / f"{name}-lat.json").read_text())
        star = " *" if name.startswith(NARROW) else ""
        for phase, measured, predicted in PHASES:
            for m, b, n in zip(lat[phase], then[name][phase], now[name][phase], strict=True):
                t, tb, tn = m[measured] * 1e3, b[predicted] * 1e3, n[predicted] * 1e3
                if not star:
                    errors[phase].append(((tb / t - 1) * 100, (tn / t - 1) * 100))
                lines.append(f"{phase:<8} {name:<20} {m.get('B', 1):>3} {m['P']:>6} {t:11.3f} {tb:10.3f} "
                             f"({(tb / t - 1) * 100:+6.1f}) {tn:10.3f} ({(tn / t - 1) * 100:+6.1f}){star}")
        if star:
            continue
        log = (folder / "T" / f"{name}-lat.log").read_text()
        kv_gib, conc = _logged(log, "Available KV cache memory: "), _logged(log, "tokens per request: ")
        c = pred.CASES["models"][name]
        rule = pred.capacity_from_log(name, c["max_model_len"], kv_gib, lat["engine"]["max_num_batched_tokens"],
                                      lat["tp"])["max_concurrency"]
        cb, cn = then[name]["capacity"][0]["max_concurrency"], now[name]["capacity"][0]["max_concurrency"]
        caps.append(f"  {name:<18} offline {c['max_model_len']:>7} {pred.util_of(c):.2f} | {kv_gib:7.2f} {conc:9.2f} |"
                    f" {cb:9.2f} ({(cb / conc - 1) * 100:+6.2f}) {cn:9.2f} ({(cn / conc - 1) * 100:+6.2f})"
                    f" {rule:9.2f} ({(rule / conc - 1) * 100:+6.2f})")
    lines.append("")
    for phase in ("decode", "prefill"):
        for col, label in ((0, "before"), (1, "now")):
            errs = [abs(e[col]) for e in errors[phase]]
            lines.append(f"{phase}_{label:<7} median APE {statistics.median(errs):5.1f} %  worst {max(errs):5.1f} %  "
                         f"({len(errs)} cases)")
    lines.append("\ncapacity: model, run, max_model_len, util | logged KV GiB per GPU, max concurrency | max "
                 "concurrency predicted before the run (err %), now (err %), the rule on the logged budget (err %)")
    lines.extend(caps)
    lines.append("\nserving (one engine's `vllm serve` runs, which the trust bands pool): none in runs 12-14; the "
                 "disaggregated pair below is two servers behind a proxy, reported apart")


def served(run: str, lines: list[str]) -> None:
    """Disaggregated runs: the client's figures, the prediction before the run, the model now (replayed at the
    recorded send times)."""
    cases, folder, before = RUNS[run]
    pred = _predict_module(cases)
    d = pred.CASES["disagg"]
    then = json.loads(before.read_text())["disagg"]
    now = pred.pd_predictions("H200", folder)
    speed = pred.host_speed_of(folder)  # the run's own tiny server on its host (run 17's stage K), if it has one
    host = pred.pd_predictions("H200", folder, ("--host-speed", f"{speed:.4f}")) if speed else {}
    lines.append(f"\n{run}: disaggregated {d['model']}, {d['input_len']} in / {d['output_len']} out, 1 prefill + 1 "
                 f"decode server (NixlConnector), link {d.get('kv_link_bytes_per_s', 'the hardware default')}")
    if speed:
        lines.append(f"  'host': the model now with --host-speed {speed:.4f}, this host's own tiny server "
                     "(tiny-conc1.json median TTFT) against the profile's (2026-11-28)")
    for key in now:
        m = json.loads(stored.read_text(folder / f"{d['model']}-{key}.json"))
        row = [f"  {key:<10}"]
        for label, mk, pk, q in SERVED:
            meas = m[mk]
            row.append(f"{label} {meas:8.2f} ms: before {pct(then[key][pk][q] * 1e3, meas)}, now "
                       f"{pct(now[key][pk][q] * 1e3, meas)}"
                       + (f", host {pct(host[key][pk][q] * 1e3, meas)}" if host else ""))
        tput = m["output_throughput"]
        row.append(f"out tok/s {tput:8.1f}: before {pct(then[key]['throughput_tokens_per_s'], tput)}, now "
                   f"{pct(now[key]['throughput_tokens_per_s'], tput)}"
                   + (f", host {pct(host[key]['throughput_tokens_per_s'], tput)}" if host else ""))
        lines.append(row[0] + ("\n" + " " * 14).join(row[1:]))


HEADS = {"run12-13": ["Runs 12-13, 2 x NVIDIA H200 (NV18), vLLM 0.24.0, dummy weights, tp 2 (lat.py; vLLM's "
                      "allreduce_rms", "fusion pass skipped: the carried FlashInfer lacks its comm module) and a "
                      "disaggregated pair: measured", "against roofline's prediction committed before each run "
                      "('before') and the model as it stands ('now')."],
         "run14": ["Run 14, 2 x NVIDIA H200 (NV18), vLLM 0.24.0, dummy weights, tp 2 and tp 1 (lat.py) and a "
                   "disaggregated pair:",
                   "measured against roofline's prediction committed before the run ('before') and the model as it "
                   "stands ('now');",
                   "rows marked '*' are the narrow models (the host's own cost), not judged."],
         "run17": ["Run 17, 2 x NVIDIA H200 (NV18), vLLM 0.24.0, dummy weights: a disaggregated pair at 512 in / 256 "
                   "out after its handshake (PD_WARMUP=4), measured",
                   "against roofline's prediction committed before the run ('before') and the model as it stands "
                   "('now'); the term-by-term legs: python -m validate.engines.pd_legs RUN --cases cases-run17.json"]}
REPORTS = {"run12-13": (["run12"], ["run12", "run13"], "2026-11-29"), "run14": (["run14"], ["run14"], "2026-11-29"),
           "run17": ([], ["run17"], "2026-11-30")}


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--dir", type=Path, default=ROOT)
    a = p.parse_args()
    for report, (tables, serves, date) in REPORTS.items():
        lines = list(HEADS[report])
        for run in tables:
            table(run, lines)
        for run in serves:
            served(run, lines)
        text = "\n".join(lines) + "\n"
        name = (f"nvidia-h200-vllm-{date}-{report}-x2-compare.txt" if tables
                else f"nvidia-h200x2-vllm-{date}-{report}-pd-compare.txt")
        (a.dir / name).write_text(text)
        print(text, end="")


if __name__ == "__main__":
    main()
