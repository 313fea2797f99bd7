"""One decode step of a real vLLM with a draft model, taken apart: wall time, GPU kernel time, and the host time of
each phase of the V1 model runner, at K = 0 (no drafting) .. 3 draft tokens, on a tiny target and tiny draft (GPU
work negligible: the step is the engine's host work), a tiny target drafted by the 16-layer Llama-3.2-1B (the host
cost of a pass grows with the draft's layers: eager attention per layer), and the served pair (Llama-3.1-8B drafted
by Llama-3.2-1B: the check of the composition, GPU + host, not an input). derive.py --spec turns the tiny-target
cases into the profile's spec_step_s, draft_pass_s, draft_layer_s.

What the source says a draft-model step does (vLLM 0.24.0):
- async scheduling is off (vllm/config/vllm.py, "Async scheduling not supported with draft_model-based speculative
  decoding"), and the V1 model runner runs it (config/vllm.py use_v2_model_runner: "Model Runner V2 does not yet
  support speculative method 'draft_model'"): host work and GPU work follow each other;
- GpuModelRunner.sample_tokens (v1/worker/gpu_model_runner.py) runs the target's rejection sampler, then
  propose_draft_token_ids -> SpecDecodeBaseProposer.propose (v1/spec_decode/llm_base_proposer.py): one draft pass
  over every token the target just ran plus one slot per request (set_inputs_first_pass, needs_extra_input_slots),
  then K - 1 passes of one token per request, each rebuilding the attention metadata
  (build_per_group_and_layer_attn_metadata) and sampling (probabilistic draft probs at temperature > 0);
- the drafter runs PIECEWISE CUDA graphs at most (initialize_cudagraph_keys: "Only supports PIECEWISE cudagraphs"):
  attention runs eagerly between graph pieces, once per layer per pass;
- the drafts are copied to the host and synchronised (_copy_draft_token_ids_to_cpu: draft_token_ids_event.synchronize).
Each of these costs host time per pass; this script measures them, the model takes its numbers from here only.

Per case (B sequences, prompt 256 random tokens, temperature 1.0, ignore_eos; dummy weights: acceptance ~0, so every
step emits one token): step wall = (t(out=N) - t(out=1)) / (N - 1) (median of 3), then under torch.profiler
(VLLM_CUSTOM_SCOPES_FOR_PROFILING=1: the runner's record_function scopes) the per-step GPU kernel time and the CPU
time of the scopes "gpu_model_runner: preprocess / forward / postprocess / sample / draft / bookkeep" (wall time
of each CPU range, waits on the GPU inside it included; same difference of N and 1). Every case runs on the V1
runner with async scheduling off (VLLM_USE_V2_MODEL_RUNNER=0, async_scheduling=False: K = 0 is the same runner
without drafting), each configuration in its own process (engine in-process: VLLM_ENABLE_V1_MULTIPROCESSING=0).

Usage (GPU machine): python3 spec_step.py MODELS_DIR OUT_JSON [CONFIGS]
CONFIGS: comma list of target:draft:K (draft "-" for none), default
tiny-llama:-:0,tiny-llama:tiny-llama:3,tiny-llama:Llama-3.2-1B:1,tiny-llama:Llama-3.2-1B:3,
Llama-3.1-8B:Llama-3.2-1B:3 (five engine builds, ~3-4 min on an H200; the 8B pair last, so a cut run keeps the rest).
Prints a line per case (SPEC ...) with its 8 longest kernels per step, and writes {"cases": [...]} to OUT_JSON
(each case with its 25 longest kernels by name: run 1 of this script found a 1B draft pass ~12 ms of wall at B = 1,
~20x its roofline, in GPU kernel time; the kernels say which). The 8B pair alone: CONFIGS
Llama-3.1-8B:Llama-3.2-1B:3 (run 1 cut it at the driver's 330 s).
"""
import json
import os
import statistics
import subprocess
import sys
import time

DEFAULT = ("tiny-llama:-:0,tiny-llama:tiny-llama:3,tiny-llama:Llama-3.2-1B:1,tiny-llama:Llama-3.2-1B:3,"
           "Llama-3.1-8B:Llama-3.2-1B:3")
