"""An SGLang run on one H200 against roofline: a prediction (h200-sglang-runN-predicted.json, committed before the run
by validate/engines/predict_sglang.py; or -now.json, the model as it stands) beside the run's own files.

python -m validate.engines.compare_sglang [RUN_DIR] [--predicted P.json] [--before B.json] [--out REPORT]
Writes nvidia-h200-sglang-2026-11-30-run1-summary.txt by default: the summary (steps, capacity, served runs against
the prediction), then its step and serving rows again in validate.engines.compare's format (measured, before the run
(err %), now (err %); `measured / predicted (err %)`), which roofline.trust.engines reads into SGLang's bands from
each run's report of the model as it stands (`-now-summary.txt`). 'before' is --before, by default the
-predicted.json beside a -now.json --predicted, else --predicted itself (the report of the prediction before the
run has it in both columns); 'now' is --predicted.
"""

from __future__ import annotations

import argparse
import json
import re
import statistics
from pathlib import Path

from validate import stored

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1] / "validate" / "results" / "engines"
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


def lat_path(run: Path, name: str) -> Path:
    """A model's lat_sglang.py results: NAME-lat.json, else the one run on another attention backend
    (NAME-<backend>-lat.json: run 2's DeepSeek-V2-Lite on triton, FA3's MLA shapes not being in the payload)."""
    plain = run / f"{name}-lat.json"
    return plain if plain.is_file() else sorted(run.glob(f"{name}-*-lat.json"))[0]


def not_judged(name: str, lat: dict, phase: str, m: dict, out_tokens: int) -> str:
    """Why a step row is not judged ('' where it is): the tiny model (its step is the host cost its profile is
    fitted to); a run on a backend other than SGLang's default (the profile's kernels are the default's); a decode
    batch whose B x (P + out) tokens exceed the logged pool (the engine ran it in waves, not as one batch)."""
    if name.startswith("tiny-"):
        return "the tiny model: the profile's own input"
    if lat.get("attention_backend_flag"):
        return f"attention backend {lat['attention_backend_flag']}, not SGLang's default (FA3)"
    pool = lat.get("server_info", {}).get("max_total_num_tokens")
    if phase == "decode" and pool and m["B"] * (m["P"] + out_tokens) > pool:
        return f"B x (P + {out_tokens}) = {m['B'] * (m['P'] + out_tokens):,} tokens exceed the pool ({pool:,})"
    return ""


def run_label(run: Path) -> str:
    """'run 1' of a run folder named ...-run1."""
    found = re.search(r"run(\d+)$", run.name)
    return f"run {found[1]}" if found else run.name


