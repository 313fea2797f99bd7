"""vLLM 0.24's API server as one asyncio loop: the delay a new request's first token meets while other requests stream.

    python -m validate.engines.api_loop compare            (this CPU's emulation and run 24, from committed results)
    python -m validate.engines.api_loop judge25 FOLDER     (run 25: the same on the H200 host, against its prediction)
    python -m validate.engines.api_loop derive --into roofline/engines/profiles/vllm.json
                                                           (run 25's host costs per output and per chunk into the
                                                           profile: roofline.engines.timing 25.)

The loop (validate/notes/2026-11-30-api-server-queue.md has the citations) does, per engine step, a fixed cost `step_s`
and `output_s` per request-output in it (msgspec decode, OutputProcessor.process_outputs: stats, detokenize, the
collector's put or merge, one histogram observe); per SSE chunk `chunk_s` (the stream task's wake-up, the chunk's
pydantic model and JSON, Starlette's send through the middlewares, uvicorn's write). An engine step of period T brings
one token to each of N streams. A stream's collector merges the outputs its task has not yet taken, so per-chunk work
amortises over the tokens a chunk carries and per-output work does not:

    u  = (step_s + N output_s) / T                    (per-step load; cannot coalesce)
    r1 = u + N chunk_s / T                             (the load with one token a chunk)
    r1 < 1: each step's work B = r1 T is done before the next step; a token arriving at a random phase waits the
            busy remainder, B^2 / (2 T) on average, then its step's work ahead of it (its output comes last,
            the scheduler's RUNNING requests first): way out = B^2 / (2 T) + B; a hop on the way in (the HTTP
            read, the handler's task, the tokenizer thread's return) waits B^2 / (2 T)
    r1 >= 1: the loop is never idle; a cycle serves every stream once: C = N chunk_s + C u, so C = N chunk_s / (1 - u)
            and a chunk carries C / T tokens; the way out waits half a cycle for the socket reader, then a cycle's
            work ahead of its chunk: 1.5 C; a hop on the way in waits C / 2
    u >= 1: the loop falls behind without bound (inf).

The delay is the excess over an idle server (N = 0), whose own per-request costs are in its baseline.
"""

from __future__ import annotations

import json
import math
import statistics
import sys
from dataclasses import dataclass, replace
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
COSTS = ROOT / "validate/results/engines/cpu-vllm024-api-loop-2026-11-30"
RUN24 = ROOT / "validate/results/engines/nvidia-h200-vllm-2026-11-30-run24"
HOPS_IN = 3  # uvicorn's read of the request, the handler's task, the tokenizer thread's return (renderers/base.py:93)


@dataclass(frozen=True)
class LoopCosts:
    """Seconds of the API server's loop: per engine step, per request-output in it, per SSE chunk."""

    step_s: float
    output_s: float
    chunk_s: float

    def scaled(self, factor: float) -> LoopCosts:
        """The same work on a host `factor` times slower."""
        return replace(self, step_s=self.step_s * factor, output_s=self.output_s * factor,
                       chunk_s=self.chunk_s * factor)


@dataclass(frozen=True)
class Loop:
    """The loop's state at N streams and engine step period T (module docstring)."""

    load_steps: float  # u
    load_one_token_chunks: float  # r1
    cycle_s: float  # T unsaturated, C saturated, inf past u = 1
    tokens_per_chunk: float
    way_out_s: float
    hop_s: float

    def excess_s(self, hops_in: int = HOPS_IN) -> float:
        """A new request's first token, later than at an idle server: the way out and the hops on the way in."""
        return self.way_out_s + hops_in * self.hop_s


def loop(costs: LoopCosts, streams: int, step_period_s: float) -> Loop:
    """The loop at `streams` streams, one token each per engine step of `step_period_s` (module docstring)."""
    if streams == 0:
        return Loop(0.0, 0.0, step_period_s, 0.0, 0.0, 0.0)
    t = step_period_s
    u = (costs.step_s + streams * costs.output_s) / t
    r1 = u + streams * costs.chunk_s / t
    if u >= 1:
        return Loop(u, r1, math.inf, math.inf, math.inf, math.inf)
    if r1 < 1:
        busy = r1 * t
        residual = busy * busy / (2 * t)
        return Loop(u, r1, t, 1.0, residual + busy, residual)
    cycle = streams * costs.chunk_s / (1 - u)
    return Loop(u, r1, cycle, cycle / t, 1.5 * cycle, cycle / 2)


# ---- the costs measured on this CPU (api_loop_bench.py) ----

def _read(path: Path) -> dict:
    return json.loads(path.read_text())


def reps(folder: Path = COSTS) -> list[Path]:
    """The repetitions of `api_loop_bench.py all` (rep-1, rep-2, ...)."""
    return sorted(folder.glob("rep-*"))


