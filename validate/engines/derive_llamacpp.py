"""llama.cpp's time profile (roofline/engines/profiles/llamacpp.json) from its mechanisms' own runs on the H200.

python -m validate.engines.derive_llamacpp [RUN3_DIR] [--out roofline/engines/profiles/llamacpp.json]

Each law from a microbenchmark of its own, never from run 1 (the run the profile is judged on):
- ggml's matmuls (run 3 stage O, test-backend-ops perf MUL_MAT, F16 weights x F32 activations at Llama-3.1-8B's
  five shapes): at one column ggml runs its mat-vec kernel, t = gemv_latency + bytes / gemv_bw; at 2 .. 64 columns
  its batched path, t = gemm_latency + bytes / gemm_stream_bw; compute-bound, FLOPs / gemm_shape (16-bit) at 512
  columns: llama.cpp runs a prompt in physical batches of n_ubatch = 512 tokens (common/common.h:454, llama-bench's
  default; every run here logged n_ubatch 512), so no call of its default settings has more rows (stage O's 2,048
  and 8,192 are kept as residuals, the rate a larger -ub would meet). Each by least squares on the seconds over every
  shape of its range (bytes, FLOPs: llamacpp_mech.mm_cost).
- FLASH_ATTN_EXT at one query (run 3 stage O, KV 512 .. 8,192): t = attn_decode_latency + K and V bytes /
  attn_decode_bw, least squares on the seconds.
- FLASH_ATTN_EXT at 512 queries (run 3 stage O, KV 512 .. 8,192, every cell of a random mask): its FLOP/s, the
  engine's prefill attention rate (attention_flops; a causal prompt's masked tiles are skipped by ggml-cuda).
- the step's host work (run 5, a kernel timeline: cupti_trace.c, kernel_trace.py): batched-bench's decode step untimed
  less the same step's GPU-busy time traced less the logits' copy, median over F16 and Q8_0 at B 1, 2, 8: step_s, the
  host's llama_decode between two GPU steps (the benchmark's and the server's: server_step_s). The timeline shows one
  CUDA-graph launch a step at every B and the GPU busy through it, so the step past one token pays no host excess
  (eager_layer_s 0; run 3's B 2 - B 1 less the matmuls' n 2 - n 1, the retired term, is kept in `sources`). The traced
  busy time is the tracer's too (CUPTI's records): step_s is a lower bound. The logits' copy to the host (runs 5 and
  5b: B x vocabulary x 4 bytes, each copy timed by CUPTI, 0.5 .. 33 MB): latency + bytes / bandwidth, the profile's
  `sampler` law (per row, per vocabulary element), serial after the step's kernels.
- the served step's CPU sampler (run 3 K-server, -np 8, one KV stream a slot as run 1's server): the server's decode
  time a token with the default sampler chain on the host (np8-split; run 1's client sends no sampler, so the
  server's default chain ran) less with greedy sampling on the GPU (np8-greedy-bs, --backend-sampling), per slot, per
  vocabulary element (Llama-3's 128,256): sampler_host_element_s. Greedy on the host (np8-greedy) less the same is
  the vocabulary scan alone (~0.3 ms a slot); the default chain adds ~0.1 ms a slot to it (both in `sources`).
- ggml-cuda's quantized matmuls (run 4 stage O, test-backend-ops perf MUL_MAT with q8_0 / q4_0 / q4_K / q6_K weights
  at the 8B's shapes; roofline/engines/timing.py 16.), per type, W its weight bytes (the blocks' own), F the FLOPs:
  one column (MMVQ) t = gemv_latency + W / gemv_bw over every shape at n 1; 2 .. 8 columns (MMVQ over the columns)
  t = the one-column law + F (1 - 1 / n) x mmvq_flop_s(n) (the weights read once, each further column's dot products
  redone), mmvq_flop_s(n) (seconds per FLOP, floored at 0) by least squares on what the one-column law leaves of each
  row's seconds at n 2, 4 and 8 apart, each shape counted as often as the 8B's step runs it (32 layers' matrices,
  one head)
  (ggml-cuda compiles mul_mat_vec_q once per column count: one rate over the three left the law 9-12 % under the rows
  at n 8 and 10-18 % over at n 2 for a Llama layer's four shapes), 3, 5, 6, 7 interpolated; past 8
  (MMQ) t = mmq_latency + W / mmq_bw + F / mmq_rate at n 16 .. 2048, each by least squares on the seconds; W the
  op's bytes (the quantized blocks and the F32 activations in and out, as the planner counts them at llama.cpp's
  activation_bytes 4).
- the small kernels of a decode layer (run 4 stage O: rms_norm, mul, add, rope of q and k, set_rows, glu at one
  token): their median is the engine's per-kernel time (kernel_time) on the H200; the kernels llama.cpp launches
  besides the fusion table's 'typical' (op_kernels): its residual adds are kernels of their own (the graph adds
  before it norms, so ggml-cuda's rms_norm+mul+add fusion does not take them) and RoPE is two (q alone; k fused with
  its set_rows, ggml_cuda_should_fuse_rope_set_rows), the V write the one kv_update; q, k, v are three matmul calls
  and gate, up two (the GGUF's own tensors), each paying its law's latency.
"""

from __future__ import annotations

import argparse
import json
import re
from pathlib import Path

import numpy as np

