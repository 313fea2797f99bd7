"""llama.cpp run 2 on one H200: the mechanisms' own microbenchmarks (validate/notes/2026-11-30-llamacpp-h200-run1.md,
"Mechanisms" 1-3), their prediction, the parsers of what llamacpp_run2.sh captures and the compare.

  python -m validate.engines.llamacpp_mech testfile GGML_H OUT      the --test-file of test-backend-ops (the run's O)
  python -m validate.engines.llamacpp_mech predict OUT_JSON [--run 3]   roofline and the hypotheses, BEFORE the run
  python -m validate.engines.llamacpp_mech compare RESDIR --predicted PRED [--out JSON]

test-backend-ops (tests/test-backend-ops.cpp of the tree, payload .payload/l1) `perf --test-file F` times each line of
F as a test_generic_op (make_test_cases_from_file: "op type ne0..3 n_params params.. n_src (type ne0..3 nb0..3)..
name"; nb 0 = contiguous). Op and prec numbers are read from the run's own ggml.h (enum ggml_op), not assumed.
  MUL_MAT: weights F16 [k, m] (ggml's src0) times F32 activations [k, n] (src1) -> F32 [m, n]: the 8B's projections
           (k x m) 4096x4096 (q, o), 4096x1024 (k, v), 4096x14336 (gate, up), 14336x4096 (down), 4096x128256 (lm_head,
           only where a step computes it: n <= 64 and 512), at n = N_DECODE and N_PREFILL.
  FLASH_ATTN_EXT: q F32 [128, n, 32], k and v F16 [128, kv, 8], mask F16 [kv, n] -> F32 [128, 32, n]; scale 1/sqrt(128)
           as op_params[0]'s float bits (ggml_flash_attn_ext), at n 1 and 512, kv 512 .. 8192.
Its console line per case (print_perf_console): "  OP(VARS): <pad> N runs - T us/run - K kB/run - G GB/s" for an op
with no op_flops (a generic op has none), ANSI colours around G; "not supported [BACKEND]" where the backend refuses.
The parser follows those printf formats; the tests hold lines captured from a CPU build of the same tree
(test-backend-ops perf -b CPU on this file's first cases, 2026-11-30).
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import math
import re
import struct
import subprocess
import sys
from pathlib import Path

from validate.engines.llamacpp_logs import batched_rows, bench_entries, served_summary, server_memory

SHAPES = {"qo": (4096, 4096), "kv": (4096, 1024), "gate_up": (4096, 14336), "down": (14336, 4096),
          "lm_head": (4096, 128256)}  # (k, m): in x out; per layer q, o, k, v, gate, up, down; lm_head once
PER_LAYER = {"qo": 2, "kv": 2, "gate_up": 2, "down": 1}
LAYERS = 32
N_DECODE = (1, 2, 4, 8, 16, 32, 64)
N_PREFILL = (512, 2048, 8192)
FA_KV = (512, 1024, 2048, 4096, 8192)
FA_N = (1, 512)
HEADS, KV_HEADS, HEAD_DIM = 32, 8, 128
F32, F16 = 0, 1  # enum ggml_type: GGML_TYPE_F32 = 0, GGML_TYPE_F16 = 1 (ggml.h)
ANSI = re.compile(r"\x1b\[[0-9;]*m")
PERF = re.compile(r"^\s*(?P<op>[A-Z_0-9]+)\((?P<vars>.*)\):\s+(?P<runs>\d+) runs - +(?P<us>[0-9.]+) us/run - +"
                  r"(?P<kb>\d+) kB/run - +(?P<gbs>[0-9.]+) GB/s\s*$")
UNSUPPORTED = re.compile(r"^\s*(?P<op>[A-Z_0-9]+)\((?P<vars>.*)\):\s+not supported")
SRC = re.compile(r"(f16|f32)\[(\d+),(\d+),(\d+),(\d+)\]")


def ggml_op_number(header: str, name: str) -> int:
    """`name`'s value in ggml.h's enum ggml_op (GGML_OP_NONE = 0, then one apiece)."""
    body = re.search(r"enum ggml_op \{(.*?)\};", header, re.S)
    if not body:
        raise ValueError("ggml.h: no enum ggml_op")
    names = [re.match(r"\s*(\w+)", e).group(1) for e in re.sub(r"//[^\n]*", "", body.group(1)).split(",")
             if e.strip()]
    return names.index(name)


def line(op: int, ne: tuple, params: list[int], srcs: list[tuple[int, tuple]]) -> str:
    """One make_test_cases_from_file line; the output's type is F32 for both ops."""
    s = [op, F32, *ne, len(params), *params, len(srcs)]
    for t, sne in srcs:
        s += [t, *sne, 0, 0, 0, 0]
    return " ".join(map(str, s)) + " -"


