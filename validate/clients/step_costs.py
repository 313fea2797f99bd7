"""python -m validate.clients.step_costs --out FILE [--part h1 --part h2 ...] [--deadline-s S] [--dry-run]

Issue 13's three remaining misses, each tested by its own microbenchmark (torch only; ~2 min on an H100):

  h1  sustained vs burst tensor-core rate. The Llama-3.1-8B prefill GEMMs as decoder.layer issues them (F.linear,
      bf16, M = 512 .. 16384 tokens x fused qkv / o / gate+up / down) and the causal flash SDPA (head dim 128,
      32/8 heads, the client's strided q/k/v) timed (a) as micro.py's calibration does (graph, 2 warm + 10 timed
      replays: a burst of milliseconds) and (b) back to back for SUSTAIN_S seconds after IDLE_S idle, every replay
      timed, with the SM clock, power and temperature sampled (pynvml, else nvidia-smi); plus one graph of the
      32 layers' GEMMs + flash at P = 8192 (a prefill step's tensor-core work) against the sum of its parts' bursts
  h2  per-kernel time of eager aten kernels in a CUDA graph: CHAIN launches of each small op the eager decode
      issues at batch 1 (1 x 4096 bf16: add, casts, pow, mean, rsqrt, broadcast muls, RoPE neg/cat, index_put of
      the KV write, strided SiLU), of tiny F.linear, and the whole eager decode step against its GEMM + SDPA part
      alone (same weights): (t_step - t_gemm_sdpa) / (kernels_step - kernels_gemm_sdpa)
  h3  Mixtral-8x7B's expert path (decoder.moe_mlp: router, sort, two torch._grouped_mm) per decode batch, with the
      experts it touched, against the streaming-GEMM law the step model prices it at

Writes {"env", "clock_source", "clocks": [[t_s, sm_MHz, power_W, temp_C, reasons], ...], "cases": [...]} after every
part. --dry-run (no torch, no GPU): the plan, and the result shaping run on synthetic timings.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from validate.clients.step_costs_core import PARTS, dry_run


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="validate.clients.step_costs")
    p.add_argument("--out", type=Path, required=True)
    p.add_argument("--part", action="append", choices=PARTS, help="what to run (repeatable; default all, in order)")
    p.add_argument("--deadline-s", type=float, default=220.0, help="skip cases that would start after this")
    p.add_argument("--dry-run", action="store_true", help="no GPU: the plan and synthetic result shaping")
    args = p.parse_args(argv)
    if args.dry_run:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(json.dumps(dry_run(), indent=1) + "\n")
        print(f"dry run -> {args.out}")
        return 0
    from validate.clients import step_costs_gpu

    return step_costs_gpu.run(args.part or list(PARTS), args.out, args.deadline_s)


if __name__ == "__main__":
    sys.exit(main())

