"""SGLang's own decode-attention kernel timed alone: sgl_kernel's FlashAttention-3 `flash_attn_with_kvcache` as
SGLang's FlashAttentionBackend.forward_decode calls it (sglang 0.5.17 srt/layers/attention/flashattention_backend.py:
q (B, hq, d) with cu_seqlens_q, max_seqlen_q 1, a page table over the token pool, num_splits 0 = FA3's heuristic),
on SGLang's default pool of page size 1 and, beside it, on pages of 16 tokens (vLLM's block) at the same shapes: the
difference is what a page of one token costs the kernel. CUDA-graph replays through graphbench.bench (median, L2
flushed), random inputs, token slots drawn at random over the pool (a long-running server's free list).
Also the greedy sampler SGLang runs at temperature 0 (torch.argmax over the fp32 logits, B x vocabulary); SGLang's
fused MoE (sglang 0.5.17 srt/layers/moe/moe_runner/triton_utils/fused_moe.py fused_experts, the Triton runner its
auto backend picks for a bf16 MoE on one H200, with the tuned configs it ships: align, w13 GEMM, activation, w2 GEMM,
sum in one call) at the MoE shapes of Qwen3-30B-A3B and DeepSeek-V2-Lite, the cases of micro.py's vLLM fused_moe;
and FA3's prefill (sgl_kernel flash_attn_varlen_func, causal, one prompt) at micro.py's fa3_prefill cases.

Usage (GPU machine, SGLang importable): python3 micro_sglang.py OUT_JSON [GROUP ...]
GROUPs: decode (FA3 decode, argmax; run 2's stage M), moe, prefill; default all.
"""
import json
import sys
import traceback

import torch
from graphbench import bench, moe_inputs, moe_row, prefill_inputs, prefill_row  # this folder: run as a file

dev = "cuda"
res = {"device": torch.cuda.get_device_name(), "torch": torch.__version__, "fa3_decode": [], "argmax": [],
       "fused_moe": [], "fa3_prefill": [], "errors": []}
GROUPS = set(sys.argv[2:]) or {"decode", "moe", "prefill"}


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


def fused_moe(M, E, topk, H, inter):
    """One call of SGLang's fused_experts (bf16, in place: MoeRunnerConfig's default, the layer's call) on M tokens
    routed to top-k of E experts. Outside a server SGLang's process-wide config is not published, so the two flags
    the call reads get their ServerArgs defaults (enable_fused_moe_sum_all_reduce, enable_deterministic_inference:
    False, srt/server_args.py)."""
    from types import SimpleNamespace

    import sglang.srt.layers.moe.moe_runner.triton_utils.fused_moe as fm
    import sglang.srt.layers.moe.moe_runner.triton_utils.fused_moe_triton_config as fc
    from sglang.srt.layers.moe.moe_runner.base import MoeRunnerConfig
    from sglang.srt.layers.moe.topk import StandardTopKOutput
    defaults = SimpleNamespace(moe=SimpleNamespace(enable_fused_moe_sum_all_reduce=False),
                               deterministic=SimpleNamespace(enable_deterministic_inference=False))
    fm.get_exec = fc.get_exec = lambda: defaults
    fused_experts = fm.fused_experts
    x, w1, w2, logits, tw, ti = moe_inputs(M, E, topk, H, inter, dev)
    topk_out = StandardTopKOutput(tw, ti, logits)
    cfg = MoeRunnerConfig(num_experts=E, num_local_experts=E, hidden_size=H, intermediate_size_per_partition=inter,
                          top_k=topk, params_dtype=torch.bfloat16, inplace=True)

    def run():
        fused_experts(x, w1, w2, topk_out, cfg)
    return moe_row(M, E, topk, H, inter, ti, bench(run))


def fa3_prefill(P, hq, hk, d):
    """One causal prompt of P tokens (varlen, not paged): FLOPs 4 P^2 hq d / 2 (QK and PV, causal half)."""
    from sgl_kernel.flash_attn import flash_attn_varlen_func
    q, k, v, cu = prefill_inputs(P, hq, hk, d, dev)

    def run():
        flash_attn_varlen_func(q, k, v, cu_seqlens_q=cu, cu_seqlens_k=cu, max_seqlen_q=P, max_seqlen_k=P,
                               softmax_scale=d ** -0.5, causal=True, ver=3)
    return prefill_row(P, hq, hk, d, None, bench(run))


def attempt(key, fn, *args):
    try:
        r = fn(*args)
        res[key].append(r)
        print(key, args, f"{r['s'] * 1e6:.1f} us", flush=True)
    except Exception:
        res["errors"].append({"case": [key, *args], "tb": traceback.format_exc()[-800:]})
        print("ERR", key, args, traceback.format_exc()[-300:], flush=True)


CASES = [(B, L, hq, hk, d) for (hq, hk, d) in ((32, 8, 128), (32, 32, 128))
         for B in (1, 16, 64, 256) for L in (1056, 4128)] + [(16, 16416, 32, 8, 128), (64, 8224, 32, 8, 128)]
for case in CASES if "decode" in GROUPS else []:
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
for B in (1, 16, 64, 256) if "decode" in GROUPS else ():
    attempt("argmax", argmax, B, 128256)
for E, topk, H, inter in [(128, 8, 2048, 768), (64, 6, 2048, 1408)] if "moe" in GROUPS else []:
    for M in (1, 4, 16, 64, 256, 1024, 4096):
        attempt("fused_moe", fused_moe, M, E, topk, H, inter)
for P in (256, 2048, 8192, 16384) if "prefill" in GROUPS else ():
    for hq, hk, d in [(32, 8, 128), (32, 32, 128)]:
        attempt("fa3_prefill", fa3_prefill, P, hq, hk, d)
json.dump(res, open(sys.argv[1], "w"), indent=1)
print("MICRO_DONE", flush=True)
