"""Microbenchmarks of the ceilings a decoder step meets, each its own named mechanism:

  kernel    per-kernel time of dependent small kernels in a CUDA graph (x.add_(1) on [rows, 4096] bf16,
            256 in a chain): launch, ramp-up and drain of one kernel, what a step pays per kernel
  gemm      F.linear bf16 at the decode and prefill shapes of the catalogue models (M tokens x K -> N),
            weights rotated through ceil(4 L2 / weight bytes) copies so that none is read from L2
  flash     scaled_dot_product_attention, causal, B=1, 32 query / 8 KV heads (enable_gqa), per head dim:
            FLOPs 4 H D P(P+1)/2 (QK and PV over the causal pairs)
  decode    scaled_dot_product_attention of one query token over a cache of L (enable_gqa): bytes read
            2 B Hkv L D x 2 (K and V, bf16)
  stream    a large device-to-device copy (bytes read + written)
  context   the CUDA context's device memory: total - free right after CUDA init, nothing allocated yet
Rows: {"family": "client_ceilings", "name", "params": {"kind", ...}, "ms", "bytes", "flops"}.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F

from validate.clients.timing import capture, chain_ms, replay_ms

CHAIN = 256
GEMM_TOKENS = (1, 16, 32, 64, 128, 512, 2048, 8192, 16384)
# (N, K) of the Llama-3.1-8B and Llama-3.2-3B projections: qkv, o, gate/up, down, LM head
GEMM_SHAPES = ((6144, 4096), (4096, 4096), (28672, 4096), (4096, 14336), (128256, 4096),
               (5120, 3072), (3072, 3072), (16384, 3072), (3072, 8192))
FLASH = {128: (1024, 2048, 4096, 8192, 16384), 64: (2048, 8192, 16384)}
DECODE = ((1, 4096), (1, 32768), (8, 8192), (32, 2048), (32, 8192), (64, 4096))
HEADS, KV_HEADS = 32, 8


def _row(name: str, params: dict, ms: float, moved: int = 0, flops: int = 0) -> dict:
    return {"family": "client_ceilings", "name": name, "params": params, "ms": ms, "bytes": moved, "flops": flops}


def cuda_context(free_at_start: int | None = None) -> list[dict]:
    """total - free of the device before the first allocation (`free_at_start`: taken by the caller right after
    CUDA init; None: taken now, which must then be before anything is allocated)."""
    if free_at_start is None:
        if torch.cuda.memory_reserved() != 0:
            raise RuntimeError("cuda_context: the caching allocator already holds memory; measure before allocating")
        free_at_start, _ = torch.cuda.mem_get_info()
    total = torch.cuda.get_device_properties(0).total_memory
    return [{"family": "client_ceilings", "name": "cuda_context", "params": {"kind": "cuda_context"},
             "bytes": total - free_at_start, "total_memory_bytes": total, "free_at_start_bytes": free_at_start}]


def kernel_overhead() -> list[dict]:
    rows = []
    for tokens in (1, 64):
        x = torch.randn(tokens, 4096, device="cuda", dtype=torch.bfloat16)
        ms = chain_ms(lambda x=x: x.add_(1.0), CHAIN)
        rows.append(_row(f"kernel_chain_{tokens}x4096", {"kind": "kernel", "tokens": tokens, "chain": CHAIN}, ms,
                         2 * x.numel() * 2, x.numel()))
    return rows


def gemm_grid(l2_bytes: int) -> list[dict]:
    rows = []
    for n, k in GEMM_SHAPES:
        weight_bytes = n * k * 2
        copies = max(1, min(16, math.ceil(4 * l2_bytes / weight_bytes)))
        ws = [torch.randn(n, k, device="cuda", dtype=torch.bfloat16) for _ in range(copies)]
        for m in GEMM_TOKENS:
            x = torch.randn(m, k, device="cuda", dtype=torch.bfloat16)
            graph = capture(lambda x=x, ws=ws: [F.linear(x, w) for w in ws])
            ms = replay_ms(graph, timed=10, warmup=2)["ms"] / copies
            rows.append(_row(f"gemm_m{m}_n{n}_k{k}", {"kind": "gemm", "m": m, "n": n, "k": k, "dtype": "bf16"}, ms,
                             (n * k + m * k + m * n) * 2, 2 * m * n * k))
            del graph
        del ws
        torch.cuda.empty_cache()
    return rows


def flash_prefill() -> list[dict]:
    rows = []
    for d, prompts in FLASH.items():
        for p in prompts:
            q = torch.randn(1, HEADS, p, d, device="cuda", dtype=torch.bfloat16)
            k = torch.randn(1, KV_HEADS, p, d, device="cuda", dtype=torch.bfloat16)
            v = torch.randn_like(k)
            graph = capture(lambda q=q, k=k, v=v: F.scaled_dot_product_attention(q, k, v, is_causal=True,
                                                                                 enable_gqa=True))
            ms = replay_ms(graph, timed=10, warmup=2)["ms"]
            pairs = p * (p + 1) // 2
            rows.append(_row(f"flash_causal_d{d}_p{p}", {"kind": "flash", "head_dim": d, "prompt": p, "causal": True,
                                                          "heads": HEADS, "kv_heads": KV_HEADS}, ms,
                             (q.numel() * 2 + k.numel() * 2) * 2, 4 * HEADS * d * pairs))
            del graph
    return rows


def decode_attention(l2_bytes: int) -> list[dict]:
    rows = []
    d = 128
    for b, n in DECODE:
        kv_bytes = 2 * b * KV_HEADS * n * d * 2
        copies = max(1, min(16, math.ceil(4 * l2_bytes / kv_bytes)))
        sets = [(torch.randn(b, HEADS, 1, d, device="cuda", dtype=torch.bfloat16),
                 torch.randn(b, KV_HEADS, n, d, device="cuda", dtype=torch.bfloat16),
                 torch.randn(b, KV_HEADS, n, d, device="cuda", dtype=torch.bfloat16)) for _ in range(copies)]
        graph = capture(lambda sets=sets: [F.scaled_dot_product_attention(q, k, v, enable_gqa=True)
                                           for q, k, v in sets])
        ms = replay_ms(graph, timed=20, warmup=3)["ms"] / copies
        rows.append(_row(f"decode_attn_b{b}_l{n}", {"kind": "decode_attention", "batch": b, "context": n,
                                                    "head_dim": d, "heads": HEADS, "kv_heads": KV_HEADS}, ms,
                         kv_bytes, 4 * b * HEADS * n * d))
        del graph, sets
        torch.cuda.empty_cache()
    return rows


def stream_copy() -> list[dict]:
    n = 1 << 30
    a = torch.empty(n, device="cuda", dtype=torch.uint8).random_()
    b = torch.empty_like(a)
    graph = capture(lambda: b.copy_(a))
    ms = replay_ms(graph, timed=10, warmup=2)["ms"]
    return [_row("copy_1GiB", {"kind": "copy", "bytes": n}, ms, 2 * n, 0)]


def all_micro(l2_bytes: int, log=print, free_at_start: int | None = None) -> list[dict]:
    """Every microbenchmark above; `free_at_start`: free device bytes right after CUDA init (see cuda_context)."""
    rows = cuda_context(free_at_start)
    log(f"  cuda_context: {rows[0]['bytes']} bytes")
    for fn in (kernel_overhead, stream_copy, lambda: decode_attention(l2_bytes), flash_prefill,
               lambda: gemm_grid(l2_bytes)):
        got = fn()
        for r in got:
            log(f"  {r['name']}: {r['ms']:.4f} ms")
        rows += got
    return rows
