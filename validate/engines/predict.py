"""roofline's prediction of every case in cases.json, written BEFORE the engine is timed.

python -m validate.engines.predict OUT_JSON [--hardware H200] [--engine vllm]
Per model: the KV pool, pool tokens and max concurrency as `roofline capacity --engine vllm` gives them at the
case's max_model_len and gpu_memory_utilization; per decode case the mean step over contexts P+1 .. P+N-1
(PhaseModel.average_decode_time, what (t_N - t_1) / (N - 1) measures) and per prefill case the batch-1 prefill, each
with the planner's default options for the engine (`roofline plan --engine vllm`), plus the engine's time profile
(roofline.engines.timing) when one exists.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import subprocess
import tempfile
from pathlib import Path

from roofline.catalogue.loading import validate
from roofline.catalogue.store import load_hardware, load_model
from roofline.methods.registry import parse_method
from roofline.planner.phases import PhaseModel
from roofline.specs import Workload
from validate.engines import models as engine_models

CASES = json.loads((Path(__file__).resolve().parent / "cases.json").read_text())


def model_of(name: str):
    """The catalogue model, or (tiny model) roofline's import of the config.json the engine runs."""
    try:
        return load_model(name)
    except Exception:
        folder = Path(tempfile.mkdtemp())
        (folder / "config.json").write_text(json.dumps(engine_models.config(name)))
        return load_model(str(folder / "config.json"))


def capacity(name: str, max_len: int, util: float, hardware: str, entry: str) -> dict:
    """`roofline capacity --engine vllm --entry-point ENTRY` as a user runs it (the engine's default token budget
    for the GPU and entry point)."""
    from roofline.cli.capacity import budget_parts
    from roofline.engines import EngineOptions
    from roofline.engines import capacity as engine_capacity
    from roofline.engines.scheduling import scheduling

    model, hw = model_of(name), load_hardware(hardware)
    batched = scheduling("vllm", hw, entry=entry).max_num_batched_tokens
    parts = budget_parts(model, hw, 1, 1, batched, "bf16")
    r = engine_capacity(model, "vllm", EngineOptions(max_model_len=max_len, gpu_memory_utilization=util,
                                                     max_num_batched_tokens=batched), parts)
    d = r.as_dict()
    return {k: d[k] for k in ("kv_pool_bytes", "pool_tokens", "max_concurrency", "bytes_per_token")}


def capacity_from_log(name: str, max_len: int, kv_gib: float, batched: int) -> dict:
    """The engine's block and token rules alone, on the budget its log states (`--kv-memory-gib`), at the run's
    token budget (`batched`: the sliding-window rule reads it)."""
    from roofline.engines import GIB, EngineOptions
    from roofline.engines import capacity as engine_capacity

    r = engine_capacity(model_of(name), "vllm", EngineOptions(max_model_len=max_len, kv_memory_bytes=kv_gib * GIB,
                                                                max_num_batched_tokens=batched))
    d = r.as_dict()
    return {k: d[k] for k in ("kv_pool_bytes", "pool_tokens", "max_concurrency", "bytes_per_token")}


def predict(hardware: str) -> dict:
    hw = load_hardware(hardware)
    n = CASES["out_tokens"]
    out = {}
    for name, case in CASES["models"].items():
        model = model_of(name)
        wl = validate(Workload, {"batch": 1, "context_tokens": case["max_model_len"], "engine": "vllm"}, "workload")
        pm = PhaseModel.build(model, hw, wl, parse_method("bf16"))
        dec = [{"B": b, "P": p, "decode_step_s": pm.average_decode_time(b, p + 1, n - 1)} for b, p in case["decode"]]
        pre = [{"P": p, "prefill_s": pm.prefill_time(1, p)} for p in case["prefill"]]
        cap = [dict(max_model_len=case["max_model_len"], gpu_memory_utilization=CASES["gpu_memory_utilization"],
                    **capacity(name, case["max_model_len"], CASES["gpu_memory_utilization"], hardware, "offline"))]
        s = CASES["serve"]
        if name == s["model"]:
            cap.append(dict(max_model_len=s["max_model_len"], gpu_memory_utilization=s["gpu_memory_utilization"],
                            **capacity(name, s["max_model_len"], s["gpu_memory_utilization"], hardware, "api")))
        out[name] = {"decode": dec, "prefill": pre, "capacity": cap}
    return out


def serve_predictions(hardware: str) -> dict:
    """`roofline simulate` of each `vllm bench serve` run of cases.json, as a user runs it: the API server's scheduler
    defaults on a >= 70 GiB GPU (max_num_seqs 1024, max_num_batched_tokens 8192: vllm/engine/arg_utils.py
    _set_default_max_num_seqs_and_batched_tokens_args), fixed lengths (the random dataset at range ratio 0), the
    same request count. Runs the simulator cannot express (a shared prefix, a closed-loop client) are recorded
    as such."""
    import sys

    s = CASES["serve"]
    common = ["--model", s["model"], "--hardware", hardware, "--method", "bf16", "--prompt-tokens",
              str(s["input_len"]), "--output-tokens", str(s["output_len"]), "--max-num-seqs", "1024",
              "--max-num-batched-tokens", "8192", "--utilization", str(s["gpu_memory_utilization"]),
              "--no-search", "--json"]
    out = {}
    for rate, n in s["rates"]:
        r = subprocess.run([sys.executable, "-m", "roofline.cli", "simulate", "--rate", str(rate), "--requests",
                            str(n), *common], capture_output=True, text=True, check=True)
        d = json.loads(r.stdout)
        d = d[0] if isinstance(d, list) else d
        out[f"rate{rate}"] = {k: d[k] for k in ("ttft_s", "tpot_s", "e2e_s", "throughput_tokens_per_s",
                                                "requests_per_s", "preemptions")}
    out["prefix"] = {"expressible": False, "why": "roofline simulate has no prefix caching (issue 33)"}
    out["concurrency"] = {"expressible": False, "why": "roofline simulate has no closed-loop client (issue 33)"}
    return out


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("out", type=Path)
    p.add_argument("--hardware", default="H200")
    a = p.parse_args()
    sha = subprocess.run(["git", "rev-parse", "HEAD"], capture_output=True, text=True).stdout.strip()
    doc = {"about": "roofline's prediction of validate/engines/cases.json on a real vLLM, written before the run",
           "hardware": a.hardware, "engine": "vllm", "git_sha": sha, "date": dt.date.today().isoformat(),
           "models": predict(a.hardware), "serve": serve_predictions(a.hardware)}
    a.out.parent.mkdir(parents=True, exist_ok=True)
    a.out.write_text(json.dumps(doc, indent=1) + "\n")


if __name__ == "__main__":
    main()
