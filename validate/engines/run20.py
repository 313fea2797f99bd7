"""Run 20 (run20.sh): the host calibration a user does (timing mechanism 11, `--host-speed` from serve_tiny.sh) on
vLLM's served MoE, whose prefills past the largest capture size run eagerly on the host (mechanism 8), predicted
before and compared after.

    python -m validate.engines.run20 predict OUT.json                      (before the run; committed)
    python -m validate.engines.run20 compare RESULTS --predicted P [--out REPORT]

Qwen3-30B-A3B (bf16 experts: vLLM's Triton fused MoE) on one `vllm serve`, five runs of `vllm bench serve
--dataset-name random --random-input-len 1500 --random-range-ratio 0.8 --random-output-len 64`, 240 requests each:
cold (seed 201, 4 req/s, the server's first traffic: `--cold-start` judged), then steady: warm (202, 4 req/s: run 19's
warm run again), r8 (203, 8 req/s), r16 (204, 16 req/s), c32 (205, --max-concurrency 32). Each is `roofline simulate
--engine vllm` as a user types it, at the sends vLLM draws for the seed (predict.vllm_arrivals; c32 a closed loop of
32) and the lengths its random dataset draws (traces-run20/lengths.json, drawn with vLLM 0.24.0's RandomDataset
before the run). The prediction is committed at the profile's own host (S = 1) and at the lent hosts' fast state
(S = 1.75, run 17's calibration); judged is the calibration of this host before the served runs, S = the profile's
tiny-server TTFT at concurrency 1 over stage K1's (predict.host_speed_of), the same model at the committed checkout.
`compare` also replays the client's recorded sends (the open-loop runs) and reports stage K2 (the host after) and
stage E (the eager law's own narrow input, tiny-qwen3moe-48, on this host)."""

from __future__ import annotations

import datetime as dt
import json
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

from validate import stored
from validate.engines import labrun
from validate.engines.predict import PROFILE_TINY_SERVER, vllm_arrivals, write_trace

HERE = Path(__file__).resolve().parent
MODEL, N = "Qwen3-30B-A3B", 240
# run: (seed, rate, max concurrency or 0)
RUNS = {"cold": (201, 4.0, 0), "warm": (202, 4.0, 0), "r8": (203, 8.0, 0), "r16": (204, 16.0, 0),
        "c32": (205, float("inf"), 32)}
HOSTS = (1.0, 1.75)
KEYS = (("ttft", "p50", "median_ttft_ms"), ("ttft", "p90", "p90_ttft_ms"), ("ttft", "p99", "p99_ttft_ms"),
        ("tpot", "p50", "median_tpot_ms"), ("tpot", "p99", "p99_tpot_ms"))
# the eager law's MoE input (derive.py --eager): run 5's tiny-qwen3moe-48 prefills past the capture sizes
LAW_RUN = HERE.parents[1] / "validate/results/engines/nvidia-h200-vllm-2026-11-29-run5/narrow/tiny-qwen3moe-48-lat.json"
HYPOTHESES = {
    "H1": "with S from stage K1, the warm run (4 req/s) TTFT p50 and TPOT p50 within 10 % (run 19's warm run at S = 1: "
          "+41 / +53 %)",
    "H2": "the host's calibration holds through the run: stage K2's tiny TTFT at concurrency 1 within 10 % of K1's",
    "H3": "the eager law's narrow input scales as the calibration: stage E's tiny-qwen3moe-48 prefill walls past 512 "
          "tokens (median over 1,024 / 2,048 / 4,096) x S within 15 % of run 5's (the law's input)",
    "H4": "r8, r16 and c32 at S from K1 within issue 29's serving targets (TTFT / TPOT p50 10 %, p99 20 %, output "
          "tok/s 5 %)",
}


def simulate(trace: Path, conc: int, host: float, cold: bool = False) -> dict:
    cmd = [sys.executable, "-m", "roofline.cli", "simulate", "--model", MODEL, "--hardware", "H200", "--method",
           "bf16", "--engine", "vllm", "--trace", str(trace), "--no-search", "--json", "--host-speed", repr(host),
           *(["--max-concurrency", str(conc)] if conc else []), *(["--cold-start"] if cold else [])]
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode:
        return {"error": r.stderr.strip()[-300:]}
    d = json.loads(r.stdout)
    return {k: d[k] for k in ("ttft_s", "tpot_s", "e2e_s", "throughput_tokens_per_s", "first_use", "max_running")}


def traces(tmp: Path, sends: dict[str, list[float]] | None = None, runs: dict = RUNS) -> dict[str, Path]:
    """Each run's trace: the seed's draws (sends None) or the recorded sends; a closed loop's arrivals all 0. The
    lengths are the seed's (traces-run20/lengths.json: seeds 201-205, whatever the rate)."""
    lengths = json.loads((HERE / "traces-run20" / "lengths.json").read_text())
    tmp.mkdir(parents=True, exist_ok=True)
    out = {}
    for name, (seed, rate, conc) in runs.items():
        L = lengths[str(seed)]
        arrivals = [0.0] * N if conc else (sends[name] if sends else vllm_arrivals(seed, rate, N))
        out[name] = write_trace(tmp / f"{name}.csv", arrivals, L["input"], L["output"])
    return out


