"""roofline's prediction of mixed_step.py's cases, written before the run: the step model's GPU time of a decode-only
step (B sequences at context P + 4), of the mixed step (the same decodes and a CHUNK-token prompt from 0, its logits
row), and of the prompt alone, on vLLM's offline profile for the GPU (graph padding to the captured sizes: a step
of more tokens than the largest runs unpadded), and each step's wall time with the profile's offline host law added
after the GPU's (mixed_step.py runs with async scheduling off).

python -m validate.engines.mixed_predict OUT_JSON [--hardware H200] [--model Llama-3.1-8B] [--bs 32,96,160]
                                         [--prompt 1024] [--chunk 1024]
"""

from __future__ import annotations

import argparse
import json
import subprocess
from pathlib import Path

import numpy as np


def predict(model_name: str, hardware: str, bs: list[int], prompt: int, chunk: int) -> dict:
    from roofline.catalogue import load_hardware, load_model
    from roofline.catalogue.loading import validate
    from roofline.engines.scheduling import scheduling
    from roofline.engines.timing import timing
    from roofline.methods import parse_method
    from roofline.serving.simulate import Simulator
    from roofline.specs import Workload

    model, hw = load_model(model_name), load_hardware(hardware)
    profile = scheduling("vllm", hw, entry="offline")
    wl = validate(Workload, {"context_tokens": 4096, "engine": "vllm", "prefill_chunk_tokens":
                             profile.max_num_batched_tokens, "page_tokens": profile.page_tokens}, "workload")
    sim = Simulator(model, hw, wl, parse_method("bf16"), max_tokens=4096, engine=profile)
    t = timing("vllm")
    empty = np.zeros(0, dtype=np.int64)

    def step(context, starts, counts):
        tokens = len(context) + int(counts.sum())
        pad = profile.padded_tokens(tokens, not len(counts)) - tokens
        gpu = sim.steps.step_time(context, starts, counts, np.ones(len(counts), dtype=bool), pad)
        seqs = len(context) + len(counts)
        return gpu, gpu + t.host_s(seqs)

    pre_gpu, pre_wall = step(empty, np.array([0]), np.array([chunk]))
    cases = []
    for b in bs:
        ctx = np.full(b, prompt + 4, dtype=np.int64)
        d_gpu, d_wall = step(ctx, empty, empty)
        m_gpu, m_wall = step(ctx, np.array([0]), np.array([chunk]))
        cases.append({"B": b, "P": prompt, "chunk": chunk, "decode_gpu_s": d_gpu, "decode_wall_s": d_wall,
                      "mixed_gpu_s": m_gpu, "mixed_wall_s": m_wall})
    return {"prefill_alone": {"chunk": chunk, "gpu_s": pre_gpu, "wall_s": pre_wall}, "cases": cases}


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("out", type=Path)
    p.add_argument("--hardware", default="H200")
    p.add_argument("--model", default="Llama-3.1-8B")
    p.add_argument("--bs", default="32,96,160")
    p.add_argument("--prompt", type=int, default=1024)
    p.add_argument("--chunk", type=int, default=1024)
    a = p.parse_args()
    sha = subprocess.run(["git", "rev-parse", "HEAD"], capture_output=True, text=True).stdout.strip()
    doc = {"about": "roofline's prediction of validate/engines/mixed_step.py, written before the run",
           "model": a.model, "hardware": a.hardware, "git_sha": sha,
           **predict(a.model, a.hardware, [int(b) for b in a.bs.split(",")], a.prompt, a.chunk)}
    a.out.write_text(json.dumps(doc, indent=1) + "\n")
    for c in doc["cases"]:
        print(f"B={c['B']}: decode {c['decode_wall_s'] * 1e3:.2f} ms (gpu {c['decode_gpu_s'] * 1e3:.2f}), mixed "
              f"{c['mixed_wall_s'] * 1e3:.2f} ms (gpu {c['mixed_gpu_s'] * 1e3:.2f})")
    pre = doc["prefill_alone"]
    print(f"prefill alone: {pre['wall_s'] * 1e3:.2f} ms (gpu {pre['gpu_s'] * 1e3:.2f})")


if __name__ == "__main__":
    main()
