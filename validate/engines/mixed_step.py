"""A mixed step of a real vLLM (one prompt chunk riding with B decodes) against its parts: the decode-only step at
the same B and the prompt's prefill alone, each timed one engine step at a time.

Run 2 replayed served runs at the client's send times: once the admission lag is modelled
(roofline.engines.scheduling.vllm_admission_lag) TTFT p50 at 24 requests/s is still 16 % under and TPOT p50 11 %
under (validate/notes/2026-11-29-ttft-spec.md); at that load nearly every step mixes a 1024-token prompt with ~100
decodes. The step model (roofline.serving.stepmodel) prices a mixed step as one forward pass: GEMMs over all its
tokens with the weights read once, attention per sequence at its context. vLLM runs that step without a full CUDA
graph (v1/worker/gpu_model_runner.py: FULL_AND_PIECEWISE captures FULL graphs for uniform decode batches only; a
mixed batch of more than the largest capture size, 512 tokens, runs the compiled pieces eagerly) and one FA3 varlen
call holding both the chunk's causal block and the decodes' paged reads. This measures the step itself, GPU kernels
and wall, so the model can be checked on the mechanism and not on the served runs.

Engine in-process (VLLM_ENABLE_V1_MULTIPROCESSING=0), async scheduling off so LLMEngine.step() is exactly one
schedule + forward + sample + update (V1 EngineCore.step, batch queue of one). Per B in BS: B requests of P prompt
tokens decode (ignore_eos); then, REPEAT times: 4 decode-only steps timed, one request of CHUNK prompt tokens added
and the next step timed (the mixed step: B decodes + the whole prompt, under the 16384-token offline budget), the
added request aborted after its first token. The same two step kinds once under torch.profiler: GPU kernel time per
step. Prefill alone: CHUNK tokens with nothing else running. Prints one line per B and writes OUT_JSON.

Usage (GPU machine): VLLM_ENABLE_V1_MULTIPROCESSING=0 python3 mixed_step.py MODEL_DIR OUT_JSON [BS] [P] [CHUNK]
(defaults 32,96,160 / 1024 / 1024; ~2 min for Llama-3.1-8B)
"""
import json
import statistics
import sys
import time

import numpy as np
import torch
from vllm import SamplingParams
from vllm.engine.arg_utils import EngineArgs
from vllm.v1.engine.llm_engine import LLMEngine

model_dir, out = sys.argv[1], sys.argv[2]
BS = [int(b) for b in (sys.argv[3] if len(sys.argv) > 3 else "32,96,160").split(",")]
P = int(sys.argv[4]) if len(sys.argv) > 4 else 1024
CHUNK = int(sys.argv[5]) if len(sys.argv) > 5 else 1024
REPEAT = 5
engine = LLMEngine.from_engine_args(EngineArgs(
    model=model_dir, load_format="dummy", dtype="bfloat16", max_model_len=4096, gpu_memory_utilization=0.85,
    enable_prefix_caching=False, seed=0, async_scheduling=False))
vocab = engine.model_config.get_vocab_size()
rng = np.random.default_rng(0)
counter = [0]


def add(n_tokens: int, max_tokens: int) -> str:
    counter[0] += 1
    rid = f"r{counter[0]}"
    engine.add_request(rid, {"prompt_token_ids": rng.integers(1000, vocab - 1000, size=n_tokens).tolist()},
                       SamplingParams(max_tokens=max_tokens, ignore_eos=True, temperature=1.0, detokenize=False))
    return rid


def timed_step() -> float:
    torch.cuda.synchronize()
    t = time.perf_counter()
    engine.step()
    torch.cuda.synchronize()
    return time.perf_counter() - t


def gpu_of(fn) -> float:
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CUDA]) as prof:
        fn()
    torch.cuda.synchronize()
    return sum(e.time_range.elapsed_us() for e in prof.events()
               if e.device_type == torch.autograd.DeviceType.CUDA) * 1e-6


def drain(ids: list[str]) -> None:
    engine.abort_request(ids)
    while engine.has_unfinished_requests():
        engine.step()


def prefill_alone() -> dict:
    walls = []
    for _ in range(REPEAT):
        rid = add(CHUNK, 1)
        walls.append(timed_step())
        drain([rid])
    rid = add(CHUNK, 1)
    g = gpu_of(engine.step)
    drain([rid])
    return {"chunk": CHUNK, "wall_s": statistics.median(walls), "gpu_s": g}


def case(B: int) -> dict:
    ids = [add(P, 100000) for _ in range(B)]
    generated = dict.fromkeys(ids, 0)
    for _ in range(200):  # every prompt prefilled (several steps of the token budget), all decoding
        if min(generated.values()) >= 2:
            break
        for o in engine.step():
            if o.request_id in generated:
                generated[o.request_id] = len(o.outputs[0].token_ids)
    for _ in range(3):
        engine.step()
    dec, mix = [], []
    for _ in range(REPEAT):
        dec += [timed_step() for _ in range(4)]
        extra = add(CHUNK, 1)
        mix.append(timed_step())
        engine.abort_request([extra])
    dec_gpu = gpu_of(engine.step)
    extra = add(CHUNK, 1)
    mix_gpu = gpu_of(engine.step)
    engine.abort_request([extra])
    drain(ids)
    res = {"B": B, "P": P, "chunk": CHUNK, "decode_wall_s": statistics.median(dec),
           "mixed_wall_s": statistics.median(mix), "decode_gpu_s": dec_gpu, "mixed_gpu_s": mix_gpu,
           "decode_walls_s": dec, "mixed_walls_s": mix}
    print(f"MIXED B={B} P={P} chunk={CHUNK}: decode {res['decode_wall_s'] * 1e3:.2f} ms (gpu {dec_gpu * 1e3:.2f}) "
          f"mixed {res['mixed_wall_s'] * 1e3:.2f} ms (gpu {mix_gpu * 1e3:.2f})", flush=True)
    return res


for _ in range(2):  # warm-up: first-use compiles and allocations of both step kinds
    prefill_alone()
pre = prefill_alone()
print(f"MIXED prefill alone {CHUNK}: {pre['wall_s'] * 1e3:.2f} ms (gpu {pre['gpu_s'] * 1e3:.2f})", flush=True)
cases = []
for B in BS:
    cases.append(case(B))
    with open(out, "w") as f:
        json.dump({"prefill_alone": pre, "cases": cases, "device": torch.cuda.get_device_name(),
                   "capture_sizes": list(engine.vllm_config.compilation_config.cudagraph_capture_sizes or [])},
                  f, indent=1)
print("MIXED_DONE", flush=True)
