"""The fused-MoE Triton kernel's first call at a new specialisation: its JIT compile, timed alone (run 18, stage J).

Why: SGLang run 3 stalled 1.95 s at its first eager decode step past its captured batches (B 257, Qwen3-30B-A3B),
read from its log as two Triton compiles of fused_moe_kernel (validate/notes/2026-11-30-sglang-first-eager-stall.md):
Triton compiles a kernel once per constexpr set and per "integer argument divisible by 16" key, and num_valid_tokens
(= M x top_k) changes that key when M turns odd. vLLM 0.24's copy of the kernel has the same arguments
(model_executor/layers/fused_moe/fused_moe.py:293-330, no do_not_specialize). This times vLLM's fused_experts at
Qwen3-30B-A3B's shapes (E 128, top-k 8, hidden 2,048, intermediate 768, bf16) in a fresh Triton cache: each call's
wall time and the compiled kernels the cache gained (cubin files), in the order
  256, 256, 258, 257, 257, 259, 386, 386, 385, 385
then, in a second process on the now warm cache, 257 (a compiled kernel loaded from disk, not compiled).
Usage (GPU machine, vLLM importable): python3 jit_probe.py OUT_JSON [--warm]"""

import json
import os
import sys
import tempfile
import time

ORDER = (256, 256, 258, 257, 257, 259, 386, 386, 385, 385)
WARM_ORDER = (257, 257)


def cubins(d: str) -> int:
    return sum(f.endswith(".cubin") for _, _, fs in os.walk(d) for f in fs)


def main() -> None:
    out, warm = sys.argv[1], "--warm" in sys.argv
    if not warm:
        os.environ["TRITON_CACHE_DIR"] = tempfile.mkdtemp(prefix="triton-jit-probe-")
    cache = os.environ["TRITON_CACHE_DIR"]
    import torch
    from graphbench import moe_inputs  # this folder: run as a file
    from vllm.model_executor.layers.fused_moe.fused_moe import fused_experts

    E, topk, H, inter = 128, 8, 2048, 768
    rows = []
    for M in (WARM_ORDER if warm else ORDER):
        x, w1, w2, _, tw, ti = moe_inputs(M, E, topk, H, inter)
        torch.cuda.synchronize()
        before = cubins(cache)
        t0 = time.perf_counter()
        fused_experts(x, w1, w2, tw, ti)
        torch.cuda.synchronize()
        t = time.perf_counter() - t0
        rows.append({"M": M, "s": t, "cubins_added": cubins(cache) - before})
        print(f"M={M} {t * 1e3:.1f} ms, +{rows[-1]['cubins_added']} cubins", flush=True)
    res = {"warm_cache": warm, "triton_cache": cache, "shape": {"E": E, "topk": topk, "H": H, "I": inter},
           "calls": rows}
    with open(out, "w") as f:
        json.dump(res, f, indent=1)
    print("JIT_PROBE_DONE", cache, flush=True)


if __name__ == "__main__":
    main()
