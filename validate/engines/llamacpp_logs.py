"""Readers of what a llama.cpp run writes (llamacpp_run.sh): the server's start-up log, llama-batched-bench's table,
llama-bench's JSON and llamacpp_client.py's streams. Each pattern is the format string of the line in llama.cpp
0c1e570 (cited beside it); a log that lacks a line gives no key for it, never a guessed figure.
"""

from __future__ import annotations

import json
import re
import statistics

MIB = 1024 * 1024
# src/llama-model.cpp:1930  "%s: %12s model buffer size = %8.2f MiB"
MODEL_BUF = re.compile(r"load_tensors:\s+(\S+) model buffer size =\s+([\d.]+) MiB")
# src/llama-kv-cache.cpp:291  "%s: %10s KV buffer size = %8.2f MiB"
KV_BUF = re.compile(r"llama_kv_cache:\s+(\S+) KV buffer size =\s+([\d.]+) MiB")
# src/llama-kv-cache.cpp:301, cells per stream then n_seq_max/n_stream:
#   "%s: size = %7.2f MiB (%6u cells, %3d layers, %2u/%u seqs), K (%s): %7.2f MiB, V (%s): %7.2f MiB"
KV_SIZE = re.compile(r"llama_kv_cache: size =\s+([\d.]+) MiB \(\s*(\d+) cells,\s+(\d+) layers,\s+(\d+)/\s*(\d+) "
                     r"seqs\), K \((\w+)\):\s+([\d.]+) MiB, V \((\w+)\):\s+([\d.]+) MiB")
# src/llama-context.cpp:740 (in llama_context::sched_reserve)  "%s: %10s compute buffer size = %8.2f MiB"
COMPUTE_BUF = re.compile(r"sched_reserve:\s+(\S+) compute buffer size =\s+([\d.]+) MiB")
# src/llama-context.cpp:308-312  "%s: n_seq_max             = %u" and the lines after it
CPARAM = re.compile(r"llama_context: (n_seq_max|n_ctx|n_ctx_seq|n_batch|n_ubatch)\s+= (\d+)")
# tools/server/server-context.cpp:1231  "initializing, n_slots = %d, n_ctx_slot = %d, kv_unified = '%s'"
SLOTS = re.compile(r"n_slots = (\d+), n_ctx_slot = (\d+), kv_unified = '(\w+)'")
# tools/batched-bench/batched-bench.cpp:235  "|%6d | %6d | %4d | %6d | %8.3f | %8.2f | %8.3f | %8.2f | %8.3f | %8.2f |"
BATCHED_ROW = re.compile(r"^\|\s*(\d+) \|\s*(\d+) \|\s*(\d+) \|\s*(\d+) \|\s*([\d.]+) \|\s*([\d.]+) \|\s*([\d.]+) \|"
                         r"\s*([\d.]+) \|\s*([\d.]+) \|\s*([\d.]+) \|$")
BATCHED_KEYS = ("pp", "tg", "pl", "n_kv", "t_pp_s", "s_pp_tok_per_s", "t_tg_s", "s_tg_tok_per_s", "t_s", "s_tok_per_s")


def server_memory(text: str) -> dict:
    """The buffers and context sizes of a llama-server start-up log, in bytes and cells. Where a line appears more
    than once (a context created again), the last one stands: it is the context that served."""
    out: dict = {}
    for key, rx in (("model_buffer_bytes", MODEL_BUF), ("kv_buffer_bytes", KV_BUF),
                    ("compute_buffer_bytes", COMPUTE_BUF)):
        found: dict[str, float] = {}
        for dev, mib in rx.findall(text):
            found[dev] = float(mib) * MIB
        if found:
            out[key] = found
    sizes = KV_SIZE.findall(text)
    if sizes:
        mib, cells, layers, seq_max, streams, kt, kmib, vt, vmib = sizes[-1]
        out["kv"] = {"bytes": float(mib) * MIB, "cells_per_stream": int(cells), "streams": int(streams),
                     "cells": int(cells) * int(streams), "layers": int(layers), "seq_max": int(seq_max),
                     "k_type": kt, "k_bytes": float(kmib) * MIB, "v_type": vt, "v_bytes": float(vmib) * MIB}
    for name, value in CPARAM.findall(text):
        out[name] = int(value)
    slots = SLOTS.findall(text)
    if slots:
        n, ctx, unified = slots[-1]
        out["slots"] = {"n_slots": int(n), "n_ctx_slot": int(ctx), "kv_unified": unified == "true"}
    return out


def batched_rows(text: str) -> list[dict]:
    """llama-batched-bench's table rows: PP prompt tokens of each of PL sequences prefilled together (T_PP s), then
    TG steps of PL tokens each (T_TG s); T_TG / TG is the mean decode step at contexts PP+1 .. PP+TG."""
    rows = []
    for line in text.splitlines():
        m = BATCHED_ROW.match(line.strip())
        if m:
            vals = [int(v) for v in m.groups()[:4]] + [float(v) for v in m.groups()[4:]]
            rows.append(dict(zip(BATCHED_KEYS, vals, strict=True)))
    return rows


def bench_entries(text: str) -> list[dict]:
    """llama-bench -o json: one entry per test (n_prompt, n_gen, n_depth, mean and spread of its repetitions in s)."""
    return [{"n_prompt": e["n_prompt"], "n_gen": e["n_gen"], "n_depth": e.get("n_depth", 0),
             "avg_s": e["avg_ns"] / 1e9, "stddev_s": e["stddev_ns"] / 1e9, "avg_tok_per_s": e["avg_ts"],
             "samples_s": [ns / 1e9 for ns in e.get("samples_ns", [])]} for e in json.loads(text)]


