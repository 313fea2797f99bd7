"""Offline step timing of a real SGLang (the offline Engine, dummy weights): decode steps and prefills of
cases-sglang.json, the method of lat.py (vLLM) on SGLang's own entry point.

Usage (on the GPU machine, SGLang importable): python3 lat_sglang.py MODEL_DIR NAME OUT_JSON
The cases file is $ROOFLINE_SGLANG_CASES (a path relative to this folder; default cases-sglang.json);
$ROOFLINE_SGLANG_ATTN, when set, names the attention backend (default: SGLang's own choice, FA3 on Hopper for MHA/GQA
models).
Decode step at (B, P): fresh random prompts, t(out=N) and t(out=1) with ignore_eos; step = (t_N - t_1) / (N - 1), the
mean over contexts P+1 .. P+N-1 (SGLang runs prefill batches and decode batches as separate steps, prefill first, so
the B prefills and the first token cancel). Prefill: B = 1, max_new_tokens = 1. The radix cache is off, so no run
reuses another's KV. One warm-up generate after start-up; cases of more than 100K prompt tokens are timed once, the
others three times (median). The engine's resolved configuration (Engine.get_server_info: mem_fraction_static,
max_total_num_tokens, chunked_prefill_size, CUDA-graph sizes, attention backend, max running requests) is recorded
beside the times.
A case may name its model folder ("dir", default the case's name) and extra Engine arguments ("engine_args": e.g.
mem_fraction_static, a second capacity setting). Its "profile" cases [B, P, N] are run under SGLang's torch profiler
(Engine.start_profile, GPU activity only): per-step kernel time by name = (census at out=N - census at out=1) / (N - 1),
from the scheduler's trace files, parsed here (the traces are deleted; only the census is kept).
"""
import glob
import gzip
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

import numpy as np


def census(trace_dir: str) -> dict:
    """{kernel name: {"calls", "s"}} of the GPU kernels in the trace files of `trace_dir` (chrome traces, "kernel"
    events, durations in microseconds)."""
    out: dict = {}
    for f in glob.glob(os.path.join(trace_dir, "*.trace.json.gz")):
        with gzip.open(f, "rt") as fh:
            events = json.load(fh)["traceEvents"]
        for e in events:
            if e.get("cat") == "kernel":
                k = out.setdefault(e["name"], {"calls": 0, "s": 0.0})
                k["calls"] += 1
                k["s"] += e["dur"] * 1e-6
    return out


def profiled(engine, timed, b: int, p: int, n: int) -> dict:
    """Per-step kernel census of a decode at batch b, prompt p: the generate at out=n and at out=1 under the profiler,
    the difference over n - 1 steps; the wall times of both beside it."""
    runs = {}
    for o in (n, 1):
        d = tempfile.mkdtemp(prefix=f"sgprof-B{b}-o{o}-")
        engine.start_profile(output_dir=d, activities=["GPU"], with_stack=False, record_shapes=False,
                             profile_prefix=f"B{b}-o{o}")
        t = timed(b, p, o, 1)
        engine.stop_profile()
        time.sleep(2)  # the scheduler writes its trace after replying
        runs[o] = (census(d), t["median_s"])
        for f in glob.glob(os.path.join(d, "*")):
            os.remove(f)
    (cn, tn), (c1, t1) = runs[n], runs[1]
    step = {}
    for name in set(cn) | set(c1):
        a, z = cn.get(name, {"calls": 0, "s": 0.0}), c1.get(name, {"calls": 0, "s": 0.0})
        step[name] = {"calls": (a["calls"] - z["calls"]) / (n - 1), "s": (a["s"] - z["s"]) / (n - 1)}
    total = sum(v["s"] for v in step.values())
    print(f"profile B={b} P={p} kernels/step {total * 1e3:.3f} ms, wall/step {(tn - t1) / (n - 1) * 1e3:.3f} ms",
          flush=True)
    return {"B": b, "P": p, "N": n, "kernel_step_s": total, "wall_step_s": (tn - t1) / (n - 1),
            "wall_outN_s": tn, "wall_out1_s": t1, "kernels": step,
            "out1_kernels": c1}


