"""vLLM's start-up memory profile of 2-layer models at the real widths of Qwen3-30B-A3B (V1 runner, fused MoE),
DeepSeek-V2-Lite (V2 runner, MLA, a dense layer then an MoE layer) and Llama-3.1-8B (V2 runner, dense), at
max_num_batched_tokens 4096 / 16384 and max_num_seqs 256 / 1024: what roofline/engines/vllm_profile.py predicts
(the prediction, committed before the run: validate/engines/profile_mem_predict.py ->
validate/results/engines/h200-profile-mem-predicted.json).

Standard library + vLLM only (the GPU machine). Each case is its own child process (killed with its process group on
timeout), the engine in-process (VLLM_ENABLE_V1_MULTIPROCESSING=0) so the worker's own figures are read in bytes
(v1/worker/gpu_worker.py:473-475 peak_activation_memory, non_torch_memory, cudagraph_memory_estimate; :489
available_kv_cache_memory_bytes; the runner's model_memory_usage), beside the start-up log at DEBUG for the worker and
the model runner (its per-mode CUDA-graph split, gpu_model_runner.py:6539-6546) and VLLM_DEBUG_WORKSPACE=1 (the
fused-MoE WorkspaceManager's resizes, v1/worker/workspace.py:181-188). After start-up the child also reads the
persistent buffers (the WorkspaceManager's, the Triton top-k/top-p sampler's cache) and runs profile_run a second time
with the allocator's peak reset: its increase is the transient part alone (the persistent buffers already exist).

Run 16 (session 21, RUN16_CASES, `--set run16`): the CUDA-graph estimate's first capture, which the source does not
fix (vllm_profile.py), on the V1 runner at several depths and widths (Qwen3-MoE at its width and narrowed, a dense
Qwen2, Llama-3.1-8B forced onto the V1 runner with VLLM_USE_V2_MODEL_RUNNER=0, a narrow 32-layer Llama, Phi-3's
32K vocabulary), each at the H200's offline defaults (16,384 tokens, 1,024 sequences: 51 capture sizes per mode),
the per-mode split read from the model runner's DEBUG lines; plus the non-torch increase at tp 1 on every case.

Usage (GPU machine, vLLM importable): python3 validate/engines/profile_mem.py OUT.json [--set run16] [CASE ...]
CASE: an index into the set's cases (default all); OUT.json is rewritten after every case, logs beside it
(OUT-<case>.log).
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
LAYERS = 2
MAX_MODEL_LEN = 4096
UTILIZATION = 0.5
TIMEOUT_S = 140  # 4 cases fit one 600 s device call
TIMEOUT_RUN16_S = 200  # run 16 runs detached: its deepest compiles (48 layers) took ~50-180 s at start-up
# (model, max_num_batched_tokens, max_num_seqs): the 2 x 2 grid on the V1 MoE model, two corners on the others
CASES = (("Qwen3-30B-A3B", 16384, 1024), ("Qwen3-30B-A3B", 16384, 256), ("Qwen3-30B-A3B", 4096, 1024),
         ("Qwen3-30B-A3B", 4096, 256), ("DeepSeek-V2-Lite", 16384, 1024), ("DeepSeek-V2-Lite", 4096, 256),
         ("Llama-3.1-8B", 16384, 1024), ("Llama-3.1-8B", 4096, 256))
# run 16: (model, max_num_batched_tokens, max_num_seqs, layers, runner forced: "v1" / None = vLLM's choice)
RUN16_CASES = (("Qwen3-30B-A3B", 16384, 1024, 2, None), ("Qwen3-30B-A3B", 16384, 1024, 12, None),
               ("tiny-qwen3moe-48", 16384, 1024, 48, None), ("Qwen2.5-7B", 16384, 1024, 2, None),
               ("Qwen2.5-7B", 16384, 1024, 14, None), ("Llama-3.1-8B", 16384, 1024, 2, "v1"),
               ("Llama-3.1-8B", 16384, 1024, 16, "v1"), ("tiny-llama-32", 16384, 1024, 32, "v1"),
               ("Phi-3-mini", 16384, 1024, 2, None), ("tiny-qwen3moe-48", 16384, 1024, 12, None),
               ("Llama-3.1-8B", 16384, 1024, 2, None), ("DeepSeek-V2-Lite", 16384, 1024, 2, None))
# run 16b (a second lease: the first machine was released with cases 5-11 unread): the FULL-capture law's checks and
# two whole models on the V1 runner
RUN16B_CASES = (("Phi-3-mini", 16384, 1024, 2, None), ("tiny-llama-32", 16384, 1024, 32, "v1"),
                ("Llama-3.1-8B", 16384, 1024, 32, "v1"), ("Qwen2.5-7B", 16384, 1024, 28, None))
SETS = {"run5": CASES, "run16": RUN16_CASES, "run16b": RUN16B_CASES}


def case_of(cases: tuple, index: int) -> tuple:
    """(model, tokens, seqs, layers, forced runner) of a set's case; the original set's cases are 2-layer, unforced."""
    c = cases[index]
    return c if len(c) == 5 else (*c, LAYERS, None)

LOGGING = {
    "version": 1, "disable_existing_loggers": False,
    "formatters": {"vllm": {"class": "vllm.logging_utils.NewLineFormatter", "datefmt": "%m-%d %H:%M:%S",
                            "format": "%(levelname)s %(asctime)s [%(fileinfo)s:%(lineno)d] %(message)s"}},
    "handlers": {"vllm": {"class": "logging.StreamHandler", "formatter": "vllm", "level": "DEBUG",
                          "stream": "ext://sys.stdout"}},
    "loggers": {"vllm": {"handlers": ["vllm"], "level": "INFO", "propagate": False},
                "vllm.v1.worker.gpu_worker": {"level": "DEBUG"},
                "vllm.v1.worker.gpu_model_runner": {"level": "DEBUG"}},
}

GIB_FIELDS = {
    "log_torch_peak_gib": r"torch peak memory increase: ([\d.]+)GiB",
    "log_non_torch_gib": r"non-torch forward increase memory: ([\d.]+)GiB",
    "log_weights_gib": r"weights memory: ([\d.]+)GiB",
    "log_cudagraph_estimate_gib": r"Estimated CUDA graph memory: ([\d.]+) GiB total",
    "log_available_kv_gib": r"Available KV cache memory: ([\d.]+) GiB",
}


def config_of(name: str, layers: int = LAYERS) -> dict:
    """The model's published config (validate/engines/models.py) cut to `layers` decoder layers."""
    sys.path.insert(0, str(HERE))
    import models  # validate/engines/models.py, standard library only

    cfg = models.config(name)
    cfg.pop("quantization_config", None)
    cfg.pop("auto_map", None)
    text = cfg.get("text_config", cfg)
    text["num_hidden_layers"] = layers
    return cfg


