"""The dense models' GEMMs alone, at every M a decode or mixed step runs them: cuBLAS through torch's F.linear,
the call vLLM 0.24's unquantized linear method makes on CUDA (vllm/model_executor/layers/utils.py
dispatch_unquantized_gemm -> default_unquantized_gemm -> torch.nn.functional.linear). bf16, CUDA-graph replays
through triton.testing.do_bench (median, L2 flushed), random inputs. Run 1's decode steps at B = 128 / 256 were
12-21 % longer than predicted on every dense model and Llama-2-7B's prefills at 256 / 1024 tokens 20 / 26 %: this
measures whether the GEMMs at those M run below the device law the planner uses.

Usage (GPU machine): python3 micro2.py OUT_JSON
"""
import json
import sys
import traceback

import torch
from graphbench import bench  # this folder: each script is run as a file

dev = "cuda"
# (model, layer, K, N): vLLM's merged projections (QKVParallelLinear, MergedColumnParallelLinear) at tp 1
SHAPES = [
    ("Llama-3.1-8B", "qkv", 4096, 6144), ("Llama-3.1-8B", "o", 4096, 4096),
    ("Llama-3.1-8B", "gate_up", 4096, 28672), ("Llama-3.1-8B", "down", 14336, 4096),
    ("Llama-3.1-8B", "lm_head", 4096, 128256),
    ("Llama-2-7B", "qkv", 4096, 12288), ("Llama-2-7B", "gate_up", 4096, 22016), ("Llama-2-7B", "down", 11008, 4096),
    ("Llama-2-7B", "lm_head", 4096, 32000),
]
MS = (1, 8, 16, 32, 64, 96, 128, 160, 192, 256, 320, 384, 512, 768, 1024, 2048, 4096)
res = {"device": torch.cuda.get_device_name(), "torch": torch.__version__, "cublas": torch.backends.cudnn.version(),
       "gemm": [], "errors": []}



for model, layer, K, N in SHAPES:
    w = torch.randn(N, K, device=dev, dtype=torch.bfloat16) * 0.02
    for M in MS:
        if layer == "lm_head" and M > 512:
            continue  # vLLM computes logits of the sampled rows only
        try:
            x = torch.randn(M, K, device=dev, dtype=torch.bfloat16)
            t_lin = bench(lambda x=x, w=w: torch.nn.functional.linear(x, w))
            flops, wbytes = 2 * M * N * K, 2 * N * K
            res["gemm"].append({"model": model, "layer": layer, "M": M, "K": K, "N": N, "s": t_lin,
                                "flops_per_s": flops / t_lin,
                                "bytes": wbytes + 2 * M * (K + N), "bytes_per_s": (wbytes + 2 * M * (K + N)) / t_lin})
        except Exception:
            res["errors"].append(traceback.format_exc()[-600:])
    r = [g for g in res["gemm"] if g["model"] == model and g["layer"] == layer]
    print(model, layer, " ".join(f"M{g['M']}:{g['s'] * 1e6:.0f}us/{g['flops_per_s'] / 1e12:.0f}TF" for g in r),
          flush=True)
    del w
with open(sys.argv[1], "w") as f:
    json.dump(res, f, indent=1)
print("MICRO2_DONE", len(res["errors"]), "errors", flush=True)
