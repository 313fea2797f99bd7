"""llama-server's host prompt cache (run 6, llamacpp_run6.sh): the save of an idle slot's state before a new task.

llama-server (0c1e570, tools/server: --cache-ram, 8192 MiB by default since ggml-org/llama.cpp PR #16391) keeps the
state of finished requests in host memory: when a task starts, every idle slot whose tokens are not yet cached is saved
("saving idle slot to prompt cache", then "prompt_save: - saving prompt with length L, total state size = X MiB"), the
slot's KV (its prompt and output tokens) copied to the host while the server's loop waits; "update: - cache state: ..."
follows when the copy is done. Its log times both lines (-lv 4), so each save's seconds and bytes are read from it.

  python -m validate.engines.llamacpp_cache saves LOG..                       every save: tokens, MiB, seconds
  python -m validate.engines.llamacpp_cache predict OUT_JSON [--now]          before run 6 (module docstring of run 6);
                                                                              --now: the model as it stands, with its
                                                                              save law (timing 18) and --cache-ram 0
  python -m validate.engines.llamacpp_cache compare RESDIR --predicted JSON   run 6 against the prediction
  python -m validate.engines.llamacpp_cache now7 OUT_JSON                     run 7's c4 on the model as it stands
  python -m validate.engines.llamacpp_cache compare7 RESDIR --predicted JSON  run 7 against a prediction

predict: the saves at hypothesis H1, seconds = bytes / the rate run 1's own log shows (its saves of 639-token states:
nvidia-h200-llamacpp-2026-11-30-run1/serve.log.gz), for each save case of llamacpp_cases_run6.json (the previous
request's prompt + output - 1 tokens x the KV type's bytes a token); and run 1's served runs with --cache-ram 0 on the
model as it stands (no save in it: what the server does with the cache off).
"""

from __future__ import annotations