def report(run: Path, predicted: dict, before: dict | None = None) -> list[str]:
    """The report's lines (`before`: the prediction committed before the run, for the rows' before column; default
    `predicted`)."""
    about = predicted.get("about", "")
    basis = ("GPU work alone under SGLang's rules" if "no SGLang time profile" in about
             else "SGLang's rules and time profile around the GPU work")
    lines = [f"SGLang {run_label(run)}: {run.name} against roofline's prediction ({predicted['git_sha'][:7]}, "
             f"{predicted['date']}; {basis})", ""]
    steps: dict[str, list[float]] = {"decode": [], "prefill": []}
    out_tokens = json.loads((HERE / predicted.get("cases", "cases-sglang.json")).read_text())["out_tokens"]
    lines.append("phase    model             B      P  measured ms  predicted ms  err %")
    reasons: dict[str, str] = {}
    for name, pred in predicted["models"].items():
        lat = json.loads(lat_path(run, name).read_text())
        for phase, measured, predicted_key in PHASES:
            for m, p in zip(lat[phase], pred[phase], strict=True):
                t, tp = m[measured] * 1e3, p[predicted_key] * 1e3
                why = not_judged(name, lat, phase, m, out_tokens)
                if not why:
                    steps[phase].append(err(tp, t))
                else:
                    reasons.setdefault(why, f"*{len(reasons) + 1}")
                lines.append(f"{phase:<8} {name:<16} {m.get('B', 1):>3} {m['P']:>6} {t:11.3f} {tp:13.3f} "
                             f"{err(tp, t):+6.1f}" + (f" {reasons[why]}" if why else ""))
    lines += [f"({mark}: not judged: {why})" for why, mark in reasons.items()]
    for phase, errs in ((k, v) for k, v in steps.items() if v):
        lines.append(f"{phase}: median APE {statistics.median(abs(e) for e in errs):.1f} %, worst "
                     f"{max(errs, key=abs):+.1f} % ({len(errs)} cases)")
    lines += ["", "capacity (max_total_num_tokens): logged, predicted (err %)"]
    for name, pred in predicted["models"].items():
        logged = json.loads(lat_path(run, name).read_text())["server_info"]["max_total_num_tokens"]
        p = pred["capacity"]["pool_tokens"]
        lines.append(f"  {name:<18} offline Engine {logged:>12,} {p:>12,} ({err(p, logged):+.3f} %)")
    for model, pool in served_pools(run, predicted):
        lines.append(f"  {model:<18} launch_server  {pool[0]:>12,} {pool[1]:>12,} ({err(pool[1], pool[0]):+.3f} %)")
    for model, served in served_runs(predicted):
        lines += ["", f"served {model} (sglang.bench_serving, random-ids {length_text(predicted, model)}): measured, "
                  "predicted (err %)"]
        for key, pred in served.items():
            m = json.loads(stored.read_text(run / f"{model}-{key}.jsonl").splitlines()[-1])
            row = [f"  {key:<7}"]
            for label, mk, pk, q in SERVED:
                row.append(f"{label} {m[mk]:8.2f} ms: {pred[pk][q] * 1e3:8.2f} "
                           f"({err(pred[pk][q] * 1e3, m[mk]):+6.1f} %)")
            row.append(f"out tok/s {m['output_throughput']:8.1f}: {pred['throughput_tokens_per_s']:8.1f} "
                       f"({err(pred['throughput_tokens_per_s'], m['output_throughput']):+6.1f} %)")
            hit = prefix_hit(run, model, key)
            if hit is not None and pred.get("prefix_cache"):
                row.append(f"prefix hit {hit * 100:6.2f} %: {pred['prefix_cache']['hit_rate'] * 100:6.2f} % "
                           "(the server log's cached over prefilled tokens)")
            lines.append(row[0] + ("\n" + " " * 10).join(row[1:]))
    return lines + compare_rows(run, predicted, predicted if before is None else before)


def cases_of(predicted: dict) -> dict:
    """The cases file a prediction names."""
    return json.loads((HERE / predicted.get("cases", "cases-sglang.json")).read_text())


def served_runs(predicted: dict) -> list[tuple[str, dict]]:
    """(model, {run: prediction}) of each served entry the prediction has ("serve", run 3 on also "serve2")."""
    cases = cases_of(predicted)
    return [(cases[k]["model"], predicted[k]) for k in ("serve", "serve2") if predicted.get(k)]


def length_text(predicted: dict, model: str) -> str:
    """'1,024 in / 256 out' of a served model's entry."""
    s = next(c for k in ("serve", "serve2") if (c := cases_of(predicted).get(k)) and c["model"] == model)
    return f"{s['input_len']:,} in / {s['output_len']:,} out"


def served_pools(run: Path, predicted: dict) -> list[tuple[str, tuple[int, int]]]:
    """(model, (logged, predicted)) launch_server pools: each served model whose server log the run holds, against
    the prediction's served_capacity (run 3 on), else its offline model entry."""
    out = []
    for model in dict.fromkeys(m for m, _ in served_runs(predicted)):
        log = run / f"{model}-server.log"
        pred = (predicted.get("served_capacity", {}).get(model) or predicted["models"].get(model, {}).get("capacity"))
        if stored.exists(log) and pred and "pool_tokens" in pred:
            out.append((model, (pool_tokens(stored.read_text(log)), pred["pool_tokens"])))
    return out


def prefix_hit(run: Path, model: str, key: str) -> float | None:
    """The server's prefix hits over a run: its log's "Prefill batch" lines (#new-token, #cached-token: SGLang's
    radix-cache hits) from the run's mark to the next (marks.txt: epoch seconds, the log's stamps UTC to the
    second), the first (the warm-up request, before --flush-cache) left out; cached over new + cached tokens. None
    where the run has no marks or log (bench_serving's own cached_tokens field stays 0 on the generate endpoint's
    stream: run 3's prefix run logged 512 cached tokens a prefill and returned 0)."""
    import datetime as dt

    marks, log = run / f"{model}-marks.txt", run / f"{model}-server.log"
    if not marks.is_file() or not stored.exists(log):
        return None
    times = [(tag, float(t)) for tag, t in (line.split() for line in marks.read_text().splitlines())]
    window = next(((t, nxt) for (tag, t), (_, nxt) in zip(times, times[1:], strict=False) if tag == key), None)
    if window is None:
        return None
    rx = re.compile(r"^\[(\S+ \S+)\] Prefill batch, #new-seq: \d+, #new-token: (\d+), #cached-token: (\d+)")
    rows = []
    for line in stored.read_text(log).splitlines():
        if m := rx.match(line):
            stamp = dt.datetime.fromisoformat(m[1]).replace(tzinfo=dt.UTC).timestamp()
            if int(window[0]) <= stamp <= window[1]:
                rows.append((int(m[2]), int(m[3])))
    rows = rows[1:]
    return sum(c for _, c in rows) / sum(n + c for n, c in rows) if rows else None