def sims(trace: Path, name: str, host: float, runs: dict = RUNS) -> dict:
    conc = runs[name][2]
    out = {"steady": simulate(trace, conc, host)}
    if name == "cold":
        out["cold_start"] = simulate(trace, conc, host, cold=True)
    return out


def predict(out: Path, runs: dict = RUNS, hosts: tuple = HOSTS, hypotheses: dict = HYPOTHESES,
            about: str = __doc__.splitlines()[0]) -> None:
    tr = traces(Path(tempfile.mkdtemp()), runs=runs)
    table = {f"{host:g}": {name: sims(t, name, host, runs) for name, t in tr.items()} for host in hosts}
    sha = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True).stdout.strip()
    out.write_text(json.dumps({"about": about, "date": dt.date.today().isoformat(),
                               "checkout": sha, "hypotheses": hypotheses,
                               "judged": {name: "cold_start" if name == "cold" else "steady" for name in runs},
                               "hosts": table}, indent=1) + "\n")


def tiny_ttft(results: Path, tag: str = "") -> float | None:
    f = results / f"tiny{tag}-conc1.json"
    return json.loads(stored.read_text(f))["median_ttft_ms"] if stored.exists(f) else None


def eager_wall(lat: dict) -> float:
    """The median prefill wall past the largest capture size (512) of a lat.py result, ms."""
    return 1e3 * statistics.median(p["median_s"] for p in lat["prefill"] if p["P"] > 512)


def compare(results: Path, predicted: dict, runs: dict = RUNS,
            title: str = "Run 20: the host's calibration on vLLM's served MoE") -> str:
    ref = json.loads((PROFILE_TINY_SERVER / "tiny-conc1.json").read_text())["median_ttft_ms"]
    k1, k2 = tiny_ttft(results), tiny_ttft(results, "2")
    host = ref / k1 if k1 else 1.0
    lines = [f"{title} ({MODEL}, H200); results {results.name}",
             f"host: the profile's tiny TTFT at concurrency 1 {ref:.2f} ms; K1 (before) "
             + (f"{k1:.2f} ms -> S = {host:.4f}" if k1 else "not run -> S = 1")
             + (f"; K2 (after) {k2:.2f} ms (S {ref / k2:.4f}, K2/K1 {k2 / k1:.3f})" if k1 and k2 else "")]
    if stored.exists(results / "host-probe.jsonl"):
        probes = [json.loads(x)["python_probe_s"] for x in stored.read_text(results / "host-probe.jsonl").splitlines()
                  if x.startswith("{")]
        lines.append("host_probe.py (K1 before / after, K2 before / after, E after), ms: "
                     + " / ".join(f"{1e3 * p:.1f}" for p in probes))
    lat_f = results / "tiny-qwen3moe-48-lat.json"
    if stored.exists(lat_f):
        law, now = eager_wall(json.loads(LAW_RUN.read_text())), eager_wall(json.loads(stored.read_text(lat_f)))
        lines.append(f"E: tiny-qwen3moe-48 prefill past 512 tokens, median: run 5 (the law's input) {law:.1f} ms, "
                     f"here {now:.1f} ms (speed {law / now:.3f}); x S: {now * host:.1f} ms "
                     f"({100 * (now * host - law) / law:+.1f} % of the law's input)")
    lines.append("measured / predicted (err %); * judged")
    tmp = Path(tempfile.mkdtemp())
    meas = {name: labrun.result(results, name) for name in runs}
    now_rows = []
    columns = [(f"before, S = {h}", predicted["hosts"][h]) for h in predicted["hosts"]]
    columns.append((f"before, S = {host:.4f} (K1)", {name: sims(t, name, host, runs) for name, t in
                                                      traces(tmp / "k1", runs=runs).items()} if k1 else None))
    ran = {n: m for n, m in meas.items() if m is not None}
    sends = {n: labrun.sends(m) for n, m in ran.items()}
    if len(ran) == len(runs):  # the trust rows: the default host (what `simulate` prints without --host-speed)
        rec = traces(tmp / "rec", sends, runs)
        for h in (1.0, host):
            columns.append((f"now, recorded sends, S = {h:.4f}", {name: sims(t, name, h, runs)
                                                                  for name, t in rec.items()}))
    for title, table in columns:
        if table is None:
            continue
        lines.append(f"-- {title}")
        for name in runs:
            if meas[name] is None:
                lines.append(f"{name}: not run")
                continue
            cubins = stored.read_text(results / f"{name}-cubins.txt").strip() if stored.exists(
                results / f"{name}-cubins.txt") else "?"
            for variant, sim in table[name].items():
                if "error" in sim:
                    lines.append(f"{name:5s} {variant:10s}  error: {sim['error']}")
                    continue
                judged = "*" if predicted["judged"][name] == variant and "(K1)" in title else " "
                keys = (sim.get("first_use") or {}).get("keys", 0)
                cells = labrun.served_cells(meas[name], sim, KEYS)
                lines.append(f"{name:5s} {variant:10s}{judged}  {cells}   max running "
                             f"{sim['max_running']}" + (f"   keys {keys}, cubins {cubins}" if name == "cold" else ""))
                if title.endswith("S = 1.0000") and variant == "steady" and name != "cold":
                    now_rows.append((name, meas[name], sim))
    lines += labrun.trust_rows(f"{MODEL}, vllm serve, random 300-2,700-token prompts, the default host (S = 1)",
                               now_rows)
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    labrun.main(__doc__, predict, compare)
