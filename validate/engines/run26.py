"""Runs 26 and 27 (two H200 leases, vLLM 0.24.0): where a served TTFT goes, read inside the processes.

    python -m validate.engines.run26 report     (every figure of the note, from the committed results; ~20 s)
    python -m validate.engines.run26 compare N  (run N's served runs against roofline as it stands: the serving block
                                                 of a compare report, nvidia-h200-vllm-2026-12-02-runN-compare.txt)
    python -m validate.engines.run26 repeat     (the measurement's own spread, the same served runs on three leases:
                                                 nvidia-h200-vllm-2026-12-02-run26-27-30-repeat-report.txt, which
                                                 roofline.trust.engines.repeat_spreads reads)

Results: validate/results/engines/nvidia-h200-vllm-2026-12-02-run26/ (probe/ and serve/ are run 26's two calls,
probe27/ and serve27/ run 27's, k30/ and serve30/ run 30's (session 39: K1 by run30.sh, then run26b.sh); kits
validate/engines/run26.sh, run26b.sh; predictions h200-vllm-run26-predicted.json, h200-vllm-run27-predicted.json and
h200-vllm-run30-predicted.json, each committed before its run). Each folder's lag/ holds loop_lag.py's windows of
every Python process (the API server, the engine core, the clients).

- probe (run 24's design): tiny-llama served, N background streams, a probe of 20 prompts of 1,500 tokens. The probe's
  TTFT excess over N = 0's, less its engine prefill's growth, is the API side's (api_loop.run24_api_excess_s); beside
  it the API server's GIL wait and loop hop while the probe ran.
- serve (run 1's settings): Llama-3.1-8B at Poisson rates 12 and 24 and one --max-concurrency 32 client. A TTFT's
  mean splits by /metrics deltas over each run into the engine's (queue + prefill: scheduled to first token, engine
  stamps), the API server's own TTFT (vllm:time_to_first_token, front-end stamps) less the engine's, and the client's
  TTFT less the API server's (the HTTP request in, the first chunk out).
"""

from __future__ import annotations

import json
import os
import sys
from collections import Counter
from pathlib import Path

from validate import stored
from validate.engines import api_loop, loop_lag

ROOT = Path(__file__).resolve().parents[2]
RESULTS = ROOT / "validate/results/engines/nvidia-h200-vllm-2026-12-02-run26"
PREDICTED = {26: ROOT / "validate/results/engines/h200-vllm-run26-predicted.json",
             27: ROOT / "validate/results/engines/h200-vllm-run27-predicted.json",
             30: ROOT / "validate/results/engines/h200-vllm-run30-predicted.json"}
# run 30 (session 39, a third lease): K1 (run30.sh) in k30/, no probe; its served runs in serve30/
FOLDERS = {26: ("probe", "serve"), 27: ("probe27", "serve27"), 30: ("k30", "serve30")}
LEASES = (26, 27, 30)  # the same served settings on three leases
MODEL = "Llama-3.1-8B"
RATES = ("rate12", "rate24")


# ---- the probe (tiny-llama) ----

def _stamp(path: Path) -> float:
    return float(path.read_text().split()[0])


def probe_point(folder: Path, n: int = 64) -> dict:
    """The probe at N streams: its TTFT excess over N = 0's, the API side's part (lo, hi), and the API server's
    monitors over the windows while the probe's client ran its requests (its loop's windows, last one back by the
    run's duration)."""
    p0, p = api_loop.run24_point(0, folder), api_loop.run24_point(n, folder)
    excess = p["ttft_p50_s"] - p0["ttft_p50_s"]
    api_lo = excess - (p["prefill_hi_s"] - p0["prefill_hi_s"])
    api_hi = excess - (p["prefill_lo_s"] - p0["prefill_hi_s"])
    before = _stamp(folder / f"a{n}-before-metrics.txt")
    procs = [loop_lag.read(f) for f in sorted((folder / "lag").glob("lag-*.jsonl"))]
    api = next(ws for h, ws in procs if loop_lag.role(h) == "api")
    probe = [ws for h, ws in procs if loop_lag.role(h) == "client" and h["t"] > before]
    end = max(w["t1"] for w in probe[0] if w["hop"]["n"])
    duration = json.loads((folder / f"p{n}.json").read_text())["duration"]
    start = end - duration - 1.0
    during = loop_lag.merged(api, start - 0.01, end + 1.01)
    bg = loop_lag.merged(api, start - 7.0, start)
    return {"step_period_s": p["step_period_s"], "ttft0_s": p0["ttft_p50_s"], "ttft_s": p["ttft_p50_s"],
            "excess_s": excess, "api_side_s": (api_lo, api_hi), "during": during, "background": bg}


