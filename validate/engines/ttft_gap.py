"""Where a served run's TTFT goes: each request's measured TTFT (vllm bench serve --save-detailed: ttfts,
start_times) against roofline's simulation of the same arrivals, request by request, split by the load the
simulation saw when the request arrived.

python -m validate.engines.ttft_gap RESULTS_DIR [--json OUT] [--no-lag]
(cases file: $ROOFLINE_ENGINE_CASES, default here cases-run2.json; --no-lag: the engine's admission lag switched off,
the simulation as it was before EngineScheduling.admission_lag)

For every served run of the cases file with a saved result (predict.serve_runs: the client's recorded send times),
the simulation is `roofline simulate --engine vllm` with the run's flags (predict.simulate_flags), run in-process so
its per-request first-token times and its per-step records (start, duration, running, waiting) are kept. Per
request:
- excess_s = measured TTFT - simulated TTFT;
- the load at arrival in the simulation: running sequences (decodes the prefill shares its steps with) and waiting,
  and the simulation's blocks (a block: one step, or decode-only steps back to back) from arrival to first token.
The report bins the requests by running decodes at arrival and gives the median excess per bin, and the slope of
excess against running decodes (least squares). A mechanism that costs per step in flight (a step's duration grows
with the running decodes) grows with them; a fixed per-request cost (the API server's) is flat.
Nothing here feeds the model: it locates the gap for the microbenchmark (admission.py) to measure.
"""

from __future__ import annotations

import argparse
import json
import os
from dataclasses import replace
from pathlib import Path

import numpy as np

from validate import stored


def _simulate_trace(flags: list[str], hardware: str, lag: bool = True):
    """The Simulator and Trace of one `roofline simulate` command line, built as roofline.cli.simulate does."""
    from roofline.catalogue import load_hardware, load_model
    from roofline.catalogue.loading import validate
    from roofline.cli import build_parser
    from roofline.cli.simulate import _clients, _engine_profile, _simulator
    from roofline.cli.simulate_inputs import inputs as _inputs
    from roofline.methods import parse_method
    from roofline.specs import Workload
    from validate.engines.predict import simulate_flags

    common = simulate_flags(hardware)
    if "--trace" in flags:
        common = [f for i, f in enumerate(common) if f not in ("--prompt-tokens", "--output-tokens")
                  and common[i - 1] not in ("--prompt-tokens", "--output-tokens")]
    args = build_parser().parse_args(["simulate", *common, *flags])
    model, hw = load_model(args.model), load_hardware(args.hardware)
    requests, _, _ = _inputs(args)
    clients = _clients(args)
    profile = _engine_profile(args, hw, requests)
    data = {"context_tokens": max(requests.max_tokens, 2), "tp": args.tp, "pp": args.pp,
            "prefill_chunk_tokens": profile.max_num_batched_tokens, "engine": args.engine,
            "page_tokens": profile.page_tokens, "gpu_memory_utilization": args.utilization}
    workload = validate(Workload, data, "workload")
    sim = _simulator(args, model, hw, workload, parse_method(args.method[0]), profile, requests.max_tokens)
    if not lag:
        sim.set_engine(replace(sim.engine, admission_lag=False))
    return sim, sim.run(requests, None, clients)


def _split(trace, first_token_s: np.ndarray, arrive_s: np.ndarray) -> dict[str, np.ndarray]:
    """Per request, from the simulation's records (one per block): running and waiting at the block in progress
    when it arrived, and the blocks from its arrival to its first token."""
    st = trace.steps
    starts, ends = st[:, 0], st[:, 0] + st[:, 1]
    at = np.clip(np.searchsorted(starts, arrive_s, side="right") - 1, 0, len(st) - 1)
    first = np.searchsorted(ends, first_token_s - 1e-12, side="left")
    return {"running": st[at, 2], "waiting": st[at, 3], "blocks": (first - at).astype(float)}