SCOPES = ("gpu_model_runner: preprocess", "gpu_model_runner: forward", "gpu_model_runner: postprocess",
          "gpu_model_runner: sample", "gpu_model_runner: draft", "gpu_model_runner: bookkeep")
BS = tuple(int(b) for b in os.environ.get("SPEC_BS", "1,16").split(","))
P, N = 256, 33
# SPEC_MP=1: the engine in its own process, as `vllm serve` and the offline LLM run it by default
# (VLLM_ENABLE_V1_MULTIPROCESSING=1); wall time only (the profiler needs the engine in-process). Run 5 found the
# in-process host work 1.36x the multiprocess figure on one machine, so the host law is taken from this mode.
MP = os.environ.get("SPEC_MP") == "1"


def host_probe_s() -> float:
    """This process's pure-Python speed (host_probe.py's workload, median of 5), taken beside each case: the lent
    machines' host speed moved 1.6-1.9x between processes on one box (runs 9 and 10), so each case carries its own."""
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    from host_probe import work

    times = []
    for _ in range(5):
        t = time.perf_counter()
        work()
        times.append(time.perf_counter() - t)
    return statistics.median(times)


def child(models: str, target: str, draft: str, k: int) -> list[dict]:
    import numpy as np
    import torch
    from vllm import LLM, SamplingParams

    kw = {"async_scheduling": False}  # the baseline as a draft model runs: synchronous (vLLM turns it off then)
    if draft != "-":
        kw["speculative_config"] = {"method": "draft_model", "model": f"{models}/{draft}", "num_speculative_tokens": k}
    t0 = time.time()
    llm = LLM(model=f"{models}/{target}", load_format="dummy", dtype="bfloat16", max_model_len=2048,
              gpu_memory_utilization=0.8, enable_prefix_caching=False, seed=0, max_num_seqs=32, **kw)
    init_s = time.time() - t0
    cfg = llm.llm_engine.vllm_config
    vocab = llm.llm_engine.model_config.get_vocab_size()
    rng = np.random.default_rng(0)

    def gen(b, out):
        p = [{"prompt_token_ids": rng.integers(1000, vocab - 1000, size=P).tolist()} for _ in range(b)]
        sp = SamplingParams(max_tokens=out, ignore_eos=True, temperature=1.0, detokenize=False)
        t = time.perf_counter()
        llm.generate(p, sp, use_tqdm=False)
        return time.perf_counter() - t

    def profiled(b, out):
        with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU,
                                                torch.profiler.ProfilerActivity.CUDA]) as prof:
            gen(b, out)
        torch.cuda.synchronize()
        gpu, scopes, kernels = 0.0, dict.fromkeys(SCOPES, 0.0), {}
        for e in prof.events():
            # the runner's record_function scopes also appear on the GPU timeline as user annotations spanning
            # their kernels: counting them as kernels (run 1 and run 5 of this script did) doubles the GPU time
            annotation = getattr(e, "is_user_annotation", False) or e.name in scopes
            if e.device_type == torch.autograd.DeviceType.CUDA and not annotation:
                gpu += e.time_range.elapsed_us() * 1e-6
                k = kernels.setdefault(e.name, [0, 0.0])
                k[0] += 1
                k[1] += e.time_range.elapsed_us() * 1e-6
            elif e.name in scopes and e.device_type != torch.autograd.DeviceType.CUDA:
                scopes[e.name] += e.time_range.elapsed_us() * 1e-6
        return gpu, scopes, kernels

    probe_before = host_probe_s()
    out = []
    # warm-up of every batch before any is timed (Triton JIT of the proposer's kernels, first-use allocations):
    # run 6 timed each batch right after its own warm-up, and whichever batch a process timed first read 20-50 % slow
    for b in BS:
        gen(b, 4), gen(b, N)
    for b in BS:
        wall = {o: statistics.median(gen(b, o) for _ in range(3)) for o in (1, N)}
        if MP:
            out.append({"target": target, "draft": draft, "K": k, "B": b, "P": P, "N": N, "multiprocess": True,
                        "step_wall_s": (wall[N] - wall[1]) / (N - 1), "init_s": init_s,
                        "probe_before_s": probe_before, "probe_after_s": host_probe_s(),
                        "async_scheduling": bool(cfg.scheduler_config.async_scheduling),
                        "cudagraph_mode": str(cfg.compilation_config.cudagraph_mode),
                        "device": torch.cuda.get_device_name()})
            continue
        (g1, s1, k1), (gn, sn, kn) = profiled(b, 1), profiled(b, N)
        per_step = {n: {"s": (kn.get(n, [0, 0.0])[1] - k1.get(n, [0, 0.0])[1]) / (N - 1),
                        "calls": (kn.get(n, [0, 0])[0] - k1.get(n, [0, 0])[0]) / (N - 1)} for n in set(k1) | set(kn)}
        top = dict(sorted(per_step.items(), key=lambda kv: -kv[1]["s"])[:25])
        res = {"target": target, "draft": draft, "K": k, "B": b, "P": P, "N": N,
               "step_wall_s": (wall[N] - wall[1]) / (N - 1), "step_gpu_s": (gn - g1) / (N - 1),
               "scope_s": {s: (sn[s] - s1[s]) / (N - 1) for s in SCOPES}, "init_s": init_s,
               "kernels_per_step": top,  # the 25 longest kernels by name, seconds and calls per step
               "async_scheduling": bool(cfg.scheduler_config.async_scheduling),
               "cudagraph_mode": str(cfg.compilation_config.cudagraph_mode),
               "capture_sizes": list(cfg.compilation_config.cudagraph_capture_sizes or []),
               "device": torch.cuda.get_device_name()}
        out.append(res)
    return out


