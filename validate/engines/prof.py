"""One decode step of a real vLLM attributed to its kernels: the engine in-process (VLLM_ENABLE_V1_MULTIPROCESSING=0,
so torch.profiler sees the GPU work), B sequences of P prompt tokens, out = 1 and out = N under the profiler; per-step
kernel time = (sum over kernels at N - at 1) / (N - 1), by kernel name. The same two generates are timed without the
profiler, so the step's wall time and its kernel time compare: a wall time above the kernel time is host work the GPU
waits for. Run 1's B = 256 decode of Llama-3.1-8B was 12.1 ms measured, 10.2 ms predicted (GPU), host law 7.9 ms.

Usage (GPU machine): VLLM_ENABLE_V1_MULTIPROCESSING=0 python3 prof.py MODEL_DIR OUT_JSON [B[,B...] P N]
"""
import json
import os
import statistics
import sys
import time

import numpy as np
import torch
from vllm import LLM, SamplingParams

model_dir, out = sys.argv[1], sys.argv[2]
BS, P, N = sys.argv[3:6] if len(sys.argv) > 5 else ("256,128,32", "256", "33")
BS, P, N = [int(b) for b in BS.split(",")], int(P), int(N)
MAX_LEN = int(os.environ.get("PROF_MAX_MODEL_LEN", 4096))  # a sliding-window model keeps its window path only above it
llm = LLM(model=model_dir, load_format="dummy", dtype="bfloat16", max_model_len=MAX_LEN, gpu_memory_utilization=0.8,
          enable_prefix_caching=False, seed=0)
vocab = llm.llm_engine.model_config.get_vocab_size()
rng = np.random.default_rng(0)


def gen(B, O):
    p = [{"prompt_token_ids": rng.integers(1000, vocab - 1000, size=P).tolist()} for _ in range(B)]
    sp = SamplingParams(max_tokens=O, ignore_eos=True, temperature=1.0, detokenize=False)
    t = time.perf_counter()
    llm.generate(p, sp, use_tqdm=False)
    return time.perf_counter() - t


def census(fn):
    """{kernel name: [calls, seconds]} of the CUDA kernels `fn` runs, under torch.profiler."""
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CUDA]) as prof:
        fn()
    torch.cuda.synchronize()
    agg = {}
    for e in prof.events():
        if e.device_type == torch.autograd.DeviceType.CUDA:
            a = agg.setdefault(e.name, [0, 0.0])
            a[0] += 1
            a[1] += e.time_range.elapsed_us() * 1e-6
    return agg


def case(B):
    gen(B, 2), gen(B, N)  # warm-up: compiles, first-use allocations
    wall = {O: statistics.median(gen(B, O) for _ in range(3)) for O in (1, N)}
    kernels = {O: census(lambda O=O: gen(B, O)) for O in (1, N)}
    names = set(kernels[1]) | set(kernels[N])
    per_step = {n: {"s": (kernels[N].get(n, [0, 0.0])[1] - kernels[1].get(n, [0, 0.0])[1]) / (N - 1),
                    "calls": (kernels[N].get(n, [0, 0])[0] - kernels[1].get(n, [0, 0])[0]) / (N - 1)} for n in names}
    top = dict(sorted(per_step.items(), key=lambda kv: -kv[1]["s"])[:60])
    res = {"B": B, "P": P, "N": N, "wall_s": wall, "wall_step_s": (wall[N] - wall[1]) / (N - 1),
           "kernel_step_s": sum(v["s"] for v in per_step.values()), "kernels": top,
           "device": torch.cuda.get_device_name()}
    print(f"PROF B={B} P={P} wall step {res['wall_step_s'] * 1e3:.3f} ms kernels {res['kernel_step_s'] * 1e3:.3f} ms",
          flush=True)
    for n, v in list(top.items())[:25]:
        print(f"  {v['s'] * 1e6:9.1f} us x{v['calls']:.1f} {n[:110]}", flush=True)
    return res


def prefill_case(P):
    """One prompt of P tokens, max_tokens 1 (lat.py's prefill case), warmed twice, then its wall time (median of 3)
    and its kernels under the profiler, whole (no differencing: the generate is one prefill step and one sample)."""
    sp = SamplingParams(max_tokens=1, ignore_eos=True, temperature=1.0, detokenize=False)

    def one():
        p = [{"prompt_token_ids": rng.integers(1000, vocab - 1000, size=P).tolist()}]
        t = time.perf_counter()
        llm.generate(p, sp, use_tqdm=False)
        return time.perf_counter() - t
    one(), one()
    wall = statistics.median(one() for _ in range(3))
    agg = census(one)
    top = dict(sorted(((n, {"s": v[1], "calls": v[0]}) for n, v in agg.items()), key=lambda kv: -kv[1]["s"])[:60])
    res = {"P": P, "wall_s": wall, "kernel_s": sum(v[1] for v in agg.values()), "kernels": top}
    print(f"PROF prefill P={P} wall {wall * 1e3:.3f} ms kernels {res['kernel_s'] * 1e3:.3f} ms", flush=True)
    for n, v in list(top.items())[:25]:
        print(f"  {v['s'] * 1e6:9.1f} us x{v['calls']} {n[:110]}", flush=True)
    return res


PREFILL = [int(p) for p in os.environ.get("PROF_PREFILL", "").split(",") if p]  # prefill cases instead of decode
results = [prefill_case(P) for P in PREFILL] if PREFILL else [case(B) for B in BS]
with open(out, "w") as f:
    json.dump({"cases": results}, f, indent=1)
print("PROF_DONE", flush=True)
os._exit(0)