def test_lines(header: str) -> list[str]:
    """The cases in the order they run (a timeout keeps the first): the projections at decode n, attention, the
    projections at prefill n, lm_head (n <= 64 and 512: a step computes it only for its outputs)."""
    mm, fa = ggml_op_number(header, "GGML_OP_MUL_MAT"), ggml_op_number(header, "GGML_OP_FLASH_ATTN_EXT")

    def mm_line(k: int, m: int, n: int) -> str:
        return line(mm, (m, n, 1, 1), [], [(F16, (k, m, 1, 1)), (F32, (k, n, 1, 1))])

    layer = [km for name, km in SHAPES.items() if name != "lm_head"]
    out = [mm_line(k, m, n) for k, m in layer for n in N_DECODE]
    scale = struct.unpack("<i", struct.pack("<f", 1 / math.sqrt(HEAD_DIM)))[0]
    for n in FA_N:
        for kv in FA_KV:
            out.append(line(fa, (HEAD_DIM, HEADS, n, 1), [scale, 0, 0],
                            [(F32, (HEAD_DIM, n, HEADS, 1)), (F16, (HEAD_DIM, kv, KV_HEADS, 1)),
                             (F16, (HEAD_DIM, kv, KV_HEADS, 1)), (F16, (kv, n, 1, 1))]))
    out += [mm_line(k, m, n) for k, m in layer for n in N_PREFILL]
    out += [mm_line(*SHAPES["lm_head"], n) for n in (*N_DECODE, 512)]
    return out


def case_key(op: str, srcs: list[tuple[int, ...]]) -> str | None:
    """The case a perf line times: mm-NAME-nN, fa-nN-kvKV (one KV stream) or fa-nN-kvKV-sS (S streams, q's ne3);
    None: not one of ours."""
    if op == "MUL_MAT" and len(srcs) == 2:
        (k, m), n = srcs[0][:2], srcs[1][1]
        name = next((s for s, km in SHAPES.items() if km == (k, m)), None)
        return f"mm-{name}-n{n}" if name else None
    if op == "FLASH_ATTN_EXT" and len(srcs) >= 3:
        streams = srcs[0][3] if len(srcs[0]) > 3 else 1
        return f"fa-n{srcs[0][1]}-kv{srcs[1][1]}" + (f"-s{streams}" if streams > 1 else "")
    return None


def _case_of(m: re.Match) -> str | None:
    """Run 2 / 3's case key of a matched perf line, from its sources' shapes (case_key)."""
    srcs = [tuple(int(x) for x in g[1:]) for g in SRC.findall(m["vars"].split("sources=", 1)[-1])]
    return case_key(m["op"], srcs)