from roofline.ggml_types import MMVQ_MAX_COLUMNS
from validate.engines.llamacpp_logs import served_summary
from validate.engines.llamacpp_mech import (
    FA_KV,
    HEAD_DIM,
    KV_HEADS,
    LAYERS,
    N_DECODE,
    N_PREFILL,
    PER_LAYER,
    SHAPES,
    batched_steps,
    layer_matmuls_s,
    mm_cost,
    perf_lines,
)

RUN3 = Path("validate/results/engines/nvidia-h200-llamacpp-2026-11-30-run3")
RUN4 = Path("validate/results/engines/nvidia-h200-llamacpp-2026-11-30-run4")
RUN5 = Path("validate/results/engines/nvidia-h200-llamacpp-2026-11-30-run5")
RUN5B = Path("validate/results/engines/nvidia-h200-llamacpp-2026-11-30-run5b")
RUN6 = Path("validate/results/engines/nvidia-h200-llamacpp-2026-12-01-run6")
RUN9 = Path("validate/results/engines/nvidia-h200-llamacpp-2026-12-01-run9")
RUN10 = Path("validate/results/engines/nvidia-h200-llamacpp-2026-12-01-run10")
RUN16 = Path("validate/results/engines/nvidia-h200-llamacpp-2026-12-01-run16")
# llama-server started with its defaults (no -b / -ub): its context's log states the physical batch it runs
SERVER_LOG = Path("validate/results/engines/nvidia-h200-llamacpp-2026-11-30-run1/mem-c32768-np8.log")
OUT = Path("roofline/engines/profiles/llamacpp.json")
VOCAB = 128_256  # Llama-3.1-8B's vocabulary (the served model of run 3)
GPU = "H200"
# the compute dtypes ggml's 16-bit matmul rate stands for: F16 measured; a BF16 GGUF takes the same cuBLAS tensor-core
# path (ggml-cuda ggml_cuda_mul_mat_cublas: both cast src1 to the weights' type), at the same dense peak on the H200
DTYPES_16 = ("fp16", "bf16")
UBATCH = 512  # llama.cpp's default physical batch, n_ubatch (common/common.h:454; llama-bench -ub default)


def affine_fit(x: list[float], t: list[float]) -> tuple[float, float, list[float]]:
    """(alpha, rate, relative residuals) of t = alpha + x / rate by least squares on the seconds: a step's time is
    the sum of its kernels', so each row weighs as its time does (a small shape's miss costs the step little)."""
    x, t = np.asarray(x, float), np.asarray(t, float)
    a = np.stack([np.ones_like(x), x], axis=1)
    (alpha, inv), *_ = np.linalg.lstsq(a, t, rcond=None)
    pred = alpha + x * inv
    return float(alpha), float(1 / inv), [round(float(r), 4) for r in pred / t - 1]


def rate_fit(work: list[float], t: list[float], calls: list[float] | None = None) -> tuple[float, list[float]]:
    """(rate, relative residuals) of t = work / rate by least squares on the seconds (affine_fit's weighting), each
    row counted `calls` times where given (as often as a step runs it): 1 / rate = sum(c w t) / sum(c w^2)."""
    w, t = np.asarray(work, float), np.asarray(t, float)
    c = np.ones_like(w) if calls is None else np.asarray(calls, float)
    rate = float((c * w * w).sum() / (c * w * t).sum())
    return rate, [round(float(r), 4) for r in w / rate / t - 1]


def l2_bytes() -> int:
    """The H200's L2 (the catalogue's l2_cache_bytes)."""
    from roofline.catalogue.store import load_hardware
    return int(load_hardware(GPU).l2_cache_bytes)


def streamed(shapes: dict = SHAPES) -> dict:
    """The shapes whose F16 weights exceed the L2 (module docstring: test-backend-ops re-runs an op on the same
    tensors, so a weight that fits is read from L2 after its first run; a model step reads every weight once, from
    DRAM)."""
    return {s: (k, m) for s, (k, m) in shapes.items() if 2 * k * m > l2_bytes()}


def matmul_laws(times: dict[str, float]) -> dict:
    """The three matmul laws (module docstring) from stage O's rows, seconds by case key; the two bandwidth laws on
    the shapes whose weights stream from DRAM (streamed), the small shapes' rows kept as residuals."""
    def rows(ns, shapes=SHAPES):
        out = [(*mm_cost(k, m, n), times[f"mm-{s}-n{n}"]) for s, (k, m) in shapes.items() for n in ns
               if times.get(f"mm-{s}-n{n}") is not None]
        return [r[0] for r in out], [r[1] for r in out], [r[2] for r in out]

    big = streamed()
    b1, _, t1 = rows((1,), big)
    gemv_a, gemv_bw, gemv_res = affine_fit(b1, t1)
    bn, _, tn = rows(tuple(n for n in N_DECODE if n > 1), big)
    gemm_a, gemm_bw, gemm_res = affine_fit(bn, tn)
    small = {s: km for s, km in SHAPES.items() if s not in big}  # their rows against the laws: L2-served
    bs1, _, ts1 = rows((1,), small)
    bsn, _, tsn = rows(tuple(n for n in N_DECODE if n > 1), small)
    # a prompt's ubatch runs the layers' projections at its rows; lm_head only for the outputs (one a sequence)
    layers = {s: km for s, km in SHAPES.items() if s != "lm_head"}
    _, fl, tl = rows((UBATCH,), layers)
    flops, flops_res = rate_fit(fl, tl)
    _, fb, tb = rows(tuple(n for n in N_PREFILL if n > UBATCH), layers)
    return {"gemv_latency": gemv_a, "gemv_bw": gemv_bw, "gemm_latency": gemm_a, "gemm_stream_bw": gemm_bw,
            **{f"{k}:{d}": flops for k in ("gemm_shape", "sustained_gemm") for d in DTYPES_16},
            "residuals": {"gemv": gemv_res, "gemm_stream": gemm_res, "gemm_flops": flops_res,
                          "gemv_l2_resident": [round((gemv_a + b / gemv_bw) / t - 1, 4) for b, t in
                                               zip(bs1, ts1, strict=True)],
                          "gemm_stream_l2_resident": [round((gemm_a + b / gemm_bw) / t - 1, 4) for b, t in
                                                      zip(bsn, tsn, strict=True)],
                          "gemm_flops_past_ubatch": [round(f / flops / t - 1, 4) for f, t in zip(fb, tb, strict=True)]}}


