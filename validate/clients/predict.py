"""python -m validate.clients.predict --hardware H100-SXM --total-memory BYTES --out FILE

Writes the predictions of every client case of the grid (validate/clients/grid.py) from the specs alone,
to be committed before the run that measures them. Needs roofline (pydantic), not torch.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import subprocess
import sys
from pathlib import Path


def predictions(hardware_name: str, total_memory: int, parts: list[str]) -> dict:
    from roofline.catalogue import load_hardware, load_model
    from roofline.validation.clients import predict_case
    from validate.clients.grid import HF_MODEL, HF_SHAPES, PARTS, case_name, case_params, moe_layers

    hardware = load_hardware(hardware_name)
    rows = []
    for part in parts:
        for name in PARTS[part]:
            model = load_model(name)
            layers = (moe_layers(model, total_memory) if model.moe else None) or model.num_layers
            experts = model.moe.num_experts if model.moe else 0
            for params in case_params(name, layers, experts, model.max_position_embeddings):
                rows.append({"name": case_name(params), "params": params,
                             **{c: predict_case(params, hardware, c)["time_s"] for c in ("measured", "datasheet")}})
    for b, n in HF_SHAPES:
        params = {"model": HF_MODEL, "client": "hf-static", "phase": "decode", "batch": b, "context": n}
        rows.append({"name": case_name(params), "params": params,
                     **{c: predict_case(params, hardware, c)["time_s"] for c in ("measured", "datasheet")}})
    sha = subprocess.run(["git", "rev-parse", "HEAD"], capture_output=True, text=True).stdout.strip()
    return {"hardware": hardware_name, "date": dt.date.today().isoformat(), "git_sha": sha,
            "note": "time_s predicted per ceilings mode, before the run", "cases": rows}


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="validate.clients.predict")
    p.add_argument("--hardware", required=True)
    p.add_argument("--total-memory", type=int, required=True, help="device bytes as CUDA reports them")
    p.add_argument("--part", action="append", default=None)
    p.add_argument("--out", type=Path, required=True)
    args = p.parse_args(argv)
    data = predictions(args.hardware, args.total_memory, args.part or ["dense-a", "dense-b", "moe"])
    args.out.write_text(json.dumps(data, indent=1) + "\n")
    print(f"{len(data['cases'])} predictions -> {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