def perf_lines(text: str, patterns: tuple[re.Pattern, re.Pattern] = (PERF, UNSUPPORTED),
               key=_case_of) -> dict[str, dict]:
    """test-backend-ops perf's console lines: per case (`key` of the matched line; None: not one of ours) its runs,
    us/run, kB/run and GiB/s as printed; or {"supported": False} where the backend refuses (`patterns`: the timed
    line's and the refusal's)."""
    out = {}
    for raw in text.splitlines():
        s = ANSI.sub("", raw)
        m = patterns[0].match(s) or patterns[1].match(s)
        if not m or (k := key(m)) is None:
            continue
        if "runs" not in m.groupdict():
            out[k] = {"supported": False}
        else:
            out[k] = {"supported": True, "runs": int(m["runs"]), "us": float(m["us"]), "kb": int(m["kb"]),
                      "gib_s": float(m["gbs"])}
    return out


def mm_cost(k: int, m: int, n: int) -> tuple[float, float]:
    """Bytes (F16 weights, F32 activations in and out) and FLOPs of one [k, m] x [k, n] matmul."""
    return 2 * k * m + 4 * k * n + 4 * m * n, 2.0 * k * m * n


def fa_cost(n: int, kv: int) -> tuple[float, float]:
    """Bytes (F32 q and out, F16 k, v, mask) and FLOPs (QK^T and PV, every cell: the mask is random, not causal)."""
    return (4 * HEAD_DIM * n * HEADS * 2 + 2 * 2 * HEAD_DIM * kv * KV_HEADS + 2 * kv * n,
            4.0 * HEADS * n * kv * HEAD_DIM)


def roofline_ops(hw) -> dict[str, float]:
    """Per case, seconds on the H200's measured ceilings (catalogue): a matmul max(bytes / gemm_stream_bytes_per_s,
    FLOPs / gemm_shape_flops_per_s[bf16]) + gemm_latency_s; attention at n 1 max(bytes /
    decode_attention_bytes_per_s) + decode_attention_latency_s, at n 512 FLOPs / attention_flops_per_s[128]."""
    ms = hw.measured
    out = {}
    for name, (k, m) in SHAPES.items():
        for n in N_DECODE + N_PREFILL:
            b, f = mm_cost(k, m, n)
            out[f"mm-{name}-n{n}"] = max(b / ms.gemm_stream_bytes_per_s,
                                         f / ms.gemm_shape_flops_per_s["bf16"]) + ms.gemm_latency_s
    for n in FA_N:
        for kv in FA_KV:
            b, f = fa_cost(n, kv)
            out[f"fa-n{n}-kv{kv}"] = (b / ms.decode_attention_bytes_per_s + ms.decode_attention_latency_s
                                      if n == 1 else max(f / ms.attention_flops_per_s[128],
                                                         b / ms.read_bytes_per_s))
    return out


def layer_matmuls_s(times: dict[str, float], n: int) -> float | None:
    """One decode/prefill step's projections at n columns: 32 layers of the per-layer matmuls (no lm_head)."""
    keys = [(f"mm-{s}-n{n}", c) for s, c in PER_LAYER.items()]
    if any(times.get(k) is None for k, _ in keys):
        return None
    return LAYERS * sum(times[k] * c for k, c in keys)