def request_times(rec: dict) -> dict | None:
    """One streamed request's TTFT (send to first chunk), TPOT ((last - first chunk) / (tokens - 1)), inter-chunk
    gaps divided over the tokens each chunk holds, end to end; the server's own prompt_ms / predicted_ms where its
    last chunk gave them. None for a failed request."""
    if rec is None or rec.get("error") or not rec.get("chunks"):
        return None
    chunks = [c for c in rec["chunks"] if c[1] > 0]
    if not chunks:
        return None
    first, last = chunks[0][0], chunks[-1][0]
    tokens = sum(c[1] for c in chunks)
    itl = [(b[0] - a[0]) / b[1] for a, b in zip(chunks, chunks[1:], strict=False)]
    out = {"send_s": rec["send_s"], "ttft_s": first - rec["send_s"], "tokens": tokens,
           "tpot_s": (last - first) / (tokens - 1) if tokens > 1 else None, "e2e_s": rec["end_s"] - rec["send_s"],
           "itl_median_s": statistics.median(itl) if itl else None}
    t = rec.get("timings") or {}
    if "prompt_ms" in t:
        out["server_prompt_s"] = t["prompt_ms"] / 1e3
        out["server_decode_s"] = t.get("predicted_ms", 0.0) / 1e3
        out["server_decode_tokens"] = t.get("predicted_n")
    return out


def served_summary(doc: dict) -> dict:
    """A client run's medians and p90s (TTFT, TPOT, e2e), its failures and its output throughput."""
    times = [t for t in map(request_times, doc["results"]) if t]
    out = {"requests": len(doc["results"]), "failed": len(doc["results"]) - len(times)}
    if not times:
        return out
    for key in ("ttft_s", "tpot_s", "e2e_s"):
        vals = sorted(t[key] for t in times if t[key] is not None)
        out[key] = {"p50": statistics.median(vals), "p90": vals[min(len(vals) - 1, int(0.9 * len(vals)))],
                    "mean": statistics.fmean(vals)}
    per = sorted(t["server_decode_s"] / t["server_decode_tokens"] for t in times if t.get("server_decode_tokens"))
    if per:  # llama-server's own timings.predicted_ms / predicted_n (its predicted_per_token_ms, in s)
        out["server_decode_s_per_token"] = statistics.median(per)
    span = max(t["send_s"] + t["e2e_s"] for t in times) - min(t["send_s"] for t in times)
    out["throughput_tokens_per_s"] = sum(t["tokens"] for t in times) / span
    return out


# common/log.cpp: each line's time as "%d.%02d.%03d.%03d" = minutes . seconds . ms . us since the server started;
# tools/server/server-context.cpp (0c1e570): SLT_INF's "slot <func>: id %2d | task %d | <msg>"
SLOT_LINE = re.compile(r"^(\d+)\.(\d+)\.(\d+)\.(\d+) I slot\s+\S+: id\s+(\d+) \| task (-?\d+) \| (.*)$")
# print_timing: "prompt eval time = %10.2f ms / %5d tokens (...)" and "       eval time = %10.2f ms / %5d tokens (...)"
EVAL_TIME = re.compile(r"^\s*(prompt )?eval time =\s+([\d.]+) ms /\s+(\d+) tokens")


def slot_tasks(text: str) -> list[dict]:
    """Each task a llama-server log (-lv 4) shows from start to release: its slot id, the seconds it started processing
    ("processing task") and stopped ("stop processing"), the server's own prompt time and tokens (prompt eval time) and
    decode time and tokens (eval time), in task order."""
    tasks: dict[int, dict] = {}
    for line in text.splitlines():
        m = SLOT_LINE.match(line)
        if m is None:
            continue
        mins, sec, ms, us, slot, task, msg = m.groups()
        t = int(mins) * 60 + int(sec) + int(ms) / 1e3 + int(us) / 1e6
        task = int(task)
        if msg.startswith("processing task"):
            tasks[task] = {"task": task, "slot": int(slot), "start_s": t}
        elif task in tasks and msg.startswith("stop processing"):
            tasks[task]["end_s"] = t
        elif task in tasks and (e := EVAL_TIME.match(msg)):
            key = "prompt" if e.group(1) else "decode"
            tasks[task][f"{key}_ms"], tasks[task][f"{key}_tokens"] = float(e.group(2)), int(e.group(3))
    return [tasks[k] for k in sorted(tasks) if "end_s" in tasks[k]]


def slot_runs(slots: list[int]) -> int:
    """Runs of consecutive slot ids among `slots` ({0, 1, 4, 5}: 2): llama.cpp's split_equal, which a batch over one KV
    stream a slot takes (src/llama-kv-cache.cpp init_batch), puts only consecutive sequence ids in one ubatch."""
    s = sorted(slots)
    return sum(1 for i, x in enumerate(s) if i == 0 or x != s[i - 1] + 1)


def busy_runs(tasks: list[dict], task: dict, samples: int = 20) -> tuple[float, float]:
    """The mean number of busy slots and of their runs (slot_runs) over `task`'s decode (its start + its prompt time
    to its end, `samples` instants): what each of its decode steps shared a step with."""
    a = task["start_s"] + task.get("prompt_ms", 0.0) / 1e3
    b = task["end_s"]
    busy, runs = [], []
    for k in range(samples):
        t = a + (b - a) * (k + 0.5) / samples
        now = [x["slot"] for x in tasks if x["start_s"] <= t < x["end_s"]]
        busy.append(len(now))
        runs.append(slot_runs(now))
    return statistics.mean(busy), statistics.mean(runs)