def attention_law(times: dict[str, float]) -> dict:
    """FLASH_ATTN_EXT at one query: latency + K and V bytes / rate (module docstring)."""
    kv = [kv for kv in FA_KV if times.get(f"fa-n1-kv{kv}") is not None]
    a, bw, res = affine_fit([2 * 2 * HEAD_DIM * KV_HEADS * n for n in kv], [times[f"fa-n1-kv{n}"] for n in kv])
    return {"attn_decode_latency": a, "attn_decode_bw": bw, "residuals": res}


def attention_prefill_rate(times: dict[str, float]) -> tuple[float, list[float]]:
    """FLASH_ATTN_EXT at 512 queries (run 3 stage O, KV 512 .. 8,192, a random mask: every (query, key) cell runs):
    FLOP/s over those cells, least squares on the seconds. ggml-cuda skips a query tile's KV tiles past its last
    unmasked one (fattn-common.cuh flash_attn_mask_to_KV_max), so a causal prompt pays its causal cells at this
    rate (the planner's causal FLOPs)."""
    kv = [kv for kv in FA_KV if times.get(f"fa-n512-kv{kv}") is not None]
    return rate_fit([4.0 * 32 * 512 * n * HEAD_DIM for n in kv], [times[f"fa-n512-kv{n}"] for n in kv])


def eager_layer_s(times: dict[str, float], steps: dict[int, float]) -> float:
    """Per layer, batched-bench's B 2 step less its B 1 step less the matmuls' own n 1 -> n 2 difference."""
    mm = layer_matmuls_s(times, 2) - layer_matmuls_s(times, 1) + times["mm-lm_head-n2"] - times["mm-lm_head-n1"]
    return (steps[2] - steps[1] - mm) / LAYERS


def logits_copies(runs: tuple[Path, ...]) -> dict[int, float]:
    """Median seconds of the logits' device-to-host copy by its bytes (B x vocab x 4), over the decode timelines of
    `runs` (kernel_trace's records: each copy timed by CUPTI on the GPU's clock)."""
    from validate.engines.kernel_trace import DTOH, read
    out: dict[int, list[float]] = {}
    for run in runs:
        for f in sorted(run.glob("trace-*-dec.tsv.xz")):
            for s, e, b, kind in read(f).copies:
                if kind == DTOH and b % (VOCAB * 4) == 0:
                    out.setdefault(b, []).append((e - s) * 1e-9)
    return {b: float(np.median(v)) for b, v in sorted(out.items())}


def host_step_s(run5: Path, copies: dict[int, float], token_s: float = 0.0) -> tuple[float, dict[str, float]]:
    """Per (type, B) of run 5 the untimed decode step (batched-bench T_TG / TG) less its traced GPU-busy time
    (kernel_trace's median over the steps), the logits' copy (`copies`) and its B tokens' host work (`token_s`),
    and their median (module docstring)."""
    from validate.engines.llamacpp_logs import batched_rows
    each = {}
    for log in sorted(run5.glob("batched-*.log")):
        q = log.stem.removeprefix("batched-")
        if "-" in q:  # the traced and graph-off runs' own logs
            continue
        for r in batched_rows(log.read_text()):
            summ = run5 / f"trace-{q}-b{r['pl']}.json"
            if summ.is_file():
                busy = json.loads(summ.read_text())["groups"][0]["median"]["busy_us"] * 1e-6
                each[f"{q} B{r['pl']}"] = (r["t_tg_s"] / r["tg"] - busy - copies[r["pl"] * VOCAB * 4]
                                           - token_s * r["pl"])
    return float(np.median(list(each.values()))), each


def prompt_token_s(run5: Path, step_s: float, copies: dict[int, float], prompt: int = 512) -> tuple[float, dict]:
    """Per type of run 5, llama-bench's `prompt`-token prompt in steady state (the median of its repetitions after the
    first, which instantiates a new CUDA graph) less its traced GPU-busy time, the logits' row copy and step_s, per
    token; and their median (module docstring)."""
    each = {}
    for bench in sorted(run5.glob("bench-*.json")):
        q = bench.stem.removeprefix("bench-")
        summ = run5 / f"trace-{q}-pp.json"
        if "-" in q or not summ.is_file():
            continue
        entry = next(e for e in json.loads(bench.read_text()) if e["n_prompt"] == prompt and e["n_gen"] == 0)
        steady = float(np.median(entry["samples_ns"][1:])) * 1e-9
        group = min(json.loads(summ.read_text())["groups"], key=lambda g: g["kernels_per_step"])  # one ubatch
        each[q] = (steady - group["median"]["busy_us"] * 1e-6 - copies[VOCAB * 4] - step_s) / prompt
    return float(np.median(list(each.values()))), each