# The stated hypotheses (run 1's note, "Mechanisms"), as numbers fixed before run 2. Run 1's measurements they start
# from: batched-bench's step 4.9 ms at B 1, 7.2 ms at B 2, 7.8 ms at B 8, 9.3 ms at B 64; llama-bench pp ~27k tok/s;
# served TPOT p50 14.3 ms at -np 8 (Poisson 4 req/s). Each is judged by its own microbenchmark below.
HYPOTHESES = {
    "H1_mm_small_n_ratio": {
        "claim": "the 32 layers' projections at n 2 take >= 1.3x those at n 1 (the mat-vec kernel only at n 1; run 1's "
                 "step ratio B2/B1 = 7.2/4.9 = 1.47); at n 8 within 10 % of n 2 (run 1: 7.8/7.2 = 1.08); roofline: "
                 "all n <= 64 within 2 % of n 1 (weight-read bound)",
        "n2_over_n1": 1.47, "n8_over_n2": 1.08},
    "H2_mm_prefill_tflops": {
        "claim": "the projections at n 2048 run at 400-500 TFLOP/s, not the 730 of the catalogue's GEMM ceiling "
                 "(run 1's ~27k tok/s x 2 x 8.03e9 = ~430 TFLOP/s whole model)", "tflops": 450.0},
    "H2_fa_prefill": {
        "claim": "run 1's llama-bench ran -fa auto (flash_attn -1 in its JSON), which CUDA resolves to on: -fa on "
                 "repeats run 1's pp rates within 5 % (22.1k / 24.9k / 22.5k tok/s at 512 / 2k / 8k); -fa off "
                 "writes and reads the [kv, 512, 32] F32 scores per ubatch and layer: off/on ~1.02 at pp 512, ~1.15 "
                 "at 2k, ~1.5 at 8k (8k: 16 ubatches x 32 layers x ~2 GB of scores traffic at ~4.5 TB/s = ~0.23 s)",
        "off_over_on_pp512": 1.02, "off_over_on_pp2048": 1.15, "off_over_on_pp8192": 1.5,
        "on_tok_per_s": {"512": 22130.0, "2048": 24890.0, "8192": 22460.0}},
    "H3_sampler_per_slot": {
        "claim": "closed loop of N clients at -np N: TPOT = batched-bench's step at B N (run 1: 4.9 / 7.2 / 7.7 ms) + "
                 "the others' prompts (N - 1 prefills of 512, ~23 ms each, per 127 intervals) + N x s, s the host's "
                 "per-slot sampler cost. Two readings of run 1 disagree on s, and run 2 decides: (a) the note's s = "
                 "0.8 ms (r4 at -np 8: 14.3 ms) gives default 5.7 / 10.9 / 15.4 ms; (b) run 1's c4 (4 clients: 8.7 "
                 "ms) gives s = 0.25 ms: default 5.15 / 8.7 / 11.0 ms. Greedy (top_k 1 then dist, still one pass "
                 "over 128,256 logits) ~0.1 ms a slot: 5.0 / 8.1 / 9.8 ms. (a) predicts default - greedy >= 5 ms at "
                 "-np 8, (b) ~1.2 ms; run 1's r4 gap beyond (b) would then be the Poisson arrivals' mixed steps, "
                 "not the sampler",
        "tpot_default_s": {"1": 0.0057, "4": 0.0109, "8": 0.0154},
        "tpot_default_b_s": {"1": 0.00515, "4": 0.0087, "8": 0.0110},
        "tpot_greedy_s": {"1": 0.0050, "4": 0.0081, "8": 0.0098}},
}


