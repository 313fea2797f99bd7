"""python -m validate.clients --part micro|dense-a|dense-b|moe|hf|memory ... --out FILE [--deadline-s S]

Runs on the GPU box (torch, transformers; roofline's catalogue for the model shapes, pydantic from wheels)
and writes {"env": {...}, "cases": [...]} to FILE after every model, so a run cut short keeps its rows.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

from validate.clients.grid import PARTS


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="validate.clients")
    p.add_argument("--part", action="append", required=True, choices=["micro", "hf", "memory", *PARTS],
                   help="what to run (repeatable, in order)")
    p.add_argument("--out", type=Path, required=True)
    p.add_argument("--deadline-s", type=float, default=540.0, help="skip cases that would start after this")
    args = p.parse_args(argv)
    start = time.time()
    deadline = start + args.deadline_s

    import torch

    from roofline.catalogue import load_model
    from validate.clients import cases, hf, memory, micro
    from validate.clients.grid import HF_MODEL, MEMORY_BATCH, MEMORY_MODEL, moe_layers
    from validate.common.harness import environment, l2_bytes, write_json

    torch.backends.cuda.matmul.allow_tf32 = False
    import torch._dynamo

    torch._dynamo.config.cache_size_limit = 64
    free_at_start, total = torch.cuda.mem_get_info()
    results = {"env": {**environment(), "free_at_start_bytes": free_at_start}, "cases": []}

    def log(msg):
        print(f"[{time.time() - start:6.1f}s] {msg}", flush=True)

    for part in args.part:
        log(f"part {part}")
        if part == "micro":
            results["cases"] += micro.all_micro(l2_bytes(), log, free_at_start)
        elif part == "hf":
            results["cases"] += hf.run_hf(HF_MODEL, load_model(HF_MODEL).model_dump(), deadline, log)
        elif part == "memory":
            dump = load_model(MEMORY_MODEL).model_dump()
            results["cases"].append(memory.boundary(MEMORY_MODEL, dump, MEMORY_BATCH, free_at_start, log))
        else:
            for name in PARTS[part]:
                model = load_model(name)
                dump = model.model_dump()
                layers = moe_layers(model, total) if model.moe else None
                log(f"model {name} ({layers or dump['num_layers']} layers)")
                results["cases"] += cases.run_model(name, dump, layers, deadline, log)
                write_json(args.out, results)
        write_json(args.out, results)
    log(f"done: {len(results['cases'])} rows -> {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
