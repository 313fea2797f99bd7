"""SGLang at load, from a served run's own files: the decode step between the server log's decode lines, the prefills
between them, the server's stalls in the clients' token stream, and where a light run's TTFT goes; beside each, what
`roofline simulate --engine sglang` has for the same sends.

python -m validate.engines.sglang_load [RUN_DIR] [--model Llama-3.1-8B]

Reading of the log (sglang 0.5.17): a `Decode batch` line is written every decode_log_interval (40, server_info)
decode steps; its gen throughput is the decode tokens of those steps (each step adds its running requests,
scheduler_components/batch_result_processor.py:829) over the time since the previous decode line
(scheduler_components/metrics_reporter.py:736-738), prefill steps run between them included; #running-req is the
last step's batch and #token the KV tokens in use. Between two decode lines with no prefill line no request joins and
the batch falls about linearly as requests finish, so a step takes (mean of the two lines' #running-req) / gen
throughput at the mean context (#token over #running-req, both lines pooled): the step as the scheduler ran it, host
and GPU. Where prefill lines fall between, the interval's time less its 40 decode steps at the decode-only law
(interpolated in the batch) is its prefills' time. A stall is a gap in the clients' merged token stream longer than
twice the run's longest prefill batch by the log (its tokens at the run's prefill rate) while requests were in
flight. A light run's TTFT splits at the step end (client clock) at which its prefill was formed: sglang_steps's
first_boundary reading (two or three step ends before the first token).
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from roofline.engines.scheduling import EngineOverheads
from validate import stored
from validate.engines.sglang_steps import EVENT_GAP_S, log_prefills, per_token_s, run_args, run_lines

DECODE = re.compile(r"Decode batch, #running-req: (\d+), #token: (\d+),.*gen throughput \(token/s\): ([\d.]+)")
PREFILL = re.compile(r"Prefill batch, #new-seq: (\d+), #new-token: (\d+),")
LOG_INTERVAL = 40  # decode_log_interval, the run's server_info


@dataclass(frozen=True)
class Interval:
    """The steps between two decode lines: the batch at each line, the mean context, one decode step's seconds as
    if all were decodes (mean batch / gen throughput), and the prefill batches between (requests, tokens)."""

    running: tuple[int, int]
    context: float
    step_s: float
    prefills: tuple[tuple[int, int], ...] = ()

    @property
    def batch(self) -> float:
        return sum(self.running) / 2

    @property
    def seconds(self) -> float:
        """The interval's time: its decode tokens over the throughput the line gives."""
        return LOG_INTERVAL * self.step_s


def intervals(lines: list[str]) -> list[Interval]:
    """The decode-line intervals of one run's log lines (sglang_steps.run_lines), the first line's left out (it
    counts from the previous run's last line)."""
    out, last, between = [], None, []
    for x in lines:
        if m := PREFILL.search(x):
            between.append((int(m[1]), int(m[2])))
        elif m := DECODE.search(x):
            running, tokens, rate = int(m[1]), int(m[2]), float(m[3])
            if last is not None and running + last[0] > 0:
                b = (last[0] + running) / 2
                out.append(Interval((last[0], running), (last[1] + tokens) / (last[0] + running), b / rate,
                                    tuple(between)))
            last, between = (running, tokens), []
    return out


def decode_law(ivs: list[Interval]) -> tuple[np.ndarray, np.ndarray]:
    """(batch, step seconds) of the decode-only intervals (of one run or several pooled), averaged per mean batch:
    the scheduler's decode step at load."""
    by: dict[float, list[float]] = {}
    for iv in ivs:
        if not iv.prefills:
            by.setdefault(iv.batch, []).append(iv.step_s)
    keys = sorted(by)
    return np.array(keys), np.array([float(np.mean(by[b])) for b in keys])