def gil_holders(folder: Path) -> dict[str, float]:
    """py-spy --gil at N 64 (run 27): each thread's share of the samples that held the GIL."""
    path = folder / "pyspy-64-gil.txt"
    if not path.exists():
        return {}
    threads: Counter = Counter()
    for line in path.read_text().splitlines():
        stack, _, n = line.rpartition(" ")
        threads[stack.split(";")[0].split(": ", 1)[-1]] += int(n)
    total = sum(threads.values())
    return {k: v / total for k, v in threads.most_common()}


# ---- the served runs (Llama-3.1-8B) ----

def ttft_split(folder: Path, run: str) -> dict[str, float]:
    """Means over one run (seconds): the client's TTFT, the API server's own, the engine's queue + prefill, the mean
    inter-token latency; from the client's result and /metrics before and after the run."""
    m0 = api_loop._metrics(folder / f"{MODEL}-{run}-before-metrics.txt")
    m1 = api_loop._metrics(folder / f"{MODEL}-{run}-after-metrics.txt")

    def mean(name: str) -> float:
        k = f"vllm:{name}"
        return (m1[f"{k}_sum"] - m0.get(f"{k}_sum", 0.0)) / (m1[f"{k}_count"] - m0.get(f"{k}_count", 0.0))

    client = json.loads(stored.read_text(folder / f"{MODEL}-{run}.json"))
    return {"client_s": client["mean_ttft_ms"] / 1e3, "api_s": mean("time_to_first_token_seconds"),
            "engine_s": mean("request_queue_time_seconds") + mean("request_prefill_time_seconds"),
            "itl_s": mean("inter_token_latency_seconds")}


def serve_lag(folder: Path, run: str) -> dict:
    """The API server's monitors over the run's serving windows (those with its CPU above 10 %), from the run's mark
    to the next (serve.sh's marks: RUN, RUN-end for a Poisson run, end after the last)."""
    marks = [line.split() for line in (folder / f"{MODEL}-marks.txt").read_text().splitlines()]
    i = [m[0] for m in marks].index(run)
    t0, t1 = float(marks[i][1]), float(marks[i + 1][1])
    procs = [loop_lag.read(f) for f in sorted((folder / "lag").glob("lag-*.jsonl"))]
    api = next(ws for h, ws in procs if loop_lag.role(h) == "api")
    busy = [w for w in api if w["t0"] >= t0 and w["t1"] <= t1 and w["cpu_s"] > 0.1 * (w["t1"] - w["t0"])]
    return loop_lag.merged(busy)


def serve_rows(folder: Path) -> list[dict]:
    """compare.compare_serve of the run (`roofline simulate --engine vllm` at the client's recorded send times) under
    cases-run26.json, in a process of its own: compare.py reads its cases file at import, so this process's own
    import (under another cases file, or none) is never the one asked."""
    import subprocess

    code = ("import json, sys; from pathlib import Path; from validate.engines.compare import compare_serve; "
            "print(json.dumps(compare_serve(Path(sys.argv[1]), 'H200')))")
    env = {**os.environ, "ROOFLINE_ENGINE_CASES": "cases-run26.json"}
    out = subprocess.run([sys.executable, "-c", code, str(folder)], env=env, capture_output=True, text=True,
                         check=True, cwd=ROOT).stdout
    return json.loads(out)


# ---- the hypotheses ----

def _within(x: float, lo: float, hi: float) -> bool:
    return lo <= x <= hi


