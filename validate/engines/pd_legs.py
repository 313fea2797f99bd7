"""Where a disaggregated request's TTFT goes, term by term: the proxy's legs (pd_proxy.py), the decode server's own
figures, and roofline's replay of the same arrivals with each term of its decode leg.

python -m validate.engines.pd_legs RUN [--cases FILE] [--json OUT]   (RUN: run12 | run13 | run14, whose results are
nvidia-h200x2-vllm-2026-11-29-RUN and cases cases-RUN.json, or a results folder with --cases)

Per rate, means over the requests whose decode leg is under HANDSHAKE_S (the pair's first requests wait ~2.2 s for
vLLM's handshake, no term of the model):
- measured: the prefill leg and the decode leg (the proxy's instants); X, NIXL's xferDuration from the post to the
  poll in a later step that found the READs done (vLLM's "KV Transfer metrics" lines of the decode log, ~10 s
  windows, those inside the rate's span weighted by their transfers);
- model (the Python loop, its instants recorded): the prefill leg; the decode leg = api (the decode server's API
  path, EngineOverheads.api_request_s) + to_post (from its arrival at the engine to the schedule that posts its
  READs) + X (to the schedule that observes them done) + O (to the schedule that runs its last prompt token) + P
  (to its first token, emitted).
Pooled over the run (the servers' /metrics are read once, after the last rate), from vLLM's own histograms' sums:
TTFT (frontend, from before tokenization to the first token's output processed), queue (engine core, from the add to
the schedule that runs the last token: to_post + X + O) and prefill time (that schedule to the token: P); TTFT less
the two is the API path inside vLLM, the proxy's leg less TTFT the part outside it.
Nothing here feeds the model.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import os
import re
from datetime import UTC, datetime
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[2] / "validate" / "results" / "engines"
HANDSHAKE_S = 0.25
WINDOW = re.compile(r"INFO (\d\d-\d\d \d\d:\d\d:\d\d) \[metrics\.py:\d+\] KV Transfer metrics: Num successful "
                    r"transfers=(\d+), Avg xfer time \(ms\)=([\d.]+)")


def replay(folder: Path, cases: str) -> list[dict]:
    """Per disaggregated rate of the run: the model's per-request terms (seconds) and the measured legs."""
    os.environ["ROOFLINE_ENGINE_CASES"] = cases
    import roofline.serving.disagg as disagg
    import roofline.serving.scheduler as scheduler
    import validate.engines.predict as predict
    from roofline.cli import main as cli
    from roofline.serving.remote import OBSERVED, RemoteLoads

    marks: dict[str, dict[int, float]] = {"post": {}, "observe": {}, "report": {}, "promote": {}}

    class Recorded(RemoteLoads):
        """RemoteLoads that keeps each load's instants (serving.remote's semantics unchanged)."""

        def post(self, i, t_sched):
            super().post(i, t_sched)
            marks["post"][i] = t_sched

        def observe(self, t_sched):
            for i in self.ids:
                if self.report_s[i] == np.inf and self.ready_s[i] <= t_sched:
                    marks["observe"][i] = t_sched
            super().observe(t_sched)

        def spin(self, t):
            for i in self.ids:
                if self.report_s[i] == np.inf and self.ready_s[i] <= t:
                    marks["observe"][i] = marks["report"][i] = self.ready_s[i]
            super().spin(t)

        def report(self, now):
            for i in self.ids:
                if self.report_s[i] == OBSERVED:
                    marks["report"][i] = now
            super().report(now)

        def reported(self, i, t_sched):
            done = super().reported(i, t_sched)
            if done:
                marks["promote"][i] = t_sched
            return done

    captured = {}

    class Pools(disagg.Disaggregated):
        def run(self, requests):
            self.prefill.kernel = self.decode.kernel = False  # the Python loop, whose instants are recorded
            out = super().run(requests)
            captured.update(pools=self, out=out, requests=requests)
            return out

    d = predict.CASES["disagg"]
    proxy = [json.loads(x) for x in (folder / f"{d['model']}-pd-proxy-requests.jsonl").read_text().splitlines() if x]
    marks_at = sorted((float(t), name) for name, t in
                      (x.split() for x in (folder / f"{d['model']}-pd-marks.txt").read_text().splitlines() if x))
    rates, original = [], disagg.Disaggregated
    scheduler.RemoteLoads, disagg.Disaggregated = Recorded, Pools
    try:
        for name, flags in predict.pd_runs(folder):
            for m in marks.values():
                m.clear()
            with contextlib.redirect_stdout(io.StringIO()):
                cli(["simulate", *predict.pd_flags("H200"), *flags])
            k = [m for _, m in marks_at].index(name)
            span = (marks_at[k][0], marks_at[k + 1][0] if k + 1 < len(marks_at) else np.inf)
            rates.append(_terms(name, captured, marks, proxy, span))
    finally:
        scheduler.RemoteLoads, disagg.Disaggregated = RemoteLoads, original
    return rates