def sampler_element_s(cpu_s: float, gpu_s: float, slots: int = 8, vocab: int = VOCAB) -> float:
    """Host seconds per slot per vocabulary element of the CPU sampler: (TPOT host sampler - TPOT backend sampler)
    / slots / vocab (module docstring)."""
    return (cpu_s - gpu_s) / slots / vocab


def quant_laws(times: dict[str, float]) -> tuple[dict, dict]:
    """Per measured ggml type its three matmul laws (module docstring) from run 4's stage O rows (seconds by case
    name), as 'ggml:<type>:<law>' keys, and the fits' relative residuals per type and law."""
    from validate.engines.llamacpp_quant import CASES as RUN4_CASES
    from validate.engines.llamacpp_quant import mm_bytes

    laws, residuals = {}, {}
    for w in RUN4_CASES["ops"]["weights"]:
        def rows(ns, w=w, calls=False):
            out = []
            for s, (k, m) in SHAPES.items():
                for n in ns:
                    t = times.get(f"mm-{w}-{s}-n{n}")
                    if t is not None:  # the op's bytes: the blocks' weights and F32 activations in and out
                        out.append((mm_bytes(w, k, m, n)[0], 2.0 * k * m * n, t)
                                   + ((LAYERS * PER_LAYER.get(s, 0) or 1,) if calls else ()))
            return out

        one = rows((1,))
        a1, bw1, r1 = affine_fit([r[0] for r in one], [r[2] for r in one])
        rates, resv = {}, []
        for n in (n for n in RUN4_CASES["ops"]["n_decode"] if 1 < n <= MMVQ_MAX_COLUMNS):
            vq = rows((n,), calls=True)  # ggml-cuda compiles MMVQ once per column count: each its own cost
            extra = [f * (1 - 1 / n) for _, f, _, _ in vq]  # the further columns' FLOPs
            left = [t - (a1 + b / bw1) for b, _, t, _ in vq]  # the seconds the one-column law leaves
            # each shape as often as the 8B's step calls it (32 layers' q / o, k / v, gate / up, down; the head
            # once): the head's 7.4 GFLOP at n 8 would otherwise set the per-FLOP cost of every layer's matrices
            per_flop = 1 / rate_fit(extra, left, [c for *_, c in vq])[0]
            rates[n] = max(0.0, per_flop)  # seconds per further FLOP
            resv += [round(float(((a1 + b / bw1) + x * rates[n]) / t - 1), 4) for (b, _, t, _), x in zip(vq, extra,
                                                                                                           strict=True)]
        laws.update(mmvq_flop_s(w, rates))
        mq = rows(tuple(n for n in (*RUN4_CASES["ops"]["n_decode"], *RUN4_CASES["ops"]["n_prefill"]) if n > 8))
        x = np.array([[1.0, r[0], r[1]] for r in mq])
        t = np.array([r[2] for r in mq])
        (aq, inv_bw, inv_rate), *_ = np.linalg.lstsq(x, t, rcond=None)
        laws.update({f"ggml:{w}:gemv_latency": a1, f"ggml:{w}:gemv_bw": bw1,
                     f"ggml:{w}:mmq_latency": float(aq),
                     f"ggml:{w}:mmq_bw": float(1 / inv_bw), f"ggml:{w}:mmq_rate": float(1 / inv_rate)})
        fit = x @ (aq, inv_bw, inv_rate) / t - 1
        residuals[w] = {"gemv": r1, "mmvq": resv, "mmq": [round(float(r), 4) for r in fit]}
    return laws, residuals


def mmvq_flop_s(w: str, per_flop: dict[int, float]) -> dict[str, float]:
    """'ggml:<w>:mmvq_flop_s:<n>', the seconds per further FLOP at n columns, for every count 2 .. MMVQ_MAX_COLUMNS from
    the counts measured (`per_flop`, least squares, floored at 0: a count whose further columns cost nothing the fit
    can see adds nothing); a count between two measured ones interpolated linearly in n, past the last measured the
    last's (ggml-cuda instantiates mul_mat_vec_q once per ncols_dst, so no count shares another's cost)."""
    ns = sorted(per_flop)
    out = {}
    for n in range(2, MMVQ_MAX_COLUMNS + 1):
        lo = max((m for m in ns if m <= n), default=ns[0])
        hi = min((m for m in ns if m >= n), default=ns[-1])
        f = 0.0 if hi == lo else (n - lo) / (hi - lo)
        out[f"ggml:{w}:mmvq_flop_s:{n}"] = max(0.0, (1 - f) * per_flop[lo] + f * per_flop[hi])
    return out


SMALL_OPS = ("rms_norm", "mul", "add", "rope_q", "rope_k", "set_rows", "glu")
# the kernels llama.cpp's Llama layer launches besides the fusion table's 'typical' (module docstring)
OP_KERNELS = {"rope": 2, "attn_residual": 1, "mlp_residual": 1, "qkv_proj": 3, "mlp_up": 2}


def small_kernel_s(times: dict[str, float]) -> tuple[float, dict[str, float]]:
    """The median of the small ops at one token (run 4 stage O) and each of them."""
    each = {n: times[f"{n}-n1"] for n in SMALL_OPS if times.get(f"{n}-n1") is not None}
    return float(np.median(list(each.values()))), each


