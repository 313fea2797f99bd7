"""python -m validate.engines.public_burst_predict [--out FILE]

The prediction, committed before the run, of validate/engines/public_burst.sh's three bursts on the lent H200
(vLLM 0.24.0, Llama-3.1-8B, dummy weights, 1000 random 1024/128 requests with --ignore-eos, all at once): the
public harness's replay (validate.engines.public_predict.simulate) of each setting — (1) the A100's default limits
(256 sequences, 2048 tokens a step), (2) the H200's defaults, (3) the defaults with synchronous scheduling, whose
host law is unmeasured (predicted with the measured asynchronous one: the run measures the difference).
Writes validate/results/engines/public-burst-predicted.json.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from datetime import UTC, datetime
from pathlib import Path
from types import SimpleNamespace

from roofline.errors import RooflineError
from roofline.validation.engine_results import Benchmark, Deployment, Engine
from validate.engines.public_predict import simulate

OUT = Path(__file__).resolve().parent.parent / "results" / "engines" / "public-burst-predicted.json"
CLIENT = ("vllm bench serve --backend vllm --dataset-name random --random-input-len 1024 --random-output-len 128 "
          "--ignore-eos --num-prompts 1000 --request-rate inf --seed 7")
SETTINGS = {"a100defaults": (256, 2048, "--max-num-seqs 256 --max-num-batched-tokens 2048"),
            "default": (None, None, ""), "sync": (None, None, "--no-async-scheduling")}


def run_of(tag: str) -> SimpleNamespace:
    """The settings of one burst, shaped as a published record's engine, deployment and benchmark."""
    seqs, tokens, flags = SETTINGS[tag]
    deployment = Deployment(hardware_as_published="NVIDIA H200", catalogue_hardware="H200", gpus=1, tp=1,
                            model_as_published="Llama-3.1-8B (dummy weights)", catalogue_model="Llama-3.1-8B",
                            weight_dtype="bf16", kv_cache_dtype="bf16")
    bench = Benchmark(kind="serve", client="vllm bench serve", dataset="random", input_tokens=1024, output_tokens=128,
                      lengths_fixed=True, num_prompts=1000, request_rate_per_s=None, max_concurrency=None,
                      prefix_caching=True, max_num_seqs=seqs, max_num_batched_tokens=tokens,
                      command=f"vllm serve M --load-format dummy --max-model-len 4096 {flags} ; {CLIENT}")
    return SimpleNamespace(engine=Engine(name="vllm", version="0.24.0", release="0.24.0"), deployment=deployment,
                           benchmark=bench)


def main(argv: list[str] | None = None) -> int:
    """Predict the three bursts and write them with the checkout they were predicted at."""
    p = argparse.ArgumentParser(prog="validate.engines.public_burst_predict", description=__doc__.splitlines()[0])
    p.add_argument("--out", type=Path, default=OUT, help="where to write the predictions")
    args = p.parse_args(argv)
    try:
        preds = {tag: simulate(run_of(tag)) for tag in SETTINGS}
    except (RooflineError, ValueError) as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    sha = subprocess.run(["git", "rev-parse", "HEAD"], capture_output=True, text=True, check=False,
                         cwd=Path(__file__).resolve().parent).stdout.strip() or "unknown"
    doc = {"predicted_at": datetime.now(UTC).isoformat(timespec="seconds"), "checkout": sha,
           "script": "validate/engines/public_burst.sh", "client": CLIENT,
           "settings": {tag: SETTINGS[tag][2] or "(defaults)" for tag in SETTINGS}, "predictions": preds}
    try:
        args.out.write_text(json.dumps(doc, indent=1) + "\n")
    except OSError as err:
        print(f"error: --out: {args.out}: {err.strerror or err}", file=sys.stderr)
        return 2
    for tag, pred in preds.items():
        print(f"{tag}: TPOT mean {pred['tpot']['mean_ms']:.1f} ms, median {pred['tpot']['median_ms']:.1f} ms, "
              f"TTFT mean {pred['ttft']['mean_ms']:.0f} ms, out {pred['output_throughput_tokens_per_s']:.0f} tok/s, "
              f"preemptions {pred['preemptions']}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