def main() -> None:
    models, path = sys.argv[1], sys.argv[2]
    if len(sys.argv) > 4 and sys.argv[3] == "--child":
        target, draft, k = sys.argv[4].split(":")
        for r in child(models, target, draft, int(k)):
            print("SPECCASE " + json.dumps(r), flush=True)
        os._exit(0)
    cases = []
    env = dict(os.environ, VLLM_ENABLE_V1_MULTIPROCESSING="1" if MP else "0",
               VLLM_CUSTOM_SCOPES_FOR_PROFILING="0" if MP else "1",
               VLLM_USE_V2_MODEL_RUNNER="0")  # every case on the V1 runner, the one a draft model runs on
    for conf in (sys.argv[3] if len(sys.argv) > 3 else DEFAULT).split(","):
        try:
            r = subprocess.run([sys.executable, __file__, models, path, "--child", conf], capture_output=True,
                               text=True, timeout=int(os.environ.get("SPEC_CASE_TIMEOUT", "150")), env=env)
            got = [json.loads(x[9:]) for x in r.stdout.splitlines() if x.startswith("SPECCASE ")]
            err = None if got else r.stderr[-2000:]
        except subprocess.TimeoutExpired as exc:
            got, err = [], f"timeout: {str(exc.stderr)[-1500:]}"
        cases += got or [{"config": conf, "error": err}]
        for c in got:
            if MP:
                print(f"SPEC {conf} B={c['B']} wall {c['step_wall_s'] * 1e3:.2f} ms (multiprocess)", flush=True)
                continue
            sc = " ".join(f"{k.split(': ')[1]} {v * 1e3:.2f}" for k, v in c["scope_s"].items())
            print(f"SPEC {conf} B={c['B']} wall {c['step_wall_s'] * 1e3:.2f} ms gpu {c['step_gpu_s'] * 1e3:.2f} ms "
                  f"| host scopes ms: {sc}", flush=True)
            for name, v in list(c["kernels_per_step"].items())[:8]:
                print(f"    {v['s'] * 1e6:9.1f} us x{v['calls']:.1f} {name[:100]}", flush=True)
        if err:
            print(f"SPEC {conf} error {err[-400:]}", flush=True)
        with open(path, "w") as f:
            json.dump({"cases": cases}, f, indent=1)
    print("SPEC_DONE", flush=True)


if __name__ == "__main__":
    main()