def write_model(outdir: str, name: str, layers: int = LAYERS) -> str:
    """A weight-less folder of `name` with `layers` layers (models.write, then its config.json cut), its own name."""
    sys.path.insert(0, str(HERE))
    import models

    folder = models.write(outdir, name)
    target = f"{folder}-{layers}L"
    os.makedirs(target, exist_ok=True)
    for f in os.listdir(folder):
        Path(target, f).write_bytes(Path(folder, f).read_bytes())
    (Path(target) / "config.json").write_text(json.dumps(config_of(name, layers), indent=1))
    return target


def child(folder: str, tokens: int, seqs: int) -> dict:
    """Start the engine in this process; return the worker's figures in bytes and the second profile run's."""
    import torch
    from vllm import LLM

    t0 = time.time()
    llm = LLM(model=folder, load_format="dummy", dtype="bfloat16", max_model_len=MAX_MODEL_LEN,
              max_num_batched_tokens=tokens, max_num_seqs=seqs, gpu_memory_utilization=UTILIZATION,
              enable_prefix_caching=False, seed=0)
    out = {"init_s": time.time() - t0}
    worker = llm.llm_engine.model_executor.driver_worker.worker
    runner = worker.model_runner
    for key in ("peak_activation_memory", "non_torch_memory", "cudagraph_memory_estimate",
                "available_kv_cache_memory_bytes", "requested_memory"):
        out[key] = getattr(worker, key, None)
    out["model_memory_usage"] = getattr(runner, "model_memory_usage", None)
    out["runner_class"] = f"{type(runner).__module__}.{type(runner).__name__}"
    cc = llm.llm_engine.vllm_config.compilation_config
    out["cudagraph_mode"] = str(getattr(cc, "cudagraph_mode", ""))
    out["capture_sizes"] = list(getattr(cc, "cudagraph_capture_sizes", None) or [])
    out.update(persistent_buffers())
    try:
        torch.cuda.synchronize()
        torch.cuda.reset_peak_memory_stats()
        before = torch.cuda.memory_allocated()
        runner.profile_run()
        torch.cuda.synchronize()
        out["second_profile_run_increase"] = torch.cuda.max_memory_allocated() - before
    except Exception as exc:  # the measurement's own failure, recorded, not fatal to the other figures
        out["second_profile_run_error"] = repr(exc)[:400]
    out["device"] = torch.cuda.get_device_name()
    return out


def persistent_buffers() -> dict:
    """Bytes of the fused-MoE WorkspaceManager's buffers and of the Triton sampler's cached per-program buffers."""
    out: dict = {}
    try:
        from vllm.v1.worker import workspace

        manager = workspace._manager
        sizes = [] if manager is None else [0 if w is None else w.numel() * w.element_size()
                                            for w in manager._current_workspaces]
        out["moe_workspace_bytes"] = sizes
    except Exception as exc:
        out["moe_workspace_error"] = repr(exc)[:200]
    try:
        from vllm.v1.sample.ops import topk_topp_triton

        out["triton_sampler_buffer_bytes"] = [b.numel() * b.element_size()
                                              for b in topk_topp_triton._TRITON_BUFFER_CACHE.values()]
    except Exception as exc:
        out["triton_sampler_buffer_error"] = repr(exc)[:200]
    return out