def main() -> None:
    """Start the engine, time every case of the model, write OUT_JSON (under a main guard: the Engine starts its
    scheduler and detokenizer as child processes)."""
    model_dir, name, out = sys.argv[1], sys.argv[2], sys.argv[3]
    here = Path(__file__).resolve().parent
    cases = json.loads((here / os.environ.get("ROOFLINE_SGLANG_CASES", "cases-sglang.json")).read_text())
    case = cases["models"][name]
    n_out = cases["out_tokens"]
    temperature = cases.get("temperature", 0.0)

    import sglang
    from sglang.srt.entrypoints.engine import Engine

    kwargs = dict(model_path=model_dir, load_format="dummy", dtype="bfloat16", disable_radix_cache=True,
                  random_seed=0, log_level="info")
    if case.get("context_length"):
        kwargs["context_length"] = case["context_length"]
    if os.environ.get("ROOFLINE_SGLANG_ATTN"):
        kwargs["attention_backend"] = os.environ["ROOFLINE_SGLANG_ATTN"]
    kwargs.update(case.get("engine_args", {}))
    t0 = time.time()
    engine = Engine(**kwargs)
    t_init = time.time() - t0
    info = engine.get_server_info()
    vocab = json.loads((Path(model_dir) / "config.json").read_text())["vocab_size"]
    rng = np.random.default_rng(0)

    def timed(b: int, length: int, o: int, reps: int) -> dict:
        sp = {"max_new_tokens": o, "ignore_eos": True, "temperature": temperature}
        ts = []
        for _ in range(reps):
            ids = rng.integers(1000, vocab - 1000, size=(b, length)).tolist()
            t = time.perf_counter()
            outs = engine.generate(input_ids=ids, sampling_params=sp)
            ts.append(time.perf_counter() - t)
            got = [r["meta_info"]["completion_tokens"] for r in outs]
            assert all(g == o for g in got), f"asked {o} tokens, got {sorted(set(got))}"
        return {"B": b, "P": length, "out": o, "times_s": ts, "median_s": statistics.median(ts)}

    res = {"engine": "sglang", "sglang": sglang.__version__, "model": name, "init_s": t_init,
           "method": "offline Engine.generate, (t(out=N) - t(out=1)) / (N - 1); prefill = t(B=1, out=1)",
           "context_length": case.get("context_length"),
           "attention_backend_flag": os.environ.get("ROOFLINE_SGLANG_ATTN", ""),
           "temperature": temperature, "out_tokens": n_out, "server_info": info, "decode": [], "prefill": []}
    print("SERVER_INFO", json.dumps({k: info.get(k) for k in ("max_total_num_tokens", "mem_fraction_static",
                                                              "chunked_prefill_size", "attention_backend")}),
          flush=True)
    timed(4, 512, 8, 1)  # warm-up: the first generate after start-up pays lazy initialisation and JIT builds
    for b, p in case["decode"]:
        reps = 1 if b * p > 100_000 else 3
        a, c = timed(b, p, n_out, reps), timed(b, p, 1, reps)
        step = (a["median_s"] - c["median_s"]) / (n_out - 1)
        res["decode"].append({"B": b, "P": p, "t_outN": a, "t_out1": c, "decode_step_s": step})
        print(f"decode B={b} P={p} step={step * 1e3:.3f} ms", flush=True)
    for p in case["prefill"]:
        r = timed(1, p, 1, 3)
        res["prefill"].append(r)
        print(f"prefill P={p} {r['median_s'] * 1e3:.2f} ms", flush=True)
    res["profile"] = []
    for b, p, n in case.get("profile", []):
        try:
            res["profile"].append(profiled(engine, timed, b, p, n))
        except Exception as e:  # a profiler failure costs this census, not the run's times
            res["profile"].append({"B": b, "P": p, "N": n, "error": repr(e)[:500]})
            print(f"profile B={b} P={p} failed: {e!r}"[:300], flush=True)
    Path(out).write_text(json.dumps(res, indent=1, default=str))
    print("LAT_DONE", flush=True)
    engine.shutdown()
    os._exit(0)  # the engine's child processes would otherwise hold the interpreter


if __name__ == "__main__":
    main()