def _terms(name: str, captured: dict, marks: dict, proxy: list[dict], span: tuple[float, float]) -> dict:
    """One rate's model terms (the decode pool numbers requests in its arrival order) and its measured legs."""
    out, requests, pools = captured["out"], captured["requests"], captured["pools"]
    n = len(requests)
    order = np.argsort(out.prefill.finish_s, kind="stable")  # Disaggregated.run's decode order
    at = {key: np.full(n, np.nan) for key in marks}
    for key, m in marks.items():
        for j, t in m.items():
            at[key][order[j]] = t
    api = pools.decode.engine.overheads.api_request_s
    first, ready = out.trace.first_token_s, out.prefill.finish_s
    model = {"prefill_leg": ready - requests.arrival_s, "decode_leg": first - ready, "api": np.full(n, api),
             "to_post": at["post"] - ready - api, "X": at["observe"] - at["post"],
             "O": at["promote"] - at["observe"], "P": first - at["promote"]}
    mine = [x for x in proxy if span[0] <= x["in"] < span[1] and x["decode_first"]]
    pre = np.array([x["prefill_done"] - x["in"] for x in mine])
    dec = np.array([x["decode_first"] - x["prefill_done"] for x in mine])
    ok = dec < HANDSHAKE_S
    measured = {"prefill_leg": float(pre[ok].mean()), "decode_leg": float(dec[ok].mean()),
                "prefill_leg_p50": float(np.median(pre)), "decode_leg_p50": float(np.median(dec))}
    if all(x.get("decode_headers") for x in mine):  # pd_proxy.py since run 17: parsed and tokenized by then
        front = np.array([x["decode_headers"] - x["prefill_done"] for x in mine])
        measured["decode_to_headers"] = float(front[ok].mean())
    return {"rate": name, "requests": n, "handshake": int((~ok).sum()), "span": span,
            # per request (s), for pd_requests.py; main leaves it out of --json
            "arrays": {"arrival": np.asarray(requests.arrival_s), "tpot": (out.trace.finish_s - first)
                       / np.maximum(np.asarray(requests.output_tokens) - 1, 1)} | model,
            "measured": measured,
            "model": {key: float(np.nanmean(v)) for key, v in model.items()}
            | {"prefill_leg_p50": float(np.median(model["prefill_leg"])),
               "decode_leg_p50": float(np.median(model["decode_leg"]))}}


def logged_xfer(folder: Path, rates: list[dict], year: int = 2026) -> None:
    """Each rate's X (s, into rates[k]["measured"]) from the decode log's windows (a line covers the ~10 s before its
    time, UTC as the marks): a window goes to the rate most of whose requests' prefills returned in it (the proxy's
    instants); the run's first window, which holds the handshake's transfers, is left out."""
    log = (folder / "Llama-3.1-8B-pd-decode.log").read_text()
    proxy = [json.loads(x) for x in (folder / "Llama-3.1-8B-pd-proxy-requests.jsonl").read_text().splitlines() if x]
    posted = np.array([x["prefill_done"] for x in proxy])
    sums: dict[int, list[float]] = {}
    for stamp, count, ms in WINDOW.findall(log)[1:]:
        t = datetime.strptime(f"{year}-{stamp}", "%Y-%m-%d %H:%M:%S").replace(tzinfo=UTC).timestamp()
        inside = posted[(posted > t - 10) & (posted <= t)]
        if not len(inside):
            continue
        k = int(np.argmax([((inside >= r["span"][0]) & (inside < r["span"][1])).sum() for r in rates]))
        acc = sums.setdefault(k, [0.0, 0.0])
        acc[0], acc[1] = acc[0] + int(count) * float(ms) / 1e3, acc[1] + int(count)
    for k, (total, count) in sums.items():
        rates[k]["measured"]["X"], rates[k]["measured"]["X_transfers"] = total / count, int(count)


SUMS = {"ttft": "time_to_first_token_seconds", "queue": "request_queue_time_seconds",
        "prefill_time": "request_prefill_time_seconds", "xfer": "nixl_xfer_time_seconds",
        "post": "nixl_post_time_seconds"}


def _sums(path: Path) -> dict[str, tuple[float, float]]:
    """(sum, count) of each SUMS histogram in one /metrics scrape."""
    text = path.read_text()
    out = {}
    for key, metric in SUMS.items():
        total = re.search(rf"vllm:{metric}_sum{{[^}}]*}} (\S+)", text)
        count = re.search(rf"vllm:{metric}_count{{[^}}]*}} (\S+)", text)
        if total and count:
            out[key] = (float(total.group(1)), float(count.group(1)))
    return out