def norm_kernel_s(runs: tuple[Path, ...]) -> tuple[float, dict[str, float]]:
    """ggml's rms_norm kernel as the step runs it (fused with the norm weight's mul, rms_norm_f32<1024, true>): its
    median exclusive time a call over the decode steps the kernel timelines of runs 5 / 5b hold (trace-*-b<B>.json,
    kernel_trace.py's per-name table: F16, Q8_0, Q4_K_M at B 1 .. 64, graphs on), and each step's. One CTA of 1,024
    threads a row, a block reduction then the scale and the mul: ~3.2 us at any B up to 64, where stage O's RMS_NORM
    alone (no mul, the op's isolated repeat) took 2.05 at one row."""
    each = {}
    for run in runs:
        for f in sorted(run.glob("trace-*-b*.json")):
            group = json.loads(f.read_text())["groups"][0]
            calls = [(r["calls"], r["us"]) for r in group["per_name_per_step"] if "rms_norm" in r["name"]]
            if calls:
                each[f"{run.name}/{f.name}"] = sum(u for _, u in calls) / sum(c for c, _ in calls) * 1e-6
    return float(np.median(list(each.values()))), each


def one_row_epilogue(run5: Path) -> tuple[float, dict[str, dict[str, float]]]:
    """1.0 where run 5's one-token steps launch no residual add and no GLU kernel of their own while its two-token
    steps launch one a layer of each (ggml-cuda's ggml_cuda_should_fuse_mul_mat at one column: the residual added in
    o_proj's and down's mat-vec, gate / up / GLU one call), F16 and Q8_0 alike; else 0. With the calls a step of
    each B's adds, GLUs and matmuls."""
    def calls(f: Path) -> dict[str, float]:
        rows = json.loads(f.read_text())["groups"][0]["per_name_per_step"]
        out = {"add": 0.0, "glu": 0.0, "matmul": 0.0}
        for r in rows:
            if "op_add" in r["name"]:
                out["add"] += r["calls"]
            elif "unary_gated" in r["name"] or "glu" in r["name"]:
                out["glu"] += r["calls"]
            elif r["cat"] == "matmul" and "fixup" not in r["name"]:
                out["matmul"] += r["calls"]
        return out

    seen = {f"{t}-b{b}": calls(run5 / f"trace-{t}-b{b}.json") for t in ("F16", "Q8_0") for b in (1, 2)}
    fused = all(seen[f"{t}-b1"]["add"] <= 1 and seen[f"{t}-b1"]["glu"] == 0 and seen[f"{t}-b2"]["add"] >= LAYERS
                and seen[f"{t}-b2"]["glu"] >= LAYERS for t in ("F16", "Q8_0"))
    return (1.0 if fused else 0.0), seen


def cache_save_law(run6: Path) -> tuple[dict, list[dict]]:
    """llama-server's save of a finished request's state to its host prompt cache (run 6, llamacpp_cache.py): each
    save's seconds and bytes from the server's own log (save-f16.log.gz, save-q8_0.log.gz: one slot, requests one after
    another, 271 .. 8,207 tokens), seconds = latency + bytes / rate by least squares on the seconds."""
    from validate.engines.llamacpp_cache import _read, law, saves

    rows = [r for kv in ("f16", "q8_0") for r in saves(_read(run6 / f"save-{kv}.log.gz"))]
    return law(rows), rows


def server_ubatch(log: Path = SERVER_LOG) -> int:
    """llama-server's default n_ubatch, from its context's start-up line ("llama_context: n_ubatch = 512")."""
    found = re.search(r"llama_context: n_ubatch\s+=\s+(\d+)", log.read_text())
    if found is None:
        raise ValueError(f"{log}: no 'llama_context: n_ubatch' line")
    return int(found.group(1))


def kq_mask_law(run16: Path = RUN16) -> tuple[float, float, dict]:
    """The host's KQ mask on one stream (run 16: kq_mask_bench.cpp, set_input_kq_mask's loop over llama_kv_cells,
    three repetitions, each case's median): (seconds per cell a sequence's first row walks: the median over the
    decode cases of us / (rows x view); seconds per cell a further row copies: the prompt cases' slope over the view
    (least squares on the seconds) less one first row, over the ubatch's further rows)."""
    import json
    import statistics
    cases: dict[tuple, list[dict]] = {}
    for f in sorted(run16.glob("kq-mask-*.jsonl")):
        for line in f.read_text().splitlines():
            d = json.loads(line)
            cases.setdefault((d["kind"], d["seqs"], d["held"]), []).append(d)
    med = {k: (v[0], statistics.median(x["us"] for x in v) * 1e-6) for k, v in cases.items()}
    cell = statistics.median(t / (d["seqs"] * d["n_kv"]) for (kind, *_), (d, t) in med.items() if kind == "decode")
    prompt = sorted((d["n_kv"], t, d["rows"]) for (kind, *_), (d, t) in med.items() if kind == "prompt")
    _, rate, res = affine_fit([v for v, _, _ in prompt], [t for _, t, _ in prompt])
    rows = prompt[0][2]
    return cell, (1 / rate - cell) / (rows - 1), {"prompt_residuals": res, "prompt_rows": rows,
                                                  "per_view_cell_s": 1 / rate}


