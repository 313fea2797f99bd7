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

Group extend (session 28's stage, named only: not in the default set): the served prefill step's kernels alone at
the sizes run 3's Qwen3-30B-A3B server ran (k prompts of 1,024 tokens, k = 1 .. 8; validate/engines/sglang_prefill.py
takes the step apart): the fused MoE at M = 512 .. 8,192 with the tuned config's BLOCK_SIZE_M and the rows it pads
to; FA3's extend call as SGLang's forward_extend makes it on its page-1 pool; the copy SGLang's extend makes of q;
the step's dense GEMMs at its token counts.

Usage (GPU machine, SGLang importable): python3 micro_sglang.py OUT_JSON [GROUP ...]
GROUPs: decode (FA3 decode, argmax; run 2's stage M), moe, prefill; default all; extend (named only).
"""
import json
import sys
import traceback
from pathlib import Path

import torch
from graphbench import bench, moe_inputs, moe_row, prefill_inputs, prefill_row  # this folder: run as a file

dev = "cuda"
res = {"device": torch.cuda.get_device_name(), "torch": torch.__version__, "fa3_decode": [], "argmax": [],
       "fused_moe": [], "fa3_prefill": [], "fa3_extend": [], "q_copy": [], "gemm": [], "errors": []}
GROUPS = set(sys.argv[2:]) or {"decode", "moe", "prefill"}
EXTEND = json.loads((Path(__file__).resolve().parent / "micro-sglang-extend.json").read_text())


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


def fused_moe(M, E, topk, H, inter, padding=False):
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
    row = moe_row(M, E, topk, H, inter, ti, bench(run))
    if padding:  # the tuned config SGLang picks at M (fused_moe_triton_config.py:300) and the rows it aligns to
        block = fc.try_get_optimal_moe_config(w1.shape, w2.shape, topk, None, M)["BLOCK_SIZE_M"]
        per_expert = torch.bincount(ti.flatten().long(), minlength=E)
        row.update(block_m=block, padded_rows=int((-(-per_expert // block) * block).sum()))
    return row


def fa3_prefill(P, hq, hk, d):
    """One causal prompt of P tokens (varlen, not paged): FLOPs 4 P^2 hq d / 2 (QK and PV, causal half)."""
    from sgl_kernel.flash_attn import flash_attn_varlen_func
    q, k, v, cu = prefill_inputs(P, hq, hk, d, dev)

    def run():
        flash_attn_varlen_func(q, k, v, cu_seqlens_q=cu, cu_seqlens_k=cu, max_seqlen_q=P, max_seqlen_k=P,
                               softmax_scale=d ** -0.5, causal=True, ver=3)
    return prefill_row(P, hq, hk, d, None, bench(run))


def fa3_extend(k, P, hq, hk, d, slots):
    """k prompts of P tokens prefilled as SGLang's FlashAttentionBackend.forward_extend runs them (sglang 0.5.17
    srt/layers/attention/flashattention_backend.py:1453-1471): flash_attn_with_kvcache over the page-1 pool holding
    the step's own K/V (written before the call), page_table the requests' token slots, cu_seqlens_k_new, causal, no
    scheduler metadata (decode precomputes it, :768-774; an extend call sizes FA3's grid itself, the per-layer
    prepare_varlen_num_blocks kernel); q contiguous (its copy is q_copy). slots 'fresh': consecutive (a new server's
    allocator), 'random': drawn over a pool twice the size (a long-running server's free list)."""
    from sgl_kernel.flash_attn import flash_attn_with_kvcache
    tokens = k * P
    kc = torch.randn(2 * tokens, 1, hk, d, device=dev, dtype=torch.bfloat16)
    vc = torch.randn_like(kc)
    slot = (torch.randperm(2 * tokens, device=dev)[:tokens] if slots == "random"
            else torch.arange(tokens, device=dev))
    table = slot.to(torch.int32).view(k, P).contiguous()
    q = torch.randn(tokens, hq, d, device=dev, dtype=torch.bfloat16)
    cu = torch.arange(0, tokens + 1, P, device=dev, dtype=torch.int32)
    seqlens = torch.full((k,), P, device=dev, dtype=torch.int32)

    def run():
        flash_attn_with_kvcache(q=q, k_cache=kc, v_cache=vc, page_table=table, cache_seqlens=seqlens,
                                cu_seqlens_q=cu, cu_seqlens_k_new=cu, max_seqlen_q=P, softmax_scale=d ** -0.5,
                                causal=True, window_size=(-1, -1), softcap=0.0, num_splits=0, ver=3)
    t = bench(run)
    flops = k * 4 * P * P * hq * d / 2
    return {"k": k, "P": P, "hq": hq, "hk": hk, "d": d, "slots": slots, "s": t, "flops": flops,
            "flops_per_s": flops / t}


def q_copy(T, hq, hk, d):
    """q.contiguous() of the q view of a [T, (hq + 2 hk) d] qkv output (qwen3_moe.py:627 splits qkv; flashattention
    _backend.py:1454 makes q contiguous): T x hq x d bf16 read and written."""
    qkv = torch.randn(T, (hq + 2 * hk) * d, device=dev, dtype=torch.bfloat16)
    q = qkv[:, :hq * d]

    def run():
        q.contiguous()
    t = bench(run)
    return {"T": T, "hq": hq, "d": d, "s": t, "bytes": 2 * T * hq * d * 2}


def gemm(name, T, n_in, n_out):
    """One of the step's dense GEMMs (F.linear, bf16, as SGLang's unquantized linear method) at T tokens."""
    x = torch.randn(T, n_in, device=dev, dtype=torch.bfloat16)
    w = torch.randn(n_out, n_in, device=dev, dtype=torch.bfloat16) * 0.02

    def run():
        torch.nn.functional.linear(x, w)
    t = bench(run)
    return {"op": name, "T": T, "K": n_in, "N": n_out, "s": t, "flops": 2 * T * n_in * n_out}


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
if "extend" in GROUPS:
    m, a = EXTEND["moe"], EXTEND["attention"]
    for M in m["M"]:
        attempt("fused_moe", fused_moe, M, m["E"], m["topk"], m["H"], m["I"], True)
    for k, P in a["prompts"]:
        for slots in ("fresh", "random"):
            attempt("fa3_extend", fa3_extend, k, P, a["hq"], a["hk"], a["d"], slots)
    for T in EXTEND["tokens"]:
        attempt("q_copy", q_copy, T, a["hq"], a["hk"], a["d"])
        for name, n_in, n_out in EXTEND["gemm"]:
            attempt("gemm", gemm, name, T, n_in, n_out)
json.dump(res, open(sys.argv[1], "w"), indent=1)
print("MICRO_DONE", flush=True)