def prefill_per_request_s(ivs: list[Interval], law: tuple[np.ndarray, np.ndarray]) -> tuple[float, int]:
    """Seconds of prefill per request over the intervals with prefills (each: its time less 40 decode steps at the
    law interpolated at its batch) and the requests they prefilled."""
    busy = [iv for iv in ivs if iv.prefills]
    seconds = sum(iv.seconds - LOG_INTERVAL * float(np.interp(iv.batch, *law)) for iv in busy)
    requests = sum(n for iv in busy for n, _ in iv.prefills)
    return seconds / requests, requests


def prefills_in_life(ivs: list[Interval], output_tokens: int) -> np.ndarray:
    """Per request (send order, FCFS), the prefill batches run while it decodes: each batch placed on the run's
    decode-step axis, spread evenly inside its interval; a request decodes from its own batch for output - 1 steps."""
    at, sizes = [], []
    for k, iv in enumerate(ivs):
        n = len(iv.prefills)
        for j, (seqs, _) in enumerate(iv.prefills):
            at.append(LOG_INTERVAL * (k + (j + 1) / (n + 1)))
            sizes.append(seqs)
    at = np.array(at)
    starts = np.repeat(at, sizes)
    return np.array([((at > a) & (at < a + output_tokens - 1)).sum() for a in starts])


def _stream(run: Path, model: str, key: str) -> tuple[np.ndarray, np.ndarray, np.ndarray, list[np.ndarray]]:
    """Send instants, TTFTs and finishes (seconds from the first send) and each request's token times."""
    sends = json.loads((run / f"{model}-{key}-sends.json").read_text())["requests"][1:]
    doc = json.loads(stored.read_text(run / f"{model}-{key}.jsonl").splitlines()[0])
    t0 = sends[0]["start_perf_s"]
    sent = np.array([r["start_perf_s"] - t0 for r in sends])
    ttft = np.array(doc["ttfts"])
    finish = sent + np.array([r["latency_s"] for r in sends])
    times = [s + t + np.concatenate([[0.0], np.cumsum(itl)]) for s, t, itl in zip(sent, ttft, doc["itls"], strict=True)]
    return sent, ttft, finish, times


def stalls(run: Path, model: str, key: str, min_gap_s: float) -> list[dict]:
    """Gaps of more than `min_gap_s` in the clients' merged token stream while requests were in flight: when, how
    many streams waited, the requests sent inside and the TTFTs of those whose first token came after it."""
    sent, ttft, finish, times = _stream(run, model, key)
    every = np.sort(np.concatenate(times))
    out = []
    for k in np.flatnonzero(np.diff(every) > min_gap_s):
        a, b = every[k], every[k + 1]
        waited = (sent < b) & (sent + ttft >= b)
        out.append({"from_s": round(float(a), 3), "to_s": round(float(b), 3), "ms": round(float(b - a) * 1e3, 1),
                    "in_flight": int(((sent < a) & (finish > b)).sum()),
                    "sent_inside": int(((sent > a) & (sent < b)).sum()),
                    "first_token_after_it_ms": sorted(np.round(ttft[waited] * 1e3).astype(int).tolist(), reverse=True)})
    return out


def formation_split(run: Path, model: str, key: str) -> dict:
    """A light run's TTFT split at the step end (client clock) that formed its prefill: the requests with two or three
    step ends between send and first token (sglang_steps.first_boundary), formed at the first or the second; the
    medians of send -> that end and that end -> first token."""
    sent, _, _, times = _stream(run, model, key)
    every = np.sort(np.concatenate(times))
    bursts = every[np.concatenate([[0], np.flatnonzero(np.diff(every) > EVENT_GAP_S) + 1])]
    before, after = [], []
    for s, tt in zip(sent, times, strict=True):
        between = bursts[(bursts > s) & (bursts < tt[0] - EVENT_GAP_S)]
        if len(between) in (2, 3):
            end = between[len(between) - 2]
            before.append(end - s)
            after.append(tt[0] - end)
    return {"requests": len(before), "send_to_forming_end_ms": round(float(np.median(before)) * 1e3, 2),
            "forming_end_to_first_token_ms": round(float(np.median(after)) * 1e3, 2)}


