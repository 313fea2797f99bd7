"""The engine's time profile from its own microbenchmarks (never from the runs it is judged on):
roofline/engines/profiles/<engine>.json.

python -m validate.engines.derive RESULTS_DIR [--in-situ RUN_DIR] [--hardware H200]
                                  [--out roofline/engines/profiles/vllm.json]

- host work per step: the tiny model's offline decode steps (RESULTS_DIR/tiny-llama-lat.json), whose GPU work the
  planner puts at ~0.1 ms: with asynchronous scheduling the step is max(gpu, host) = host; without it, host =
  step - gpu. host(B) = step_s + per_seq_s x B by relative least squares over B = 1 .. 256.
- the API server's host law: the tiny server's median TPOT at concurrency 1, 16, 64 (the same fit).
- capture sizes and async scheduling: what the engine recorded choosing (the first judged model's config).
- a request's own cost: the offline time of one 128-token request on the tiny model (generate() at B = 1, out = 1);
  the API server's per-request cost: the tiny server's median TTFT at concurrency 1 (128-token prompts) less that.
- kernels on the device: FlashAttention-3 paged decode, time = alpha + KV bytes / rate over the GQA and MHA cases
  (micro.json fa3_decode, no window); the fused Triton MoE, time = alpha + active experts' weight bytes / rate at the
  decode batches M <= 64, and its FLOP/s at M = 4096 (grouped_gemm_flops, as roofline/catalogue/derive/engine_kernels
  defines it for the derived profiles); prefill attention FLOP/s per head dim at the longest prompt (fa3_prefill, GQA).
  With --micro4, every one of those cases less a one-call CUDA-graph replay's own fixed cost first (graph_replay of
  micro4's graph_floor, 3.95 us on the H200): micro.py timed each kernel as the one call of a replayed graph.
- in situ (--in-situ RUN_DIR with a prof.py result): the paged decode attention inside the engine's own decode
  steps (its kernel durations under the profiler, Llama-3.1-8B at B = 32, 128, 256, P = 256) exceeds the alone law
  at B >= 128 by a cost that grows with the tiles it runs (13-14 ns per (sequence, KV head) tile at B = 128 and
  256; validate/notes/2026-11-28-vllm-h200-run2.md): attn_decode_program = that excess per tile, least squares
  through the origin; the alone law (micro.json) keeps the latency and the streaming rate, which long contexts
  follow. Kernel durations, not step times; the profiled batch (B = 256 at P = 256) is left out of the judged cases.
- speculative decoding with a draft model (--spec RUN_DIR, spec_step.py's multiprocess results: the engine in its
  own process, as served; run 5 found in-process host work 1.36x slower): on a tiny target, the step wall with K
  drafts less the wall with no draft (medians over the batches and orders measured), least squares of
  spec_step_s + K x (draft_pass_s + draft_layer_s x layers) over the 2-layer tiny draft and the 16-layer
  Llama-3.2-1B at K = 1 and 3 (the wall of a pass: its host work, the draft's GPU work running under it). The
  32-layer narrow draft (tiny-llama-32) was measured too and does not follow the line (run 6: ~1.4x it, unexplained;
  validate/notes/2026-11-29-vllm-h200-run6.md): its residual is kept in fit_residuals, it is not an input.
- a step past the largest capture size (--eager RUN_DIR, lat.py's results of cases-run5.json's narrow models): each
  model's prefill wall at 1,024-4,096 tokens (median over the lengths) less its 256-token prefill on the 2-layer
  tiny model (the request's own cost with CUDA graphs, same machine and run), fitted by least squares as
  eager_step_s + eager_layer_s x layers + eager_moe_layer_s x layers with routed experts (layer counts from
  roofline's import of each config.json). The narrow models are not judged; the law applies to every model.
- op_kernels: from the source (OP_KERNELS), not a measurement.
- a disaggregated pair's KV connector (--nixl FILE, nixl_probe.py's result with ISOLATE=1: one GPU a process, as the
  two servers run, and NUM_THREADS=4: the UCX threads vLLM's NixlConnector gives its agent,
  vllm/distributed/kv_transfer/kv_connector/v1/nixl/base_worker.py@v0.24.0 lines 319-329, which complete the READs
  faster than NIXL's default threads): READs of spaced descriptors (no two merge, as a request's blocks in an
  engine's pool) of 8-32 KiB, each case's completion (post to DONE) less its bytes over the back-to-back cases'
  bandwidth (the wire, which the serving model prices on the link between the pools), relative least squares
  kv_transfer_s + descriptors x kv_descriptor_s.
- the part of it the decode worker's thread spends posting the READs (--nixl-post FILE, nixl_probe.py's result with
  ISOLATE=1 and NUM_THREADS=4, the connector's own num_threads: vllm/distributed/kv_transfer/kv_connector/v1/nixl/
  base_worker.py@v0.24.0): the spaced cases' post (make_prepped_xfer + transfer on the caller's thread), relative
  least squares kv_post_s + descriptors x kv_post_descriptor_s.
- tensor parallelism's all-reduce (--allreduce FILE, ar_probe.py's result: vLLM's custom all-reduce inside a CUDA
  graph on two GPUs of one host, 8 KiB - 4 MiB): allreduce_custom_latency + bytes / allreduce_custom_bw by relative
  least squares, for the ranks measured, below vLLM's max_size (custom_all_reduce.py@v0.24.0: 8 MiB).
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from pathlib import Path

import numpy as np


def fit_affine(xs, ts) -> tuple[float, float]:
    """(alpha, rate) of t = alpha + x / rate by relative least squares (weights 1/t^2), alpha clipped at 0."""
    w = [1.0 / t ** 2 for t in ts]
    rows = list(zip(w, xs, ts, strict=True))
    sw, sx, st = sum(w), sum(wi * x for wi, x, _ in rows), sum(wi * t for wi, _, t in rows)
    sxx, sxt = sum(wi * x * x for wi, x, _ in rows), sum(wi * x * t for wi, x, t in rows)
    beta = (sw * sxt - sx * st) / (sw * sxx - sx * sx)
    alpha = (st - beta * sx) / sw
    if alpha < 0:  # through the origin
        alpha, beta = 0.0, sxt / sxx
    return alpha, 1.0 / beta


def fit_host(batches, steps) -> tuple[float, float]:
    """(step_s, per_seq_s) of host = step_s + per_seq_s x B (relative least squares)."""
    alpha, rate = fit_affine(batches, steps)
    return alpha, 1.0 / rate


# the profiled model's KV bytes per token and layer (Llama-3.1-8B: 8 KV heads x 128 x (K, V) x bf16)
PROF_KV_HEADS = 8
PROF_KV_BYTES_PER_TOKEN_LAYER = PROF_KV_HEADS * 128 * 2 * 2
ATTN_KERNEL = "FlashAttnFwdSm90"


def in_situ_attention(prof: Path, alpha: float, rate: float) -> tuple[float, list[dict]]:
    """(seconds per tile, points) of the engine's decode attention from prof.py's per-step kernel times: the
    FlashAttnFwdSm90 kernels launched once per layer and step (a prefill's launch, once per generate, is left out),
    per layer, less the alone law (alpha + mean KV bytes a layer reads over the profiled steps / rate), against the
    tiles (B x KV heads)."""
    points = []
    for c in json.loads(prof.read_text())["cases"]:
        per_step = [v for name, v in c["kernels"].items() if ATTN_KERNEL in name and "Combine" not in name
                    and v["calls"] >= 16]
        calls = max(v["calls"] for v in per_step)
        layer_s = sum(v["s"] for v in per_step) / calls
        context = c["P"] + c["N"] / 2  # mean of P+1 .. P+N-1
        kv = c["B"] * context * PROF_KV_BYTES_PER_TOKEN_LAYER
        points.append({"B": c["B"], "P": c["P"], "layer_s": layer_s, "kv_bytes": kv,
                       "tiles": c["B"] * PROF_KV_HEADS, "excess_s": layer_s - (alpha + kv / rate)})
    per_tile = (sum(p["excess_s"] * p["tiles"] for p in points) / sum(p["tiles"] ** 2 for p in points))
    return max(0.0, per_tile), points


def fused_moe_law(rows: list[dict], source: str) -> tuple[dict, dict]:
    """(kernels, sources) of an engine's fused MoE call timed alone (micro.py / micro_sglang.py fused_moe rows):
    grouped_gemm_latency, grouped_gemm_bw from t = alpha + active weight bytes / rate over M <= 64 (decode batches),
    and grouped_gemm_flops, 2 M k 3 H I / t at the largest M of the first shape (a prefill-sized batch: the definition
    of the derived profiles, roofline/catalogue/derive/engine_kernels.py); empty without rows."""
    moe = [r for r in rows if r["M"] <= 64]
    if not moe:
        return {}, {}
    a_moe, r_moe = fit_affine([r["active_weight_bytes"] for r in moe], [r["s"] for r in moe])
    first = rows[0]
    big = max((r for r in rows if (r["E"], r["topk"], r["H"], r["I"]) ==
               (first["E"], first["topk"], first["H"], first["I"])), key=lambda r: r["M"])
    kernels = {"grouped_gemm_latency": a_moe, "grouped_gemm_bw": r_moe,
               "grouped_gemm_flops": 2 * big["M"] * big["topk"] * 3 * big["H"] * big["I"] / big["s"]}
    sources = {"fused_moe": f"{source} fused_moe M <= 64, t = alpha + active weight bytes / rate",
               "grouped_gemm_flops": (f"{source} fused_moe M = {big['M']}, E = {big['E']}, k = {big['topk']}: "
                                      "2 M k 3 H I / t (the derived profiles' definition)")}
    return kernels, sources


def prefill_flops(rows: list[dict]) -> dict:
    """{head dim: FLOP/s} of an engine's FA3 prefill alone: per head dim the longest GQA prompt timed."""
    flops = {}
    for d in sorted({r["d"] for r in rows}):
        gqa = [r for r in rows if r["d"] == d and r["hk"] < r["hq"]]
        if gqa:
            flops[d] = max(gqa, key=lambda r: r["P"])["flops_per_s"]
    return flops


def less_replay(rows: list[dict], replay_s: float) -> list[dict]:
    """micro.py's one-call cases less a one-call CUDA-graph replay's own fixed cost (graph_replay's replay_s): each
    case was the one call of a graph replayed alone, while in the engine's decode step the kernel is one of
    hundreds in one replay and does not pay it (micro4's GEMM, KV-write and sampler laws are taken the same way, and
    derive_sglang's --replay for SGLang's kernels). A row's FLOP/s follows its time."""
    out = []
    for r in rows:
        row = {**r, "s": r["s"] - replay_s}
        if "flops" in r:
            row["flops_per_s"] = r["flops"] / row["s"]
        out.append(row)
    return out


def derive(results: Path, hardware: str, in_situ: Path | None = None, replay_s: float = 0.0) -> dict:
    """The profile's laws from a run folder (tiny-llama's timings, micro.json's kernels alone); `replay_s`: a
    one-call CUDA-graph replay's own fixed cost (from micro4's graph_floor), taken off micro.json's cases."""
    tiny = json.loads((results / "tiny-llama-lat.json").read_text())
    micro = json.loads((results / "micro.json").read_text())
    micro = {**micro, **{k: less_replay(micro.get(k, []), replay_s) for k in ("fa3_decode", "fused_moe",
                                                                              "fa3_prefill")}}
    eng = tiny["engine"]
    overlap = bool(eng.get("async_scheduling"))
    batches = [d["B"] for d in tiny["decode"]]
    steps = [d["decode_step_s"] for d in tiny["decode"]]
    step_s, per_seq_s = fit_host(batches, steps)
    sources = {"step_s": f"{results}/tiny-llama-lat.json decode (B, step) fitted host = a + b B",
               "overlap": f"{results}/tiny-llama-lat.json engine.async_scheduling = {eng.get('async_scheduling')}",
               "capture_sizes": f"{results}/tiny-llama-lat.json engine.cudagraph_capture_sizes"}
    pre = {p["P"]: p["median_s"] for p in tiny["prefill"]}
    request = pre[min(pre)]  # the tiny model's GPU work is ~0.1 ms (roofline's own prediction)
    sources["request_s"] = f"{results}/tiny-llama-lat.json prefill P={min(pre)} (B = 1, max_tokens 1)"
    api = 0.0
    conc1 = results / "tiny-conc1.json"
    if conc1.is_file():
        ttft = json.loads(conc1.read_text())["median_ttft_ms"] * 1e-3
        api = max(0.0, ttft - request)
        sources["api_request_s"] = f"{conc1} median_ttft_ms less request_s"
    served = [(c, json.loads((results / f"tiny-conc{c}.json").read_text())["median_tpot_ms"] * 1e-3)
              for c in (1, 16, 64) if (results / f"tiny-conc{c}.json").is_file()]
    server_step_s, server_per_seq_s = (fit_host([c for c, _ in served], [t for _, t in served]) if len(served) > 1
                                       else (step_s, per_seq_s))
    sources["server_step_s"] = f"{results}/tiny-conc{{1,16,64}}.json median_tpot_ms against concurrency"
    dec = [r for r in micro["fa3_decode"] if not r["window"]]
    a_att, r_att = fit_affine([r["kv_bytes_read"] for r in dec], [r["s"] for r in dec])
    kernels = {"attn_decode_latency": a_att, "attn_decode_bw": r_att}
    sources["attn_decode"] = f"{results}/micro.json fa3_decode (no window), t = alpha + KV bytes / rate"
    extra = {}
    prof = in_situ / "Llama-3.1-8B-prof.json" if in_situ else None
    if prof and prof.is_file():
        per_tile, points = in_situ_attention(prof, a_att, r_att)
        kernels["attn_decode_program"] = per_tile
        sources["attn_decode_program"] = (f"{prof} FlashAttnFwdSm90 per layer in the engine's decode steps less the "
                                          "alone law, per (sequence, KV head) tile")
        extra["attn_decode_in_situ_points"] = points
    moe_kernels, moe_sources = fused_moe_law(micro["fused_moe"], f"{results}/micro.json")
    kernels.update(moe_kernels)
    sources.update(moe_sources)
    flops = prefill_flops(micro["fa3_prefill"])
    sources["attention_flops"] = f"{results}/micro.json fa3_prefill, longest prompt, GQA"
    return {"version": tiny.get("vllm", ""), "step_s": step_s, "per_seq_s": per_seq_s, "overlap": overlap,
            "server_step_s": server_step_s, "server_per_seq_s": server_per_seq_s,
            "capture_sizes": sorted(eng["cudagraph_capture_sizes"]), "api_request_s": api, "request_s": request,
            "kernels": {hardware: kernels}, "attention_flops": {hardware: flops},
            "op_kernels": dict(OP_KERNELS), "sources": {**sources, "op_kernels": OP_KERNELS_SOURCE},
            "fit_residuals": {"host": [round(s / (step_s + per_seq_s * b) - 1, 4)
                                       for b, s in zip(batches, steps, strict=True)],
                              "attn_decode_median_ape": statistics.median(
                                  abs((a_att + r["kv_bytes_read"] / r_att) / r["s"] - 1) for r in dec)}, **extra}


# kernels an op launches outside the engine's fused MoE call, which micro.py's fused_moe law times whole
OP_KERNELS = {"routing": 1}
OP_KERNELS_SOURCE = ("vllm/model_executor/layers/fused_moe/fused_moe.py (vLLM 0.24.0) fused_experts_impl, lines "
                     "1537-1735: it runs moe_align_block_size, the w13 GEMM, silu_and_mul, the w2 GEMM and moe_sum in "
                     "the one call micro.py times for the fused_moe law; outside it the router's topk_softmax (one "
                     "kernel) stays the routing op's")


def eager_points(run: Path) -> tuple[list[dict], float]:
    """Per narrow model of `run` (lat.py results): layers, layers with routed experts and its median prefill wall
    past the largest capture size; and the 2-layer tiny model's graphed 256-token prefill (the request's own cost)."""
    from roofline.accounting import moe_layer_count
    from validate.engines.predict import model_of

    points, base = [], None
    for path in sorted(run.glob("*-lat.json")):
        lat = json.loads(path.read_text())
        top = max(lat["engine"]["cudagraph_capture_sizes"])
        eager = [p["median_s"] for p in lat["prefill"] if p["P"] > top]
        if lat["model"] == "tiny-llama":
            base = min(p["median_s"] for p in lat["prefill"] if p["P"] <= top)
        model = model_of(lat["model"])
        points.append({"model": lat["model"], "layers": model.num_layers, "moe_layers": moe_layer_count(model),
                       "wall_s": statistics.median(eager), "walls_s": eager})
    if base is None or len(points) < 3:
        raise SystemExit(f"--eager {run}: needs tiny-llama and two more narrow models' lat.py results")
    return points, base


def eager_host(run: Path) -> tuple[dict, dict, list[dict]]:
    """eager_step_s, eager_layer_s, eager_moe_layer_s by least squares over the narrow models (module docstring)."""
    import numpy as np

    points, base = eager_points(run)
    a = np.array([[1.0, p["layers"], p["moe_layers"]] for p in points])
    y = np.array([p["wall_s"] - base for p in points])
    (step, layer, moe), *_ = np.linalg.lstsq(a, y, rcond=None)
    values = {"eager_step_s": max(0.0, float(step)), "eager_layer_s": float(layer), "eager_moe_layer_s": float(moe)}
    for p in points:
        fit = base + values["eager_step_s"] + layer * p["layers"] + moe * p["moe_layers"]
        p["fit_residual"] = round(fit / p["wall_s"] - 1, 4)
    src = (f"{run}/*-lat.json prefill past the largest capture size (median over P) less tiny-llama's graphed "
           f"P = {256} prefill, least squares on (1, layers, layers with routed experts)")
    return values, dict.fromkeys(values, src), points


def local_attention(path: Path) -> tuple[float, list[dict]]:
    """(seconds per (sequence, KV head) tile, points) the sliding-window instantiation of FA3's paged decode costs
    over the same call with its window dropped (micro5_window.py: window 4,096 with max_seqlen_k above it, as vLLM
    captures at max_model_len, against max_seqlen_k <= 4,096, FA3 then running the plain kernel), at the same (B, L):
    least squares through the origin, as in_situ_attention. Mistral-7B's 8 KV heads."""
    cases = json.loads(path.read_text())["cases"]
    points = []
    for b, length in sorted({(c["B"], c["L"]) for c in cases}):
        windowed = [c for c in cases if (c["B"], c["L"]) == (b, length) and c["window"]]
        kept = [c["s"] for c in windowed if c["max_seqlen_k"] > c["window"]]
        dropped = [c["s"] for c in windowed if c["max_seqlen_k"] <= c["window"]]
        if kept and dropped:
            points.append({"B": b, "L": length, "tiles": b * MICRO5_KV_HEADS,
                           "excess_s": statistics.mean(kept) - statistics.mean(dropped)})
    if not points:
        raise SystemExit(f"--micro5 {path}: no windowed case with and without its window kept")
    per_tile = sum(p["excess_s"] * p["tiles"] for p in points) / sum(p["tiles"] ** 2 for p in points)
    return max(0.0, per_tile), points


MICRO5_KV_HEADS = 8  # micro5_window.py's HK (Mistral-7B-v0.1)


def spec_gpu_s(case: dict) -> float:
    """A spec_step.py case's GPU kernel time per step without the runner's scopes: runs before the script's fix
    (validate/results/engines/*-mech, *-run5) counted the scopes' GPU-side user annotations ("gpu_model_runner:
    ...", spanning their kernels) as kernels; they are taken out by name from its per-step kernel list."""
    scopes = sum(v["s"] for n, v in case.get("kernels_per_step", {}).items() if n.startswith("gpu_model_runner:"))
    return case["step_gpu_s"] - scopes


SPEC_DRAFTS = ("tiny-llama", "Llama-3.2-1B")  # the drafts whose walls set the law (module docstring)


def spec_cases(run: Path) -> list[dict]:
    """spec_step.py's multiprocess cases of a run folder: every spec/*.json result and every SPECCASE line of the
    diag/*.log children run by hand (run 6: the same configuration in the other order of batches)."""
    cases = []
    for f in sorted(run.glob("spec/*.json")):
        cases += json.loads(f.read_text())["cases"]
    for f in sorted(run.glob("diag/*.log")):
        cases += [json.loads(x[9:]) for x in f.read_text().splitlines() if x.startswith("SPECCASE ")]
    return [c for c in cases if "error" not in c and c.get("multiprocess")]


def spec_host(run: Path) -> tuple[dict, dict, dict]:
    """spec_step_s, draft_pass_s, draft_layer_s from spec_step.py's multiprocess walls on the tiny target (module
    docstring), their sources, and the law's residual on every draft measured (the check drafts included)."""
    from validate.engines.models import config

    walls: dict[tuple[str, int], list[float]] = {}
    for c in spec_cases(run):
        walls.setdefault((c["draft"], c["K"]), []).append(c["step_wall_s"])
    need = [("-", 0)] + [(d, k) for d in SPEC_DRAFTS for k in (1, 3)]
    missing = [k for k in need if k not in walls]
    if missing:
        raise SystemExit(f"--spec {run}: no multiprocess result for {', '.join(f'{d}:{k}' for d, k in missing)}")
    base = statistics.median(walls[("-", 0)])
    added = {key: statistics.median(w) - base for key, w in walls.items() if key != ("-", 0)}
    layers = {d: config(d)["num_hidden_layers"] for d, _ in added}
    rows = [(1.0, k, k * layers[d]) for d in SPEC_DRAFTS for k in (1, 3)]
    fixed, per_pass, per_layer = np.linalg.lstsq(np.array(rows), np.array([added[(d, k)] for d in SPEC_DRAFTS
                                                                           for k in (1, 3)]), rcond=None)[0]
    values = {"spec_step_s": float(fixed), "draft_pass_s": float(per_pass), "draft_layer_s": float(per_layer)}
    residuals = {f"{d}:{k}": round(float((fixed + k * (per_pass + per_layer * layers[d])) / h) - 1, 4)
                 for (d, k), h in sorted(added.items())}
    src = (f"{run} spec_step.py multiprocess (SPEC_MP=1), tiny target: the step wall with K drafts less the wall with "
           f"none (medians over B = 1, 16, 32 and both orders), least squares of fixed + K x (pass + layer x layers) "
           f"over {', '.join(SPEC_DRAFTS)} at K = 1 and 3")
    return values, dict.fromkeys(values, src), residuals


def graph_replay(micro4: dict) -> tuple[float, float]:
    """(replay_s, per_kernel_s) of a CUDA-graph replay of K dependent one-element kernels (micro4.json graph_floor),
    t = replay_s + K x per_kernel_s by ordinary least squares: per_kernel_s is a small kernel's cost inside a replay
    (launch, ramp-up, drain), replay_s the replay's own fixed cost, which every single-call case of micro4 carries
    once beside its kernel's and which a kernel inside the engine's graph of a whole step does not pay."""
    pts = [(r["kernels"], r["s"]) for r in micro4["graph_floor"]]
    n, sx, st = len(pts), sum(k for k, _ in pts), sum(t for _, t in pts)
    sxx, sxt = sum(k * k for k, _ in pts), sum(k * t for k, t in pts)
    per_kernel = (n * sxt - sx * st) / (n * sxx - sx * sx)
    return (st - per_kernel * sx) / n, per_kernel


def sampler_law(micro4: dict, replay_s: float) -> tuple[float, float]:
    """(latency_s, elements_per_s) of vLLM's sampler step (the logits' fp32 cast, the temperature division and
    gumbel_sample: micro4.json sampler cast_and_sample_s less the replay's fixed cost) as t = a + B x V / rate,
    relative least squares over both vocabularies (B x V is the work: 32 x 128,256 and 128 x 32,000 take the same)."""
    rows = micro4["sampler"]
    return fit_affine([r["B"] * r["V"] for r in rows], [r["cast_and_sample_s"] - replay_s for r in rows])


def kv_write_law(micro4: dict, replay_s: float) -> tuple[float, float]:
    """(latency_s, bytes_per_s) of reshape_and_cache_flash (micro4.json kv_write less the replay's fixed cost) as
    t = a + K and V bytes written / rate (2 x T x KV heads x head dim x 2 bf16 bytes: the kv_update op's traffic),
    relative least squares over every case."""
    rows = micro4["kv_write"]
    return fit_affine([kv_written_bytes(r) for r in rows], [r["s"] - replay_s for r in rows])


def kv_written_bytes(case: dict) -> int:
    """K and V bytes a micro4 kv_write case writes into the cache (bf16): 2 x T x hk x d x 2."""
    return 2 * case["T"] * case["hk"] * case["d"] * 2


def micro4_kernels(path: Path) -> tuple[dict, dict, dict, dict]:
    """From micro4.json (the engine's kernels alone on one GPU): the kernel ceilings it sets (kv_write_latency,
    kv_write_bw: the KV write's law; kernel_time: a small kernel's cost inside a graph replay), the sampler law
    {latency_s, elements_per_s}, the sources of each, and the fits' residuals (fit / measured - 1)."""
    micro4 = json.loads(path.read_text())
    replay_s, per_kernel_s = graph_replay(micro4)
    a_kv, r_kv = kv_write_law(micro4, replay_s)
    a_smp, r_smp = sampler_law(micro4, replay_s)
    kernels = {"kv_write_latency": a_kv, "kv_write_bw": r_kv, "kernel_time": per_kernel_s}
    sampler = {"latency_s": a_smp, "elements_per_s": r_smp}
    src = f"{path} graph_floor: t = replay + K x per kernel (least squares); replay_s = {replay_s:.3e} s"
    sources = {"kernel_time": src,
               "kv_write": f"{path} kv_write less replay_s, t = alpha + K and V bytes / rate (relative least squares)",
               "sampler": f"{path} sampler cast_and_sample_s less replay_s, t = alpha + B x V / rate"}
    residuals = {"replay_s": replay_s,
                 "graph_floor": [round((replay_s + per_kernel_s * r["kernels"]) / r["s"] - 1, 4)
                                 for r in micro4["graph_floor"]],
                 "kv_write": [round((replay_s + a_kv + kv_written_bytes(r) / r_kv) / r["s"] - 1, 4)
                              for r in micro4["kv_write"]],
                 "sampler": [round((replay_s + a_smp + r["B"] * r["V"] / r_smp) / r["cast_and_sample_s"] - 1, 4)
                             for r in micro4["sampler"]]}
    return kernels, sampler, sources, residuals


def _spaced_fit(spaced: list[dict], ts: list[float]) -> tuple[float, float, list[dict]]:
    """(alpha, per descriptor, points) of t = alpha + descriptors x per over nixl_probe.py's spaced cases."""
    xs = [c["descriptors"] for c in spaced]
    alpha, rate = fit_affine(xs, ts)  # t = alpha + descriptors / rate
    per = 1.0 / rate
    points = [{"descriptors": x, "bytes_each": c["bytes_each"], "s": t, "fit_s": alpha + per * x}
              for x, c, t in zip(xs, spaced, ts, strict=True)]
    return alpha, per, points


def nixl_law(path: Path) -> tuple[dict, dict, list[dict]]:
    """kv_transfer_s and kv_descriptor_s from nixl_probe.py's isolated result (module docstring); the points."""
    d = json.loads(path.read_text())
    if not d.get("isolate") or d.get("num_threads") != 4:
        raise SystemExit(f"--nixl {path}: not nixl_probe.py's ISOLATE=1 NUM_THREADS=4 result (the connector's threads)")
    cases = d["cases"]
    wire_bps = statistics.median(c["bytes_per_s"] for c in cases if c["spacing"] == 1 and c["bytes"] >= 1 << 27)
    spaced = [c for c in cases if c["spacing"] > 1]
    alpha, per, points = _spaced_fit(spaced, [c["done_s"] - c["bytes"] / wire_bps for c in spaced])
    src = (f"{path} spaced READs (no merging) of {sorted({c['bytes_each'] for c in spaced})} bytes with the "
           f"connector's 4 UCX threads, completion (post to DONE) less bytes / {wire_bps / 1e9:.0f} GB/s (back-to-back "
           "cases of >= 128 MiB), t = alpha + descriptors x per")
    return ({"kv_transfer_s": alpha, "kv_descriptor_s": per}, {"kv_transfer_s": src, "kv_descriptor_s": src},
            points)


def nixl_post_law(path: Path) -> tuple[dict, dict, list[dict]]:
    """kv_post_s and kv_post_descriptor_s from nixl_probe.py's ISOLATE=1 NUM_THREADS=4 result (module docstring)."""
    d = json.loads(path.read_text())
    if not d.get("isolate") or d.get("num_threads") != 4:
        raise SystemExit(f"--nixl-post {path}: not nixl_probe.py's ISOLATE=1 NUM_THREADS=4 result")
    spaced = [c for c in d["cases"] if c["spacing"] > 1]
    alpha, per, points = _spaced_fit(spaced, [c["post_s"] for c in spaced])
    src = (f"{path} spaced READs (no merging) of {sorted({c['bytes_each'] for c in spaced})} bytes with the "
           "connector's 4 UCX threads, the post on the caller's thread, t = alpha + descriptors x per")
    return ({"kv_post_s": alpha, "kv_post_descriptor_s": per}, {"kv_post_s": src, "kv_post_descriptor_s": src},
            points)


CUSTOM_AR_MAX_BYTES = 8192 * 1024  # vllm/distributed/device_communicators/custom_all_reduce.py@v0.24.0 max_size


def allreduce_law(path: Path) -> tuple[dict, str, list[dict]]:
    """vLLM's custom all-reduce law from ar_probe.py's result (module docstring); its source; the points."""
    d = json.loads(path.read_text())
    rows = d.get("custom") or []
    if len(rows) < 3:
        raise SystemExit(f"--allreduce {path}: no custom all-reduce rows ({d.get('custom_error')})")
    xs, ts = [r["bytes"] for r in rows], [r["custom_graph_s"] for r in rows]
    alpha, rate = fit_affine(xs, ts)
    points = [{"bytes": x, "s": t, "fit_s": alpha + x / rate} for x, t in zip(xs, ts, strict=True)]
    law = {"allreduce_custom_latency": alpha, "allreduce_custom_bw": rate, "allreduce_custom_ranks": 2.0,
           "allreduce_custom_max_bytes": float(CUSTOM_AR_MAX_BYTES)}
    src = (f"{path} vLLM CustomAllreduce in a CUDA graph of 50 calls on 2 GPUs (NVLink), {xs[0]}-{xs[-1]} bytes, "
           "t = alpha + bytes / rate (relative least squares); used below max_size 8 MiB at tp 2")
    return law, src, points


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("results", type=Path)
    p.add_argument("--in-situ", type=Path, help="a run folder with prof.py's result (the engine's own kernels)")
    p.add_argument("--hardware", default="H200")
    p.add_argument("--spec", type=Path, help="a run folder with spec_step.py's multiprocess results (spec/*.json, "
                                             "diag/*.log): a draft model's host time per step and pass")
    p.add_argument("--eager", type=Path, help="lat.py results of the narrow models (a step without CUDA graphs)")
    p.add_argument("--micro4", type=Path, help="micro4.py's result (KV write, sampler, a kernel in a graph replay)")
    p.add_argument("--micro5", type=Path, help="micro5_window.py's result (FA3's sliding-window decode kernel)")
    p.add_argument("--nixl", type=Path, help="nixl_probe.py's ISOLATE=1 NUM_THREADS=4 result (a disaggregated pair's "
                                             "connector: its completion)")
    p.add_argument("--allreduce", type=Path, help="ar_probe.py's result (vLLM's custom all-reduce at tp 2)")
    p.add_argument("--nixl-post", type=Path, help="nixl_probe.py's ISOLATE=1 NUM_THREADS=4 result (the post)")
    p.add_argument("--out", type=Path, default=Path("roofline/engines/profiles/vllm.json"))
    a = p.parse_args()
    a.out.parent.mkdir(parents=True, exist_ok=True)
    replay_s = 0.0
    if a.micro4:
        try:
            replay_s = graph_replay(json.loads(a.micro4.read_text()))[0]
        except (OSError, ValueError, KeyError, TypeError, ZeroDivisionError) as exc:  # JSONDecodeError: a ValueError
            print(f"--micro4 {a.micro4}: not micro4.py's result with graph_floor cases ({type(exc).__name__}: {exc})",
                  file=sys.stderr)
            raise SystemExit(2) from None
    profile = derive(a.results, a.hardware, a.in_situ, replay_s)
    if replay_s:
        profile["sources"]["replay_s"] = (f"{a.micro4} graph_floor: a one-call replay's fixed cost "
                                          f"{replay_s * 1e6:.2f} us, taken off micro.json's fa3_decode, fused_moe "
                                          "and fa3_prefill cases before their fits")
    # the laws that set top-level figures: (flag's value, its law, the residuals' key)
    for path, law, key in ((a.spec, spec_host, "spec"), (a.eager, eager_host, "eager")):
        if path:
            values, sources, residuals = law(path)
            profile.update(values)
            profile["sources"].update(sources)
            profile["fit_residuals"][key] = residuals
    if a.micro4:
        try:
            kernels, sampler, sources, residuals = micro4_kernels(a.micro4)
        except (OSError, ValueError, KeyError, TypeError, ZeroDivisionError) as exc:  # JSONDecodeError is a ValueError
            print(f"--micro4 {a.micro4}: not micro4.py's result with graph_floor, kv_write and sampler cases "
                  f"({type(exc).__name__}: {exc})", file=sys.stderr)
            raise SystemExit(2) from None
        profile["kernels"][a.hardware].update(kernels)
        profile["sampler"] = {a.hardware: sampler}
        profile["sources"].update(sources)
        profile["fit_residuals"]["micro4"] = residuals
    if a.micro5:
        per_tile, points = local_attention(a.micro5)
        profile["kernels"][a.hardware]["attn_decode_local_program"] = per_tile
        profile["sources"]["attn_decode_local_program"] = (
            f"{a.micro5} FA3 paged decode, window 4096 kept (max_seqlen_k > W, vLLM's capture at max_model_len) less "
            "dropped, per (sequence, KV head) tile, least squares through the origin")
        profile["fit_residuals"]["attn_decode_local_points"] = points
    for path, law, key in ((a.nixl, nixl_law, "nixl"), (a.nixl_post, nixl_post_law, "nixl_post")):
        if path:
            values, sources, points = law(path)
            profile.update(values)
            profile["sources"].update(sources)
            profile["fit_residuals"][key] = points
    if a.allreduce:
        law, src, points = allreduce_law(a.allreduce)
        profile["kernels"][a.hardware].update(law)
        profile["sources"]["allreduce_custom"] = src
        profile["fit_residuals"]["allreduce_custom"] = points
    a.out.write_text(json.dumps(profile, indent=1) + "\n")


if __name__ == "__main__":
    main()
