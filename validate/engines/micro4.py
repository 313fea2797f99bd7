"""The op-level misses of the in-engine profiles (validate/notes/2026-11-29-attribute.md), each kernel timed alone
in a CUDA-graph replay (graphbench.bench, as micro.py): the cases are micro4-cases.json, the planner's prediction of
each is micro4_predict.py's (validate/results/engines/h200-vllm-micro4-predicted.json, committed before the run).

- gemm: cuBLAS (torch.nn.functional.linear, vLLM's unquantized linear) at the decode steps' M = 32 .. 256 and
  prefill M = 256 .. 2048 of Llama-3.1-8B's, Mistral-7B's and Qwen3-30B-A3B's GEMMs: the engine's GEMMs at batch 128
  ran 8-15 % over the planner per call, its prefill GEMMs 20-35 % under;
- fa3_engine: FlashAttention-3 paged decode as the FLASH_ATTN backend calls it under full CUDA graphs (AOT
  scheduler metadata, 32 splits; vllm/v1/attention/backends/flash_attn.py, v0.24.0, lines 448-490 and 866-895)
  with and without Mistral's window, beside micro3's plain call: in the engine the window layer ran 143 us at
  B = 256 against 115 us without a window, alone (micro3) the two were equal;
- kv_write: reshape_and_cache_flash at T tokens (in the engine 2.4-3.0 us per decode call, 12.9 us at 2,048);
- sampler: the logits' fp32 cast and vLLM's gumbel_sample (in the engine 42-238 us a step, no op in the planner);
- graph_floor: K dependent one-element kernels in one graph: a small kernel's cost inside a replay.

Usage (GPU machine, vLLM importable, from validate/engines/): python3 micro4.py OUT_JSON
"""
import json
import sys
import traceback
from pathlib import Path

import torch
from graphbench import bench  # this folder: each script is run as a file

dev = "cuda"
CASES = json.loads((Path(__file__).resolve().parent / "micro4-cases.json").read_text())


def gemm(M, N, K):
    """x [M, K] @ w[N, K]^T: what torch.nn.functional.linear runs for a 2-D input without bias (aten Linear.cpp)."""
    x = torch.randn(M, K, device=dev, dtype=torch.bfloat16)
    w = torch.randn(N, K, device=dev, dtype=torch.bfloat16) * 0.02
    out = torch.empty(M, N, device=dev, dtype=torch.bfloat16)

    def run():
        torch.matmul(x, w.t(), out=out)
    return {"M": M, "N": N, "K": K, "s": bench(run), "flops": 2 * M * N * K, "weight_bytes": N * K * 2}


