"""SGLang's own decode-attention kernel timed alone: sgl_kernel's FlashAttention-3 `flash_attn_with_kvcache` as
SGLang's FlashAttentionBackend.forward_decode calls it (sglang 0.5.17 srt/layers/attention/flashattention_backend.py:
q (B, hq, d) with cu_seqlens_q, max_seqlen_q 1, a page table over the token pool, num_splits 0 = FA3's heuristic),
on SGLang's default pool of page size 1 and, beside it, on pages of 16 tokens (vLLM's block) at the same shapes: the
difference is what a page of one token costs the kernel. CUDA-graph replays through graphbench.bench (median, L2
flushed), random inputs, token slots drawn at random over the pool (a long-running server's free list).
Also the greedy sampler SGLang runs at temperature 0 (torch.argmax over the fp32 logits, B x vocabulary).

Usage (GPU machine, SGLang importable): python3 micro_sglang.py OUT_JSON
"""
import json
import sys
import traceback

import torch
from graphbench import bench  # this folder: each script is run as a file

dev = "cuda"
res = {"device": torch.cuda.get_device_name(), "torch": torch.__version__, "fa3_decode": [], "argmax": [],
       "errors": []}


def fa3_decode(B, L, hq, hk, d, page):
    """One decode layer: B sequences of L cached tokens, pages of `page` tokens scattered over a pool twice the
    size needed."""
    from sgl_kernel.flash_attn import flash_attn_with_kvcache
    pages = -(-L // page)
    pool = 2 * B * pages
    kc = torch.randn(pool, page, hk, d, device=dev, dtype=torch.bfloat16)
    vc = torch.randn_like(kc)
    table = torch.randperm(pool, device=dev, dtype=torch.int32)[:B * pages].view(B, pages).contiguous()
    q = torch.randn(B, hq, d, device=dev, dtype=torch.bfloat16)
    cu_q = torch.arange(B + 1, device=dev, dtype=torch.int32)
    seqlens = torch.full((B,), L, device=dev, dtype=torch.int32)

    def run():
        flash_attn_with_kvcache(q=q, k_cache=kc, v_cache=vc, page_table=table, cache_seqlens=seqlens,
                                cu_seqlens_q=cu_q, max_seqlen_q=1, softmax_scale=d ** -0.5, causal=True,
                                window_size=(-1, -1), softcap=0.0, num_splits=0, ver=3)
    t = bench(run)
    read = B * L * 2 * hk * d * 2
    return {"B": B, "L": L, "hq": hq, "hk": hk, "d": d, "page": page, "s": t, "kv_bytes_read": read,
            "bytes_per_s": read / t}


def argmax(B, V):
    logits = torch.randn(B, V, device=dev, dtype=torch.float32)

    def run():
        torch.argmax(logits, dim=-1)
    return {"B": B, "V": V, "s": bench(run)}


CASES = [(B, L, hq, hk, d) for (hq, hk, d) in ((32, 8, 128), (32, 32, 128))
         for B in (1, 16, 64, 256) for L in (1056, 4128)] + [(16, 16416, 32, 8, 128), (64, 8224, 32, 8, 128)]
for case in CASES:
    for page in (1, 16):
        try:
            r = fa3_decode(*case, page)
            res["fa3_decode"].append(r)
            print(f"fa3 decode {case} page {page}: {r['s'] * 1e6:.1f} us {r['bytes_per_s'] / 1e12:.2f} TB/s",
                  flush=True)
        except Exception:
            res["errors"].append({"case": list(case), "page": page, "tb": traceback.format_exc()[-800:]})
            print("ERR", case, page, traceback.format_exc()[-300:], flush=True)
        torch.cuda.empty_cache()
for B in (1, 16, 64, 256):
    try:
        res["argmax"].append(argmax(B, 128256))
    except Exception:
        res["errors"].append({"case": ["argmax", B], "tb": traceback.format_exc()[-800:]})
json.dump(res, open(sys.argv[1], "w"), indent=1)
print("MICRO_DONE", flush=True)
