"""SGLang's prefill steps at load, from its own log, against roofline's schedule of the same sends: when a request that
arrives while a step runs first runs (roofline.engines.scheduling.sglang_admission_lag).

python -m validate.engines.sglang_steps [RUN_DIR] [--model Llama-3.1-8B]
Per Poisson run of RUN_DIR: SGLang's prefill batches (the server log's `Prefill batch, #new-seq, #new-token, ...,
input throughput (token/s)` lines, written when a prefill's result is processed, just after its first tokens are
streamed), their sizes, and the back-to-back pairs (two prefills with no decode step between); beside them the same
figures for `roofline simulate --engine sglang` at the client's recorded sends, with the admission lag and without.

Reading of the log: a line's input throughput is its new tokens over the time since the previous prefill line
(metrics_reporter.report_prefill_stats), so the lines' times follow one another exactly; they are put on the client's
clock by the median of (first token at the client - line time) over the run, the requests of a batch being the next
#new-seq ones in send order (schedule_policy "fcfs"). A prefill runs at one rate per token (per_token_s: the rate at
which the most consecutive lines are back to back), so a batch started at its line time less its tokens x that rate,
and a pair is back to back when the later line's gap is its own prefill time within BACK_TO_BACK_S.
Under the overlap scheduler the later batch of such a pair was formed as the earlier one started: every one of its
requests was sent before then; with a synchronous loop it would be formed as the earlier one ended, and requests sent
while the earlier prefill ran would be in it.
"""

from __future__ import annotations

import argparse
import json
import re
from collections import Counter
from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np

from validate import stored

HERE = Path(__file__).resolve().parent
RUN = HERE.parents[1] / "validate" / "results" / "engines" / "nvidia-h200-sglang-2026-11-30-run1"
EVENT_GAP_S = 1e-3  # tokens of one step reach the clients within this of each other (light load)
BACK_TO_BACK_S = 2.5e-3  # the lines' times carry the scheduler's own jitter (a result processed a few ms late)
PREFILL = re.compile(r"Prefill batch, #new-seq: (\d+), #new-token: (\d+),.*input throughput \(token/s\): ([\d.]+)")


@dataclass(frozen=True)
class Batches:
    """Prefill batches of one run on the client's clock: start and end of each, its first request (index in send
    order; a batch's requests run to the next batch's first), and the requests' send times."""

    start_s: np.ndarray
    end_s: np.ndarray
    first: np.ndarray
    sends_s: np.ndarray

    def pairs(self) -> dict:
        """Back-to-back pairs (a batch starting within BACK_TO_BACK_S of the previous one's end) and, over them, the
        later batches' requests sent after the earlier batch started."""
        b2b = np.flatnonzero(np.abs(self.start_s[1:] - self.end_s[:-1]) <= BACK_TO_BACK_S) + 1
        bounds = np.append(self.first, len(self.sends_s))
        late = [int((self.sends_s[bounds[b]:bounds[b + 1]] > self.start_s[b - 1]).sum()) for b in b2b]
        return {"batches": len(self.end_s), "back_to_back": len(b2b), "sent_after_the_earlier_started": sum(late),
                "pairs_with_such_a_request": sum(x > 0 for x in late)}


def per_token_s(gaps_s: np.ndarray, tokens: np.ndarray) -> float:
    """A prefill's seconds per token: the lower decile of gap / tokens over the lines of two or more requests (a gap
    holds the prefill and whatever decode steps ran before it; the lines of one request, 1,024 tokens in every run
    here, cannot tell a prefill of 25 ms from one of 20 ms after a 5 ms decode step)."""
    many = tokens >= 2 * tokens.min()
    if not many.any():
        raise ValueError("no prefill of two or more requests: the prefill's rate cannot be read off the gaps")
    return float(np.quantile(gaps_s[many] / tokens[many], 0.1))


def run_lines(log: str, key: str, runs: tuple[str, ...]) -> list[str]:
    """The server log's lines of run `key`: after the cache flush that follows its warm-up request and before the next
    run's warm-up (runs: the runs in the log's order)."""
    lines = log.split("\n")
    flushes = [i for i, x in enumerate(lines) if "POST /flush_cache" in x]
    k = runs.index(key)
    end = flushes[k + 1] if k + 1 < len(flushes) else len(lines)
    if k + 1 < len(flushes):  # the next run's warm-up request comes in just before its flush
        end = max(i for i in range(flushes[k], end) if "POST /generate" in lines[i])
    return lines[flushes[k]:end]


def log_prefills(log: str, key: str, runs: tuple[str, ...]) -> list[tuple[int, int, float]]:
    """(seqs, tokens, seconds since the previous prefill line) of run `key`'s prefill lines (run_lines)."""
    out = []
    for x in run_lines(log, key, runs):
        if m := PREFILL.search(x):
            out.append((int(m[1]), int(m[2]), int(m[2]) / float(m[3])))
    return out


def measured(run: Path, model: str, key: str, runs: tuple[str, ...]) -> tuple[Batches, float]:
    """The run's prefill batches on the client's clock (module docstring) and its prefill seconds per token."""
    sends = json.loads((run / f"{model}-{key}-sends.json").read_text())["requests"][1:]  # the warm-up left out
    t0 = sends[0]["start_perf_s"]
    s = np.array([r["start_perf_s"] - t0 for r in sends])
    first_token = s + np.array([r["ttft_s"] for r in sends])
    # progress bars' lone carriage returns are not lines
    rows = log_prefills(stored.read_text(run / f"{model}-server.log", newline=""), key, runs)
    seqs = np.array([r[0] for r in rows])
    if seqs.sum() != len(s):
        raise ValueError(f"{key}: {seqs.sum()} prefilled requests in the log, {len(s)} sent")
    t = np.cumsum([0.0] + [r[2] for r in rows[1:]])
    first = np.concatenate([[0], np.cumsum(seqs)[:-1]])
    t += np.median(first_token[first] - t)
    tokens = np.array([r[1] for r in rows])
    per_token = per_token_s(np.array([r[2] for r in rows[1:]]), tokens[1:])
    return Batches(t - tokens * per_token, t, first, s), per_token