def server_graph_s(run9: Path = RUN9, run10: Path = RUN10) -> tuple[float, dict[str, float]]:
    """The server's host work a step pays when it rebuilds its graph: four streams pinned to slots 4..7 (one ubatch a
    step) decode with LLAMA_GRAPH_REUSE_DISABLE=1 (run 10, every step rebuilt) against the same set with reuse (run 9),
    the clients' TPOT p50s."""
    from validate.engines.llamacpp_logs import served_summary as summary

    off = summary(json.loads((run10 / "set-noreuse-1.json").read_text()))["tpot_s"]["p50"]
    on = summary(json.loads((run9 / "set-split-1.json").read_text()))["tpot_s"]["p50"]
    return off - on, {"noreuse_tpot_s": off, "reuse_tpot_s": on}


def derive(run3: Path, run4: Path = RUN4, run5: Path = RUN5, run5b: Path = RUN5B) -> dict:
    times = {k: v["us"] * 1e-6 for k, v in perf_lines((run3 / "ops.txt").read_text()).items() if v["supported"]}
    mm, fa = matmul_laws(times), attention_law(times)
    fa_rate, fa_rate_res = attention_prefill_rate(times)
    steps = batched_steps((run3 / "batched-split.log").read_text())
    retired = eager_layer_s(times, steps)
    copies = logits_copies((run5, run5b))
    copy_a, copy_bw, copy_res = affine_fit(list(copies), list(copies.values()))
    host, host_each = host_step_s(run5, copies)
    token, token_each = prompt_token_s(run5, host, copies)
    for _ in range(3):  # step_s and token_s, each net of the other (a decode step carries B tokens, a prompt step_s)
        host, host_each = host_step_s(run5, copies, token)
        token, token_each = prompt_token_s(run5, host, copies)
    tpot = {n: served_summary(json.loads((run3 / f"serve-k-{n}.json").read_text()))["server_decode_s_per_token"]
            for n in ("np8-split", "np8-greedy", "np8-greedy-bs")}
    # the host chain's difference holds the logits' copy (greedy on the GPU copies one token a slot): its share out
    element = sampler_element_s(tpot["np8-split"], tpot["np8-greedy-bs"]) - 4 / copy_bw
    scan = sampler_element_s(tpot["np8-greedy"], tpot["np8-greedy-bs"]) * VOCAB
    ops = f"{run3}/ops.txt (test-backend-ops perf, stage O)"
    kernels = {k: v for k, v in {**mm, **fa}.items() if k != "residuals"}
    from validate.engines.llamacpp_quant import perf_lines as named_perf_lines
    times4 = {k: v["us"] * 1e-6 for k, v in named_perf_lines((run4 / "ops.txt").read_text()).items()
              if v["supported"]}
    qlaws, qres = quant_laws(times4)
    kernel_s, small = small_kernel_s(times4)
    norm_s, norm_each = norm_kernel_s((run5, run5b))
    epilogue, epilogue_calls = one_row_epilogue(run5)
    save, save_rows = cache_save_law(RUN6)
    graph, graph_each = server_graph_s()
    mask_cell, mask_copy, mask_each = kq_mask_law()
    kernels.update({**qlaws, "kernel_time": kernel_s, "norm_kernel": norm_s, "one_row_epilogue": epilogue})
    ops4 = f"{run4}/ops.txt (test-backend-ops perf, stage O)"
    return {
        "version": "llama.cpp 0c1e57098bba43ac29e6e3b677cdceebdd22334f (llama-cpp-python 0.3.36), CUDA 13.0, sm_90a",
        "step_s": host, "per_seq_s": 0.0, "overlap": False, "capture_sizes": [1],
        "api_request_s": 0.0, "request_s": 0.0, "server_step_s": host, "server_per_seq_s": 0.0,
        "eager_step_s": 0.0, "eager_layer_s": 0.0, "eager_serial": True, "sampler_host_element_s": element,
        "token_s": token,
        "cache_save_s": save["latency_s"], "cache_save_byte_s": 1.0 / save["bytes_per_s"],
        "pass_tokens": server_ubatch(),
        "server_graph_s": graph,
        "fa_span": True,
        "mask_cell_s": mask_cell, "mask_copy_s": mask_copy,
        "activation_bytes": 4, "kernels": {GPU: kernels}, "op_kernels": OP_KERNELS,
        "sampler": {GPU: {"latency_s": copy_a, "elements_per_s": copy_bw / 4}},
        "attention_flops": {GPU: {str(HEAD_DIM): fa_rate}},
        "sources": {
            "step_s": f"{run5}: batched-bench's decode step untimed (batched-TYPE.log T_TG / TG) less its GPU-busy "
                      "time traced (trace-TYPE-bB.json, kernel_trace.py) less the logits' copy (`sampler`) and B x "
                      "token_s, median over "
                      + ", ".join(f"{k} {v * 1e6:.0f}" for k, v in host_each.items()) + " us: llama_decode's host "
                      "work between two GPU steps, the server's too (server_step_s); a lower bound (the traced "
                      "busy time holds the tracer's own)",
            "token_s": f"{run5}: llama-bench's 512-token prompt in steady state (bench-TYPE.json, the median of the "
                       "repetitions after the first, which instantiates a new CUDA graph) less its traced GPU-busy "
                       "time (trace-TYPE-pp.json), the logits' row copy and step_s, / 512: "
                       + ", ".join(f"{k} {v * 1e6:.2f}" for k, v in token_each.items()) + " us a token, the median: "
                       "the host's per-token work before the GPU starts (the CPU's token-embedding rows, the KQ mask "
                       "over the stream's cells, the inputs; the timeline: the ubatch's embeddings reach the GPU ~2.9 "
                       "ms after the step before ended), serial in every step and prompt",
            "overlap": "llama-server's loop is synchronous (tools/server/server.cpp update_slots: decode, then "
                       "sample every slot, then the next batch): host work adds to the GPU's",
            "capture_sizes": "(1,) with eager_layer_s 0: a decode step is one CUDA-graph launch at any batch (run 5's "
                             "timeline: one cudaGraphLaunch a step at B 1, 2 and 8; ggml-cuda.cu "
                             "ggml_cuda_graph_check_compability at 0c1e570), so nothing is added past one token",
            "gemv": f"{ops} MUL_MAT n 1, 5 shapes: t = gemv_latency + bytes / gemv_bw (least squares on the seconds)",
            "gemm_stream": f"{ops} MUL_MAT n 2..64, 5 shapes: t = gemm_latency + bytes / gemm_stream_bw",
            "gemm_flops": f"{ops} MUL_MAT n 512 (the 4 layer shapes; n_ubatch 512, the most rows a default call "
                          "has; lm_head runs for the outputs alone): t = FLOPs / rate, also the sustained rate "
                          "(test-backend-ops runs each case back to back); "
                          "n 2048 / 8192 in fit_residuals gemm_flops_past_ubatch",
            "attn_decode": f"{ops} FLASH_ATTN_EXT n 1, KV 512..8192: t = latency + K,V bytes / rate (least squares "
                           "on the seconds)",
            "eager_layer_s": f"0 (run 5: no host excess past one token, the GPU busy through the step). Retired: "
                             f"{run3}/batched-split.log step B 2 - B 1 ({steps[2]:.6f} - {steps[1]:.6f} s) less the "
                             f"matmuls' own n 2 - n 1, / 32 layers = {retired * 1e6:.1f} us a layer: the F16 step's "
                             "own GPU work past one token (run 5: mul_mat_f's q / k / v / o calls 4-7 us over their "
                             "isolated times, the unfused adds and GLU, the tile attention kernel)",
            "sampler": f"{run5}, {run5b.name}: the logits' device-to-host copy after every step that outputs (B rows x "
                       "vocabulary x 4 B), timed by CUPTI: latency + bytes / bandwidth by least squares over its "
                       + ", ".join(f"{b / 1e6:.2f} MB {t * 1e6:.1f} us" for b, t in copies.items())
                       + f" ({copy_bw / 1e9:.1f} GB/s): serial after the GPU's last kernel, before the host's next "
                       "step, in batched-bench and the server alike (not a sampler: llama.cpp's logits leave the GPU)",
            "sampler_host_element_s": f"{run3}/serve-k-np8-split.json - serve-k-np8-greedy-bs.json server decode s"
                                      f"/token ({tpot['np8-split']:.6f} - {tpot['np8-greedy-bs']:.6f} s) / 8 "
                                      f"slots / {VOCAB} logits: the default chain on the CPU a slot (greedy alone, "
                                      f"serve-k-np8-greedy.json: {scan * 1e3:.3f} ms a slot, the vocabulary's scan), "
                                      "less the logits' copy a logit (`sampler`: greedy on the GPU copies no logits)",
            "activation_bytes": "4: ggml's activations between ops are GGML_TYPE_F32 (llm_graph_context builds every "
                                "intermediate as F32; test-backend-ops' F32 src1 in every MUL_MAT row the laws are fit "
                                "on, llamacpp_mech.mm_cost); the KV cache keeps its own type",
            "ggml_quantized": f"{ops4} MUL_MAT, weights q8_0 / q4_0 / q4_K / q6_K at the 8B's shapes: per type one "
                              "column gemv_latency + W / gemv_bw (n 1), 2..8 columns that law + F (1 - 1 / n) x "
                              "mmvq_flop_s:<n> (seconds per FLOP fit at n 2, 4, 8 each, the shapes counted as the "
                              "8B's step runs them, floored at 0; 3 / 5 / 6 / 7 interpolated), past 8 mmq_latency + "
                              "W / mmq_bw + F / mmq_rate (n 16 .. 2048), "
                              "least squares on the seconds (W the op's bytes: blocks + F32 activations, F FLOPs); "
                              "residuals in fit_residuals",
            "norm_kernel": f"{run5} and {run5b} trace-*-b<B>.json (the kernel timelines' decode steps, F16 / Q8_0 / "
                           "Q4_K_M at B 1 .. 64): ggml's rms_norm kernel fused with the weight's mul, median us a call "
                           "of " + ", ".join(f"{k.split('/')[-1][6:-5]} {v * 1e6:.2f}" for k, v in norm_each.items()),
            "cache_save_s": f"{RUN6}/save-f16.log.gz, save-q8_0.log.gz: llama-server's saves of a finished "
                            "request's KV to its host prompt cache (--cache-ram, on by default), timed by its own log "
                            "(prompt_save to the cache's update), seconds = latency + bytes x cache_save_byte_s by "
                            f"least squares over {save['n']} saves of 18..1,026 MiB: {save['latency_s'] * 1e3:.2f} ms "
                            f"+ bytes / {save['bytes_per_s'] / 1e9:.3f} GB/s, residuals {save.get('residuals')}",
            "pass_tokens": f"{SERVER_LOG} 'llama_context: n_ubatch' (llama-server's default; batched-bench and "
                           "llama-bench run -ub 512 too): llama_decode splits its batch into ubatches of at most "
                           "n_ubatch tokens and computes one graph a ubatch (src/llama-context.cpp decode at 0c1e570), "
                           "so a prompt or step of T tokens reads the weights and launches every kernel "
                           "ceil(T / n_ubatch) times (runs 5 / 5b's timelines: four ubatches' kernels in a 2,048-token "
                           "call)",
            "server_graph_s": (
                f"{RUN10}/set-noreuse-1.json less {RUN9}/set-split-1.json, the clients' TPOT p50: four streams pinned "
                "to slots 4..7 of an -np 8 server (one ubatch a step) with LLAMA_GRAPH_REUSE_DISABLE=1 (every step "
                f"rebuilds its graph) and with reuse, {graph_each['noreuse_tpot_s'] * 1e3:.2f} - "
                f"{graph_each['reuse_tpot_s'] * 1e3:.2f} ms: the server's host work when a step cannot reuse the step "
                "before's graph (src/llama-context.cpp process_ubatch: build_graph, ggml_backend_sched_alloc_graph, "
                "the inputs; ggml-cuda's CUDA graph captured again), which a step with prompt tokens and a step split "
                "by slots pay (run 9's split server: n_reused stalls); llama-batched-bench's rebuild is 0.47 ms (run "
                "10, batched-reuse.log / batched-noreuse.log)"),
            "fa_span": (
                "ggml/src/ggml-cuda/fattn-common.cuh launch_fattn at 0c1e570: the mask is scanned for the highest "
                "unmasked cell of a query tile (flash_attn_mask_to_KV_max) only when Q has >= 1,024 rows or several "
                "streams (Q->ne[3] > 1); otherwise every block runs its query tile over all n_kv cells of the "
                "stream's view (llama_kv_cache::get_n_kv: pad256 of the highest used cell + 1), masked cells "
                "computed: a unified stream's ubatch (the server's -kvu, its default) attends over every slot's "
                "cells, at the kernel's own rate (attention_flops, measured over a random mask of every cell)"),
            "mask_cell_s": (
                f"{RUN16}/kq-mask-*.jsonl (kq_mask_bench.cpp: set_input_kq_mask's loop over the engine's own "
                "llama_kv_cells on the H200 machine's host, 3 repetitions): the median over 15 decode cases (1..32 "
                "sequences of 512..8,192 cells, one row each) of seconds / (rows x view): a sequence's first row "
                f"walks every cell of the view, {mask_cell * 1e9:.2f} ns a cell"),
            "mask_copy_s": (
                f"{RUN16}/kq-mask-*.jsonl: a 512-token prompt ubatch beside 0..36,864 other cells, seconds = a + "
                f"view x {mask_each['per_view_cell_s'] * 1e9:.1f} ns (least squares on the seconds, residuals "
                f"{mask_each['prompt_residuals']}), less one first row, over its {mask_each['prompt_rows'] - 1} "
                f"further rows (each copies the first's row of view cells): {mask_copy * 1e12:.1f} ps a cell"),
            "one_row_epilogue": f"{run5} trace-<type>-b1.json / -b2.json (the timelines' per-name calls a step): "
                                "ggml-cuda fuses the residual adds and the GLU into the mat-vecs at one column "
                                "(ggml_cuda_should_fuse_mul_mat): adds / GLUs / matmul calls a step "
                                + "; ".join(f"{k} {v['add']:.0f} / {v['glu']:.0f} / {v['matmul']:.0f}"
                                            for k, v in epilogue_calls.items()),
            "kernel_time": f"{ops4} the small ops at one token, median of "
                           + ", ".join(f"{k} {v * 1e6:.2f}" for k, v in small.items()) + " us",
            "op_kernels": "src/models/llama.cpp build_arch_graph and ggml-cuda.cu ggml_cuda_try_fuse at 0c1e570: the "
                          "residual ADDs precede the next RMS_NORM (no rms_norm+mul+add fusion takes them), RoPE of q "
                          "alone and of k with its SET_ROWS (ggml_cuda_should_fuse_rope_set_rows): rope 2, each "
                          "residual 1, over the fusion table's 'typical'; the projections as the GGUF stores them "
                          "(build_qkv: attn_q, attn_k, attn_v apart; build_ffn: ffn_gate and ffn_up apart): qkv_proj "
                          "3 calls, mlp_up 2 (at one token ggml-cuda fuses gate, up and the GLU into one MMVQ call, "
                          "ggml_cuda_should_fuse_mul_mat, whose time is not measured alone: counted as the two)",
            "attention_flops": f"{ops} FLASH_ATTN_EXT n 512, KV 512..8192, a random mask (every cell runs): "
                               "FLOP/s over 4 x heads x n x kv x d, least squares on the seconds; a causal prompt "
                               "pays only its causal cells: ggml-cuda stops each query tile's KV loop at its last "
                               "unmasked tile (fattn-common.cuh flash_attn_mask_to_KV_max)",
        },
        "fit_residuals": {**mm["residuals"], "attn_decode": fa["residuals"], "attention_flops": fa_rate_res,
                          "ggml_quantized": qres, "logits_copy": copy_res},
    }


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("run3", nargs="?", type=Path, default=RUN3)
    p.add_argument("--run4", type=Path, default=RUN4)
    p.add_argument("--run5", type=Path, default=RUN5)
    p.add_argument("--run5b", type=Path, default=RUN5B)
    p.add_argument("--out", type=Path, default=OUT)
    a = p.parse_args()
    a.out.write_text(json.dumps(derive(a.run3, a.run4, a.run5, a.run5b), indent=1) + "\n")
    print(f"wrote {a.out}")


if __name__ == "__main__":
    main()
