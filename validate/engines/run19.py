"""Run 19 (run19.sh): a fresh vLLM server's first-use compiles of the fused-MoE kernel in served traffic, predicted
before and compared after.

    python -m validate.engines.run19 predict OUT.json                      (before the run; committed)
    python -m validate.engines.run19 compare RESULTS --predicted P [--out REPORT]

Qwen3-30B-A3B (bf16 experts: vLLM's Triton fused MoE) on a freshly started `vllm serve`, two runs of `vllm bench
serve --dataset-name random --random-input-len 1500 --random-range-ratio 0.8 --random-output-len 64` at 4 req/s, 240
requests each, no ready-check request (--ready-check-timeout-sec 0): "cold" (seed 201) first, then "warm" (seed 202)
on the same server. Prompts of 300-2,700 tokens make steps of more tokens than vLLM's largest capture size (512), so
the fused MoE runs at the step's own token count and meets new (tuned config, parity) keys until each has been seen
(roofline.engines.first_use). Each run is `roofline simulate --engine vllm` as a user types it, steady (the default)
and `--cold-start`, at the sends vLLM draws for the seed (predict.vllm_arrivals) and the lengths its random dataset
draws (traces-run19/lengths.json, drawn with vLLM 0.24.0's RandomDataset before the run); `compare` replays the
client's recorded sends and lengths. The engine's compiles are counted as the cubin files written during each run
(run19.sh: `find -newer` a marker), two per key."""

from __future__ import annotations

import datetime as dt
import json
import subprocess
import sys
import tempfile
from pathlib import Path

from validate import stored
from validate.engines import labrun
from validate.engines.predict import vllm_arrivals, write_trace

HERE = Path(__file__).resolve().parent
MODEL, RATE, N = "Qwen3-30B-A3B", 4.0, 240
RUNS = {"cold": 201, "warm": 202}
KEYS = (("ttft", "p50", "median_ttft_ms"), ("ttft", "p90", "p90_ttft_ms"), ("ttft", "p99", "p99_ttft_ms"),
        ("tpot", "p50", "median_tpot_ms"), ("tpot", "p99", "p99_tpot_ms"))


def simulate(trace: Path, cold: bool) -> dict:
    cmd = [sys.executable, "-m", "roofline.cli", "simulate", "--model", MODEL, "--hardware", "H200", "--method",
           "bf16", "--engine", "vllm", "--trace", str(trace), "--no-search", "--json",
           *(["--cold-start"] if cold else [])]
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode:
        return {"error": r.stderr.strip()[-300:]}
    d = json.loads(r.stdout)
    return {k: d[k] for k in ("ttft_s", "tpot_s", "e2e_s", "throughput_tokens_per_s", "first_use", "max_running")}


def predict(out: Path) -> None:
    lengths, tmp = json.loads((HERE / "traces-run19" / "lengths.json").read_text()), Path(tempfile.mkdtemp())
    runs = {}
    for name, seed in RUNS.items():
        L = lengths[str(seed)]
        trace = write_trace(tmp / f"{name}.csv", vllm_arrivals(seed, RATE, N), L["input"], L["output"])
        runs[name] = {"steady": simulate(trace, False), "cold_start": simulate(trace, True)}
    sha = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True).stdout.strip()
    out.write_text(json.dumps({"about": __doc__.splitlines()[0], "date": dt.date.today().isoformat(),
                               "checkout": sha, "judged": {"cold": "cold_start", "warm": "steady"},
                               "runs": runs}, indent=1) + "\n")


def compare(results: Path, predicted: dict) -> str:
    tmp = Path(tempfile.mkdtemp())
    lines = [f"Run 19: a fresh vLLM server's fused-MoE compiles in served traffic ({MODEL}, H200, 4 req/s); "
             f"results {results.name}", "measured / predicted (err %); judged: the cold run fresh (--cold-start), "
             "the warm run steady; the other column beside it"]
    now_rows = []
    for which in ("before", "now"):
        lines.append(f"-- {which}: " + ("the prediction at the seed's sends and lengths (committed before the run)"
                                         if which == "before" else "replayed at the client's recorded sends"))
        for name in RUNS:
            meas = labrun.result(results, name)
            if meas is None:
                lines.append(f"{name}: not run")
                continue
            if which == "before":
                sims = predicted["runs"][name]
            else:
                trace = write_trace(tmp / f"{name}.csv", labrun.sends(meas), meas["input_lens"], meas["output_lens"])
                sims = {"steady": simulate(trace, False), "cold_start": simulate(trace, True)}
                if predicted["judged"][name] == "steady":  # the bands are the default (steady) simulation's
                    now_rows.append((f"moe-{name}", meas, sims["steady"]))
            cubins = stored.read_text(results / f"{name}-cubins.txt").strip() if stored.exists(
                results / f"{name}-cubins.txt") else "?"
            for variant in ("cold_start", "steady"):
                sim = sims[variant]
                keys = (sim.get("first_use") or {}).get("keys", 0)
                judged = "*" if predicted["judged"][name] == variant else " "
                lines.append(f"{name:5s} {variant:10s}{judged}   " + labrun.served_cells(meas, sim, KEYS) +
                             f"   keys compiled: model {keys} (cubins {2 * keys}), engine cubins {cubins}")
    lines += labrun.trust_rows(f"{MODEL}, vllm serve, random 300-2,700-token prompts; the warm run", now_rows)
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    labrun.main(__doc__, predict, compare)