def _rep_costs(rep: Path) -> LoopCosts:
    """One repetition's costs: step and output from `costs` (least squares over steps of 1..128 outputs; a negative
    intercept reads 0); chunk from `serve` at 16 streams (one token a chunk, the loop ~40 % busy): the server's CPU
    seconds less its steps' cost at 16 outputs, over its chunks (the stand-in engine's msgspec encode of each step
    stays in: ~1 us an output)."""
    c = _read(rep / "costs.json")
    s = _read(rep / "serve-16-1.94.json")
    chunk = (s["cpu"] - s["steps"] * c["step_s_by_outputs"]["16"]) / s["chunks"]
    return LoopCosts(max(0.0, c["step_fixed_s"]), c["step_per_output_s"], chunk)


def measured_costs(folder: Path = COSTS) -> tuple[LoopCosts, float]:
    """(the costs on the CPU that ran api_loop_bench.py, each the median over the repetitions; that CPU's host_probe
    seconds, the median of every reading)."""
    each = [_rep_costs(r) for r in reps(folder)]
    probes = [p for r in reps(folder) for p in _read(r / "costs.json")["host_probe_s"]]
    probes += [_read(f)["host_probe_s"] for r in reps(folder) for f in sorted(r.glob("serve-*.json"))]
    return LoopCosts(*(statistics.median(getattr(c, k) for c in each) for k in ("step_s", "output_s", "chunk_s"))), \
        statistics.median(probes)


# ---- run 24 (validate/engines/run24.sh) ----

RUN24_N = (0, 4, 16, 64)


def _metrics(path: Path) -> dict[str, float]:
    out: dict[str, float] = {}
    for line in path.read_text().splitlines()[1:]:
        name, _, value = line.rpartition(" ")
        key = name.split("{")[0]
        if key.endswith(("_sum", "_count")):
            out[key] = out.get(key, 0.0) + float(value)
    return out


def run24_point(n: int, results: Path = RUN24) -> dict[str, float]:
    """Run 24 at N streams: the engine's step period while they stream (the inter-token latency histogram's mean,
    engine stamps), the probe's client TTFT median and mean, and the probe's engine prefill (scheduled to first
    token) as bounds: /metrics records it at a request's finish, so requests of the N before that finished in the
    window are in its sum: `lo` charges each of them the idle probe's prefill, `hi` none."""
    a, b = _metrics(results / f"a{n}-before-metrics.txt"), _metrics(results / f"a{n}-after-metrics.txt")

    def delta(k: str) -> float:
        return b[f"vllm:{k}"] - a.get(f"vllm:{k}", 0.0)

    client = _read(results / f"p{n}.json")
    count, total = delta("request_prefill_time_seconds_count"), delta("request_prefill_time_seconds_sum")
    extra = count - client["completed"]
    idle = _idle_prefill_s(results)
    itl = delta("inter_token_latency_seconds_sum") / delta("inter_token_latency_seconds_count")
    return {"step_period_s": itl, "ttft_p50_s": client["median_ttft_ms"] / 1e3,
            "ttft_mean_s": client["mean_ttft_ms"] / 1e3,
            "prefill_lo_s": (total - extra * idle) / client["completed"], "prefill_hi_s": total / client["completed"]}


def _idle_prefill_s(results: Path) -> float:
    a, b = _metrics(results / "a0-before-metrics.txt"), _metrics(results / "a0-after-metrics.txt")
    k = "vllm:request_prefill_time_seconds"
    return (b[f"{k}_sum"] - a[f"{k}_sum"]) / (b[f"{k}_count"] - a[f"{k}_count"])


def run24_api_excess_s(n: int) -> tuple[float, float]:
    """Run 24's API-side excess at N streams, (lo, hi): the probe's client TTFT median over N = 0's, less its engine
    prefill's growth over N = 0's (the engine's queue is under 0.03 ms at every N)."""
    p, p0 = run24_point(n), run24_point(0)
    ttft = p["ttft_p50_s"] - p0["ttft_p50_s"]
    return ttft - (p["prefill_hi_s"] - p0["prefill_hi_s"]), ttft - (p["prefill_lo_s"] - p0["prefill_hi_s"])


# ---- the host factor ----

# host_probe.py on the H200 leases, paired with K1 (validate/engines/serve_tiny.sh) on the same lease: run 20
# (S 1.36, three readings), run 17 (S 1.75, two); run 24 recorded no host_probe.
PROBE_PAIRS = {"run20": (1.3599, (0.03719238100001121, 0.05038328199998432, 0.03334287600000607)),
               "run17": (1.7501, (0.0442563889999974, 0.04594486500002404))}