@dataclass(frozen=True)
class ScaledDecode(EngineOverheads):
    """A diagnostic, never the model: SGLang's host rule with every decode-only step's GPU time multiplied by
    ratio(B), interpolated in the batch over (batches, ratios)."""

    batches: tuple[float, ...] = field(default=(1.0,))
    ratios: tuple[float, ...] = field(default=(1.0,))

    def combine(self, gpu_s, sequences: int, tokens: int = 0, loads_s: float = 0.0, prefill: bool = False):
        if sequences and tokens == sequences and not prefill:
            gpu_s = gpu_s * float(np.interp(sequences, self.batches, self.ratios))
        return super().combine(gpu_s, sequences, tokens, loads_s, prefill)


def simulate(run: Path, model: str, key: str, ratio: tuple[tuple[float, ...], tuple[float, ...]] | None = None):
    """`roofline simulate --engine sglang` of the run's sends (sglang_steps.simulated's set-up): its trace, and with
    `ratio` (batches, ratios) the same with ScaledDecode's decode steps (Python loop)."""
    from dataclasses import replace

    from roofline.catalogue import load_hardware, load_model
    from roofline.catalogue.loading import validate
    from roofline.engines import scheduling as sched
    from roofline.methods import parse_method
    from roofline.serving.engined import engine_simulator
    from roofline.serving.requests import Requests
    from roofline.specs import Workload

    sends = json.loads((run / f"{model}-{key}-sends.json").read_text())["requests"][1:]
    s = np.array([r["start_perf_s"] for r in sends])
    prompt, output = np.array([r["prompt_len"] for r in sends]), np.array([r["output_len"] for r in sends])
    longest = int((prompt + output).max())
    hw = load_hardware("H200")
    profile = sched.scheduling("sglang", hw, "api", 1, context_len=longest)
    if ratio is not None:
        o = profile.overheads
        profile = replace(profile, overheads=ScaledDecode(**{f: getattr(o, f) for f in o.__dataclass_fields__},
                                                          batches=ratio[0], ratios=ratio[1]))
    wl = validate(Workload, {"context_tokens": longest, "prefill_chunk_tokens": profile.max_num_batched_tokens,
                             "engine": "sglang", "page_tokens": 1}, "workload")
    sim = engine_simulator(load_model(model), hw, wl, parse_method("bf16"), longest, profile)
    if ratio is not None:
        sim.kernel = False  # the compiled loop has its own copy of the host rule
    return sim, sim.run(Requests(s - s[0], prompt, output))


def roofline_prefills(trace) -> dict:
    """roofline's prefill steps (a step of whole 1,024-token multiples with requests waiting): how many, seconds per
    request, and per request the prefill steps started while it decodes."""
    st = trace.steps
    pre = (st[:, 6] >= 1024) & (st[:, 6] % 1024 == 0) & (st[:, 3] > 0)
    start = st[pre, 0]
    spans = zip(trace.first_token_s, trace.finish_s, strict=True)
    life = np.array([((start >= a) & (start < b)).sum() for a, b in spans])
    return {"batches": int(pre.sum()), "per_request_ms": round(float(st[pre, 1].sum() / len(trace.finish_s)) * 1e3, 2),
            "in_life_p50": float(np.median(life)), "max_running": int(st[:, 2].max())}


