"""Memory-side microbenchmarks (torch only), each the lab's definition so the figures compare:

  context   device bytes the CUDA context takes: total - free right after CUDA init, nothing allocated
            (validate/clients/micro.py cuda_context)
  read      streaming read of S bytes of fp32 into one partial sum per 4096 elements (the lab's Triton read kernel,
            validate/ops/ceilings/kernel.py, sums blocks of 4096; here torch.sum over rows of 4096), bytes = S,
            input copies rotated past 4 x L2 (validate/ops/ceilings/cases.py READ_SIZES 1 MiB .. 4 GiB)
  copy      device-to-device copy of S bytes, bytes = 2 S (read + written)
  launch    an empty kernel (NVRTC-compiled `__global__ void empty() {}` where torch can compile one, else a
            one-element fill), 1000 in one CUDA graph: the GPU's cost of a launch (cases.py LAUNCHES)
  kernel    per-kernel time of 256 dependent x.add_(1) on [1, 4096] bf16 in a CUDA graph (micro.kernel_overhead)
  aten      per-call time of 2000-call chains of each small aten op of an eager decode layer at batch 1, in a graph,
            2 warm + 5 warm-up + 20 timed replays (validate/clients/step_costs_gpu.py h2_chains and _chain_kinds;
            weighted by validate.clients.calibrate EAGER_LAYER_CALLS). Timed twice: first with no profiler ever
            started in the process ("aten_bare" rows, kept in the raw file only), then as h2_chains times them, each
            op's kernel census (torch.profiler) right before its chain ("aten" rows, the figure): Kineto leaves CUPTI
            attached after the first census (timing.kernel_count), and the lab's chains, routed MLPs and eager decode
            steps (validate/clients/cases.py: a census at each form's first shape) were all timed that way
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

from roofline.calibrate.bench import Bench
from roofline.calibrate.timing import kernel_count

READ_BLOCK = 4096
LAUNCHES = 1000
ATEN_CHAIN = 2000


def context(total_bytes: int, free_at_start_bytes: int) -> dict:
    """The cuda_context row from total and free device bytes taken right after CUDA init."""
    return {"kind": "cuda_context", "name": "cuda_context", "bytes": total_bytes - free_at_start_bytes,
            "total_memory_bytes": total_bytes, "free_at_start_bytes": free_at_start_bytes, "s": 0.0, "flops": 0}


def stream(b: Bench, kind: str) -> None:
    """Read or copy rows over the scale's sizes, timed as the lab's graph_ms (do_bench of a graph of the rotated
    copies); sizes that do not fit a third of the free memory are skipped."""
    kernels = b.stream_kernels()
    for size in b.scale.read_bytes:
        name = f"{kind}_{size >> 10}KiB"
        moved = size if kind == "read" else 2 * size
        if b.late(name):
            return
        if moved > b.free_bytes() // 3:
            b.skip(name, "does not fit in a third of the free device memory")
            continue
        n = size // 4
        copies = b.copies(moved)
        xs = [torch.rand(n, device=b.device, dtype=torch.float32) for _ in range(copies)]
        outs = [torch.empty(n // READ_BLOCK, device=b.device) if kind == "read" else torch.empty_like(x) for x in xs]
        if kernels is not None:
            call, label = (kernels.read, "read_kernel") if kind == "read" else (kernels.copy, "copy_kernel")
        elif kind == "read":
            call, label = (lambda x, o: torch.sum(x.view(-1, READ_BLOCK), dim=1, out=o)), "torch.sum rows of 4096"
        else:
            call, label = (lambda x, o: o.copy_(x)), "Tensor.copy_"

        def fn(xs=xs, outs=outs, call=call):
            for x, o in zip(xs, outs, strict=True):
                call(x, o)
        s = b.timer.do_bench_s(fn, calls=copies)
        b.add(kind, name, s, moved, size // 4 if kind == "read" else 0, size_bytes=size, copies=copies,
              kernel=label)
        del xs, outs
        b.release()


def launch(b: Bench) -> None:
    """The launch row: `LAUNCHES` empty kernels in one graph, per launch (do_bench of the graph, as the lab)."""
    kernels = b.stream_kernels()
    x = torch.empty(1, device=b.device)
    if kernels is None:
        fn, label = (lambda: [x.fill_(1.0) for _ in range(LAUNCHES)]), "fill_1"
    else:
        fn, label = (lambda: [kernels.empty(x) for _ in range(LAUNCHES)]), "empty_kernel"
    s = b.timer.do_bench_s(fn, calls=LAUNCHES)
    b.add("launch", f"launch_{label}", s, kernel=label)


def kernel_chain(b: Bench) -> None:
    """Per-kernel time of a chain of dependent small adds in one graph, at 1 and 64 rows of 4096."""
    for tokens in (1, 64):
        x = b.randn(tokens, 4096)
        s = b.timer.per_call_s(lambda x=x: [x.add_(1.0) for _ in range(b.scale.chain)], calls=b.scale.chain,
                               reps=20, warmup=5)
        b.add("kernel", f"kernel_chain_{tokens}x4096", s, 2 * x.numel() * 2, x.numel(), tokens=tokens,
              chain=b.scale.chain)


def _aten_ops(b: Bench) -> dict:
    """Each small aten op one eager decode layer launches at batch 1, on its operands (step_costs_gpu._chain_kinds)."""
    x, r, w = b.randn(1, 1, 4096), b.randn(1, 1, 4096), b.randn(4096)
    xf = x.float()
    m = xf.pow(2).mean(-1, keepdim=True)
    qkv = b.randn(1, 1, 6144)
    q = qkv[..., :4096].view(1, 1, 32, 128).transpose(1, 2)
    k = qkv[..., 4096:5120].view(1, 1, 8, 128).transpose(1, 2)
    qa, qb = -q[..., 64:], q[..., :64]
    cos = b.randn(1, 128)
    cache, pos = b.randn(1, 8, 1024, 128), torch.tensor([1023], device=b.device)
    gate, up = b.randn(1, 1, 28672).chunk(2, dim=-1)
    sg = F.silu(gate)
    x2 = b.randn(1, 4096)
    return {"add_inplace_1x4096": lambda: x2.add_(1.0), "add": lambda: x + r, "mul_weight": lambda: x * w,
            "to_fp32": lambda: x.float(),
            "to_bf16": lambda: xf.to(torch.bfloat16), "pow2_fp32": lambda: xf.pow(2),
            "mean_fp32": lambda: xf.mean(-1, keepdim=True), "add_eps": lambda: m + 1e-5,
            "rsqrt": lambda: torch.rsqrt(m), "mul_fp32_bcast": lambda: xf * m, "neg_strided": lambda: -q[..., 64:],
            "cat_rope": lambda: torch.cat([qa, qb], dim=-1), "mul_rope": lambda: q * cos,
            "index_put_kv": lambda: cache.__setitem__((slice(None), slice(None), pos), k),
            "silu_strided": lambda: F.silu(gate), "mul_silu_up": lambda: sg * up}


def aten_chains(b: Bench) -> None:
    """Each small aten op's per-call time in a chain of ATEN_CHAIN calls: an "aten_bare" row per op before any
    profiler, then (CUDA) an "aten" row per op timed right after its kernel census, as the lab's probe did."""
    calls = ATEN_CHAIN if b.device == "cuda" else 50
    ops = _aten_ops(b)
    for kind in ("aten_bare", "aten"):
        for op, fn in ops.items():
            if b.late(f"{kind}_{op}"):
                return
            kernels = kernel_count(fn) if kind == "aten" and b.device == "cuda" else None
            s = b.timer.per_call_s(lambda fn=fn: [fn() for _ in range(calls)], calls=calls, reps=20, warmup=5)
            b.add(kind, f"{kind}_{op}", s, op=op, chain=calls, **({"kernels": kernels} if kernels else {}))
    b.release()
