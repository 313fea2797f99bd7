"""routing_kernel_s: the per-kernel time of a routed MLP's routing kernels in a CUDA graph (torch only).

The ops are those of validate/clients/decoder.py moe_mlp (Mixtral-8x7B's top-2 of 8 experts, d = 4096, I = 14336)
between its router GEMM and its two grouped GEMMs, run on the router's logits and the grouped GEMMs' outputs made
beforehand: topk, softmax and its casts, a stable argsort, the expert counts by scatter_add into zeros, their
cumsum, the token gather, SiLU x up, the gate scaling and the index_add of the expert outputs into zeros. Per
decode batch, the time of one call (a graph of the 2-layer chain, as the probe alternates two layers) over the
kernels one call launches (torch.profiler's CUDA activity); the figure is the median over batches. The lab's
figure (validate/clients/calibrate.py routing_kernel_time) is the same quotient, read from the whole moe_mlp less
its grouped calls and the router GEMM at the GEMM law.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

from roofline.calibrate.bench import Bench
from roofline.calibrate.timing import kernel_count

TOP_K = 2


def _routing(x, logits, gu, ys_grouped, experts: int):
    """moe_mlp's routing ops on precomputed logits [T, E], grouped outputs gu [T k, 2 I] and ys [T k, d]."""
    scores, chosen = torch.topk(logits, TOP_K, dim=-1)  # [T, k]
    gates = torch.softmax(scores.float(), dim=-1).to(x.dtype)
    flat = chosen.reshape(-1)
    order = torch.argsort(flat, stable=True)
    token = order // TOP_K
    counts = torch.zeros(experts, device=x.device, dtype=torch.int32).scatter_add_(
        0, flat, torch.ones_like(flat, dtype=torch.int32))
    offs = torch.cumsum(counts, 0, dtype=torch.int32)
    xs = x[token]  # [T k, d]: what the first grouped GEMM reads
    gate, up = gu.chunk(2, dim=-1)
    hidden = F.silu(gate) * up  # [T k, I]: what the second reads
    ys = ys_grouped * gates.reshape(-1)[order][:, None]
    return torch.zeros_like(x).index_add_(0, token, ys), offs, xs, hidden


def routing(b: Bench) -> None:
    """One row per decode batch: per-kernel time of the routing ops (CUDA only: the census needs CUDA activity).
    It runs after the aten chains' censuses, so CUPTI is attached while it times (timing.kernel_count), as it was
    when the lab's probe timed its routed MLPs (step_costs_gpu.py h3_moe, after h2_chains)."""
    if b.device != "cuda":
        return
    experts, d, inter = b.scale.moe_dims
    timed = []
    for batch in b.scale.moe_batches:
        if b.late(f"routing_b{batch}"):
            break
        layers = [(b.randn(batch, d), b.randn(batch, experts), b.randn(batch * TOP_K, 2 * inter),
                   b.randn(batch * TOP_K, d)) for _ in range(2)]

        def call(layers=layers):
            for x, logits, gu, ys in layers:
                _routing(x, logits, gu, ys, experts)
        timed.append((batch, layers, b.timer.per_call_s(call, calls=len(layers), reps=b.scale.reps)))
    for batch, layers, s in timed:
        kernels = kernel_count(lambda layers=layers: _routing(*layers[0], experts))
        if not kernels:
            b.skip("routing", "torch.profiler saw no CUDA kernels")
            return
        b.add("routing", f"routing_b{batch}", s, batch=batch, kernels=kernels, per_kernel_s=s / kernels)
