"""roofline's prediction of every case in cases.json, written BEFORE the engine is timed.

python -m validate.engines.predict OUT_JSON [--hardware H200] [--engine vllm]
The cases file is $ROOFLINE_ENGINE_CASES (relative to validate/engines/; default cases.json).
Per model: the KV pool, pool tokens and max concurrency as `roofline capacity --engine vllm` gives them at the
case's max_model_len and gpu_memory_utilization; per decode case what (t_N - t_1) / (N - 1) measures: the two runs
replayed step by step as the engine schedules them (offline_schedule.py: chunked prefill of the B prompts within the
offline token budget, decodes riding in the prefill steps, the last requests' tail; pure decode steps are
PhaseModel.decode_time) and differenced; per prefill case the batch-1 prefill at the clock its three calls run at
(lone_prefill: where its median call sits on the board's settling curve), each with the planner's default options
for the engine (`roofline plan --engine vllm`), plus the engine's time profile (roofline.engines.timing) when one
exists.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import subprocess
import tempfile
from pathlib import Path

from roofline.catalogue.loading import validate
from roofline.catalogue.store import load_hardware, load_model
from roofline.engines.scheduling import vllm as vllm_scheduling
from roofline.methods.registry import parse_method
from roofline.planner.phases import PhaseModel
from roofline.specs import Workload
from validate import stored
from validate.engines import models as engine_models
from validate.engines.lone_prefill import lone_prefill_s
from validate.engines.offline_schedule import offline_decode_step_s

CASES_FILE = os.environ.get("ROOFLINE_ENGINE_CASES", "cases.json")
CASES = json.loads((Path(__file__).resolve().parent / CASES_FILE).read_text())
# serve.sh's --seed of each run, in its order: the Poisson rates, the prefix run, the closed loop, the burst
SERVE_SEED0 = 100


def util_of(case: dict) -> float:
    """A model's gpu_memory_utilization: its own entry, else the file's."""
    return case.get("gpu_memory_utilization", CASES["gpu_memory_utilization"])


def vllm_arrivals(seed: int, rate: float, n: int) -> list[float]:
    """The send times `vllm bench serve --request-rate RATE --seed SEED` draws (burstiness 1): numpy's global
    generator seeded with the run's seed, one gamma(1, 1 / rate) gap per request, cumulated and rescaled so the last
    send is at n / rate (vllm/benchmarks/serve.py get_request, v0.24.0; the random dataset draws from its own
    generator, so nothing else consumes the global one first)."""
    import numpy as np

    state = np.random.get_state()
    np.random.seed(seed)
    gaps = [np.random.gamma(shape=1.0, scale=1.0 / rate) for _ in range(n)]
    np.random.set_state(state)
    t = np.cumsum(gaps)
    return list(t * (n / rate) / t[-1])


def write_trace(path: Path, arrivals: list[float], prompt: list[int] | int, output: list[int] | int) -> Path:
    """A `roofline simulate --trace` CSV: arrival_s, prompt_tokens, output_tokens per request."""
    n = len(arrivals)
    prompt = prompt if isinstance(prompt, list) else [prompt] * n
    output = output if isinstance(output, list) else [output] * n
    rows = ["arrival_s,prompt_tokens,output_tokens"]
    rows += [f"{a:.6f},{p},{o}" for a, p, o in zip(arrivals, prompt, output, strict=True)]
    path.write_text("\n".join(rows) + "\n")
    return path


def model_of(name: str):
    """The catalogue model, or (tiny model) roofline's import of the config.json the engine runs."""
    try:
        return load_model(name)
    except Exception:
        folder = Path(tempfile.mkdtemp())
        (folder / "config.json").write_text(json.dumps(engine_models.config(name)))
        return load_model(str(folder / "config.json"))


def capacity(name: str, max_len: int, util: float, hardware: str, entry: str, tp: int = 1, pp: int = 1) -> dict:
    """`roofline capacity --engine vllm --entry-point ENTRY --tp TP --pp PP` as a user runs it (the engine's default
    token budget for the GPU and entry point)."""
    from roofline.cli.capacity import budget_parts
    from roofline.engines import EngineOptions
    from roofline.engines import capacity as engine_capacity
    from roofline.engines.scheduling import scheduling

    model, hw = model_of(name), load_hardware(hardware)
    batched = scheduling("vllm", hw, entry=entry).max_num_batched_tokens
    parts = budget_parts(model, hw, tp, pp, batched, "bf16", engine="vllm")
    r = engine_capacity(model, "vllm", EngineOptions(tp=tp, pp=pp, max_model_len=max_len, gpu_memory_utilization=util,
                                                     max_num_batched_tokens=batched), parts)
    d = r.as_dict()
    return {k: d[k] for k in ("kv_pool_bytes", "pool_tokens", "max_concurrency", "bytes_per_token")}