def decode_rows(ivs: list[Interval], model: str) -> list[dict]:
    """The decode-only intervals against roofline's decode step (PhaseModel under SGLang) over the same 40 steps:
    the batch and the mean context moving linearly from one line to the next."""
    from roofline.catalogue.loading import validate
    from roofline.catalogue.store import load_hardware, load_model
    from roofline.methods.registry import parse_method
    from roofline.planner.phases import PhaseModel
    from roofline.specs import Workload

    wl = validate(Workload, {"batch": 256, "context_tokens": 4096, "engine": "sglang", "page_tokens": 1}, "workload")
    pm = PhaseModel.build(load_model(model), load_hardware("H200"), wl, parse_method("bf16"))
    rows = []
    for iv in (iv for iv in ivs if not iv.prefills and min(iv.running) > 0):
        bs = np.linspace(*iv.running, LOG_INTERVAL)
        ours = float(np.mean([pm.decode_time(round(b), iv.context) for b in bs]))
        rows.append({"B": iv.running, "context": round(iv.context), "log_ms": round(iv.step_s * 1e3, 2),
                     "roofline_ms": round(ours * 1e3, 2), "err_pct": round((ours / iv.step_s - 1) * 100, 1)})
    return rows


def decode_ratio(rows: list[dict], min_batch: float = 16) -> tuple[tuple[float, ...], tuple[float, ...]]:
    """(batches, log / roofline) over the decode-only rows of mean batch >= min_batch (fewer requests make the
    linear batch between two lines too rough), averaged per batch: ScaledDecode's ratio."""
    by: dict[float, list[float]] = {}
    for r in rows:
        b = sum(r["B"]) / 2
        if b >= min_batch:
            by.setdefault(b, []).append(r["log_ms"] / r["roofline_ms"])
    keys = sorted(by)
    return tuple(keys), tuple(float(np.mean(by[b])) for b in keys)


def main() -> None:
    a, runs = run_args()
    log = stored.read_text(a.run / f"{a.model}-server.log", newline="")
    every = []
    for key in runs:
        rows = decode_rows(intervals(run_lines(log, key, runs)), a.model)
        every += rows
        big = [r for r in rows if sum(r["B"]) / 2 >= 40]
        print(f"{key}: {len(rows)} decode-only intervals, roofline's step against the log's: median "
              f"{np.median([r['err_pct'] for r in rows]):+.1f} %; at a mean batch >= 40: {big}")
    ratio = decode_ratio(every)
    law = decode_law([iv for key in runs for iv in intervals(run_lines(log, key, runs))])
    lines = {k: log_prefills(log, k, runs) for k in runs if k.startswith("rate")}
    pooled = [r for k in lines for r in lines[k][1:]]
    rate = per_token_s(np.array([r[2] for r in pooled]), np.array([r[1] for r in pooled]))
    for key, prefills in lines.items():
        ivs = intervals(run_lines(log, key, runs))
        longest = max(r[1] for r in prefills) * rate
        _, trace = simulate(a.run, a.model, key)
        print(f"{key}: log: {len(prefills)} prefill batches, "
              f"{prefill_per_request_s(ivs, law)[0] * 1e3:.2f} ms of prefill a request (the intervals with prefills, "
              f"less 40 steps at the runs' pooled decode-only law), prefill batches in a request's decode life p50 "
              f"{np.median(prefills_in_life(ivs, 256)):.0f}; roofline: {roofline_prefills(trace)}")
        print(f"  stalls (token-stream gaps > {2 * longest * 1e3:.0f} ms): {stalls(a.run, a.model, key, 2 * longest)}")
        if key == "rate4":
            print(f"  TTFT split at the forming step end: {formation_split(a.run, a.model, key)}")
        if key == "rate24":
            _, scaled = simulate(a.run, a.model, key, ratio)
            by = dict(zip(ratio[0], np.round(ratio[1], 3).tolist(), strict=True))
            print(f"  roofline with the log's decode step (ratio {by}): "
                  f"TPOT p50 / p99 {np.percentile(scaled.tpot_s, 50) * 1e3:.2f} / "
                  f"{np.percentile(scaled.tpot_s, 99) * 1e3:.2f} ms (as the model: "
                  f"{np.percentile(trace.tpot_s, 50) * 1e3:.2f} / {np.percentile(trace.tpot_s, 99) * 1e3:.2f}), "
                  f"max running {roofline_prefills(scaled)['max_running']}")


if __name__ == "__main__":
    main()