def run24_factor(here_probe_s: float, s_run24: float = 1.4302) -> dict[str, float]:
    """How much slower run 24's host runs the loop than this CPU, by each pairing: host_probe scales as 1 / S."""
    return {k: statistics.median(v) * s / s_run24 / here_probe_s for k, (s, v) in PROBE_PAIRS.items()}


def _server_side_s(d: dict) -> float:
    """The probe's time on the emulated server, less the stand-in engine's wait for its next step: from the handler's
    start to the tokens (the tokenizer thread and its return), and from the step's emission to the chunk's write;
    median over the probes."""
    return statistics.median((p["tokenized"] - p["handler"]) + (p["written"] - p["first_emitted"])
                             for p in d["probes"] if "written" in p)


def emulated(folder: Path = COSTS) -> list[dict]:
    """Per serve point on this CPU (N, T): tokens a chunk and the probe's server-side excess over N = 0's, one value
    per repetition (the model's counterpart: the way out and one hop in, the tokenizer thread's return; the HTTP read
    and the handler's start come before the handler's stamp)."""
    points: dict[tuple[int, float], dict] = {}
    for rep in reps(folder):
        base = _server_side_s(_read(rep / "serve-0-2.0.json"))
        for f in rep.glob("serve-*.json"):
            d = _read(f)
            if d["n"]:
                e = points.setdefault((d["n"], d["t_step_s"]), {"n": d["n"], "t_step_s": d["t_step_s"],
                                                                 "tokens_per_chunk": [], "excess_s": []})
                e["tokens_per_chunk"].append(d["tokens"] / d["chunks"])
                e["excess_s"].append(_server_side_s(d) - base)
    return [points[k] for k in sorted(points, key=lambda k: (k[0], -k[1]))]


def compare() -> str:
    costs, probe = measured_costs()
    lines = [f"costs on this CPU: step {costs.step_s * 1e6:.1f} us + {costs.output_s * 1e6:.2f} us an output, "
             f"{costs.chunk_s * 1e6:.1f} us a chunk; host_probe {probe * 1e3:.1f} ms",
             "this CPU's emulation (api_loop_bench serve): N  T ms  r1  tok/chunk measured / model  "
             "server-side excess ms measured / model"]
    for e in emulated():
        lp = loop(costs, e["n"], e["t_step_s"])
        tpc = " ".join(f"{x:.2f}" for x in e["tokens_per_chunk"])
        exc = " ".join(f"{x * 1e3:.2f}" for x in e["excess_s"])
        lines.append(f"  {e['n']:3d} {e['t_step_s'] * 1e3:5.2f} {lp.load_one_token_chunks:5.2f}  "
                     f"{tpc} / {lp.tokens_per_chunk:.2f}   {exc} / {lp.excess_s(hops_in=1) * 1e3:.2f}")
    factors = run24_factor(probe)
    lines.append("run 24: host factor " + ", ".join(f"{k} {v:.2f}" for k, v in factors.items()))
    lines.append("  N  T ms  r1 (run20 pairing)  API-side excess ms measured (lo..hi) / model run20 / run17")
    for n in RUN24_N[1:]:
        p = run24_point(n)
        lo, hi = run24_api_excess_s(n)
        models = [loop(costs.scaled(f), n, p["step_period_s"]) for f in factors.values()]
        lines.append(f"  {n:3d} {p['step_period_s'] * 1e3:5.2f} {models[0].load_one_token_chunks:5.2f}   "
                     f"{lo * 1e3:6.1f}..{hi * 1e3:5.1f} / " + " / ".join(f"{m.excess_s() * 1e3:6.1f}" for m in models))
    return "\n".join(lines) + "\n"


# ---- run 25: api_loop_bench on the H200 host (validate/engines/run25.sh) ----

PREDICTED25 = ROOT / "validate/results/engines/h200-api-loop-run25-predicted.json"


def _work16(c: LoopCosts) -> float:
    """H1's yardstick: one step of 16 outputs and one chunk."""
    return c.step_s + 16 * c.output_s + c.chunk_s