def fa3_decode(B, L, window, engine_style, c):
    from vllm.vllm_flash_attn.flash_attn_interface import flash_attn_varlen_func, get_scheduler_metadata
    hq, hk, d, block = c["hq"], c["hk"], c["d"], c["block"]
    blocks = -(-L // block)
    kc = torch.randn(B * blocks, block, hk, d, device=dev, dtype=torch.bfloat16)
    vc = torch.randn_like(kc)
    table = torch.randperm(B * blocks, device=dev, dtype=torch.int32).view(B, blocks)
    q = torch.randn(B, hq, d, device=dev, dtype=torch.bfloat16)
    out = torch.empty_like(q)
    cu_q = torch.arange(B + 1, device=dev, dtype=torch.int32)
    seqused = torch.full((B,), L, device=dev, dtype=torch.int32)
    ws = (window - 1, 0) if window else (-1, -1)
    meta, splits = None, 0
    if engine_style:  # the backend's build(): schedule() then the call with num_splits = max_num_splits
        splits = c["num_splits"]
        meta = get_scheduler_metadata(batch_size=B, max_seqlen_q=1, max_seqlen_k=L, num_heads_q=hq, num_heads_kv=hk,
                                      headdim=d, cache_seqlens=seqused, qkv_dtype=torch.bfloat16, cu_seqlens_q=cu_q,
                                      page_size=block, causal=True, window_size=ws, num_splits=splits)

    def run():
        flash_attn_varlen_func(q, kc, vc, max_seqlen_q=1, cu_seqlens_q=cu_q, max_seqlen_k=L, seqused_k=seqused,
                               softmax_scale=d ** -0.5, causal=True, block_table=table, window_size=list(ws), out=out,
                               scheduler_metadata=meta, num_splits=splits, fa_version=3)
    return {"B": B, "L": L, "window": window, "engine_style": engine_style, "s": bench(run),
            "kv_bytes_read": B * min(L, window or L) * 2 * hk * d * 2}


def kv_write(T, hk, d, block=16):
    from vllm import _custom_ops as ops
    blocks = -(-T // block) + 8
    key = torch.randn(T, hk, d, device=dev, dtype=torch.bfloat16)
    value = torch.randn_like(key)
    kc = torch.zeros(blocks, block, hk, d, device=dev, dtype=torch.bfloat16)
    vc = torch.zeros_like(kc)
    slots = torch.randperm(blocks * block, device=dev)[:T].to(torch.int64)
    scale = torch.ones((), device=dev, dtype=torch.float32)

    def run():
        ops.reshape_and_cache_flash(key, value, kc, vc, slots, "auto", scale, scale)
    return {"T": T, "hk": hk, "d": d, "s": bench(run), "bytes": 2 * 2 * T * hk * d * 2}


def sampler(B, V):
    from vllm.v1.worker.gpu.sample.gumbel import gumbel_sample
    logits = torch.randn(B, V, device=dev, dtype=torch.bfloat16)
    idx = torch.arange(B, device=dev, dtype=torch.int32)
    temp = torch.ones(B, device=dev, dtype=torch.float32)
    seed = torch.arange(B, device=dev, dtype=torch.int64)
    pos = torch.full((B,), 300, device=dev, dtype=torch.int64)
    res = {"B": B, "V": V}

    def cast():
        logits.float()

    def sample():  # sampler.py (v0.24.0) Sampler: fp32 logits, / temperature, then gumbel_sample without it
        gumbel_sample(logits.float() / temp[:, None], idx, temp, seed, pos, apply_temperature=False)
    res["cast_s"], res["cast_and_sample_s"] = bench(cast), bench(sample)
    return res


def graph_floor(K):
    x = torch.zeros(1, device=dev)

    def run():
        for _ in range(K):
            x.add_(1)
    return {"kernels": K, "s": bench(run)}


def main():
    res = {"device": torch.cuda.get_device_name(), "torch": torch.__version__, "gemm": [], "fa3_engine": [],
           "kv_write": [], "sampler": [], "graph_floor": [], "errors": []}

    def attempt(family, fn, *args):
        try:
            r = fn(*args)
            res[family].append(r)
            print(family, {k: v for k, v in r.items() if k != "s"}, f"{r.get('s', 0) * 1e6:.1f} us", flush=True)
        except Exception:
            res["errors"].append(f"{family}{args}: " + traceback.format_exc()[-600:])
    g = CASES["gemm"]
    for shape in g["shapes"]:
        for M in sorted(set(g["decode_M"]) | set(g["prefill_M"])):
            attempt("gemm", lambda s=shape, m=M: {**s, **gemm(m, s["N"], s["K"])})
    c = CASES["fa3_engine"]
    for B, L in c["cases"]:
        for w in c["windows"]:
            for engine_style in (True, False):
                attempt("fa3_engine", fa3_decode, B, L, w, engine_style, c)
    for case in CASES["kv_write"]["cases"]:
        for T in case["tokens"]:
            attempt("kv_write", lambda c=case, t=T: {"model": c["model"], **kv_write(t, c["hk"], c["d"])})
    for B, V in CASES["sampler"]["cases"]:
        attempt("sampler", sampler, B, V)
    for K in CASES["graph_floor"]["kernels"]:
        attempt("graph_floor", graph_floor, K)
    with open(sys.argv[1], "w") as f:
        json.dump(res, f, indent=1)
    print("MICRO4_DONE", len(res["errors"]), "errors", flush=True)


if __name__ == "__main__":
    main()
