"""Launch-config sweep of the XQuant kernels on a GPU: block_n x r_block x warps x stages, each config first
checked against the torch reference at 640 tokens, then timed like the bench (CUDA graph, rotated inputs).

On the GPU box: `python benchmarks/gpu_sweep_xquant.py [fused] [remat] [mha]`. The H200 output of 2026-11-22
is validate/results/nvidia-h200-xquant-sweep.txt; TF counts the remat GEMMs only (2 B L r 2 H_kv d_h).
"""

from __future__ import annotations

import itertools
import sys
import time

import torch

from validate.common.harness import graph_ms, input_sets
from validate.common.testing import relative_rms
from validate.ops.xquant import cases as xf
from validate.ops.xquant import launch as xk
from validate.ops.xquant import reference as xref

GRID = [dict(block_n=bn, r_block=r, num_warps=w, num_stages=s)
        for bn, r, w, s in itertools.product((64, 128), (64, 128), (4, 8), (2, 3))]
CHECK_TOKENS = 640


def remat_flops(p: dict) -> int:
    return 2 * p["batch"] * p["context"] * p["latent"] * 2 * p["num_kv_heads"] * p["head_dim"]


def time_fused(p: dict, cfg: dict) -> float:
    w = xf.random_weights(p, "cuda")
    b, h, d = p["batch"], p["num_heads"], p["head_dim"]
    out, work = torch.empty(b, h, d, dtype=torch.bfloat16, device="cuda"), {}

    def make():
        return torch.randn(b, h, d, dtype=torch.bfloat16, device="cuda"), xf.random_layer(p, w, "cuda")

    return graph_ms(lambda q, layer: xk.decode(q, layer, None, out, work, **cfg), input_sets(make, xf._set_bytes(p)))


def time_remat(p: dict, cfg: dict) -> float:
    w = xf.random_weights(p, "cuda")
    shape = (p["batch"], p["num_kv_heads"], p["context"], p["head_dim"])

    def make():
        kv = tuple(torch.empty(shape, dtype=torch.bfloat16, device="cuda") for _ in "kv")
        return xf.random_layer(p, w, "cuda"), kv

    kv_bytes = 4 * p["batch"] * p["num_kv_heads"] * p["context"] * p["head_dim"]
    return graph_ms(lambda layer, kv: xk.materialize(layer, kv, **cfg), input_sets(make, xf._set_bytes(p) + kv_bytes))


def check(p: dict, cfg: dict, kind: str) -> float:
    g = torch.Generator(device="cuda").manual_seed(0)
    r = p["latent"]
    x_k = torch.randn(1, CHECK_TOKENS, r, device="cuda", generator=g)
    x_v = None if p["variant"] == "mha_fused" else torch.randn(1, CHECK_TOKENS, r, device="cuda", generator=g)
    ws = [torch.randn(r, p["num_kv_heads"] * p["head_dim"], device="cuda", generator=g) * r ** -0.5 for _ in "kv"]
    layer = xk.build_layer(x_k, x_v, *ws, p["num_kv_heads"], 2, 128)
    if kind == "remat":
        (k, v), (k_ref, v_ref) = xk.materialize(layer, **cfg), xref.remat_reference(layer)
        return max(relative_rms(k, k_ref), relative_rms(v, v_ref))
    q = torch.randn(1, p["num_heads"], p["head_dim"], device="cuda", generator=g).to(torch.bfloat16)
    return relative_rms(xk.decode(q, layer, **cfg), xref.reference(q, layer))


def main(which: list[str]) -> None:
    jobs = []
    if "fused" in which:
        jobs += [("fused", xf.params("fused", 8, 16384)), ("fused", xf.params("fused", 1, 32768))]
    if "remat" in which:
        jobs += [("remat", xf.params("materialized", 8, 16384))]
    if "mha" in which:
        jobs += [("fused", xf.params("mha_fused", 1, 8192))]
    for kind, p in jobs:
        for cfg in GRID:
            start = time.time()
            head = f"{kind:6s} {p['variant']:9s} b{p['batch']} L{p['context']} {cfg}"
            try:
                err = check(p, cfg, kind)
                ms = (time_remat if kind == "remat" else time_fused)(p, cfg)
                tf = remat_flops(p) / ms / 1e9
                print(f"{head} err={err:.2e} ms={ms:.4f} TF={tf:.0f} ({time.time() - start:.1f}s)", flush=True)
            except Exception as err:  # a config that does not compile or fit is reported, not fatal
                print(f"{head} FAIL {type(err).__name__}: {str(err)[:120]}", flush=True)


if __name__ == "__main__":
    main(sys.argv[1:] or ["fused", "remat", "mha"])