def per_rate_metrics(folder: Path, rates: list[dict]) -> None:
    """Where serve_pd.sh kept the decode server's /metrics before the first rate and after each one: each rate's
    means (s) from the difference of two scrapes, into rates[k]["measured"]: vllm_ttft, vllm_queue (add to the
    promoting schedule), vllm_prefill_time (to the token), X_metrics, post_metrics, and api_inside (TTFT less queue
    and prefill time: the API path inside vLLM's TTFT)."""
    prev = folder / "Llama-3.1-8B-pd-metrics-decode-before.txt"
    for r in rates:
        path = folder / f"Llama-3.1-8B-pd-metrics-decode-{r['rate'].removeprefix('pd-')}.txt"
        if not (prev.is_file() and path.is_file()):
            return
        a, b = _sums(prev), _sums(path)
        mean = {k: (b[k][0] - a[k][0]) / (b[k][1] - a[k][1]) for k in b if k in a and b[k][1] > a[k][1]}
        m = r["measured"]
        m.update({f"vllm_{k}": v for k, v in mean.items() if k in ("ttft", "queue", "prefill_time")})
        m.update({f"{k}_metrics": v for k, v in mean.items() if k in ("xfer", "post")})
        if {"ttft", "queue", "prefill_time"} <= mean.keys():
            m["api_inside"] = mean["ttft"] - mean["queue"] - mean["prefill_time"]
        prev = path


def pooled(folder: Path) -> dict[str, float]:
    """The decode and prefill servers' histogram means over the run (s) and the proxy's mean legs."""
    out = {}
    for side in ("prefill", "decode"):
        text = (folder / f"Llama-3.1-8B-pd-metrics-{side}.txt").read_text()
        for key in ("time_to_first_token", "request_queue_time", "request_prefill_time"):
            total = float(re.search(rf"vllm:{key}_seconds_sum{{[^}}]*}} (\S+)", text).group(1))
            count = float(re.search(rf"vllm:{key}_seconds_count{{[^}}]*}} (\S+)", text).group(1))
            out[f"{side}_{key}"] = total / count
    proxy = [json.loads(x) for x in (folder / "Llama-3.1-8B-pd-proxy-requests.jsonl").read_text().splitlines() if x]
    out["proxy_prefill_leg"] = float(np.mean([x["prefill_done"] - x["in"] for x in proxy]))
    out["proxy_decode_leg"] = float(np.mean([x["decode_first"] - x["prefill_done"] for x in proxy]))
    for side in ("prefill", "decode"):
        inside = out[f"{side}_time_to_first_token"] - out[f"{side}_request_queue_time"] - \
            out[f"{side}_request_prefill_time"]
        out[f"{side}_api_inside_vllm"] = inside
        out[f"{side}_api_outside_vllm"] = out[f"proxy_{side}_leg"] - out[f"{side}_time_to_first_token"]
    return out


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("run", help="run12 | run13 | run14, or a results folder (with --cases)")
    p.add_argument("--cases", help="the run's cases file in validate/engines (default cases-RUN.json)")
    p.add_argument("--json", type=Path)
    a = p.parse_args()
    folder = ROOT / f"nvidia-h200x2-vllm-2026-11-29-{a.run}" if a.run in ("run12", "run13", "run14") else Path(a.run)
    if not folder.is_dir() or not (a.cases or a.run.startswith("run")):
        raise SystemExit(f"pd_legs: {a.run}: not run12-14 nor a results folder given with --cases")
    rates = replay(folder, a.cases or f"cases-{a.run}.json")
    logged_xfer(folder, rates)
    per_rate_metrics(folder, rates)
    pool = pooled(folder)
    ms = lambda x: f"{x * 1e3:6.1f}" if x == x else "     -"  # noqa: E731
    print(f"{a.run}: means in ms over the requests without the handshake (decode leg < {HANDSHAKE_S * 1e3:.0f} ms)")
    print("rate        | prefill leg meas model | decode leg meas model | X meas model | api  to_post  O     P")
    for r in rates:
        m, s = r["measured"], r["model"]
        print(f"{r['rate']:<11} | {ms(m['prefill_leg'])} {ms(s['prefill_leg'])}   | {ms(m['decode_leg'])} "
              f"{ms(s['decode_leg'])}   | {ms(m.get('X', np.nan))} {ms(s['X'])} | {ms(s['api'])} {ms(s['to_post'])} "
              f"{ms(s['O'])} {ms(s['P'])}")
    for r in rates:
        extra = {k: v for k, v in r["measured"].items()
                 if k.startswith(("vllm_", "api_inside", "decode_to_headers")) or "_metrics" in k}
        if extra:
            print(f"{r['rate']} per-rate /metrics: " + ", ".join(f"{k} {v * 1e3:.1f}" for k, v in extra.items()))
    print("pooled over the run (vLLM's histograms): " + ", ".join(f"{k} {v * 1e3:.1f}" for k, v in pool.items()))
    if a.json:
        kept = [{k: v for k, v in r.items() if k != "arrays"} for r in rates]
        a.json.write_text(json.dumps({"run": a.run, "rates": kept, "pooled": pool}, indent=1) + "\n")


if __name__ == "__main__":
    main()