def judge25(folder: Path, here: Path = COSTS) -> str:
    """Run 25's three hypotheses (PREDICTED25), judged on the H200 host's repetitions in `folder`: H1 the host's
    costs over this CPU's in [1.0, 2.2]; H2 the emulation's N 64 points within 30 % of loop() at the host's own costs;
    H3 N 4 and 16 within 1.5 ms of it. Then run 24's API-side excess by loop() at the host's costs, scaled by the
    host_probe of run 24's host (the two pairings) over run 25's."""
    there, probe = measured_costs(folder)
    mine, probe_here = measured_costs(here)
    ratio = _work16(there) / _work16(mine)
    lines = [f"H200 host ({len(reps(folder))} repetitions): step {there.step_s * 1e6:.1f} us + "
             f"{there.output_s * 1e6:.2f} us an output, {there.chunk_s * 1e6:.1f} us a chunk; host_probe "
             f"{probe * 1e3:.1f} ms",
             f"this CPU: step {mine.step_s * 1e6:.1f} us + {mine.output_s * 1e6:.2f} us an output, "
             f"{mine.chunk_s * 1e6:.1f} us a chunk; host_probe {probe_here * 1e3:.1f} ms",
             f"H1: step + 16 outputs + a chunk there / here = {ratio:.2f} (host_probe ratio "
             f"{probe / probe_here:.2f}): {'held' if 1.0 <= ratio <= 2.2 else 'refuted'} (predicted [1.0, 2.2])",
             "  N  T ms   r1  tok/chunk measured / model  server-side excess ms measured / model  err"]
    h2, h3 = [], []
    for e in emulated(folder):
        lp = loop(there, e["n"], e["t_step_s"])
        model = lp.excess_s(hops_in=1)
        meas = statistics.median(e["excess_s"])
        (h2 if e["n"] == 64 else h3).append((model - meas) / meas if e["n"] == 64 else model - meas)
        tpc = " ".join(f"{x:.2f}" for x in e["tokens_per_chunk"])
        exc = " ".join(f"{x * 1e3:.2f}" for x in e["excess_s"])
        err = f"{(model - meas) / meas * 100:+.0f} %" if e["n"] == 64 else f"{(model - meas) * 1e3:+.2f} ms"
        lines.append(f"  {e['n']:3d} {e['t_step_s'] * 1e3:5.2f} {lp.load_one_token_chunks:5.2f}  {tpc} / "
                     f"{lp.tokens_per_chunk:.2f}   {exc} / {model * 1e3:.2f}  {err}")
    lines.append(f"H2 (N 64 within 30 %): {'held' if h2 and all(abs(x) <= 0.30 for x in h2) else 'refuted'}")
    lines.append(f"H3 (N 4, 16 within 1.5 ms): {'held' if h3 and all(abs(x) <= 1.5e-3 for x in h3) else 'refuted'}")
    lines.append("run 24 by loop() at the H200 host's costs x (run 24's host_probe by pairing / run 25's):")
    lines.append("  N  T ms   API-side excess ms measured (lo..hi) / model " + " / ".join(PROBE_PAIRS))
    factors = {k: f * probe_here / probe for k, f in run24_factor(probe_here).items()}
    for n in RUN24_N[1:]:
        p = run24_point(n)
        lo, hi = run24_api_excess_s(n)
        models = [loop(there.scaled(f), n, p["step_period_s"]) for f in factors.values()]
        lines.append(f"  {n:3d} {p['step_period_s'] * 1e3:5.2f}   {lo * 1e3:6.1f}..{hi * 1e3:5.1f} / "
                     + " / ".join(f"{m.excess_s() * 1e3:6.1f}" for m in models)
                     + "   (factors " + ", ".join(f"{v:.2f}" for v in factors.values()) + ")")
    return "\n".join(lines) + "\n"


RUN25 = ROOT / "validate/results/engines/nvidia-h200-api-loop-2026-12-02-run25"


def derive(profile: Path, folder: Path = RUN25) -> dict[str, float]:
    """Run 25's costs on the H200 host (measured_costs: each the median over its repetitions) into the engine profile
    at `profile` as api_output_s and api_chunk_s, with their sources; the other fields untouched."""
    costs, _ = measured_costs(folder)
    d = json.loads(profile.read_text())
    rel = folder.relative_to(ROOT)
    d["api_output_s"], d["api_chunk_s"] = costs.output_s, costs.chunk_s
    host = "; at run 25's host, taken as the profile's (that host's speed against the profile's was not measured)"
    d["sources"]["api_output_s"] = (f"{rel}/rep-*/costs.json step_per_output_s (least squares over steps of 1..128 "
                                    "outputs), median over the repetitions: validate.engines.api_loop.measured_costs"
                                    + host)
    d["sources"]["api_chunk_s"] = (f"{rel}/rep-*/serve-16-1.94.json: the server's CPU less its steps' cost, over its "
                                   "chunks, median over the repetitions: validate.engines.api_loop.measured_costs"
                                   + host)
    profile.write_text(json.dumps(d, indent=1) + "\n")
    return {"api_output_s": costs.output_s, "api_chunk_s": costs.chunk_s}


if __name__ == "__main__":
    if len(sys.argv) == 4 and sys.argv[1:3] == ["derive", "--into"]:
        print(derive(Path(sys.argv[3])))
    elif sys.argv[1:] == ["compare"]:
        print(compare(), end="")
    elif len(sys.argv) == 3 and sys.argv[1] == "judge25":
        print(judge25(Path(sys.argv[2])), end="")
    else:
        sys.exit(__doc__)
