"""Run 23 (run23.sh): vLLM's served Qwen3-30B-A3B at run 22's sends again, with the engine's own step log and an
in-situ host probe, to take run 22's TTFT miss apart (its eager steps 80-85 ms where run 20's were 65 ms, on a lease
whose tiny server read 4 % faster).

    python -m validate.engines.run23 predict OUT.json                      (before the run; committed)
    python -m validate.engines.run23 compare RESULTS --predicted P [--out REPORT]

Runs (run 22's table): cold (seed 201, 6 req/s, first traffic), r6 (203, 6 req/s), r12 (204, 12 req/s), c16 (205,
--max-concurrency 16); the probes P2k / P256: 12 prompts of 2,048 / 256 tokens, 4 outputs, --max-concurrency 1 (one
eager prefill / one graphed prefill and nothing queued) on the same server between cold and r6. The server logs every
step (iter_log.py). Judged at S from stage K1 (the user's calibration), the model at the committed checkout; beside it
the host speed the probe P2k implies (in_situ_speed: the S at which the model's P2k TTFT median equals the measured)
and the judged runs at that S."""

from __future__ import annotations

import json
import statistics
import tempfile
from pathlib import Path

import numpy as np

from validate import stored
from validate.engines import iter_log, labrun, run20, run22
from validate.engines.predict import PROFILE_TINY_SERVER, write_trace

RUNS = run22.RUNS
HOSTS = (1.0, 1.1, 1.36, 1.41, 1.75)
PROBES = {"P2k": 2048, "P256": 256}
PROBE_N, PROBE_OUT = 12, 4
HYPOTHESES = {
    "H1": "run 22 reproduces at S from K1: TPOT p50 / p99 of r6, r12, c16 within the serving targets, TTFT p50 under "
          "by more than 10 % (run 22: -23..-27 %)",
    "H2": "K1 does not carry the eager path: the probe P2k's TTFT median (one eager prefill, nothing queued) is under "
          "by more than 10 % at S from K1",
    "H3": "the engine groups more prompts into one prefill step than the model: the client-side first-token clusters "
          "(first tokens within 4 ms) of r6 hold more prompts each than the model's at the same sends, by more than "
          "10 % (run 22 at S = 1.1: 1.28 measured, 1.10 modelled)",
    "H4": "at the probe's in-situ S the served TTFT p50 of r6, r12, c16 within 10 % (the eager step's speed is the "
          "TTFT's; run 22 at S = 1.1 said -6 / +4 / -7 %) while their TPOT p50 are over by more than 10 % (the "
          "grouping of H3: run 22 at S = 1.1: +17 / +28 / +12 %)",
}


def probe_trace(tmp: Path, prompt: int) -> Path:
    return write_trace(tmp / f"probe{prompt}.csv", [0.0] * PROBE_N, prompt, PROBE_OUT)


def probe_ttft(prompt: int, host: float) -> float:
    """The model's TTFT median (ms) of a probe: PROBE_N prompts of `prompt` tokens one at a time (a closed loop)."""
    sim = run20.simulate(probe_trace(Path(tempfile.mkdtemp()), prompt), 1, host)
    return sim["ttft_s"]["p50"] * 1e3


def in_situ_speed(prompt: int, measured_ms: float, lo: float = 0.3, hi: float = 4.0) -> float:
    """The host speed at which the model's probe TTFT median equals `measured_ms` (bisection: the TTFT falls as the
    host gets faster; the ends if the measurement is outside)."""
    if probe_ttft(prompt, hi) > measured_ms:
        return hi
    if probe_ttft(prompt, lo) < measured_ms:
        return lo
    for _ in range(14):
        mid = (lo * hi) ** 0.5
        lo, hi = (mid, hi) if probe_ttft(prompt, mid) > measured_ms else (lo, mid)
    return (lo * hi) ** 0.5


def first_token_clusters(first: np.ndarray, gap_s: float = 0.004) -> float:
    """Prompts per cluster of first tokens (sorted instants within `gap_s` of the previous one: one step's)."""
    t = np.sort(first)
    return len(t) / (1 + int(np.sum(np.diff(t) > gap_s)))


def predict(out: Path) -> None:
    run20.predict(out, runs=RUNS, hosts=HOSTS, hypotheses=HYPOTHESES, about=__doc__.splitlines()[0])
    d = json.loads(out.read_text())
    d["probes"] = {f"{h:g}": {name: probe_ttft(p, h) for name, p in PROBES.items()} for h in HOSTS}
    out.write_text(json.dumps(d, indent=1) + "\n")