# Run 3's hypothesis (llamacpp_run3.sh stage K), fixed before it: run 2's served step (the server's own decode time a
# token, 5.3 / 9.0 / 15.0 ms at -np 1 / 4 / 8; 14.3 greedy at 8) against batched-bench's (run 1, pp 128 and 1024:
# 4.9-5.0 / 7.1-7.3 / 7.5-7.8 ms at B 1 / 4 / 8). Two readings, each as numbers. "A": the server's -np N keeps one KV
# stream per slot (kv_unified 'false' in run 2's log) while batched-bench's default is unified, and per-stream attention
# costs ~1.3 ms a slot a step: --kv-unified brings -np 8 to ~9 ms. "source": the tree refutes A's premise: common.h's
# kv_unified defaults to false for every tool and batched-bench sets n_seq_max = max(-npl) (batched-bench.cpp:39), so
# run 1's 7.8 ms was already 8 streams: -kvu moves neither tool by more than the attention over the other sequences'
# masked cells (~0.2 ms at B 8). Instead the host's sampler: run 2's round 1 at -np 8 (8 slots in lockstep, no prompt
# inside the window) logged 13.7 ms a token, ~6 ms (~0.75 ms a slot) over batched-bench, which samples nothing. Both
# chains pay common_sampler's set_logits over 128,256 candidates and top_k's partial sort over them (top_k 40 in the
# default chain, 1 in greedy), so run 2's greedy-vs-default (0.1 ms a slot) could not see it. --backend-sampling
# (-bs) runs a chain's leading samplers with a backend_apply in the graph (llama-sampler.cpp: top_k and dist have
# one, dry has none, so only greedy's whole chain moves): -np 8 greedy falls from ~14.3 to ~10 ms (bench 7.6 + the
# others' prefills ~1.1 + ~0.15 ms a slot of result handling).
HYPOTHESES_RUN3 = {
    "K_served_step": {
        "claim": "the server's decode s/token at -np 8: with --kv-unified A ~0.009, source ~0.0155 (no fall); greedy "
                 "with --backend-sampling source ~0.010, A 0.0143 (as greedy without it); batched-bench -kvu within "
                 "5 % of its default at every B (both); batched-bench's default logs 8 KV streams at -npl max 8 "
                 "(source) or 1 (A)",
        "server_decode_s_per_token": {
            "A": {"np8-split": 0.0150, "np8-unified": 0.0090, "np4-split": 0.0090, "np8-greedy": 0.0143,
                  "np8-greedy-bs": 0.0143},
            "source": {"np8-split": 0.0150, "np8-unified": 0.0155, "np4-split": 0.0090, "np8-greedy": 0.0143,
                       "np8-greedy-bs": 0.0100}},
        "server_kv_unified": {"np8-split": 0, "np8-unified": 1, "np4-split": 0, "np8-greedy": 0, "np8-greedy-bs": 0},
        "batched_step_s": {
            "A": {"split": {"1": 0.0050, "2": 0.0072, "4": 0.0072, "8": 0.0076},
                  "unified": {"1": 0.0050, "2": 0.0072, "4": 0.0072, "8": 0.0076}},
            "source": {"split": {"1": 0.0050, "2": 0.0072, "4": 0.0072, "8": 0.0076},
                       "unified": {"1": 0.0050, "2": 0.0072, "4": 0.0073, "8": 0.0078}}},
        "batched_streams": {"A": {"split": 1, "unified": 1}, "source": {"split": 8, "unified": 1}}},
}


def predict(hardware: str, run: int = 2) -> dict:
    from roofline.catalogue.store import load_hardware  # the planner's catalogue; only the predict step needs it
    hw = load_hardware(hardware)
    ops = roofline_ops(hw)
    steps = {str(n): layer_matmuls_s(ops, n) for n in N_DECODE + N_PREFILL}
    sha = subprocess.run(["git", "rev-parse", "HEAD"], capture_output=True, text=True).stdout.strip()
    hyp = {2: HYPOTHESES, 3: {**{k: v for k, v in HYPOTHESES.items() if k.startswith("H1")}, **HYPOTHESES_RUN3}}[run]
    return {"about": f"llama.cpp run {run} (llamacpp_run{run}.sh, validate/engines/llamacpp_cases_run{run}.json), "
                     "written before the run: per-op roofline on the catalogue's measured H200 ceilings, and the "
                     "hypotheses as numbers", "run": run, "hardware": hardware, "git_sha": sha,
            "date": dt.date.today().isoformat(), "ops_s": ops, "layer_matmuls_s": steps, "hypotheses": hyp}


def bench_by(res: Path, name: str) -> dict[int, float]:
    p = res / name
    if not p.is_file():
        return {}
    return {e["n_prompt"]: e["avg_s"] for e in bench_entries(p.read_text()) if e["n_gen"] == 0}