def capacity_from_log(name: str, max_len: int, kv_gib: float, batched: int, tp: int = 1, pp: int = 1) -> dict:
    """The engine's block and token rules alone, on the budget its log states (`--kv-memory-gib`, per GPU), at the
    run's token budget (`batched`: the sliding-window rule reads it), tensor and pipeline parallelism."""
    from roofline.engines import GIB, EngineOptions
    from roofline.engines import capacity as engine_capacity

    r = engine_capacity(model_of(name), "vllm", EngineOptions(tp=tp, pp=pp, max_model_len=max_len,
                                                                kv_memory_bytes=kv_gib * GIB,
                                                                max_num_batched_tokens=batched))
    d = r.as_dict()
    return {k: d[k] for k in ("kv_pool_bytes", "pool_tokens", "max_concurrency", "bytes_per_token")}


def _grouped(pm: PhaseModel, batch: int, prompt: int, budget: int) -> PhaseModel:
    """The phase model of an offline decode case at pp > 1 with the engine's decode groups as its micro-batches
    (engines.timing 26.): vLLM makes a request eligible to decode again pp steps after it was scheduled, so the B
    prompts, prefilled in ceil(B P / budget) steps, decode in min(pp, those steps) groups (one group where they all fit
    one step); pp 1 unchanged."""
    pp = pm.workload.pp
    if pp == 1:
        return pm
    groups = min(pp, -(-batch * prompt // budget), batch)
    wl = pm.workload.model_copy(update={"micro_batches": groups, "batch": max(pm.workload.batch, groups)})
    return PhaseModel.build(pm.model, pm.hardware, wl, pm.method)


def predict(hardware: str) -> dict:
    hw = load_hardware(hardware)
    n = CASES["out_tokens"]
    limits = vllm_scheduling(hw, "offline")  # the LLM class's token budget and sequence limit on this GPU
    out = {}
    for name, case in CASES["models"].items():
        model = model_of(name)
        tp, pp = case.get("tp", 1), case.get("pp", 1)  # run 28: pipeline parallelism over the machine's GPUs
        wl = validate(Workload, {"batch": 1, "context_tokens": case["max_model_len"], "engine": "vllm", "tp": tp,
                                 "pp": pp}, "workload")
        pm = PhaseModel.build(model, hw, wl, parse_method("bf16"))
        budget = limits.max_num_batched_tokens
        dec = [{"B": b, "P": p, "decode_step_s": offline_decode_step_s(_grouped(pm, b, p, budget), b, p, n, budget,
                                                                        limits.max_num_seqs)}
               for b, p in case["decode"]]
        pre = [{"P": p, "prefill_s": lone_prefill_s(model, hw, wl, p)} for p in case["prefill"]]
        cap = [dict(max_model_len=case["max_model_len"], gpu_memory_utilization=util_of(case),
                    **capacity(name, case["max_model_len"], util_of(case), hardware, "offline", tp, pp))]
        s = CASES.get("serve", {})
        if name == s.get("model"):
            cap.append(dict(max_model_len=s["max_model_len"], gpu_memory_utilization=s["gpu_memory_utilization"],
                            **capacity(name, s["max_model_len"], s["gpu_memory_utilization"], hardware, "api",
                                       s.get("tp", 1), s.get("pp", 1))))
        out[name] = {"tp": tp, "pp": pp, "decode": dec, "prefill": pre, "capacity": cap}
    return out


def _detailed(results: Path | None, run: str) -> dict | None:
    """A served run's saved result (with --save-detailed: each request's start_times, input_lens, output_lens)."""
    f = results / f"{CASES['serve']['model']}-{run}.json" if results else None
    return json.loads(stored.read_text(f)) if f and stored.exists(f) else None


def serve_runs(results: Path | None = None) -> list[tuple[str, list[str]]]:
    """Each `vllm bench serve` run of the cases file and the `roofline simulate` flags that describe it. A Poisson
    run is replayed as a trace: the send times the client recorded (`start_times`, relative to the first) when
    `results` holds the run, else the ones its seed draws (vllm_arrivals); the speculative runs need the acceptance
    the engine measured (its /metrics), so they exist only with `results`."""
    s, seed, tmp = CASES["serve"], SERVE_SEED0, Path(tempfile.mkdtemp())
    runs = []

    def replay(run: str, seed: int, rate: float, n: int, shared: int = 0) -> str:
        """The run's trace file: recorded send times and lengths (less a shared prefix the flags add back)."""
        d = _detailed(results, run)
        if d and d.get("start_times"):
            t0 = d["start_times"][0]
            return str(write_trace(tmp / f"{run}.csv", [t - t0 for t in d["start_times"]],
                                   [n_in - shared for n_in in d["input_lens"]], d["output_lens"]))
        return str(write_trace(tmp / f"{run}.csv", vllm_arrivals(seed, rate, n), s["input_len"], s["output_len"]))

    for rate, n in s["rates"]:
        seed += 1
        runs.append((f"rate{rate}", ["--trace", replay(f"rate{rate}", seed, rate, n)]))
    if "prefix" in s:  # run 9's cases have none (serve.sh then runs none)
        p = s["prefix"]
        seed += 1
        runs.append(("prefix", ["--trace", replay("prefix", seed, p["rate"], p["prompts"], p["prefix_len"]),
                                "--prefix", f"system:{p['prefix_len']}"]))
    seed += 1
    c = s["concurrency"]
    runs.append((f"conc{c['max_concurrency']}", ["--rate", "inf", "--max-concurrency", str(c["max_concurrency"]),
                                                 "--requests", str(c["prompts"])]))
    if "burst" in s:
        b = s["burst"]
        runs.append(("burst", ["--rate", "inf", "--requests", str(b["prompts"]), "--prompt-tokens",
                               str(b["input_len"]), "--output-tokens", str(b["output_len"])]))
    if "speculative" in s and results is not None:
        from validate.engines.spec import acceptance
        sp = s["speculative"]
        for conc, n in sp["runs"]:
            acc = acceptance(results / f"{s['model']}-spec-metrics-before-conc{conc}.txt",
                             results / f"{s['model']}-spec-metrics-conc{conc}.txt", sp["tokens"])
            if acc is None:
                continue
            runs.append((f"spec-conc{conc}", [
                "--rate", "inf", "--max-concurrency", str(conc), "--requests", str(n), "--prompt-tokens",
                str(sp["input_len"]), "--output-tokens", str(sp["output_len"]), "--speculative",
                f"draft={sp['draft']}:{sp['tokens']}:" + ",".join(f"{a:.4f}" for a in acc)]))
    return runs


def simulate_flags(hardware: str) -> list[str]:
    """The flags every served run shares: `roofline simulate --engine vllm` (the API server's defaults and the
    engine's time profile) at the server's memory setting, fixed lengths as the random dataset sends them."""
    s = CASES["serve"]
    return ["--model", s["model"], "--hardware", hardware, "--method", "bf16", "--engine", "vllm",
            "--prompt-tokens", str(s["input_len"]), "--output-tokens", str(s["output_len"]),
            "--utilization", str(s["gpu_memory_utilization"]), "--no-search", "--json",
            *(["--tp", str(s["tp"])] if s.get("tp", 1) > 1 else []),
            *(["--pp", str(s["pp"])] if s.get("pp", 1) > 1 else [])]


def simulate(flags: list[str], hardware: str) -> dict:
    """One `roofline simulate` run as a user types it; its JSON (the first method's)."""
    import sys

    common = simulate_flags(hardware)
    if "--trace" in flags:  # a trace carries its own lengths
        common = [f for i, f in enumerate(common) if f not in ("--prompt-tokens", "--output-tokens")
                  and common[i - 1] not in ("--prompt-tokens", "--output-tokens")]
    r = subprocess.run([sys.executable, "-m", "roofline.cli", "simulate", *common, *flags], capture_output=True,
                       text=True)
    if r.returncode:
        return {"error": r.stderr.strip()[-300:]}
    d = json.loads(r.stdout)
    return d[0] if isinstance(d, list) else d


def serve_predictions(hardware: str) -> dict:
    """`roofline simulate --engine vllm` of each served run, before the run (Poisson runs at the send times their
    seeds draw)."""
    out = {}
    for name, flags in serve_runs():
        d = simulate(flags, hardware)
        out[name] = d if "error" in d else {k: d[k] for k in ("ttft_s", "tpot_s", "e2e_s", "throughput_tokens_per_s",
                                                             "requests_per_s", "preemptions", "gemm_clock") if k in d}
    if "speculative" in CASES["serve"]:
        out["speculative"] = {"expressible": False, "why": "the acceptance per draft position is an input: it is read "
                                                           "from the engine's /metrics of the run, then simulated"}
    return out


def pd_runs(results: Path | None = None) -> list[tuple[str, list[str]]]:
    """Each disaggregated run of the cases file's "disagg" entry (serve_pd.sh: a prefill and a decode server of one
    GPU each behind pd_proxy.py) and the `roofline simulate --disaggregate 1:1` flags that describe it: Poisson runs
    replayed at the send times the client recorded when `results` holds them, else at the ones their seeds draw."""
    d, tmp = CASES["disagg"], Path(tempfile.mkdtemp())
    seed, runs = d["seed0"], []
    for rate, n in d["rates"]:
        seed += 1
        f = results / f"{d['model']}-pd-rate{rate}.json" if results else None
        det = json.loads(stored.read_text(f)) if f and stored.exists(f) else None
        if det and det.get("start_times"):
            t0 = det["start_times"][0]
            trace = write_trace(tmp / f"pd{rate}.csv", [t - t0 for t in det["start_times"]], det["input_lens"],
                                det["output_lens"])
        else:
            trace = write_trace(tmp / f"pd{rate}.csv", vllm_arrivals(seed, rate, n), d["input_len"], d["output_len"])
        runs.append((f"pd-rate{rate}", ["--trace", str(trace)]))
    return runs


def pd_flags(hardware: str) -> list[str]:
    """What a user types for the disaggregated pair: one prefill and one decode replica of one GPU each, the API
    server's defaults (`--engine vllm`), the link between the pools the hardware's own unless the cases file names
    the link the pair crosses (run 13: NVLink inside one host, --kv-link-bytes-per-s)."""
    d = CASES["disagg"]
    link = ["--kv-link-bytes-per-s", str(d["kv_link_bytes_per_s"])] if "kv_link_bytes_per_s" in d else []
    return ["--model", d["model"], "--hardware", hardware, "--method", "bf16", "--engine", "vllm",
            "--utilization", str(d["gpu_memory_utilization"]), "--disaggregate", "1:1", "--no-search", "--json",
            *link]


# the tiny server the vLLM profile's host figures were measured on (roofline/engines/profiles/vllm.json sources)
PROFILE_TINY_SERVER = Path(__file__).resolve().parents[2] / "validate/results/engines/nvidia-h200-vllm-2026-11-28"


def host_speed_of(results: Path) -> float | None:
    """The host speed (roofline.engines.timing mechanism 11) of the host a run's folder was measured on, as a user
    calibrates theirs: the profile's tiny server's median TTFT at concurrency 1 over this run's own (its
    tiny-conc1.json, serve_tiny.sh on the same host in the same lease); None where the run has none."""
    own = results / "tiny-conc1.json"
    if not own.is_file():
        return None
    ref = json.loads((PROFILE_TINY_SERVER / "tiny-conc1.json").read_text())["median_ttft_ms"]
    return ref / json.loads(own.read_text())["median_ttft_ms"]


def pd_predictions(hardware: str, results: Path | None = None, extra: tuple[str, ...] = ()) -> dict:
    """`roofline simulate --disaggregate 1:1 --engine vllm` of each disaggregated run (`extra`: more flags)."""
    import sys

    out = {}
    for name, flags in pd_runs(results):
        r = subprocess.run([sys.executable, "-m", "roofline.cli", "simulate", *pd_flags(hardware), *flags, *extra],
                           capture_output=True, text=True)
        if r.returncode:
            out[name] = {"error": r.stderr.strip()[-300:]}
            continue
        d = json.loads(r.stdout)
        d = d[0] if isinstance(d, list) else d
        out[name] = {k: d[k] for k in ("ttft_s", "tpot_s", "e2e_s", "throughput_tokens_per_s", "requests_per_s",
                                       "preemptions", "disaggregated") if k in d}
    return out


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("out", type=Path)
    p.add_argument("--hardware", default="H200")
    a = p.parse_args()
    sha = subprocess.run(["git", "rev-parse", "HEAD"], capture_output=True, text=True).stdout.strip()
    doc = {"about": f"roofline's prediction of validate/engines/{CASES_FILE} on a real vLLM, written before the run",
           "hardware": a.hardware, "engine": "vllm", "git_sha": sha, "date": dt.date.today().isoformat(),
           "models": predict(a.hardware),
           "serve": serve_predictions(a.hardware) if "serve" in CASES else {},
           "disagg": pd_predictions(a.hardware) if "disagg" in CASES else {}}
    a.out.parent.mkdir(parents=True, exist_ok=True)
    a.out.write_text(json.dumps(doc, indent=1) + "\n")


if __name__ == "__main__":
    main()
