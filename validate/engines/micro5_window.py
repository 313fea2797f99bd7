"""Does the engine's CUDA-graph capture keep Mistral's window in FlashAttention-3's decode? (GPU, one file, JSON.)

micro4 found FA3's paged decode the same with and without a 4,096-token window at L = 272 (the windowed layer's
in-engine excess unexplained), but it passed max_seqlen_k = L. FA3 drops a window wider than max_seqlen_k - 1
(hopper/flash_api.cpp mha_fwd: `if (window_size_left >= seqlen_k - 1) window_size_left = -1`, then is_local only
with a window left), and vLLM's V2 runner captures its full CUDA graphs with max_seq_len = max_model_len ("Capture
with worst-case max_seq_len so the graph is valid at any replay": vllm/v1/worker/gpu/model_states/default.py,
prepare_attn for_capture), so the captured decode keeps the window and runs the Is_local instantiation: the
engine's profile of Mistral-7B names FlashAttnFwdSm90<..., tile 128x128x128, Is_causal=false, Is_local=true, ...>
where Llama-3.1-8B's is <..., 64x128x128, Is_causal=true, Is_local=false, ...> (prof.py, runs 2 and 3).

Cases: B = 32 / 128 / 256 at L = 272 (and 256 at 1,024), window none or 4,096 ((W - 1, 0) as vLLM passes it),
max_seqlen_k = L, 4,096, 4,097, 32,768, called as the FLASH_ATTN backend calls it under full graphs (AOT scheduler
metadata with the same max_seqlen_k and window, num_splits 32). Each: the median of CUDA-graph replays
(triton.testing.do_bench, L2 flushed), less nothing (compare cases with each other, or subtract micro4's 3.95 us
replay cost). The hypothesis committed before the run is micro5-predicted.json beside this file's results.

Usage (GPU machine, vLLM importable): python3 micro5_window.py OUT_JSON   (prints the JSON too)
"""
import json
import sys
import traceback

import torch
from graphbench import bench  # this folder: each script is run as a file

dev = "cuda"
HQ, HK, D, BLOCK, SPLITS = 32, 8, 128, 16, 32  # Mistral-7B-v0.1's attention, vLLM's block and split count


def decode(B, L, window, max_seqlen_k):
    """FA3 paged decode of B one-token queries over L cached tokens, engine-style, with `max_seqlen_k` passed."""
    from vllm.vllm_flash_attn.flash_attn_interface import flash_attn_varlen_func, get_scheduler_metadata
    blocks = -(-L // BLOCK)
    kc = torch.randn(B * blocks, BLOCK, HK, D, device=dev, dtype=torch.bfloat16)
    vc = torch.randn_like(kc)
    table = torch.randperm(B * blocks, device=dev, dtype=torch.int32).view(B, blocks)
    q = torch.randn(B, HQ, D, device=dev, dtype=torch.bfloat16)
    out = torch.empty_like(q)
    cu_q = torch.arange(B + 1, device=dev, dtype=torch.int32)
    seqused = torch.full((B,), L, device=dev, dtype=torch.int32)
    ws = (window - 1, 0) if window else (-1, -1)
    meta = get_scheduler_metadata(batch_size=B, max_seqlen_q=1, max_seqlen_k=max_seqlen_k, num_heads_q=HQ,
                                  num_heads_kv=HK, headdim=D, cache_seqlens=seqused, qkv_dtype=torch.bfloat16,
                                  cu_seqlens_q=cu_q, page_size=BLOCK, causal=True, window_size=ws, num_splits=SPLITS)

    def run():
        flash_attn_varlen_func(q, kc, vc, max_seqlen_q=1, cu_seqlens_q=cu_q, max_seqlen_k=max_seqlen_k,
                               seqused_k=seqused, softmax_scale=D ** -0.5, causal=True, block_table=table,
                               window_size=list(ws), out=out, scheduler_metadata=meta, num_splits=SPLITS, fa_version=3)
    return bench(run)


def main():
    res = {"device": torch.cuda.get_device_name(), "torch": torch.__version__, "cases": [], "errors": []}
    for B, L in ((32, 272), (128, 272), (256, 272), (256, 1024)):
        for window in (None, 4096):
            for mk in sorted({L, 4096, 4097, 32768}):
                try:
                    s = decode(B, L, window, mk)
                    res["cases"].append({"B": B, "L": L, "window": window, "max_seqlen_k": mk, "s": s})
                    print(f"B={B} L={L} window={window} max_seqlen_k={mk}: {s * 1e6:.1f} us", file=sys.stderr)
                except Exception:
                    res["errors"].append(f"{(B, L, window, mk)}: " + traceback.format_exc()[-600:])
    text = json.dumps(res, indent=1)
    with open(sys.argv[1], "w") as f:
        f.write(text + "\n")
    print(text)


if __name__ == "__main__":
    main()
