"""Two mechanisms of run 3 timed alone (vLLM's kernels, CUDA-graph replays as micro.py):
- FlashAttention-3's paged decode with a sliding window at contexts INSIDE the window (Mistral-7B: W = 4096): the
  local-attention instantiation against the plain one at equal shapes (run 3's prof.py: 143 vs 115 us per layer at
  B = 256, L = 256);
- vLLM's fused MoE (`fused_experts`) at prefill-sized M (256 .. 16384 tokens) at Qwen3-30B-A3B's and
  DeepSeek-V2-Lite's shapes, with its peak memory (torch.cuda.max_memory_allocated over the call, less its inputs):
  the MoE prompts of 2,048 tokens run ~40 ms over their parts in the engine.

Usage (GPU machine, vLLM importable): python3 micro3.py OUT_JSON
"""
import json
import sys
import traceback

import torch
from micro import fa3_decode, fused_moe  # this folder: each script is run as a file

res = {"device": torch.cuda.get_device_name(), "torch": torch.__version__, "fa3_window": [], "fused_moe": [],
       "errors": []}
for B, L in [(1, 1024), (32, 1024), (64, 1024), (128, 512), (256, 256), (256, 1024), (64, 4096)]:
    for w in (None, 4096):
        try:
            r = fa3_decode(B, L, 32, 8, 128, w)
            res["fa3_window"].append(r)
            print(f"fa3 B={B} L={L} w={w} {r['s'] * 1e6:.1f} us", flush=True)
        except Exception:
            res["errors"].append(traceback.format_exc()[-800:])
for E, topk, H, inter in [(128, 8, 2048, 768), (64, 6, 2048, 1408)]:
    for M in (256, 1024, 2048, 4096, 8192, 16384):
        try:
            torch.cuda.synchronize()
            torch.cuda.reset_peak_memory_stats()
            base = torch.cuda.memory_allocated()
            r = fused_moe(M, E, topk, H, inter)
            # the peak holds the call's weights and inputs too (made inside fused_moe) and the graph's pool
            r["peak_bytes_over_start"] = torch.cuda.max_memory_allocated() - base
            r["weights_bytes"] = E * 3 * H * inter * 2
            res["fused_moe"].append(r)
            print(f"moe E={E} M={M} {r['s'] * 1e6:.1f} us peak+{r['peak_bytes_over_start'] / 2**30:.2f} GiB",
                  flush=True)
        except Exception:
            res["errors"].append(traceback.format_exc()[-800:])
with open(sys.argv[1], "w") as f:
    json.dump(res, f, indent=1)
print("MICRO3_DONE", len(res["errors"]), "errors", flush=True)