def parse_log(text: str) -> dict:
    """The start-up log's memory lines: GiB figures, the per-mode CUDA-graph split (MiB), workspace resizes (MB)."""
    out: dict = {}
    for key, pattern in GIB_FIELDS.items():
        found = re.findall(pattern, text)
        out[key] = float(found[-1]) if found else None
    out["log_cudagraph_modes"] = [
        {"mode": m[0], "first_capture_mib": float(m[1]), "graphs": int(m[2]), "per_graph_mib": float(m[3])}
        for m in re.findall(r"Estimated (\w+) CUDA graph memory: ([\d.]+) MiB first-capture \+ \((\d+)-1\) . "
                            r"([\d.]+) MiB per-graph", text)]
    out["log_workspace_resizes_mb"] = [float(m) for m in re.findall(
        r"Resized workspace from .*?: [\d.]+ MB -> ([\d.]+) MB", text)]
    out["log_v2_runner"] = "Using V2 Model Runner" in text
    return out


def run_case(cases: tuple, index: int, out_path: Path, models_dir: str, log_config: str) -> dict:
    """One case in a child process group, killed on timeout; its log beside the results."""
    name, tokens, seqs, layers, forced = case_of(cases, index)
    case = {"case": index, "model": name, "layers": layers, "max_num_batched_tokens": tokens, "max_num_seqs": seqs,
            "max_model_len": MAX_MODEL_LEN, "gpu_memory_utilization": UTILIZATION, "forced_runner": forced}
    folder = write_model(models_dir, name, layers)
    env = dict(os.environ, VLLM_ENABLE_V1_MULTIPROCESSING="0", VLLM_LOGGING_CONFIG_PATH=log_config,
               VLLM_DEBUG_WORKSPACE="1", VLLM_NO_USAGE_STATS="1", HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1")
    if forced == "v1":
        env["VLLM_USE_V2_MODEL_RUNNER"] = "0"
    log_path = out_path.with_name(f"{out_path.stem}-{index}.log")
    cmd = [sys.executable, __file__, "--child", folder, str(tokens), str(seqs)]
    with open(log_path, "w") as log:
        proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, env=env, start_new_session=True)
        try:
            case["rc"] = proc.wait(timeout=TIMEOUT_S if cases is CASES else TIMEOUT_RUN16_S)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
            case["rc"], case["error"] = None, "timeout"
    text = log_path.read_text(errors="replace")
    case.update(parse_log(text))
    got = [line[len("PROFILE_MEM "):] for line in text.splitlines() if line.startswith("PROFILE_MEM ")]
    if got:
        case["worker"] = json.loads(got[-1])
    elif "error" not in case:
        case["error"] = text[-1500:]
    return case


def main(argv: list[str]) -> None:
    """Run the chosen cases (default all), rewriting OUT.json after each."""
    if len(argv) > 1 and argv[1] == "--child":
        result = child(argv[2], int(argv[3]), int(argv[4]))
        print("PROFILE_MEM " + json.dumps(result), flush=True)
        os._exit(0)
    if len(argv) < 2:
        sys.exit("usage: profile_mem.py OUT.json [CASE ...]")
    out_path = Path(argv[1])
    rest = argv[2:]
    cases = CASES
    if rest[:1] == ["--set"]:
        cases, rest = SETS[rest[1]], rest[2:]
    chosen = [int(a) for a in rest] or list(range(len(cases)))
    previous = json.loads(out_path.read_text())["cases"] if out_path.is_file() else []
    results = {c["case"]: c for c in previous}
    work = tempfile.mkdtemp()
    log_config = os.path.join(work, "logging.json")
    Path(log_config).write_text(json.dumps(LOGGING))
    for index in chosen:
        t0 = time.time()
        results[index] = run_case(cases, index, out_path, work, log_config)
        c = results[index]
        print(f"PROFILE_MEM case {index} {c['model']} L={c['layers']} T={c['max_num_batched_tokens']} "
              f"S={c['max_num_seqs']} runner={c.get('forced_runner')} "
              f"rc={c.get('rc')} {time.time() - t0:.0f} s: torch peak {c.get('log_torch_peak_gib')} GiB, "
              f"CUDA graphs {c.get('log_cudagraph_estimate_gib')} GiB, worker {json.dumps(c.get('worker'))[:300]}",
              flush=True)
        out_path.write_text(json.dumps({"about": __doc__.splitlines()[0], "cases": sorted(
            results.values(), key=lambda r: r["case"])}, indent=1))


if __name__ == "__main__":
    main(sys.argv)