def judge26() -> list[tuple[str, str, bool]]:
    """Run 26's hypotheses (h200-vllm-run26-predicted.json): (name, the measured figure, held)."""
    probe, serve = (RESULTS / f for f in FOLDERS[26])
    pt = probe_point(probe)
    during = pt["during"]
    s12, s24 = ttft_split(serve, "rate12"), ttft_split(serve, "rate24")
    lag = {r: serve_lag(serve, r) for r in ("rate12", "rate24", "conc32")}
    path12, path24 = s12["client_s"] - s12["engine_s"], s24["client_s"] - s24["engine_s"]
    client = {r: json.loads(stored.read_text(serve / f"{MODEL}-{r}.json")) for r in RATES}
    out = [("H1", f"hop mean {during['hop'].mean() * 1e3:.2f} ms in [1.2, 4.7]",
            _within(during["hop"].mean(), 1.2e-3, 4.7e-3)),
           ("H2", f"API server CPU {during['cpu_s'] / during['wall_s']:.2f} >= 0.85",
            during["cpu_s"] / during["wall_s"] >= 0.85),
           ("H3", f"probe excess {pt['excess_s'] * 1e3:.1f} ms in [60, 111]", _within(pt["excess_s"], 0.060, 0.111)),
           ("H4", f"hop mean rate 24 {lag['rate24']['hop'].mean() * 1e3:.2f} ms in [0.9, 3.7]; rate 12 "
                  f"{lag['rate12']['hop'].mean() * 1e3:.2f}, conc32 {lag['conc32']['hop'].mean() * 1e3:.2f} < 0.6",
            _within(lag["rate24"]["hop"].mean(), 0.9e-3, 3.7e-3) and lag["rate12"]["hop"].mean() < 0.6e-3
            and lag["conc32"]["hop"].mean() < 0.6e-3),
           ("H5", f"client TTFT less engine: rate 24 {path24 * 1e3:.1f} - rate 12 {path12 * 1e3:.1f} = "
                  f"{(path24 - path12) * 1e3:.1f} ms in [5, 20]", _within(path24 - path12, 5e-3, 20e-3)),
           ("H6", f"TTFT p50 rate 12 {client['rate12']['median_ttft_ms']:.1f} in [60, 85], rate 24 "
                  f"{client['rate24']['median_ttft_ms']:.1f} in [90, 170]; TPOT p50 "
                  f"{client['rate12']['median_tpot_ms']:.2f} / {client['rate24']['median_tpot_ms']:.2f} within 10 % of "
                  "8.9 / 20.7",
            _within(client["rate12"]["median_ttft_ms"], 60, 85) and _within(client["rate24"]["median_ttft_ms"], 90, 170)
            and abs(client["rate12"]["median_tpot_ms"] / 8.9 - 1) <= 0.10
            and abs(client["rate24"]["median_tpot_ms"] / 20.7 - 1) <= 0.10)]
    return out