def compare(res: Path, pred: dict) -> list[dict]:
    """Rows: (family, case, measured, predicted, ratio measured/predicted): the ops and layer sums (runs 2 and 3),
    then run 2's H2 / H3 rows or, where the prediction holds run 3's K hypothesis, run 3's K rows."""
    rows = []

    def add(fam: str, case: str, meas, pr) -> None:
        rows.append({"family": fam, "case": case, "measured": meas, "predicted": pr,
                     "ratio": meas / pr if meas is not None and pr else None})

    ops_txt = res / "ops.txt"
    meas = perf_lines(ops_txt.read_text()) if ops_txt.is_file() else {}
    times = {k: v["us"] / 1e6 for k, v in meas.items() if v.get("supported")}
    for key, p in pred["ops_s"].items():
        if key in meas and not meas[key]["supported"]:
            add("op-unsupported", key, None, p)
        else:
            add("mm" if key.startswith("mm") else "fa", key, times.get(key), p)
    for n, p in pred["layer_matmuls_s"].items():
        add("layer-mm", f"n{n}", layer_matmuls_s(times, int(n)), p)
    h = pred["hypotheses"]
    one, two, eight = (layer_matmuls_s(times, n) for n in (1, 2, 8))
    add("H1", "n2/n1", two / one if one and two else None, h["H1_mm_small_n_ratio"]["n2_over_n1"])
    add("H1", "n8/n2", eight / two if two and eight else None, h["H1_mm_small_n_ratio"]["n8_over_n2"])
    if "K_served_step" in h:
        compare_k(res, h["K_served_step"], add)
    else:
        compare_run2(res, h, times, add)
    return rows


def compare_run2(res: Path, h: dict, times: dict[str, float], add) -> None:
    """Run 2's rows: the prefill matmuls' TFLOP/s, llama-bench -fa off / on, the served TPOT per sampler."""
    t2k = layer_matmuls_s(times, 2048)
    flops2k = LAYERS * sum(c * mm_cost(*SHAPES[s], 2048)[1] for s, c in PER_LAYER.items())
    add("H2", "mm TFLOP/s n2048", flops2k / t2k / 1e12 if t2k else None, h["H2_mm_prefill_tflops"]["tflops"])
    on, off = bench_by(res, "bench-fa-on.json"), bench_by(res, "bench-fa-off.json")
    for pp in sorted(set(on) & set(off)):
        add("H2", f"fa off/on pp{pp}", off[pp] / on[pp], h["H2_fa_prefill"].get(f"off_over_on_pp{pp}"))
        add("H2", f"tok/s fa on pp{pp}", pp / on[pp], h["H2_fa_prefill"]["on_tok_per_s"].get(str(pp)))
    h3 = h["H3_sampler_per_slot"]
    for sampler, reading in (("default", "default"), ("default", "default_b"), ("greedy", "greedy")):
        for n, p in h3[f"tpot_{reading}_s"].items():
            f = res / f"serve-np{n}-{sampler}.json"
            s = served_summary(json.loads(f.read_text())) if f.is_file() else {}
            add("H3", f"tpot np{n} {reading}", s.get("tpot_s", {}).get("p50"), p)
            if reading != "default_b":
                add("H3-server", f"decode s/token np{n} {sampler}", s.get("server_decode_s_per_token"), p)


def batched_steps(text: str) -> dict[int, float]:
    """llama-batched-bench's mean decode step per B (T_TG / TG of its table's rows)."""
    return {r["pl"]: r["t_tg_s"] / r["tg"] for r in batched_rows(text)}


