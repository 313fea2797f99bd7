"""Run 24 (run24.sh): the API server's part of a TTFT while it streams other requests' tokens, on the tiny model.

    python -m validate.engines.run24 predict OUT.json                      (before the run; committed)
    python -m validate.engines.run24 compare RESULTS --predicted P [--out REPORT]

tiny-llama on one `vllm serve` (GPU work negligible): for N in 0, 4, 16, 64 background streams (64-token prompts,
12,000 outputs, sent at once), a probe of 20 prompts of 1,500 tokens, 4 outputs, one at a time. The model's probe:
`roofline simulate --engine vllm` on a trace of the N streams at 0 s and the 20 prompts 6 s on, 60 ms apart (past
each one's TTFT: one at a time), the probe's TTFT median; its only load-dependent API term is the first token's
emission behind its step's other outputs (clients.emission_delay_s: per_seq_s x running). Measured: the probe's client
TTFT median, and from /metrics before and after the probe window the API path (the API server's TTFT less the
engine's queue and prefill, means) and the streamed tokens a second (generation_tokens_total over the window)."""

from __future__ import annotations

import datetime as dt
import json
import statistics
import subprocess
import tempfile
from pathlib import Path

from validate import stored
from validate.engines import labrun
from validate.engines.models import TINY
from validate.engines.predict import PROFILE_TINY_SERVER, write_trace

NS = (0, 4, 16, 64)
PROBE, PROBE_OUT, PROBE_N, BG_IN, BG_OUT, START, GAP = 1500, 4, 20, 64, 12000, 6.0, 0.06
HOSTS = (1.0, 1.36, 1.75)
HYPOTHESES = {
    "H1": "the API path (the API server's TTFT less the engine's queue and prefill, /metrics means) grows with the "
          "streamed tokens: at N 64 it exceeds N 0's by more than 5 ms, where the model's only load term "
          "(emission behind the step's outputs) adds per_seq_s x 64 / S (~2.5 ms at S 1)",
    "H2": "the probe's client TTFT median at N 0 within 10 % of the model's at S from K1",
}


def simulate(n: int, host: float) -> float:
    """The model's probe TTFT median (ms) with n background streams."""
    tmp = Path(tempfile.mkdtemp())
    arrivals = [0.0] * n + [START + GAP * i for i in range(PROBE_N)]
    trace = write_trace(tmp / "t.csv", arrivals, [BG_IN] * n + [PROBE] * PROBE_N, [BG_OUT] * n + [PROBE_OUT] * PROBE_N)
    config = tmp / "config.json"
    config.write_text(json.dumps(TINY))
    t = labrun.simulated_trace(["--model", str(config), "--hardware", "H200", "--method", "bf16", "--engine", "vllm",
                                "--trace", str(trace), "--no-search", "--json", "--host-speed", repr(host)])
    return 1e3 * statistics.median(t.ttft_s[n:])  # the probe: the requests after the n streams


def predict(out: Path) -> None:
    table = {f"{h:g}": {str(n): simulate(n, h) for n in NS} for h in HOSTS}
    sha = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True).stdout.strip()
    out.write_text(json.dumps({"about": __doc__.splitlines()[0], "date": dt.date.today().isoformat(), "checkout": sha,
                               "hypotheses": HYPOTHESES, "probe_ttft_ms": table}, indent=1) + "\n")


def _metrics(path: Path) -> tuple[float, dict[str, float]]:
    """A stamped /metrics scrape (run24.sh's `metrics`): (its time, {name_sum / name_count / counter: value})."""
    lines = stored.read_text(path).splitlines()
    out: dict[str, float] = {}
    for line in lines[1:]:
        name, _, value = line.rpartition(" ")
        key = name.split("{")[0]
        if key.endswith(("_sum", "_count", "_total")):
            out[key] = out.get(key, 0.0) + float(value)
    return float(lines[0]), out


def api_path(results: Path, n: int) -> tuple[float, float]:
    """(API path ms: the API server's TTFT less the engine's queue and prefill, means over the probe window; streamed
    tokens a second over the window) from the scrapes before and after N's probe."""
    t0, a = _metrics(results / f"a{n}-before-metrics.txt")
    t1, b = _metrics(results / f"a{n}-after-metrics.txt")

    def mean(k: str) -> float:
        c = b[f"vllm:{k}_count"] - a[f"vllm:{k}_count"]
        return 1e3 * (b[f"vllm:{k}_sum"] - a[f"vllm:{k}_sum"]) / c if c else float("nan")

    api = (mean("time_to_first_token_seconds") - mean("request_queue_time_seconds")
           - mean("request_prefill_time_seconds"))
    return api, (b["vllm:generation_tokens_total"] - a["vllm:generation_tokens_total"]) / (t1 - t0)


def compare(results: Path, predicted: dict) -> str:
    ref = json.loads((PROFILE_TINY_SERVER / "tiny-conc1.json").read_text())["median_ttft_ms"]
    k1 = json.loads(stored.read_text(results / "tiny-conc1.json"))["median_ttft_ms"]
    host = ref / k1
    lines = [f"Run 24: the API path under streaming load (tiny-llama, H200); results {results.name}",
             f"host: K1 {k1:.2f} ms -> S = {host:.4f}",
             "N   streamed tok/s   API path ms   probe TTFT p50 measured / model at S (err %)"]
    for n in NS:
        m = labrun.result(results, f"p{n}")
        if m is None:
            lines.append(f"{n:3d}  not run")
            continue
        api, rate = api_path(results, n)
        p = simulate(n, host)
        mt = m["median_ttft_ms"]
        lines.append(f"{n:3d}  {rate:12,.0f}   {api:10.1f}   {mt:7.1f} / {p:7.1f} ({100 * (p - mt) / mt:+.1f})")
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    labrun.main(__doc__, predict, compare)
