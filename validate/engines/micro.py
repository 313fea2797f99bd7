"""vLLM's own kernels timed alone, each a mechanism of the engine's step: FlashAttention-3 paged decode (the
FLASH_ATTN backend vLLM picks on Hopper) and the fused Triton MoE (`fused_experts`), at the shapes of the models
timed end to end. CUDA-graph replays through triton.testing.do_bench (median, L2 flushed), random inputs.

Usage (GPU machine, vLLM importable): python3 micro.py OUT_JSON
"""
import json
import sys
import traceback

import torch
from graphbench import bench, moe_inputs, moe_row, prefill_inputs, prefill_row  # this folder: run as a file

dev = "cuda"
res = {"device": torch.cuda.get_device_name(), "torch": torch.__version__, "fa3_decode": [], "fa3_prefill": [],
       "fused_moe": [], "errors": []}



def fa3_decode(B, L, hq, hk, d, window=None, block=16):
    from vllm.vllm_flash_attn.flash_attn_interface import flash_attn_varlen_func
    blocks = -(-L // block)
    kc = torch.randn(B * blocks, block, hk, d, device=dev, dtype=torch.bfloat16)
    vc = torch.randn_like(kc)
    table = torch.randperm(B * blocks, device=dev, dtype=torch.int32).view(B, blocks)
    q = torch.randn(B, hq, d, device=dev, dtype=torch.bfloat16)
    out = torch.empty_like(q)
    cu_q = torch.arange(B + 1, device=dev, dtype=torch.int32)
    seqused = torch.full((B,), L, device=dev, dtype=torch.int32)
    ws = [window - 1, 0] if window else [-1, -1]

    def run():
        flash_attn_varlen_func(q, kc, vc, max_seqlen_q=1, cu_seqlens_q=cu_q, max_seqlen_k=L, seqused_k=seqused,
                               softmax_scale=d ** -0.5, causal=True, block_table=table, window_size=ws, out=out,
                               fa_version=3)
    t = bench(run)
    read = B * min(L, window or L) * 2 * hk * d * 2
    return {"B": B, "L": L, "hq": hq, "hk": hk, "d": d, "window": window, "block": block, "s": t,
            "kv_bytes_read": read, "bytes_per_s": read / t}


def fa3_prefill(P, hq, hk, d, window=None):
    """One causal prompt of P tokens (varlen, not paged): FLOPs 4 P^2 hq d / 2 (QK and PV, causal half)."""
    from vllm.vllm_flash_attn.flash_attn_interface import flash_attn_varlen_func
    q, k, v, cu = prefill_inputs(P, hq, hk, d, dev)
    out = torch.empty_like(q)
    ws = [window - 1, 0] if window else [-1, -1]

    def run():
        flash_attn_varlen_func(q, k, v, max_seqlen_q=P, cu_seqlens_q=cu, max_seqlen_k=P, cu_seqlens_k=cu,
                               softmax_scale=d ** -0.5, causal=True, window_size=ws, out=out, fa_version=3)
    return prefill_row(P, hq, hk, d, window, bench(run))


def fused_moe(M, E, topk, H, inter):
    from vllm.model_executor.layers.fused_moe.fused_moe import fused_experts
    x, w1, w2, _, tw, ti = moe_inputs(M, E, topk, H, inter, dev)

    def run():
        fused_experts(x, w1, w2, tw, ti)
    return moe_row(M, E, topk, H, inter, ti, bench(run))


def main():
    for args in [(1, 1024), (1, 16384), (8, 1024), (8, 8192), (32, 1024), (64, 1024), (128, 512), (256, 256),
                 (32, 16384)]:
        for hq, hk, d, w in [(32, 8, 128, None), (32, 32, 128, None), (32, 8, 128, 4096)]:
            if w and args[1] < 8192:
                continue
            try:
                r = fa3_decode(*args, hq, hk, d, w)
                res["fa3_decode"].append(r)
                print(f"fa3 B={r['B']} L={r['L']} hk={hk} w={w} {r['s'] * 1e6:.1f} us "
                      f"{r['bytes_per_s'] / 1e12:.2f} TB/s", flush=True)
            except Exception:
                res["errors"].append(traceback.format_exc()[-800:])
    for P in (256, 2048, 8192, 16384):
        for hq, hk, d in [(32, 8, 128), (32, 32, 128)]:
            try:
                r = fa3_prefill(P, hq, hk, d)
                res["fa3_prefill"].append(r)
                print(f"fa3 prefill P={P} hk={hk} {r['s'] * 1e6:.1f} us {r['flops_per_s'] / 1e12:.0f} TFLOP/s",
                      flush=True)
            except Exception:
                res["errors"].append(traceback.format_exc()[-800:])
    for E, topk, H, inter in [(128, 8, 2048, 768), (64, 6, 2048, 1408)]:
        for M in (1, 4, 16, 64, 256, 1024, 4096):
            try:
                r = fused_moe(M, E, topk, H, inter)
                res["fused_moe"].append(r)
                print(f"moe E={E} M={M} active={r['active_experts']} {r['s'] * 1e6:.1f} us", flush=True)
            except Exception:
                res["errors"].append(traceback.format_exc()[-800:])
    with open(sys.argv[1], "w") as f:
        json.dump(res, f, indent=1)
    print("MICRO_DONE", len(res["errors"]), "errors", flush=True)


if __name__ == "__main__":
    main()