def compare_k(res: Path, k: dict, add) -> None:
    """Run 3's rows, per reading of K_served_step: the server's own decode s/token per serve run
    (serve-k-NAME.json), batched-bench's step per B (batched-NAME.log), and the KV layout each start-up logged
    (the server's kv_unified as 1 / 0, batched-bench's KV streams)."""
    for name in k["server_decode_s_per_token"]["source"]:
        f = res / f"serve-k-{name}.json"
        s = served_summary(json.loads(f.read_text())) if f.is_file() else {}
        log = res / f"serve-k-{name}.log"
        slots = server_memory(log.read_text()).get("slots") if log.is_file() else None
        add("K-layout", f"server {name} kv_unified", None if slots is None else int(slots["kv_unified"]),
            k["server_kv_unified"][name])
        for reading, pr in k["server_decode_s_per_token"].items():
            add("K-server", f"{name} {reading}", s.get("server_decode_s_per_token"), pr[name])
    for name in k["batched_step_s"]["source"]:
        log = res / f"batched-{name}.log"
        text = log.read_text() if log.is_file() else ""
        kv = server_memory(text).get("kv")
        for reading, streams in k["batched_streams"].items():
            add("K-layout", f"batched {name} streams {reading}", kv["streams"] if kv else None, streams[name])
        steps = batched_steps(text)
        for reading, pr in k["batched_step_s"].items():
            for b, p in pr[name].items():
                add("K-bench", f"{name} B{b} {reading}", steps.get(int(b)), p)


def fmt(v) -> str:
    return "-" if v is None else (f"{v:.4g}" if isinstance(v, float) else str(v))


def parser() -> tuple[argparse.ArgumentParser, argparse.ArgumentParser, argparse.ArgumentParser]:
    """The kits' three subcommands (testfile GGML_H OUT, predict OUT [--hardware], compare RESULTS --predicted
    [--out]): (the parser, testfile's and predict's subparsers, for a kit's own flags)."""
    p = argparse.ArgumentParser()
    sub = p.add_subparsers(dest="cmd", required=True)
    t = sub.add_parser("testfile")
    t.add_argument("ggml_h", type=Path)
    t.add_argument("out", type=Path)
    pr = sub.add_parser("predict")
    pr.add_argument("out", type=Path)
    pr.add_argument("--hardware", default="H200")
    c = sub.add_parser("compare")
    c.add_argument("results", type=Path)
    c.add_argument("--predicted", type=Path, required=True)
    c.add_argument("--out", type=Path)
    return p, t, pr


def dispatch(a: argparse.Namespace, kit: str, lines, predicted, compared, show) -> None:
    """Run `parser()`'s subcommand: the test file of `lines(ggml.h text)`, the prediction `predicted()` as JSON, or
    `compared(results, prediction)`'s rows shown by `show(rows)` (and written to --out); a results folder that is
    not one gets `kit`'s one-line error, exit 2."""
    if a.cmd == "testfile":
        a.out.write_text("\n".join(lines(a.ggml_h.read_text())) + "\n")
        print(f"wrote {a.out}")
    elif a.cmd == "predict":
        a.out.parent.mkdir(parents=True, exist_ok=True)
        a.out.write_text(json.dumps(predicted(), indent=1) + "\n")
        print(f"wrote {a.out}")
    else:
        if not a.results.is_dir():
            print(f"{kit}: {a.results} must be a results folder its driver wrote", file=sys.stderr)
            raise SystemExit(2)
        rows = compared(a.results, json.loads(a.predicted.read_text()))
        show(rows)
        if a.out:
            a.out.write_text(json.dumps(rows, indent=1) + "\n")


def show_rows(rows: list[dict], family: int = 14, case: int = 30) -> None:
    """A compare's rows as a table: family and case in columns of the given widths, then the three figures."""
    print(f"{'family':{family}} {'case':{case}} {'measured':>12} {'predicted':>12} {'meas/pred':>9}")
    for r in rows:
        print(f"{r['family']:{family}} {r['case']:{case}} {fmt(r['measured']):>12} {fmt(r['predicted']):>12} "
              f"{fmt(r['ratio']):>9}")


def main() -> None:
    p, _t, pr = parser()
    pr.add_argument("--run", type=int, choices=(2, 3), default=2)
    a = p.parse_args()
    dispatch(a, "llamacpp_mech (llamacpp_run2.sh, _run3.sh)", test_lines, lambda: predict(a.hardware, a.run), compare,
             show_rows)


if __name__ == "__main__":
    main()
