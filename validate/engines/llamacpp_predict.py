"""roofline's prediction of llama.cpp run 1 (llamacpp_cases.json) on one H200, written BEFORE the engine is timed.

python -m validate.engines.llamacpp_predict OUT_JSON [--hardware H200] [--cases FILE] [--now]

--now: the planner as it stands, with llama.cpp's time profile (roofline/engines/profiles/llamacpp.json, from runs 2
and 3's microbenchmarks: validate/engines/derive_llamacpp.py) — a prediction made AFTER run 1, to judge that profile
on it (h200-llamacpp-run1-now.json); without it the text below describes the prediction committed before run 1.

--cases: another cases file of this folder (llamacpp_cases_cpu.json: the CPU check's, on tiny-llama, whose
config.json is written from validate.engines.models as predict_sglang does).

llama.cpp has memory rules (roofline/engines/llamacpp.py) and scheduling defaults (engines/scheduling.py: llamacpp)
but no time profile, so every time here is the planner's GPU work on the H200's measured ceilings under the engine
name "llamacpp" (no host costs, no sampler profile), at the engine's -b 2048 as the prefill chunk. Weights F16
(--weight-dtype fp16: two bytes, as the GGUF llamacpp_model.py writes), KV f16 (llama.cpp's default -ctk/-ctv).
  memory    per (-c, -np): `roofline capacity --engine llamacpp --max-model-len C --parallel NP` (--no-kv-unified for
            NP > 1: llama-server makes one stream per slot unless -kvu), its kv_pool_bytes and pool_tokens (cells);
            beside them the planner's weight bytes and its activation peak at 2048 tokens (what capacity subtracts as
            compute buffers; llama.cpp's compute buffer is its counterpart)
  batched   per (npp, npl): the decode step at batch npl and mid context npp + ntg / 2 (batched-bench's T_TG / TG),
            and the prefill of npl prompts of npp tokens together (its T_PP)
  prefill   llama-bench -p P -n 0: prefill_time(1, P); tg: llama-bench -n N -d D: N decode steps at batch 1 from
            context D, the step at the mid context D + N / 2 times N
  served    `roofline simulate --engine llamacpp --max-num-seqs NP --trace` of the sends llamacpp_client.schedule
            draws (the client replays the same instants), or `--rate inf --max-concurrency C` for a closed loop
"""

from __future__ import annotations

import datetime as dt
import json
import tempfile
from pathlib import Path

from roofline.catalogue.loading import validate
from roofline.catalogue.store import load_hardware, load_model
from roofline.cli.capacity import budget_parts
from roofline.engines.scheduling import scheduling
from roofline.methods.registry import parse_method
from roofline.planner.phases import PhaseModel
from roofline.specs import Workload
from validate.engines.cases import checkout_sha, prediction_parser, read_cases, write_prediction
from validate.engines.llamacpp_client import schedule
from validate.engines.predict import write_trace
from validate.engines.predict_sglang import cli, model_arg

HERE = Path(__file__).resolve().parent
CASES = json.loads((HERE / "llamacpp_cases.json").read_text())
WEIGHT_DTYPE, KV_METHOD = "fp16", "fp16"
MODEL_DIR = Path(tempfile.mkdtemp())


def model_flags() -> list[str]:
    """`--model` flags of the cases' model (the catalogue's, or a tiny model's config.json)."""
    return model_arg(CASES["model"], MODEL_DIR)


def phases(model, hw, batch: int, context: int) -> PhaseModel:
    """The planner's phases for `batch` sequences of up to `context` tokens under the llamacpp engine."""
    chunk = scheduling("llamacpp", hw).max_num_batched_tokens
    wl = validate(Workload, {"batch": batch, "context_tokens": context, "engine": "llamacpp", "page_tokens": 256,
                             "weight_dtype": WEIGHT_DTYPE, "prefill_chunk_tokens": chunk}, "workload")
    return PhaseModel.build(model, hw, wl, parse_method(KV_METHOD))