def analyse(results: Path, hardware: str, lag: bool = True) -> dict:
    from validate.engines.predict import CASES, serve_runs

    out = {}
    for name, flags in serve_runs(results):
        f = results / f"{CASES['serve']['model']}-{name}.json"
        if not stored.exists(f) or name.startswith("spec"):
            continue
        d = json.loads(stored.read_text(f))
        meas = np.asarray(d.get("ttfts") or [], dtype=float)
        if not len(meas):
            continue
        sim, trace = _simulate_trace(flags, hardware, lag)
        if len(trace.ttft_s) != len(meas):
            out[name] = {"error": f"{len(meas)} measured requests, {len(trace.ttft_s)} simulated"}
            continue
        # the engine sees a request api_request_s after it is sent (clients.Arrivals)
        arrive = trace.requests.arrival_s + sim.engine.overheads.api_request_s
        parts = _split(trace, trace.first_token_s, arrive)
        excess = meas - trace.ttft_s
        ok = np.isfinite(excess)
        x = np.column_stack([parts["running"][ok], np.ones(ok.sum())])
        slope_run = float(np.linalg.lstsq(x, excess[ok], rcond=None)[0][0])
        bins = {}
        for lo, hi in ((0, 16), (16, 48), (48, 96), (96, 160), (160, 100000)):
            m = ok & (parts["running"] >= lo) & (parts["running"] < hi)
            if m.sum():
                bins[f"{lo}-{hi}"] = {"n": int(m.sum()), "excess_ms_p50": float(np.median(excess[m]) * 1e3),
                                      "measured_ms_p50": float(np.median(meas[m]) * 1e3),
                                      "simulated_ms_p50": float(np.median(trace.ttft_s[m]) * 1e3),
                                      "sim_blocks_p50": float(np.median(parts["blocks"][m]))}
        out[name] = {
            "n": int(ok.sum()), "measured_ttft_ms_p50": float(np.median(meas) * 1e3),
            "simulated_ttft_ms_p50": float(np.median(trace.ttft_s) * 1e3),
            "excess_ms_p50": float(np.median(excess[ok]) * 1e3),
            "excess_ms_p90": float(np.percentile(excess[ok], 90) * 1e3),
            "sim_running_p50": float(np.median(parts["running"])),
            "sim_waiting_p50": float(np.median(parts["waiting"])),
            "sim_blocks_to_first_token_p50": float(np.median(parts["blocks"])),
            "excess_ms_per_running_seq": slope_run * 1e3, "by_running": bins}
    return out


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("results", type=Path)
    p.add_argument("--hardware", default="H200")
    p.add_argument("--json", type=Path)
    p.add_argument("--no-lag", action="store_true")
    a = p.parse_args()
    res = analyse(a.results, a.hardware, not a.no_lag)
    for name, r in res.items():
        if "error" in r:
            print(name, r["error"])
            continue
        print(f"{name:8s} n={r['n']:4d} TTFT p50 measured {r['measured_ttft_ms_p50']:7.1f} simulated "
              f"{r['simulated_ttft_ms_p50']:7.1f} | excess p50 {r['excess_ms_p50']:6.1f} p90 {r['excess_ms_p90']:6.1f}"
              f" ms | sim running {r['sim_running_p50']:4.0f} waiting {r['sim_waiting_p50']:3.0f} | d(excess)/"
              f"d(running) {r['excess_ms_per_running_seq']:6.3f} ms")
        for b, v in r["by_running"].items():
            print(f"    running {b:>9s}: n={v['n']:4d} excess p50 {v['excess_ms_p50']:7.1f} ms "
                  f"(meas {v['measured_ms_p50']:7.1f}, sim {v['simulated_ms_p50']:7.1f}, "
                  f"sim blocks {v['sim_blocks_p50']:.0f})")
    if a.json:
        a.json.write_text(json.dumps(res, indent=1) + "\n")


if __name__ == "__main__":
    os.environ.setdefault("ROOFLINE_ENGINE_CASES", "cases-run2.json")
    main()