def model_clusters(trace: Path, conc: int, host: float) -> float:
    """The model's first-token clusters of a trace (the simulator's per-request first tokens)."""
    t = labrun.simulated_trace(["--model", run20.MODEL, "--hardware", "H200", "--method", "bf16", "--engine", "vllm",
                                "--trace", str(trace), "--no-search", "--json", "--host-speed", repr(host),
                                *(["--max-concurrency", str(conc)] if conc else [])])
    return first_token_clusters(t.first_token_s)


def compare(results: Path, predicted: dict) -> str:
    text = run20.compare(results, predicted, runs=RUNS, title="Run 23: run 22's sends with the engine's step log")
    ref = json.loads((PROFILE_TINY_SERVER / "tiny-conc1.json").read_text())["median_ttft_ms"]
    k1 = run20.tiny_ttft(results)
    host = ref / k1 if k1 else 1.0
    lines = ["", "-- the probes (concurrency 1, 12 prompts, 4 outputs): TTFT median measured / model at S from K1"]
    speeds = {}
    for name, prompt in PROBES.items():
        m = labrun.result(results, name)
        if m is None:
            lines.append(f"{name}: not run")
            continue
        p = probe_ttft(prompt, host)
        speeds[name] = in_situ_speed(prompt, m["median_ttft_ms"])
        mt = m["median_ttft_ms"]
        lines.append(f"{name} ({prompt} tokens): {mt:.1f} / {p:.1f} ({100 * (p - mt) / mt:+.1f} %)"
                     f"; the S at which the model reads it: {speeds[name]:.4f}")
    log_f = results / "server.log"
    text_log = stored.read_text(log_f) if stored.exists(log_f) else ""
    spans = iter_log.windows(stored.read_text(results / "stages.log")) if stored.exists(results / "stages.log") else {}
    tmp = Path(tempfile.mkdtemp())
    meas = {n: labrun.result(results, n) for n in RUNS}
    ran = {n: m for n, m in meas.items() if m is not None}
    rec = run20.traces(tmp, {n: labrun.sends(m) for n, m in ran.items()}, {n: RUNS[n] for n in ran}) if ran else {}
    if "P2k" in speeds:
        s_p = speeds["P2k"]
        lines.append(f"-- now, recorded sends, S = {s_p:.4f} (the probe P2k's in-situ speed)")
        for name, t in rec.items():
            if name == "cold":
                continue
            sim = run20.simulate(t, RUNS[name][2], s_p)
            lines.append(f"{name:5s} steady      {labrun.served_cells(ran[name], sim, run20.KEYS)}")
    lines.append("-- steps: the engine's log (iter_log.py) and the first-token clusters (prompts per cluster, "
                 "measured / model at S from K1" + (" and at P2k's S" if "P2k" in speeds else "") + ")")
    for name, t in rec.items():
        st = iter_log.summary(iter_log.steps(text_log, spans[name])) if text_log and name in spans else {}
        first = np.array([s + f for s, f in zip(ran[name]["start_times"], ran[name]["ttfts"], strict=True)])
        hosts = (host, speeds["P2k"]) if "P2k" in speeds else (host,)
        mc = [model_clusters(t, RUNS[name][2], h) for h in hosts]
        lines.append(f"{name:5s} clusters {first_token_clusters(first):.3f} / " + " / ".join(f"{c:.3f}" for c in mc)
                     + (f"   log: {st['steps']} steps, {st['prefill_steps']} with prompts ({st['eager_steps']} eager), "
                        f"{st['prompts_per_prefill_step']:.3f} prompts a prefill step, periods: eager "
                        f"{st['eager_period_ms']:.1f} ms, decode {st['decode_period_ms']:.1f} ms"
                        if st.get("steps") and st.get("eager_steps") else ""))
    spikes = []
    for name, m in ran.items():
        itl = [x for r in m["itls"] for x in r if x > 0.025]
        if itl:
            spikes.append(f"{name} {1e3 * statistics.median(itl):.1f}")
    lines.append("served ITLs over 25 ms (the eager steps as the clients see them), median ms: " + ", ".join(spikes))
    return text + "\n".join(lines) + "\n"


if __name__ == "__main__":
    labrun.main(__doc__, predict, compare)