def memory(hardware: str) -> list[dict]:
    model, hw = load_model(model_flags()[1]), load_hardware(hardware)
    chunk = scheduling("llamacpp", hw).max_num_batched_tokens
    parts = budget_parts(model, hw, 1, 1, chunk, WEIGHT_DTYPE, engine="llamacpp")
    out = []
    for c, n in CASES["memory"]:
        cap = cli("capacity", *model_flags(), "--hardware", hardware, "--engine", "llamacpp",
                  "--max-model-len", str(c), "--parallel", str(n), *(["--no-kv-unified"] if n > 1 else []),
                  "--weight-dtype", WEIGHT_DTYPE)
        # the engine's compute buffers (CUDA0 + CUDA_Host, as the log's sum) where the planner gives them, else the
        # generic activation peak it budgeted before (a prediction committed then)
        buffers = [cap.get("compute_buffer_bytes"), cap.get("host_compute_buffer_bytes")]
        compute = sum(buffers) if None not in buffers else parts.activations
        out.append({"c": c, "np": n, "kv_bytes": cap.get("kv_pool_bytes"), "cells": cap.get("pool_tokens"),
                    "weights_bytes": parts.weights, "compute_bytes": compute, "capacity": cap})
    return out


def steps(hardware: str) -> dict:
    model, hw = load_model(model_flags()[1]), load_hardware(hardware)
    b = CASES["batched"]
    batched = []
    for pp in b["npp"]:
        for pl in b["npl"]:
            pm = phases(model, hw, pl, pp + b["ntg"])
            batched.append({"pp": pp, "tg": b["ntg"], "pl": pl,
                            "decode_step_s": float(pm.decode_time(pl, pp + b["ntg"] // 2)),
                            "prefill_s": float(pm.prefill_time(pl, pp))})
    pre = []
    for p in CASES["prefill"]:
        pre.append({"n_prompt": p, "prefill_s": float(phases(model, hw, 1, p + 1).prefill_time(1, p))})
    tg, n = [], CASES["tg"]["n"]
    for d in CASES["tg"]["depth"]:
        step = float(phases(model, hw, 1, d + n).decode_time(1, d + n // 2))
        tg.append({"n_gen": n, "n_depth": d, "decode_step_s": step, "gen_s": step * n})
    return {"batched": batched, "prefill": pre, "tg": tg}


def served(hardware: str, extra: tuple[str, ...] = ()) -> dict:
    """The served runs' simulation (`extra`: more simulate flags, e.g. run 6's --cache-ram 0)."""
    s, tmp, out = CASES["serve"], Path(tempfile.mkdtemp()), {}
    base = ["simulate", *model_flags()[:2], "--hardware", hardware, "--method", KV_METHOD, "--engine",
            "llamacpp", "--max-num-seqs", str(s["np"]), "--no-search", *extra]
    keys = ("ttft_s", "tpot_s", "e2e_s", "throughput_tokens_per_s", "requests_per_s", "preemptions", "max_running")
    for name, rate, conc, n, seed in s["runs"]:
        if rate > 0:
            trace = write_trace(tmp / f"{name}.csv", schedule(seed, rate, n), s["prompt"], s["output"])
            d = cli(*base, "--trace", str(trace))
        else:
            d = cli(*base, "--rate", "inf", "--max-concurrency", str(conc), "--requests", str(n), "--prompt-tokens",
                    str(s["prompt"]), "--output-tokens", str(s["output"]))
        out[name] = {k: d[k] for k in keys if k in d} if "error" not in d else d
    return out


def main() -> None:
    p = prediction_parser("llamacpp_cases.json")
    p.add_argument("--now", action="store_true", help="with llama.cpp's time profile, after the run (module docstring)")
    a = p.parse_args()
    global CASES
    CASES = read_cases(p, a.cases)
    sha = checkout_sha()
    about = ("written after run 1 with llama.cpp's time profile (roofline/engines/profiles/llamacpp.json, from runs "
             "2 and 3's microbenchmarks), to judge it on run 1" if a.now else
             "written before the run: llama.cpp's memory rules and scheduling defaults, no time profile")
    doc = {"about": f"roofline's prediction of validate/engines/{a.cases} on a real llama.cpp (0c1e570), {about}",
           "hardware": a.hardware, "engine": "llamacpp", "weight_dtype": WEIGHT_DTYPE, "kv_method": KV_METHOD,
           "model": CASES["model"], "git_sha": sha, "date": dt.date.today().isoformat(),
           "memory": memory(a.hardware), **steps(a.hardware), "served": served(a.hardware)}
    write_prediction(a.out, doc)


if __name__ == "__main__":
    main()