def judge27() -> list[tuple[str, str, bool]]:
    """Run 27's hypotheses (h200-vllm-run27-predicted.json), against run 26 where they name it."""
    probe, serve = (RESULTS / f for f in FOLDERS[27])
    probe26, serve26 = (RESULTS / f for f in FOLDERS[26])
    pt = probe_point(probe)
    d = pt["during"]
    holders = gil_holders(probe)
    excess26 = probe_point(probe26)["excess_s"]
    c = {r: json.loads(stored.read_text(serve / f"{MODEL}-{r}.json")) for r in RATES}
    c26 = {r: json.loads(stored.read_text(serve26 / f"{MODEL}-{r}.json")) for r in RATES}
    sp = {r: ttft_split(serve, r) for r in RATES}
    sp26 = {r: ttft_split(serve26, r) for r in RATES}
    rows = serve_rows(serve)

    def err(row: dict, key: str) -> float:
        return row[key]["predicted_s"] / row[key]["measured_s"] - 1

    r4 = [(c[r]["median_ttft_ms"] / c26[r]["median_ttft_ms"] - 1, c[r]["median_tpot_ms"] / c26[r]["median_tpot_ms"] - 1,
           c[r]["output_throughput"] / c26[r]["output_throughput"] - 1) for r in RATES]
    r5 = [((sp[r]["api_s"] - sp[r]["engine_s"]) / sp[r]["itl_s"],
           (sp[r]["client_s"] - sp[r]["api_s"]) - (sp26[r]["client_s"] - sp26[r]["api_s"])) for r in RATES]
    r6 = [(err(row, "ttft_p50"), err(row, "tpot_p50"),
           row["output_tokens_per_s"]["predicted"] / row["output_tokens_per_s"]["measured"] - 1) for row in rows]
    return [
        ("R1", f"GIL wait mean {d['thread'].mean() * 1e3:.1f} ms >= 4 and >= 3x the hop mean "
               f"{d['hop'].mean() * 1e3:.2f} ms",
         d["thread"].mean() >= 4e-3 and d["thread"].mean() >= 3 * d["hop"].mean()),
        ("R2", "GIL held by " + ", ".join(f"{k} {v * 100:.1f} %" for k, v in holders.items()) + " (main >= 60 %)",
         holders.get("MainThread", 0.0) >= 0.60),
        ("R3", f"probe excess {pt['excess_s'] * 1e3:.1f} ms within 30 % of run 26's {excess26 * 1e3:.1f}",
         abs(pt["excess_s"] / excess26 - 1) <= 0.30),
        ("R4", "vs run 26, TTFT p50 / TPOT p50 / tok/s: " + "; ".join(
            f"{r} {a * 100:+.1f} / {b * 100:+.1f} / {t * 100:+.1f} %" for r, (a, b, t) in zip(RATES, r4, strict=True)),
         all(abs(a) <= 0.15 and abs(b) <= 0.05 and abs(t) <= 0.02 for a, b, t in r4)),
        ("R5", "API server's TTFT less the engine's in ITLs, client's less the API server's vs run 26: " + "; ".join(
            f"{r} {a:.2f} ITL, {b * 1e3:+.1f} ms" for r, (a, b) in zip(RATES, r5, strict=True)),
         all(_within(a, 1.0, 1.6) and abs(b) <= 3e-3 for a, b in r5)),
        ("R6", "model vs run 27b, TTFT p50 / TPOT p50 / tok/s: " + "; ".join(
            f"{row['run']} {a * 100:+.1f} / {b * 100:+.1f} / {t * 100:+.1f} %"
            for row, (a, b, t) in zip(rows, r6, strict=True)),
         all(abs(a) <= 0.12 and abs(b) <= 0.06 and abs(t) <= 0.01 for a, b, t in r6))]


# ---- the report ----

def _ms(s: float) -> str:
    return f"{s * 1e3:.2f}"


def _hist(h: loop_lag.Hist) -> str:
    return f"mean {_ms(h.mean())} p99 {_ms(h.quantile(0.99))} max {_ms(h.max)} ms"


def report() -> str:
    lines = ["Runs 26 / 27 (vLLM 0.24.0, one H200 each lease): python -m validate.engines.run26 report", "",
             "probe (tiny-llama, N 64 background streams; run 24 read TTFT 18.1 -> 103.6 ms, API side 67.8..72.3):"]
    for run, (probe, _) in FOLDERS.items():
        pt = probe_point(RESULTS / probe)
        lo, hi = pt["api_side_s"]
        lines.append(f"  run {run}: T {_ms(pt['step_period_s'])} ms; TTFT p50 N 0 {_ms(pt['ttft0_s'])} -> N 64 "
                     f"{_ms(pt['ttft_s'])} ms, excess {_ms(pt['excess_s'])}, API side {_ms(lo)}..{_ms(hi)} ms")
        for name in ("during", "background"):
            m = pt[name]
            lines.append(f"    API server, {name:10s}: CPU {m['cpu_s'] / m['wall_s']:.2f} over {m['wall_s']:.1f} s; "
                         f"GIL wait {_hist(m['thread'])}; hop {_hist(m['hop'])}")
    holders = gil_holders(RESULTS / FOLDERS[27][0])
    lines.append("  run 27, py-spy --gil at N 64 (background only): " +
                 ", ".join(f"{k} {v * 100:.1f} %" for k, v in holders.items()))
    lines += ["", "serve (Llama-3.1-8B, run 1's settings): TTFT means split, ms: client = (client - API server) + "
                  "(API server - engine) + engine",
              "  run  rate    client   client-API   API-engine (in ITLs)   engine   ITL    "
              "API server CPU, GIL wait, hop"]
    for run, (_, serve) in FOLDERS.items():
        for r in RATES:
            s, lag = ttft_split(RESULTS / serve, r), serve_lag(RESULTS / serve, r)
            lines.append(f"  {run}   {r:7s} {_ms(s['client_s']):>7s} {_ms(s['client_s'] - s['api_s']):>10s}   "
                         f"{_ms(s['api_s'] - s['engine_s']):>7s} ({(s['api_s'] - s['engine_s']) / s['itl_s']:.2f})"
                         f"          {_ms(s['engine_s']):>7s} {_ms(s['itl_s']):>6s}   "
                         f"{lag['cpu_s'] / lag['wall_s']:.2f}, {_ms(lag['thread'].mean())}, {_ms(lag['hop'].mean())}")
    from validate.engines import compare

    for run, (_, serve) in FOLDERS.items():
        lines += ["", f"run {run} " + compare.serve_report(serve_rows(RESULTS / serve))]
    for run, judge in ((26, judge26), (27, judge27)):
        lines += ["", f"run {run}'s hypotheses ({PREDICTED[run].name}):"]
        lines += [f"  {name}: {'held' if ok else 'REFUTED'}: {text}" for name, text, ok in judge()]
    return "\n".join(lines) + "\n"