def compare_rows(run: Path, predicted: dict, before: dict) -> list[str]:
    """The step and serving rows in validate.engines.compare's format (the trust bands' one parser): a step row
    `phase model B P measured before (err) now (err)`, the model by its catalogue name (a case's "dir" in the cases
    file the prediction names), '*' where not judged (the tiny model, whose step is SGLang's host cost the profile is
    fitted to); a served run `run  measured / now (err)` for TTFT p50, p99, TPOT p50, p99 and output tok/s, where the
    prediction has served runs."""
    lines = ["", "rows in validate.engines.compare's format (roofline.trust.engines reads them; 'before': the "
             "prediction committed before the run, 'now': this report's)",
             "phase    model              B      P   measured ms   before ms (err %)   now ms (err %)   "
             "(* not judged: the summary above says why)"]
    cases_file = json.loads((HERE / predicted.get("cases", "cases-sglang.json")).read_text())
    cases = cases_file["models"]
    for name, pred in predicted["models"].items():
        lat = json.loads(lat_path(run, name).read_text())
        model = cases.get(name, {}).get("dir", name)  # the catalogue's name (run 2's Llama-3.1-8B-mf80 is the 8B)
        for phase, measured, key in PHASES:
            for m, b, n in zip(lat[phase], before["models"][name][phase], pred[phase], strict=True):
                star = " *" if not_judged(name, lat, phase, m, cases_file["out_tokens"]) else ""
                t, tb, tn = m[measured] * 1e3, b[key] * 1e3, n[key] * 1e3
                lines.append(f"{phase:8s} {model:18s} {m.get('B', 1):4d} {m['P']:6d} {t:11.3f} {tb:10.3f} "
                             f"({err(tb, t):+6.1f}) {tn:9.3f} ({err(tn, t):+6.1f}){star}")
    for model, served in served_runs(predicted):  # none in a run without served runs (--steps-only)
        lines += ["", f"serving ({model}, sglang.bench_serving, random-ids {length_text(predicted, model)}): "
                  "measured / predicted (err %)", "run       TTFT p50 ms              TTFT p99 ms              "
                  "TPOT p50 ms              TPOT p99 ms              output tok/s"]
        for key, pred in served.items():
            m = json.loads(stored.read_text(run / f"{model}-{key}.jsonl").splitlines()[-1])
            cells = [f"{m[mk]:8.2f} / {pred[pk][q] * 1e3:8.2f} ({err(pred[pk][q] * 1e3, m[mk]):+6.1f})"
                     for _label, mk, pk, q in SERVED]
            tput = pred["throughput_tokens_per_s"]
            cells.append(f"{m['output_throughput']:8.1f} / {tput:8.1f} ({err(tput, m['output_throughput']):+6.1f})")
            lines.append(f"{key:8s}  " + "  ".join(cells))
    return lines


def before_of(predicted: Path) -> Path:
    """The prediction committed before the run beside a -now.json (h200-sglang-run1-now.json ->
    h200-sglang-run1-predicted.json) where it exists, else `predicted` itself."""
    beside = predicted.with_name(predicted.name.removesuffix("-now.json") + "-predicted.json")
    return beside if predicted.name.endswith("-now.json") and beside.is_file() else predicted


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("run", type=Path, nargs="?", default=RUN)
    p.add_argument("--predicted", type=Path, default=ROOT / "h200-sglang-run1-predicted.json")
    p.add_argument("--before", type=Path, help="the prediction committed before the run (default: before_of)")
    p.add_argument("--out", type=Path, default=ROOT / "nvidia-h200-sglang-2026-11-30-run1-summary.txt")
    a = p.parse_args()
    before = json.loads((a.before or before_of(a.predicted)).read_text())
    text = "\n".join(report(a.run, json.loads(a.predicted.read_text()), before)) + "\n"
    a.out.write_text(text)
    print(text, end="")


if __name__ == "__main__":
    main()