import argparse
import datetime as dt
import gzip
import json
import re
import statistics
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
RUN1 = Path("validate/results/engines/nvidia-h200-llamacpp-2026-11-30-run1")
CASES = json.loads((HERE / "llamacpp_cases_run6.json").read_text())
MIB = 1 << 20
# Llama-3.1-8B's KV a token: 32 layers x K and V x 8 heads x 128; f16 2 bytes, q8_0 34 bytes a block of 32
KV_BYTES = {"f16": 32 * 2 * 8 * 128 * 2, "q8_0": 32 * 2 * 8 * 128 * 34 // 32}
STAMP = re.compile(r"^(\d+)\.(\d+)\.(\d+)\.(\d+) ")
SAVE = re.compile(r"prompt_save: +- saving prompt with length (\d+), total state size = ([\d.]+) MiB")


def _seconds(line: str) -> float | None:
    """A log line's time: llama.cpp's common_log prefix, minutes.seconds.milliseconds.microseconds."""
    m = STAMP.match(line)
    if not m:
        return None
    mi, s, ms, us = map(int, m.groups())
    return mi * 60 + s + ms / 1e3 + us / 1e6


def saves(text: str) -> list[dict]:
    """Each save in a llama-server log: its tokens, MiB (the state's size as the server prints it) and seconds (from
    its prompt_save line to the cache's next 'cache state' line); a state already cached ("prompt is already in the
    cache, skipping") is no save."""
    lines = text.splitlines()
    out = []
    for i, line in enumerate(lines):
        m = SAVE.search(line)
        if not m:
            continue
        if any("already in the cache" in nxt for nxt in lines[i + 1:i + 3]):
            continue  # a state saved before: nothing copied
        t0 = _seconds(line)
        for nxt in lines[i + 1:i + 40]:
            if "cache state:" in nxt:
                t1 = _seconds(nxt)
                if t0 is not None and t1 is not None:
                    out.append({"tokens": int(m.group(1)), "mib": float(m.group(2)), "s": t1 - t0})
                break
    return out


def _read(path: Path) -> str:
    opener = gzip.open if path.suffix == ".gz" else open
    with opener(path, "rt", errors="replace") as f:
        return f.read()


def law(rows: list[dict]) -> dict:
    """seconds = latency + bytes / rate by least squares on the seconds (a rate alone where one size was seen)."""
    b = np.array([r["mib"] * MIB for r in rows])
    t = np.array([r["s"] for r in rows])
    if len(set(np.round(b))) < 2:
        return {"latency_s": 0.0, "bytes_per_s": float(np.median(b / t)), "n": len(rows)}
    (lat, inv), *_ = np.linalg.lstsq(np.stack([np.ones_like(b), b], axis=1), t, rcond=None)
    return {"latency_s": float(lat), "bytes_per_s": float(1 / inv), "n": len(rows),
            "residuals": [round(float((lat + x * inv) / y - 1), 4) for x, y in zip(b, t, strict=True)]}


def save_cases() -> list[dict]:
    """Run 6's saves: each request after the first saves its predecessor's prompt + output - 1 tokens (the last
    sampled token is never decoded into the KV)."""
    s = CASES["save"]
    out = []
    for kv in s["kv_types"]:
        for i in range(1, len(s["prompts"])):
            tokens = s["prompts"][i - 1] + s["output"] - 1
            out.append({"kv": kv, "case": i + 1, "tokens": tokens, "bytes": tokens * KV_BYTES[kv]})
    return out


def predict(out: Path, now: bool = False) -> None:
    from validate.engines import llamacpp_predict as lp
    from validate.engines.cases import checkout_sha

    h1 = law(saves(_read(RUN1 / "serve.log.gz")))
    cases = [{**c, "s": c["bytes"] / h1["bytes_per_s"] + h1["latency_s"]} for c in save_cases()]
    lp.CASES = {**lp.CASES, "serve": CASES["serve"]}
    if now:  # the profile's save law (timing mechanism 18, fit on run 6's saves), the served runs with the cache off
        from roofline.engines.timing import timing

        t = timing("llamacpp")
        cases = [{**c, "s": t.cache_save_s + c["bytes"] * t.cache_save_byte_s} for c in save_cases()]
    about = ("the model now (timing mechanism 18's save law, fit on this run's saves: in-sample for them; the served "
             "runs with --cache-ram 0, judged)" if now else
             "written before the run: the saves at run 1's own save rate (H1: seconds = bytes / rate), run 1's served "
             "runs with --cache-ram 0 on the model as it stands (which has no save)")
    doc = {"about": f"roofline's prediction of llama.cpp run 6 (llamacpp_cases_run6.json), {about}",
           "hardware": "H200", "git_sha": checkout_sha(), "date": dt.date.today().isoformat(),
           "h1_law_from_run1": h1, "saves": cases,
           "served": lp.served("H200", ("--cache-ram", "0") if now else ())}
    out.write_text(json.dumps(doc, indent=1) + "\n")


def predict_run7_now(out: Path) -> None:
    """Run 7's c4, the cache off and on, on the model as it stands (its "now" block: the prediction committed before the
    run is h200-llamacpp-run7-predicted.json)."""
    from validate.engines import llamacpp_predict as lp
    from validate.engines.cases import checkout_sha

    serve = json.loads((HERE / "llamacpp_cases_run7.json").read_text())["serve"]
    lp.CASES = {**lp.CASES, "serve": serve}
    doc = {"about": "roofline's run 7 (llamacpp_cases_run7.json) on the model as it stands, its served c4 with the "
                    "prompt cache off and on", "hardware": "H200", "git_sha": checkout_sha(),
           "date": dt.date.today().isoformat(),
           "served": {v: lp.served("H200", tuple(flags.split())) for v, flags in serve["variants"]}}
    out.write_text(json.dumps(doc, indent=1) + "\n")


def compare(resdir: Path, predicted: Path) -> str:
    from validate.engines.llamacpp_logs import served_summary

    pred = json.loads(predicted.read_text())
    lines = [f"llama.cpp run 6 ({resdir}): the prompt cache's saves and run 1's served runs with --cache-ram 0",
             f"predicted before the run: {predicted.name} ({pred['git_sha'][:7]})", ""]
    measured = {}
    for kv in CASES["save"]["kv_types"]:
        logs = [f for f in (resdir / f"save-{kv}.log", resdir / f"save-{kv}.log.gz") if f.exists()]
        measured[kv] = saves(_read(logs[0])) if logs else []
    all_rows = [r for rows in measured.values() for r in rows]
    if all_rows:
        fit = law(all_rows)
        h1 = pred["h1_law_from_run1"]["bytes_per_s"] / 1e9
        lines.append(f"save law over run 6's {fit['n']} saves: {fit['latency_s'] * 1e3:.2f} ms + bytes / "
                     f"{fit['bytes_per_s'] / 1e9:.3f} GB/s (H1, run 1's: {h1:.3f} GB/s)")
    lines.append("save  kv     tokens      MiB   measured ms   predicted ms   err %")
    for c in pred["saves"]:
        got = [r for r in measured.get(c["kv"], []) if r["tokens"] == c["tokens"]]
        if not got:
            lines.append(f"{c['case']:4d}  {c['kv']:5s} {c['tokens']:7d}        -             -   {c['s'] * 1e3:12.1f}")
            continue
        m = statistics.median(r["s"] for r in got)
        lines.append(f"{c['case']:4d}  {c['kv']:5s} {c['tokens']:7d} {got[0]['mib']:8.2f} {m * 1e3:12.1f}"
                     f" {c['s'] * 1e3:14.1f} {100 * (c['s'] / m - 1):+7.1f}")
    lines += ["", "served, --cache-ram 0 (measured / predicted, err %)"]
    for name, p in pred["served"].items():
        f = resdir / f"serve-{name}.json"
        if not f.exists():
            continue
        row = _served_row(f"{name:4s}", served_summary(json.loads(f.read_text())), p)
        lines.append(row)
    return "\n".join(lines)


def _served_row(label: str, s: dict, p: dict) -> str:
    """One served run's TTFT / TPOT p50 and output tok/s, measured (a served_summary) / predicted (simulate's JSON)
    with the model's signed error."""
    row = [label]
    for key in ("ttft_s", "tpot_s"):
        if key in s and key in p:
            pv = p[key]["p50"] if isinstance(p[key], dict) else p[key]
            mv = s[key]["p50"]
            row.append(f"{key} p50 {mv * 1e3:8.1f} / {pv * 1e3:8.1f} ({100 * (pv / mv - 1):+6.1f})")
    if "throughput_tokens_per_s" in p:
        pt, mt = p["throughput_tokens_per_s"], s["throughput_tokens_per_s"]
        row.append(f"out tok/s {mt:7.1f} / {pt:7.1f} ({100 * (pt / mt - 1):+6.1f})")
    return "   ".join(row)


def compare_run7(resdir: Path, predicted: Path) -> str:
    """Run 7 (llamacpp_run7.sh): c4 on a fresh traced server with the prompt cache off and on, measured / predicted
    (TTFT, TPOT p50, output tok/s), and each variant's median decode step on the kernel timeline (trace-V-b4.json)."""
    from validate.engines.llamacpp_logs import served_summary

    pred = json.loads(predicted.read_text())
    lines = [f"llama.cpp run 7 ({resdir}): run 1's c4 on a fresh traced server, the prompt cache off and on",
             f"predicted before the run: {predicted.name} ({pred['git_sha'][:7]}); measured / predicted (err %)"]
    for v, runs in pred["served"].items():
        s = served_summary(json.loads(_read(resdir / f"serve-{v}-c4.json.gz")))
        lines.append(_served_row(f"cache {v:3s} c4", s, runs["c4"]))
    lines.append("-- the decode steps of 4 outputs on the kernel timeline (medians; the tracer's own host cost "
                 "included)")
    for v in ("off", "on"):
        g = json.loads((resdir / f"trace-{v}-b4.json").read_text())["groups"][0]
        m = g["median"]
        lines.append(f"cache {v:3s}: {g['steps']} steps of {g['kernels_per_step']} kernels: wall "
                     f"{m['wall_us']:.0f} us, GPU busy {m['busy_us']:.0f}, before the first kernel {m['lead_us']:.0f}")
    return "\n".join(lines)


def main() -> None:
    p = argparse.ArgumentParser(prog="llamacpp_cache", description=__doc__.splitlines()[0])
    sub = p.add_subparsers(dest="cmd", required=True)
    s = sub.add_parser("saves")
    s.add_argument("logs", nargs="+", type=Path)
    s = sub.add_parser("predict")
    s.add_argument("out", type=Path)
    s.add_argument("--now", action="store_true", help="the model as it stands (module docstring)")
    s = sub.add_parser("compare")
    s.add_argument("resdir", type=Path)
    s.add_argument("--predicted", type=Path, required=True)
    s = sub.add_parser("now7", help="run 7's served c4 on the model as it stands")
    s.add_argument("out", type=Path)
    s = sub.add_parser("compare7", help="run 7 against a prediction")
    s.add_argument("resdir", type=Path)
    s.add_argument("--predicted", type=Path, required=True)
    a = p.parse_args()
    if a.cmd == "saves":
        for log in a.logs:
            rows = saves(_read(log))
            print(log, json.dumps(law(rows)) if rows else "no saves")
            for r in rows:
                print(f"  {r['tokens']:7d} tokens {r['mib']:9.3f} MiB {r['s'] * 1e3:8.2f} ms")
    elif a.cmd == "predict":
        predict(a.out, a.now)
    elif a.cmd == "now7":
        predict_run7_now(a.out)
    elif a.cmd == "compare7":
        print(compare_run7(a.resdir, a.predicted))
    else:
        print(compare(a.resdir, a.predicted))


if __name__ == "__main__":
    main()