def simulated(run: Path, model: str, key: str, lag: bool) -> Batches:
    """roofline's SGLang schedule of the run's sends (admission lag on or off): its prefill batches (requests sharing a
    first-token time), each step's own start and end."""
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
    profile = replace(sched.scheduling("sglang", hw, "api", 1, context_len=longest), admission_lag=lag)
    wl = validate(Workload, {"context_tokens": longest, "prefill_chunk_tokens": profile.max_num_batched_tokens,
                             "engine": "sglang", "page_tokens": 1}, "workload")
    sim = engine_simulator(load_model(model), hw, wl, parse_method("bf16"), longest, profile)
    requests = Requests(s - s[0], prompt, output)
    clock = sim.run(requests).gemm_clock  # the tensor cores' clock the run chose (serving.clock)
    share = clock["sustained_share"] if clock else 1.0
    runner = sim.twin(share) if share < 1.0 and sim.twin(share) is not None else sim
    trace = runner._run(requests)  # its first tokens at their steps' ends (before Trace.emitted)
    ends, first = np.unique(trace.first_token_s, return_index=True)
    if not np.all(np.diff(first) > 0):
        raise ValueError(f"{key}: roofline's prefill batches are not in send order")
    step_end = trace.steps[:, 0] + trace.steps[:, 1]
    at = np.searchsorted(step_end, ends - 1e-9)
    if not np.allclose(step_end[at], ends, rtol=0, atol=1e-9):
        raise ValueError(f"{key}: a first token off its step's end")
    return Batches(trace.steps[at, 0], step_end[at], first, s - s[0])


def first_boundary(run: Path, model: str, key: str) -> dict:
    """From the client's token stream (the run's .jsonl, per request TTFT and inter-token times; bench_serving's
    --output-details) at a load light enough that every step's tokens reach the clients as one burst (EVENT_GAP_S
    apart from the next): for each request, the time from its send to the first burst after it (a step's end), and
    whether its prefill was formed at that step end (one more burst, the step already launched, before its first
    token) or at the next one (two); a loop that forms a batch after the previous one's result would run it right
    after the step end that formed it (no burst between). The send-to-burst times of the two groups meet at what the
    request's path to the scheduler takes, as a step's end sees it. Also: how many requests saw 0, 1, 2, ... step
    ends between their send and their first token."""
    sends = json.loads((run / f"{model}-{key}-sends.json").read_text())["requests"][1:]
    doc = json.loads(stored.read_text(run / f"{model}-{key}.jsonl").splitlines()[0])
    t0 = sends[0]["start_perf_s"]
    times = [r["start_perf_s"] - t0 + ttft + np.concatenate([[0.0], np.cumsum(itl)])
             for r, ttft, itl in zip(sends, doc["ttfts"], doc["itls"], strict=True)]
    every = np.sort(np.concatenate(times))
    bursts = every[np.concatenate([[0], np.flatnonzero(np.diff(every) > EVENT_GAP_S) + 1])]
    first_s, formed_at, counts = [], [], []
    for r, tt in zip(sends, times, strict=True):
        send = r["start_perf_s"] - t0
        between = bursts[(bursts > send) & (bursts < tt[0] - EVENT_GAP_S)]
        counts.append(len(between))
        if len(between) in (2, 3):  # one or two step ends before the prefill was formed, then the step before it
            first_s.append(between[0] - send)
            formed_at.append(len(between) - 1)
    first_s, formed_at = np.array(first_s), np.array(formed_at)
    return {"step_ends_before_the_first_token": dict(sorted(Counter(counts).items())),
            "formed_at_the_first_end": int((formed_at == 1).sum()),
            "its_shortest_send_to_end_ms": round(float(first_s[formed_at == 1].min()) * 1e3, 1),
            "formed_at_the_second_end": int((formed_at == 2).sum()),
            "its_longest_send_to_end_ms": round(float(first_s[formed_at == 2].max()) * 1e3, 1)}


def run_args() -> tuple[argparse.Namespace, tuple[str, ...]]:
    """The lab CLIs' shared arguments (this module's and sglang_load's): the run folder, the served model and the
    runs in the server log's order."""
    p = argparse.ArgumentParser()
    p.add_argument("run", type=Path, nargs="?", default=RUN)
    p.add_argument("--model", default="Llama-3.1-8B")
    p.add_argument("--runs", default="rate4,rate12,rate24,conc32", help="the runs in the server log's order")
    a = p.parse_args()
    return a, tuple(a.runs.split(","))


def main() -> None:
    a, runs = run_args()
    for key in (k for k in runs if k.startswith("rate")):
        if key == "rate4":
            print(f"{key}: the client's token stream: {first_boundary(a.run, a.model, key)}")
        try:
            got, per_token = measured(a.run, a.model, key, runs)
        except ValueError as e:
            print(f"{key}: {e}")
            continue
        print(f"{key}: SGLang's log ({per_token * 1e6:.1f} us a prefill token): {got.pairs()}")
        for lag in (True, False):
            print(f"  roofline, admission lag {'on ' if lag else 'off'}: {simulated(a.run, a.model, key, lag).pairs()}")


if __name__ == "__main__":
    main()
