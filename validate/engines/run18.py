"""Run 18 (run18.sh): vLLM's prefix cache in a pool that binds, predicted before and compared after.

    python -m validate.engines.run18 predict OUT.json                      (before the run; committed)
    python -m validate.engines.run18 compare RESULTS --predicted P [--out REPORT]

Every run is `roofline simulate --engine vllm --kv-cache-memory-bytes 8589934592 --trace T` as a user types it
(Llama-3.1-8B on the H200, bf16), T the run's Mooncake trace (traces-run18/, the same hash ids vLLM's timed_trace
expands); the cache-off run adds --prefix-caching off. `compare` replays each run at the send times the client
recorded (--save-detailed start_times, with the trace's own lengths and ids) and reads the engine's hit rate from its
/metrics counters before and after the run: vllm:prompt_tokens_cached / vllm:prompt_tokens (each request counted once,
at its first scheduled prefill: v1/metrics/stats.py PromptTokenStats), beside the simulated cache's hit_tokens /
query_tokens (the same count since issue 33's preemption change, branch pre26: each request once, at the admission that
ends in its first token; the committed prediction, made before it, counted every admission, re-admissions of preempted
requests included). The capacity is the engine's rule on the given bytes (4,096 blocks of 16 tokens, 65,536 tokens)
against the server log's "GPU KV cache size"."""

from __future__ import annotations

import datetime as dt
import json
import re
import subprocess
import sys
import tempfile
from pathlib import Path

from validate import stored
from validate.engines import labrun

HERE = Path(__file__).resolve().parent
TRACES = HERE / "traces-run18"
KV_BYTES = 8 * 2**30
MODEL, HARDWARE = "Llama-3.1-8B", "H200"
# run name -> (trace, requests, extra simulate flags)
RUNS = {"a": ("a", 480, []), "b": ("b", 600, []), "c": ("c", 600, []),
        "off-a": ("a", 480, ["--prefix-caching", "off"])}
KEYS = (("ttft", "p50", "median_ttft_ms"), ("ttft", "p99", "p99_ttft_ms"), ("tpot", "p50", "median_tpot_ms"),
        ("tpot", "p99", "p99_tpot_ms"))


def rows(trace: str, n: int) -> list[dict]:
    return [json.loads(line) for line in (TRACES / f"{trace}.jsonl").read_text().splitlines()[:n]]


def simulate(trace_file: Path, extra: list[str]) -> dict:
    cmd = [sys.executable, "-m", "roofline.cli", "simulate", "--model", MODEL, "--hardware", HARDWARE, "--method",
           "bf16", "--engine", "vllm", "--kv-cache-memory-bytes", str(KV_BYTES), "--trace", str(trace_file),
           "--no-search", "--json", *extra]
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode:
        return {"error": r.stderr.strip()[-300:]}
    d = json.loads(r.stdout)
    pc = d.get("prefix_cache") or {}
    return {"ttft_s": d["ttft_s"], "tpot_s": d["tpot_s"], "output_tokens_per_s": d["throughput_tokens_per_s"],
            "duration_s": d["duration_s"], "preemptions": d["preemptions"], "max_running": d["max_running"],
            "hit_rate": pc.get("hit_rate", 0.0), "hit_tokens": pc.get("hit_tokens", 0),
            "query_tokens": pc.get("query_tokens", 0), "resumed_hit_tokens": pc.get("resumed_hit_tokens", 0),
            "resumed_tokens": pc.get("resumed_tokens", 0)}


def capacity() -> dict:
    from validate.engines.predict import capacity_from_log
    return capacity_from_log(MODEL, 8192, KV_BYTES / 2**30, 8192)


def write_rows(path: Path, trace_rows: list[dict], sends: list[float] | None = None) -> Path:
    """A Mooncake trace of these rows, at the client's recorded send times (seconds from the first) if given."""
    with path.open("w") as f:
        for i, r in enumerate(trace_rows):
            t = r["timestamp"] if sends is None else round(sends[i] * 1000.0, 3)
            f.write(json.dumps({"timestamp": t, "input_length": r["input_length"],
                                "output_length": r["output_length"], "hash_ids": r["hash_ids"]}) + "\n")
    return path


# jit_probe.py: vLLM's tuned fused-MoE configs for E=128, N=768 on the H200 (their keys: the batch sizes tuned;
# fused_moe.py try_get_optimal_moe_config takes the key nearest M; configs/E=128,N=768,device_name=NVIDIA_H200.json)
MOE_CONFIG_KEYS = (1, 2, 4, 8, 16, 24, 32, 48, 64, 96, 128, 256, 512, 1024, 1536, 2048, 3072, 4096)
JIT_ORDER, JIT_TOP_K, JIT_KERNELS = (256, 256, 258, 257, 257, 259, 386, 386, 385, 385), 8, 2
COMPILE_S = (0.93, 0.2, 2.0)  # a kernel's compile: the SGLang log's inference (stall note), the literature's band


def jit_prediction() -> dict:
    """The compiled kernels each jit_probe call adds: a call whose (config key, num_valid_tokens = M x top-k divisible
    by 16) was not seen compiles its JIT_KERNELS launches (gate-up and down: different constexprs); the rest reuse."""
    seen, added = set(), []
    for m in JIT_ORDER:
        key = (min(MOE_CONFIG_KEYS, key=lambda k: abs(k - m)), (m * JIT_TOP_K) % 16 == 0)
        added.append(0 if key in seen else JIT_KERNELS)
        seen.add(key)
    point, lo, hi = COMPILE_S
    return {"order": list(JIT_ORDER), "cubins_added": added, "warm_order": [257, 257], "warm_cubins_added": [0, 0],
            "compile_s_per_kernel": {"point": point, "band": [lo, hi]},
            "first_call_s_at_a_new_key": {"point": JIT_KERNELS * point, "band": [JIT_KERNELS * lo, JIT_KERNELS * hi]},
            "warm_first_call_s_below": 0.1}


