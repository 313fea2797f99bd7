"""Where a compiled decode step's time goes, kernel by kernel (torch only: runs on the GPU box without pydantic).

    python -m validate.clients.profile_step --out OUT.json [--model llama|qwen3] [--shapes b1-c1024,b16-c4096]

For each shape: the CUDA-graph replay time of the compiled step (the clients' measurement), and one un-graphed call
under torch.profiler with every kernel's device time, grouped by what it does (GEMM, split-K reduce, attention,
attention reduce, fused elementwise/reduction). The sum of kernel times against the replay time separates the
kernels' own durations from the gaps between them; the groups are compared with the model's op rows offline
(roofline.validation: the client case's predicted rows).
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from collections import defaultdict
from pathlib import Path

GROUPS = (("splitK_reduce", ("splitKreduce",)), ("gemm", ("nvjet", "gemm", "cutlass", "sm90_xmma")),
          ("attention_reduce", ("lean_reduction", "flash_fwd_splitkv_combine")),
          ("attention", ("sdpa", "flash", "fmha", "attention")), ("triton_fused", ("triton_",)))


def group_of(name: str) -> str:
    """The kernel's group by its name (first match in GROUPS), else 'other'."""
    low = name.lower()
    for group, keys in GROUPS:
        if any(k.lower() in low for k in keys):
            return group
    return "other"


def _dims(model: str):
    from validate.clients.decoder import Dims

    if model == "qwen3":  # Qwen3-8B config.json: 36 layers, d 4096, 32/8 heads, head_dim 128, 12288, QK norm
        return Dims(layers=36, d=4096, heads=32, kv_heads=8, head_dim=128, inter=12288, vocab=151936, tie=False,
                    qkv_bias=False, qk_norm=True)
    # Llama-3.1-8B config.json: 32 layers, d 4096, 32/8 heads, head_dim 128, intermediate 14336, vocab 128256
    return Dims(layers=32, d=4096, heads=32, kv_heads=8, head_dim=128, inter=14336, vocab=128256, tie=False,
                qkv_bias=False, qk_norm=False)


def profile_shape(decoder, dims, batch: int, context: int) -> dict:
    """Replay time and per-kernel device times of one compiled decode step."""
    import torch
    from torch.profiler import ProfilerActivity, profile

    from validate.clients.decoder import make_caches
    from validate.clients.timing import capture, replay_ms

    caches = make_caches(dims, batch, context, "cuda")
    tok = torch.randint(0, dims.vocab, (batch, 1), device="cuda")
    pos = torch.tensor([context - 1], device="cuda")

    def step():
        decoder.step(tok, caches, pos, True)

    graph = capture(step)
    replay = replay_ms(graph)
    step()
    torch.cuda.synchronize()
    calls = 3
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        for _ in range(calls):
            step()
        torch.cuda.synchronize()
    per_kernel: dict[str, list[float]] = defaultdict(list)
    for event in prof.events():
        if event.device_type == torch.autograd.DeviceType.CUDA:
            per_kernel[event.name[:120]].append(event.device_time_total * 1e-3)  # us -> ms
    kernels = {name: {"count": len(t) // calls, "ms_per_step": sum(t) / calls,
                      "median_us": statistics.median(t) * 1e3, "group": group_of(name)}
               for name, t in per_kernel.items()}
    groups: dict[str, dict] = defaultdict(lambda: {"count": 0, "ms_per_step": 0.0})
    for k in kernels.values():
        groups[k["group"]]["count"] += k["count"]
        groups[k["group"]]["ms_per_step"] += k["ms_per_step"]
    del graph
    return {"batch": batch, "context": context, "replay": replay,
            "kernel_ms_per_step": sum(k["ms_per_step"] for k in kernels.values()),
            "kernels_per_step": sum(k["count"] for k in kernels.values()), "groups": dict(groups),
            "kernels": dict(sorted(kernels.items(), key=lambda kv: -kv[1]["ms_per_step"]))}


def main(argv=None) -> int:
    """Profile the compiled client's decode step at each shape; write OUT.json."""
    parser = argparse.ArgumentParser(prog="validate.clients.profile_step")
    parser.add_argument("--out", required=True)
    parser.add_argument("--model", choices=("llama", "qwen3"), default="llama")
    parser.add_argument("--shapes", default="b1-c1024,b16-c4096,b64-c2048")
    args = parser.parse_args(argv)
    shapes = []
    for item in args.shapes.split(","):
        b, c = item.split("-")
        shapes.append((int(b.lstrip("b")), int(c.lstrip("c"))))
    import torch

    from validate.clients.decoder import Decoder, model_weights

    dims = _dims(args.model)
    torch.manual_seed(0)
    decoder = Decoder(dims, model_weights(dims, "cuda"), compiled=True)
    env = {"device": torch.cuda.get_device_name(0), "torch": torch.__version__, "date": time.strftime("%Y-%m-%d"),
           "model": args.model}
    rows = []
    for batch, context in shapes:
        t0 = time.time()
        rows.append(profile_shape(decoder, dims, batch, context))
        r = rows[-1]
        groups = ", ".join(f"{g} {v['ms_per_step']:.3f}/{v['count']}" for g, v in r["groups"].items())
        print(f"{args.model} b{batch}-c{context}: replay {r['replay']['ms']:.3f} ms, kernels "
              f"{r['kernel_ms_per_step']:.3f} ms in {r['kernels_per_step']} ({groups}) [{time.time() - t0:.0f} s]",
              flush=True)
    Path(args.out).write_text(json.dumps({"env": env, "rows": rows}, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
