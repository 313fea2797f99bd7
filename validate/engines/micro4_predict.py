"""The planner's prediction of every micro4.py case (micro4-cases.json), written BEFORE the GPU run.

python -m validate.engines.micro4_predict OUT_JSON [--hardware H200] [--engine vllm]

Each case is predicted by the op the planner would charge for the same work, from its rows (PhaseModel.rows under
the engine's profile, as attribute.py and predict.py build them): a GEMM of M tokens is the op's row of the decode
graph at batch M (M <= 256) and of the prefill graph at P = M (M >= 256); FlashAttention-3's decode is the attention
and attention_reduce rows at (B, L), whatever the window (L < W: the planner reads the same KV); a KV write of T
tokens is kv_update's row (decode at B = T, prefill at P = T); a graph of K one-element kernels is K x the device's
kernel_overhead_s (the per-kernel cost the rows add: roofline.costmodel.device_ceilings 'kernel_time'). The sampler
has no op in the planner (0 s); beside it, what the engine's own steps spent in the sampler's kernels at the same
(B, V), read from the committed prof.py files through attribute.py's kernel rules.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import subprocess
from pathlib import Path

from validate.engines.kernel_names import classify

HERE = Path(__file__).resolve().parent
RESULTS = HERE.parent / "results" / "engines"
# the committed in-engine profiles with a sampler at each vocabulary (Llama-3.1-8B: 128,256; Mistral-7B: 32,000)
PROFS = {128256: RESULTS / "nvidia-h200-vllm-2026-11-28-run2" / "Llama-3.1-8B-prof.json",
         32000: RESULTS / "nvidia-h200-vllm-2026-11-29-run3" / "Mistral-7B-v0.1-prof.json"}


def phase_model(model: str, hardware: str, engine: str):
    """The planner's PhaseModel of `model` on `hardware` under `engine` (bf16 KV, as predict.py)."""
    from roofline.catalogue.loading import validate
    from roofline.catalogue.store import load_hardware, load_model
    from roofline.methods.registry import parse_method
    from roofline.planner.phases import PhaseModel
    from roofline.specs import Workload

    wl = validate(Workload, {"batch": 1, "context_tokens": 4096, "engine": engine}, "workload")
    return PhaseModel.build(load_model(model), load_hardware(hardware), wl, parse_method("bf16"))


def row_s(pm, phase: str, n: int, op: str) -> float:
    """Seconds of one call of `op` in the planner's rows: decode at batch n (context 272), prefill at P = n."""
    rows = pm.rows("decode", n, 272) if phase == "decode" else pm.rows("prefill", 1, n)
    return next(float(r["time_s"]) for r in rows if r["name"] == op)


def gemm_cases(cases: dict, pms) -> list[dict]:
    """Each GEMM case's row: the decode row at batch M (decode M) and the prefill row at P = M (prefill M)."""
    g = cases["gemm"]
    out = []
    for s in g["shapes"]:
        pm = pms(s["model"])
        for m in sorted(set(g["decode_M"]) | set(g["prefill_M"])):
            p = {"model": s["model"], "op": s["op"], "M": m, "N": s["N"], "K": s["K"]}
            if m in g["decode_M"]:
                p["decode_row_s"] = row_s(pm, "decode", m, s["op"])
            if m in g["prefill_M"]:
                p["prefill_row_s"] = row_s(pm, "prefill", m, s["op"])
            out.append(p)
    return out


def fa3_cases(cases: dict, pms) -> list[dict]:
    """Each FA3 decode case: the attention and attention_reduce rows at (B, L), one figure for both windows."""
    c = cases["fa3_engine"]
    pm = pms(c["model"])
    out = []
    for b, length in c["cases"]:
        rows = {r["name"]: float(r["time_s"]) for r in pm.rows("decode", b, length)}
        out.append({"B": b, "L": length, "windows": c["windows"], "attention_s": rows["attention"],
                    "attention_reduce_s": rows.get("attention_reduce", 0.0),
                    "s": rows["attention"] + rows.get("attention_reduce", 0.0)})
    return out


def kv_cases(cases: dict, pms) -> list[dict]:
    """Each KV-write case: kv_update's row, decode at B = T up to 256 tokens, prefill at P = T beyond."""
    out = []
    for c in cases["kv_write"]["cases"]:
        pm = pms(c["model"])
        for t in c["tokens"]:
            phase = "decode" if t <= 256 else "prefill"
            out.append({"model": c["model"], "T": t, "phase_row": phase, "s": row_s(pm, phase, t, "kv_update")})
    return out


def in_engine_sampler_s(batch: int, vocab: int) -> float | None:
    """Seconds per step the engine's sampler kernels took at (batch, vocab) in a committed prof.py file (None: no
    such case), the logits' fp32 cast included (torch's float direct_copy, one a step)."""
    path = PROFS.get(vocab)
    if path is None or not path.is_file():
        return None
    for case in json.loads(path.read_text())["cases"]:
        if case.get("B") == batch:
            return sum(v["s"] for n, v in case["kernels"].items() if (r := classify(n)) is not None and
                       (r.kind == "sampler" or ("direct_copy_kernel" in n and "lambda(float)" in n)))
    return None


def predict(hardware: str, engine: str) -> dict:
    """Every family's predictions (the module docstring), one PhaseModel per model."""
    from roofline.catalogue.store import load_hardware

    cases = json.loads((HERE / "micro4-cases.json").read_text())
    cache: dict = {}

    def pms(model: str):
        """The model's PhaseModel, built once."""
        if model not in cache:
            cache[model] = phase_model(model, hardware, engine)
        return cache[model]
    overhead = load_hardware(hardware).measured.kernel_overhead_s
    return {"gemm": gemm_cases(cases, pms), "fa3_engine": fa3_cases(cases, pms), "kv_write": kv_cases(cases, pms),
            "sampler": [{"B": b, "V": v, "s": 0.0, "in_engine_s": in_engine_sampler_s(b, v)}
                        for b, v in cases["sampler"]["cases"]],
            "graph_floor": [{"kernels": k, "s": k * overhead, "kernel_overhead_s": overhead}
                            for k in cases["graph_floor"]["kernels"]]}


def main() -> None:
    """Write the prediction file with the checkout's SHA and the date."""
    ap = argparse.ArgumentParser(prog="python -m validate.engines.micro4_predict")
    ap.add_argument("out", type=Path)
    ap.add_argument("--hardware", default="H200")
    ap.add_argument("--engine", default="vllm")
    a = ap.parse_args()
    sha = subprocess.run(["git", "rev-parse", "HEAD"], capture_output=True, text=True).stdout.strip()
    doc = {"about": "roofline's prediction of validate/engines/micro4-cases.json (micro4.py), written before the run",
           "hardware": a.hardware, "engine": a.engine, "git_sha": sha, "date": dt.date.today().isoformat(),
           **predict(a.hardware, a.engine)}
    a.out.parent.mkdir(parents=True, exist_ok=True)
    a.out.write_text(json.dumps(doc, indent=1) + "\n")


if __name__ == "__main__":
    main()