def repeat_spread() -> dict[str, float]:
    """Runs 26, 27 and 30's served runs, the same settings on three leases: per figure the largest lease's over the
    smallest's less one, the largest over the runs (rate 12, rate 24, conc32)."""
    keys = {"ttft_p50": "median_ttft_ms", "ttft_p99": "p99_ttft_ms", "tpot_p50": "median_tpot_ms",
            "tpot_p99": "p99_tpot_ms", "throughput": "output_throughput"}
    spread = {}
    for k, field in keys.items():
        diffs = []
        for r in (*RATES, "conc32"):
            values = [json.loads(stored.read_text(RESULTS / FOLDERS[run][1] / f"{MODEL}-{r}.json"))[field]
                      for run in LEASES]
            diffs.append(max(values) / min(values) - 1)
        spread[k] = max(diffs)
    return spread


def compare_text(run: int) -> str:
    """Run `run`'s served runs (FOLDERS) against `roofline simulate --engine vllm` as it stands, as compare.py writes
    a report's serving block (roofline.trust reads it)."""
    from validate.engines import compare

    rows = serve_rows(RESULTS / FOLDERS[run][1])
    return (f"run {run} (validate/engines/run26b.sh; python -m validate.engines.run26 compare {run})\n\n"
            + compare.serve_report(rows) + "\n\n" + compare.slo_report(compare.slo_rates(rows)) + "\n")


def spread_line() -> str:
    return (f"lease-to-lease spread ({len(LEASES)} leases; largest over smallest less one, the largest over rate 12, "
            "rate 24, conc32): ") + ", ".join(
        f"{k} {v * 100:.1f} %" for k, v in repeat_spread().items())


def repeat_text() -> str:
    """Each served figure on every lease, then the spread line."""
    keys = ("median_ttft_ms", "p99_ttft_ms", "median_tpot_ms", "p99_tpot_ms", "output_throughput")
    lines = ["The same served runs on three H200 leases (runs 26, 27 and 30: validate/engines/run26b.sh, vLLM 0.24.0, "
             "Llama-3.1-8B; python -m validate.engines.run26 repeat)",
             "run      " + "  ".join(f"{k:>26s}" for k in keys) + "   (run 26 / run 27 / run 30)"]
    for r in (*RATES, "conc32"):
        rows = [json.loads(stored.read_text(RESULTS / FOLDERS[run][1] / f"{MODEL}-{r}.json")) for run in LEASES]
        lines.append(f"{r:8s} " + "  ".join(" / ".join(f"{d[k]:7.1f}" for d in rows) for k in keys))
    return "\n".join(lines) + "\n" + spread_line() + "\n"


if __name__ == "__main__":
    if sys.argv[1:] == ["repeat"]:
        print(repeat_text(), end="")
    elif len(sys.argv) == 3 and sys.argv[1] == "compare" and sys.argv[2] in ("26", "27", "30"):
        print(compare_text(int(sys.argv[2])), end="")
    elif sys.argv[1:] == ["report"]:
        print(report(), end="")
        print(spread_line())
    else:
        sys.exit(__doc__)
