"""One timing routine for the engine's kernels alone (micro.py, micro2.py): the call captured once in a CUDA graph,
its replays timed by triton.testing.do_bench (median, L2 flushed between replays), in seconds."""
import torch
from triton.testing import do_bench


def bench(fn) -> float:
    """Median seconds of one CUDA-graph replay of `fn` (one eager call first: lazy initialisation)."""
    fn()
    torch.cuda.synchronize()
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        fn()
    return do_bench(lambda: g.replay(), warmup=25, rep=100, return_mode="median") * 1e-3


def moe_inputs(M: int, E: int, topk: int, H: int, inter: int, dev: str = "cuda"):
    """A fused-MoE call's inputs (micro.py, micro_sglang.py): M tokens of width H, E experts of gated width `inter`
    (bf16, weights x 0.02), softmax router logits and their top-k (weights, int32 ids)."""
    x = torch.randn(M, H, device=dev, dtype=torch.bfloat16)
    w1 = torch.randn(E, 2 * inter, H, device=dev, dtype=torch.bfloat16) * 0.02
    w2 = torch.randn(E, H, inter, device=dev, dtype=torch.bfloat16) * 0.02
    logits = torch.randn(M, E, device=dev)
    tw, ti = torch.topk(torch.softmax(logits, -1), topk, dim=-1)
    return x, w1, w2, logits, tw, ti.to(torch.int32)


def moe_row(M: int, E: int, topk: int, H: int, inter: int, ids, t: float) -> dict:
    """A fused_moe result row: the experts the ids hit and their weight bytes (3 x H x inter bf16 each)."""
    active = int(torch.unique(ids).numel())
    return {"M": M, "E": E, "topk": topk, "H": H, "I": inter, "active_experts": active, "s": t,
            "active_weight_bytes": active * 3 * H * inter * 2}


def prefill_inputs(P: int, hq: int, hk: int, d: int, dev: str = "cuda"):
    """One causal prompt of P tokens for a varlen attention call: q, k, v (bf16) and cu_seqlens [0, P]."""
    q = torch.randn(P, hq, d, device=dev, dtype=torch.bfloat16)
    k = torch.randn(P, hk, d, device=dev, dtype=torch.bfloat16)
    return q, k, torch.randn_like(k), torch.tensor([0, P], device=dev, dtype=torch.int32)


def prefill_row(P: int, hq: int, hk: int, d: int, window, t: float) -> dict:
    """An fa3_prefill result row: FLOPs 4 P^2 hq d / 2 (QK and PV, the causal half)."""
    flops = 4 * P * P * hq * d / 2
    return {"P": P, "hq": hq, "hk": hk, "d": d, "window": window, "s": t, "flops": flops, "flops_per_s": flops / t}
