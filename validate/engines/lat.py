"""Offline step timing of a real vLLM (the LLM class, dummy weights): decode steps and prefills of cases.json.

Usage (on the GPU machine, vLLM importable): python3 lat.py MODEL_DIR NAME OUT_JSON
The cases file is $ROOFLINE_ENGINE_CASES (a path relative to this folder; default cases.json).
Decode step at (B, P): fresh random prompts, t(out=N) and t(out=1) with ignore_eos; step = (t_N - t_1) / (N - 1),
the mean over contexts P+1 .. P+N-1 (prefill and the first token cancel). Prefill: B = 1, max_tokens = 1 (what an
offline user waits for one prompt). Prefix caching is off, so no run reuses another's blocks. One warm-up generate
after start-up; with "warm_each_case" every case also runs once untimed first (Triton's fused MoE compiles a
configuration per batch bucket on first use); cases of more than 100K prompt tokens in all are timed once, the others
three times (median; twice until run 9, whose Qwen3-30B-A3B B = 16 median of two was the mean of a 12.8 ms rep and
one stalled 1.3 s). (Reading the worker's memory profile through LLM.collective_rpc was tried: run 2's
"__getattribute__" reached the wrapper and failed, run 3's "__getattr__" did not return within 100 s and cost the
run; the start-up log's lines are what compare.py reads.)
The engine's own configuration (attention backend from the log, CUDA-graph sizes, scheduler limits, KV blocks) is
recorded beside the times.
"""
import json
import os
import statistics
import sys
import time
from pathlib import Path

import numpy as np
from vllm import LLM, SamplingParams


def main() -> None:
    """Start the engine, time every case of the model, write OUT_JSON (under a main guard: with tp > 1 vLLM
    starts its engine core by spawn, which re-imports this file)."""
    model_dir, name, out = sys.argv[1], sys.argv[2], sys.argv[3]
    HERE = Path(__file__).resolve().parent
    CASES = json.loads((HERE / os.environ.get("ROOFLINE_ENGINE_CASES", "cases.json")).read_text())
    case = CASES["models"][name]
    UTIL = case.get("gpu_memory_utilization", CASES["gpu_memory_utilization"])
    N = CASES["out_tokens"]

    t0 = time.time()
    TP = case.get("tp", 1)  # run 12: tensor parallelism over the machine's GPUs (vLLM's custom all-reduce)
    PP = case.get("pp", 1)  # run 28: pipeline parallelism (the multiprocessing executor, one stage a GPU)
    llm = LLM(model=model_dir, load_format="dummy", dtype="bfloat16", max_model_len=case["max_model_len"],
              gpu_memory_utilization=UTIL, enable_prefix_caching=False, seed=0, tensor_parallel_size=TP,
              pipeline_parallel_size=PP)
    t_init = time.time() - t0
    cfg = llm.llm_engine.vllm_config
    vocab = llm.llm_engine.model_config.get_vocab_size()
    rng = np.random.default_rng(0)


    def engine_config() -> dict:
        """What the engine chose: scheduler limits, CUDA-graph capture sizes and mode, cache layout."""
        cc, sc, ca = cfg.compilation_config, cfg.scheduler_config, cfg.cache_config
        return {"max_num_seqs": sc.max_num_seqs, "max_num_batched_tokens": sc.max_num_batched_tokens,
                "chunked_prefill": getattr(sc, "enable_chunked_prefill", None),
                "cudagraph_capture_sizes": list(getattr(cc, "cudagraph_capture_sizes", None) or []),
                "cudagraph_mode": str(getattr(cc, "cudagraph_mode", "")),
                "max_cudagraph_capture_size": getattr(cc, "max_cudagraph_capture_size", None),
                "async_scheduling": getattr(sc, "async_scheduling", None),
                "attention_backend": str(getattr(getattr(cfg, "attention_config", None), "backend", "")),
                "block_size": ca.block_size, "num_gpu_blocks": ca.num_gpu_blocks,
                "kv_cache_dtype": str(ca.cache_dtype), "gpu_memory_utilization": ca.gpu_memory_utilization,
                "tensor_parallel_size": cfg.parallel_config.tensor_parallel_size,
                "pipeline_parallel_size": cfg.parallel_config.pipeline_parallel_size,
                "max_concurrent_batches": getattr(cfg, "max_concurrent_batches", None),
                "use_v2_model_runner": getattr(cfg, "use_v2_model_runner", None),
                "fuse_allreduce_rms": getattr(cc.pass_config, "fuse_allreduce_rms", None)}


    def prompts(B, L):
        return [{"prompt_token_ids": rng.integers(1000, vocab - 1000, size=L).tolist()} for _ in range(B)]


    def timed(B, L, O, reps):
        sp = SamplingParams(max_tokens=O, ignore_eos=True, temperature=1.0, top_p=1.0, detokenize=False)
        ts = []
        for _ in range(reps):
            p = prompts(B, L)
            t = time.perf_counter()
            outs = llm.generate(p, sp, use_tqdm=False)
            ts.append(time.perf_counter() - t)
            assert all(len(o.outputs[0].token_ids) == O for o in outs)
        return {"B": B, "P": L, "out": O, "times_s": ts, "median_s": statistics.median(ts)}


    import vllm

    res = {"vllm": vllm.__version__, "model": name, "max_model_len": case["max_model_len"], "init_s": t_init,
           "tp": TP, "pp": PP,
           "gpu_memory_utilization": UTIL, "warm_each_case": CASES.get("warm_each_case", False),
           "moe_routing_simulation": os.environ.get("VLLM_MOE_ROUTING_SIMULATION_STRATEGY", ""),
           "out_tokens": N,
           "engine": engine_config(), "decode": [], "prefill": []}
    print("ENGINE", json.dumps(res["engine"]), flush=True)
    WARM = CASES.get("warm_each_case", False)
    timed(4, 512, 8, 1)  # warm-up: the first generate after start-up pays lazy initialisation
    for B, P in case["decode"]:
        reps = 1 if B * P > 100_000 else 3  # run 9: a median of two is their mean (B = 16: one rep stalled 1.3 s)
        if WARM:  # the timed lengths themselves: run 3's Qwen3-30B-A3B B = 16 compiled a Triton kernel in its first
            timed(B, P, N, 1)  # timed rep after a warm-up of 2 tokens (vLLM's jit_monitor logged it)
        a, b = timed(B, P, N, reps), timed(B, P, 1, reps)
        step = (a["median_s"] - b["median_s"]) / (N - 1)
        res["decode"].append({"B": B, "P": P, "t_outN": a, "t_out1": b, "decode_step_s": step})
        print(f"decode B={B} P={P} step={step * 1e3:.3f} ms", flush=True)
    for P in case["prefill"]:
        if WARM:
            timed(1, P, 1, 1)
        p = timed(1, P, 1, 3)
        res["prefill"].append(p)
        print(f"prefill P={P} {p['median_s'] * 1e3:.2f} ms", flush=True)
    with open(out, "w") as f:
        json.dump(res, f, indent=1)
    print("LAT_DONE", flush=True)
    os._exit(0)  # the engine's worker processes would otherwise hold the interpreter


if __name__ == "__main__":
    main()
