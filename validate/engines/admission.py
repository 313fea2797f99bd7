"""When a request that arrives while the engine is busy first runs: vLLM's admission under asynchronous scheduling,
measured on its own (no HTTP server, no prefill of any size).

Mechanism (roofline.engines.scheduling.vllm_admission_lag, from vllm/v1/engine/core.py@v0.24.0): with async
scheduling the engine core keeps a batch queue of two; step_with_batch_queue schedules and launches step n + 1 as
soon as step n is launched, and new requests enter the scheduler only between those calls, so a request arriving
while step n runs first runs in step n + 2. Without async scheduling (batch queue of one) it runs in step n + 1.

Measurement: vLLM's AsyncLLM (the API server's engine client: engine core in its own process), B background requests
decoding (prompt 512 random tokens, ignore_eos, long outputs), then probes one after another at random gaps, each a
prompt of PROBE tokens and max_tokens 1: TTFT of each probe (generate() call -> first output) against the background
requests' inter-token time (one engine step; the median over the probe window). Expected in steps: a probe arrives
at a uniform point of a step, waits its rest (1/2 step on average), then [async on] one whole step it missed, then
its own step (mixed with the B decodes, a little longer than a decode step): ~2.5 steps with async scheduling,
~1.5 without (plus the engine client's input processing, ~1 ms, in both). Each mode runs in its own process (the
GPU memory of one engine is freed before the next).

Usage (GPU machine): python3 admission.py MODEL_DIR OUT_JSON [B] [PROBE] [PROBES]   (defaults 64, 16, 40)
Each child runs in its own session and is killed with its engine core on a timeout (170 s; run 1 of this script
hung in its first child and the engine core kept GPU 0); STAGE lines on stderr say where a cut child stopped.
Prints one JSON line per mode (ADMISSION {...}) and writes {"modes": [...]} to OUT_JSON; ~2.5 min for an 8B model.
"""
import asyncio
import json
import os
import signal
import statistics
import subprocess
import sys
import time

CAPTURE = [1, 2, 4, 8, 16, 32, 48, 64, 72, 80, 96, 128, 256]  # fewer graphs than the default: start-up time


def stage(text: str) -> None:
    """A progress line on stderr (the parent keeps the tail: where a cut run stopped)."""
    print(f"STAGE {time.strftime('%H:%M:%S')} {text}", file=sys.stderr, flush=True)


async def measure(model_dir: str, async_on: bool, B: int, probe: int, probes: int) -> dict:
    import numpy as np
    from vllm import SamplingParams
    from vllm.engine.arg_utils import AsyncEngineArgs
    from vllm.v1.engine.async_llm import AsyncLLM

    t0 = time.time()
    args = AsyncEngineArgs(model=model_dir, load_format="dummy", dtype="bfloat16", max_model_len=4096,
                           gpu_memory_utilization=0.85, enable_prefix_caching=False, seed=0,
                           async_scheduling=async_on, compilation_config={"cudagraph_capture_sizes": CAPTURE})
    llm = AsyncLLM.from_engine_args(args)
    init_s = time.time() - t0
    stage(f"engine up in {init_s:.0f} s (async_scheduling={async_on})")
    cfg = llm.vllm_config
    rng = np.random.default_rng(1)
    vocab = cfg.model_config.get_vocab_size()
    stamps: list[list[float]] = [[] for _ in range(B)]
    stop = asyncio.Event()

    async def background(i: int) -> None:
        p = {"prompt_token_ids": rng.integers(1000, vocab - 1000, size=512).tolist()}
        sp = SamplingParams(max_tokens=3500, ignore_eos=True, temperature=1.0, detokenize=False)
        async for _ in llm.generate(p, sp, request_id=f"bg{i}"):
            stamps[i].append(time.perf_counter())
            if stop.is_set():
                break

    async def first_token(j: int) -> float:
        p = {"prompt_token_ids": rng.integers(1000, vocab - 1000, size=probe).tolist()}
        sp = SamplingParams(max_tokens=1, temperature=1.0, detokenize=False)
        t = time.perf_counter()
        async for _ in llm.generate(p, sp, request_id=f"probe{j}"):
            return time.perf_counter() - t
        raise RuntimeError(f"probe {j} returned no output")

    tasks = [asyncio.create_task(background(i)) for i in range(B)]
    t_wait = time.perf_counter()
    while min(len(s) for s in stamps) < 20:  # every background request decoding
        if time.perf_counter() - t_wait > 60:
            raise RuntimeError(f"background requests not decoding after 60 s: {sorted(len(s) for s in stamps)[:8]}")
        await asyncio.sleep(0.01)
    stage("background decoding")
    ttfts, window = [], [time.perf_counter(), 0.0]
    for j in range(probes):
        await asyncio.sleep(float(rng.uniform(0.01, 0.05)))
        ttfts.append(await asyncio.wait_for(first_token(j), timeout=10))
    window[1] = time.perf_counter()
    stage(f"{len(ttfts)} probes done")
    stop.set()
    await llm.abort([f"bg{i}" for i in range(B)])
    await asyncio.sleep(0.2)
    for task in tasks:
        task.cancel()
    gaps = [b - a for s in stamps for a, b in zip(s, s[1:], strict=False) if window[0] <= a and b <= window[1]]
    step_s = statistics.median(gaps)
    res = {"async_scheduling": bool(cfg.scheduler_config.async_scheduling), "B": B, "probe_tokens": probe,
           "probes": len(ttfts), "ttft_s_median": statistics.median(ttfts), "ttft_s_mean": statistics.fmean(ttfts),
           "step_s_median": step_s, "step_s_mean": statistics.fmean(gaps),
           "ttft_in_steps_median": statistics.median(ttfts) / step_s,
           "ttft_in_steps_mean": statistics.fmean(ttfts) / statistics.fmean(gaps),
           "ttfts_s": ttfts, "init_s": init_s, "max_concurrent_batches": cfg.max_concurrent_batches}
    llm.shutdown()
    return res


def main() -> None:
    model_dir, out = sys.argv[1], sys.argv[2]
    B, probe, probes = (int(x) for x in (sys.argv[3:6] + ["64", "16", "40"][len(sys.argv[3:6]):]))
    if len(sys.argv) > 6:  # child: one mode
        res = asyncio.run(measure(model_dir, sys.argv[6] == "on", B, probe, probes))
        print("ADMISSION " + json.dumps(res), flush=True)
        return
    modes = []
    for mode in ("on", "off"):
        # its own session: on a timeout the whole group goes (the engine core is a grandchild holding the GPU)
        child = subprocess.Popen([sys.executable, __file__, model_dir, out, str(B), str(probe), str(probes), mode],
                                 stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True)
        try:
            stdout, stderr = child.communicate(timeout=170)
        except subprocess.TimeoutExpired:
            os.killpg(child.pid, signal.SIGKILL)
            stdout, stderr = child.communicate()
            stderr = "timeout after 170 s; " + "\n".join(x for x in stderr.splitlines() if x.startswith("STAGE"))[-800:]
        try:  # whatever of the group is left (an engine core outliving its parent holds the GPU)
            os.killpg(child.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        line = [x for x in stdout.splitlines() if x.startswith("ADMISSION ")]
        modes.append(json.loads(line[-1][10:]) if line else {"mode": mode, "error": stderr[-1500:]})
        print(json.dumps({k: v for k, v in modes[-1].items() if k != "ttfts_s"}), flush=True)
        with open(out, "w") as f:
            json.dump({"modes": modes}, f, indent=1)
    print("ADMISSION_DONE", flush=True)


if __name__ == "__main__":
    main()