def predict(out: Path) -> None:
    tmp = Path(tempfile.mkdtemp())
    runs = {name: simulate(write_rows(tmp / f"{name}.jsonl", rows(t, n)), extra)
            for name, (t, n, extra) in RUNS.items()}
    out.write_text(json.dumps({"about": __doc__.splitlines()[0], "date": dt.date.today().isoformat(),
                               "checkout": _sha(), "capacity": capacity(), "runs": runs, "jit": jit_prediction()},
                              indent=1) + "\n")


def _sha() -> str:
    return subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True,
                          cwd=HERE).stdout.strip()


def counters(path: Path) -> dict[str, float]:
    """A /metrics scrape's counters, summed over labels (one engine here)."""
    out: dict[str, float] = {}
    for line in stored.read_text(path).splitlines():
        m = re.match(r"^(vllm:[a-z_]+?)(?:_total)?(?:\{[^}]*\})? ([0-9.eE+-]+)$", line)
        if m:
            out[m.group(1)] = out.get(m.group(1), 0.0) + float(m.group(2))
    return out


def engine_hits(results: Path, run: str) -> dict:
    before, after = counters(results / f"{run}-metrics-before.txt"), counters(results / f"{run}-metrics.txt")
    d = {k: after.get(k, 0.0) - before.get(k, 0.0) for k in after}
    prompt, cached = d.get("vllm:prompt_tokens", 0.0), d.get("vllm:prompt_tokens_cached", 0.0)
    return {"hit_rate": cached / prompt if prompt else 0.0, "cached_tokens": cached, "prompt_tokens": prompt,
            "queries": d.get("vllm:prefix_cache_queries", 0.0), "hits": d.get("vllm:prefix_cache_hits", 0.0),
            "preemptions": d.get("vllm:num_preemptions", 0.0)}


def log_pool(results: Path) -> int | None:
    m = re.search(r"GPU KV cache size: ([\d,]+) tokens", stored.read_text(results / "on-server.log"))
    return int(m.group(1).replace(",", "")) if m else None


def compare(results: Path, predicted: dict) -> str:
    tmp = Path(tempfile.mkdtemp())
    pool = log_pool(results)
    cap = predicted["capacity"]["pool_tokens"]
    lines = [f"Run 18: vLLM prefix caching in a bound pool (Llama-3.1-8B, H200, --kv-cache-memory-bytes {KV_BYTES}); "
             f"results {results.name}",
             f"pool tokens: log {pool:,} / predicted {cap:,}" if pool else "pool tokens: not in the log",
             "run      TTFT p50 ms           TTFT p99 ms           TPOT p50 ms         TPOT p99 ms         out tok/s"
             "           hit rate (engine / model)   preemptions   cached tokens (engine / model)   prompt tokens "
             "(engine / model)",  # no bars: trust tests read those as capacity
             ]
    now_rows = []
    for which in ("before", "now"):
        lines.append(f"-- {which}: " + ("the prediction at the trace's timestamps (committed before the run; its "
                                         "cache counted every admission)" if which == "before" else
                                         "the model now, replayed at the client's recorded send times (its cache "
                                         "counts each request once, at its first prefill, as the engine's counter)"))
        for name, (t, n, extra) in RUNS.items():
            meas = labrun.result(results, name)
            if meas is None:
                lines.append(f"{name:6s}   not run")
                continue
            if which == "before":
                sim = predicted["runs"][name]
            else:
                sim = simulate(write_rows(tmp / f"{name}.jsonl", rows(t, n), labrun.sends(meas)), extra)
                now_rows.append((f"pfx-{name}", meas, sim))
            eng = engine_hits(results, name)
            cells = []
            for key, q, mkey in KEYS:
                m, p = meas[mkey], sim[f"{key}_s"][q] * 1e3
                cells.append(f"{m:7.1f} / {p:7.1f} ({100 * (p - m) / m:+5.1f})")
            m, p = meas["output_throughput"], sim["output_tokens_per_s"]
            cells.append(f"{m:6.0f} / {p:6.0f} ({100 * (p - m) / m:+5.1f})")
            h, g = eng["hit_rate"], sim["hit_rate"]
            cells.append(f"{h:.3f} / {g:.3f} ({100 * (g - h):+.1f} pt)")
            cells.append(f"{eng['preemptions']:.0f} / {sim['preemptions']:<3d}")
            c, q = sim.get("hit_tokens", 0), sim.get("query_tokens", 0)
            err = f" ({100 * (c - eng['cached_tokens']) / eng['cached_tokens']:+.2f} %)" if eng["cached_tokens"] else ""
            cells.append(f"{eng['cached_tokens']:9,.0f} / {c:9,d}{err}")
            cells.append(f"{eng['prompt_tokens']:9,.0f} / " + (f"{q:9,d}" if q else "no cache"))
            lines.append(f"{name:6s}   " + "   ".join(cells))
    lines += labrun.trust_rows(f"{MODEL}, vllm serve, Mooncake traces, --kv-cache-memory-bytes {KV_BYTES}", now_rows)
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    labrun.main(__doc__, predict, compare)
