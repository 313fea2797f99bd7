"""llama.cpp run 17 on one H200 (llamacpp_run17.sh): session 34's three llama.cpp shortfalls, each by its own
microbenchmark (validate/notes/2026-12-01-llamacpp-run17.md).

    python -m validate.engines.llamacpp_ops17 testfile GGML_H OUT        test-backend-ops' --test-file (stage O)
    python -m validate.engines.llamacpp_ops17 predict OUT_JSON           the model's figures and the hypotheses, BEFORE
    python -m validate.engines.llamacpp_ops17 compare RESDIR --predicted PRED [--out JSON]

1. ggml-cuda's F16 matmul leaves its MMA kernel for cuBLAS past 16 columns (ggml/src/ggml-cuda/mmf.cu at 0c1e570,
   ggml_cuda_should_use_mmf: `src1_ncols > 16` -> false; ggml_cuda_mul_mat then calls ggml_cuda_mul_mat_cublas).
   Run 15's split llama-batched-bench read 8.95 / 11.08 / 9.27 ms a decode step at B 16 / 17 / 32; the profile's one
   stream law (run 3: gemm_latency + bytes / gemm_stream_bw over n 2..64) has no such step. MUL_MAT of the 8B's
   layer shapes at n 16, 17, 20, 24, 32, 48, 64, 128, 256 (and lm_head at 16, 17, 24, 32).
2. One stream's prompt attention at views past run 3's 8,192 cells: FLASH_ATTN_EXT with 512 query rows (a ubatch)
   over 512 .. 40,960 cells, and 128 / 256 rows (run 9's lone 128-token prompt read -19 %) over 512 .. 8,192. The
   profile's attention_flops (run 3, through the origin) against a latency + rate law fitted on run 3's rows
   (run 14's note: 7.39 us + FLOPs / 260.1 TFLOP/s).
3. One stream's decode rows (timing 22.): n query rows of one sequence over a view read once per 64 / ncols2 = 16
   rows (fattn-mma's block for 4 query heads a K/V head), against the split layout's S streams of one row.
4. Run 15's stall: llama-batched-bench -kvu at B 32 (33,792 cells) never finished within 150 s, twice, after B 8 / 16
   / 17 in the same process (the split layout: 1.5 s). Probes alone in fresh processes (stage H: B 32, B 32 at 512
   prompt tokens, B 24, B 32 with -fa off), each watched (GPU utilisation, the process's CPU ticks) and, past its
   timeout, its threads' states read.
Line format and parsing as llamacpp_mech (make_test_cases_from_file; op numbers from the run's own ggml.h).
"""

from __future__ import annotations

import datetime as dt
import json
import math
import struct
from pathlib import Path

from validate.engines.llamacpp_mech import (
    F16,
    F32,
    HEAD_DIM,
    HEADS,
    KV_HEADS,
    LAYERS,
    PER_LAYER,
    SHAPES,
    dispatch,
    ggml_op_number,
    line,
    mm_cost,
    parser,
    perf_lines,
    show_rows,
)

HERE = Path(__file__).resolve().parent
PROFILE = HERE.parents[1] / "roofline/engines/profiles/llamacpp.json"
MM_N = (16, 17, 20, 24, 32, 48, 64, 128, 256)
LM_N = (16, 17, 24, 32)
FA_PREFILL = {512: (512, 1024, 2048, 4096, 8192, 12288, 16384, 24576, 32768, 40960), 256: (512, 2048, 8192),
              128: (512, 2048, 8192)}
# one stream's decode rows (n rows of one sequence over a view): run 15's -kvu B 8 / 16 / 17 / 32 views (pad256 of
# B x 1,056 cells) and both 16 / 17 at the largest
FA_DECODE = ((1, 16896), (8, 8448), (16, 16896), (17, 18176), (32, 33792), (16, 33792), (17, 33792))
FA_SPLIT = ((16, 1280), (17, 1280), (32, 1280))  # S streams of one row each over its own 1,056 cells (pad256)
TILE = 16  # fattn-mma's query rows a block for Llama-3.1-8B (64 / ncols2, ncols2 = 4 query heads a K/V head)
ORIGIN_MIN_FA = 16384  # H2: views from here on are past run 3's
INTERCEPT = (7.39e-6, 260.1e12)  # run 14's note: a latency + rate law on run 3's five n-512 rows (least squares)
HOLD = 0.05


def _scale() -> int:
    return struct.unpack("<i", struct.pack("<f", 1 / math.sqrt(HEAD_DIM)))[0]


def fa_line(fa: int, n: int, kv: int, streams: int = 1) -> str:
    """FLASH_ATTN_EXT: q F32 [128, n, 32, S], k and v F16 [128, kv, 8, S], mask F16 [kv, n, 1, S] -> [128, 32, n, S]."""
    return line(fa, (HEAD_DIM, HEADS, n, streams), [_scale(), 0, 0],
                [(F32, (HEAD_DIM, n, HEADS, streams)), (F16, (HEAD_DIM, kv, KV_HEADS, streams)),
                 (F16, (HEAD_DIM, kv, KV_HEADS, streams)), (F16, (kv, n, 1, streams))])


def test_lines(header: str) -> list[str]:
    """The cases in the order they run (a timeout keeps the first): the split layout's decode streams (run 17a's
    matmuls did not carry run 15's B 17 step), mechanism 1's matmuls, 2's prompt attention, 3's decode rows, then
    the larger matmuls."""
    mm, fa = ggml_op_number(header, "GGML_OP_MUL_MAT"), ggml_op_number(header, "GGML_OP_FLASH_ATTN_EXT")

    def mm_line(k: int, m: int, n: int) -> str:
        return line(mm, (m, n, 1, 1), [], [(F16, (k, m, 1, 1)), (F32, (k, n, 1, 1))])

    layer = [km for name, km in SHAPES.items() if name != "lm_head"]
    out = [fa_line(fa, 1, kv, s) for s, kv in FA_SPLIT]
    out += [mm_line(k, m, n) for k, m in layer for n in MM_N if n <= 64]
    out += [mm_line(*SHAPES["lm_head"], n) for n in LM_N]
    out += [fa_line(fa, n, kv) for n, kvs in FA_PREFILL.items() for kv in kvs]
    out += [fa_line(fa, n, kv) for n, kv in FA_DECODE]
    out += [mm_line(k, m, n) for k, m in layer for n in MM_N if n > 64]
    return out


def fa_flops(n: int, kv: int, streams: int = 1) -> float:
    return 4.0 * HEADS * n * kv * HEAD_DIM * streams


def kv_bytes(kv: int, streams: int = 1) -> float:
    return 2.0 * 2 * HEAD_DIM * kv * KV_HEADS * streams


def model_times() -> dict[str, float]:
    """Per case, seconds on the llama.cpp profile's H200 laws (roofline/engines/profiles/llamacpp.json), as the
    device model applies them: an F16 matmul at n >= 2 columns k gemm_latency + max(bytes / gemm_stream_bw,
    FLOPs / gemm_shape:fp16) with k = 1 call; prompt attention kernel_time + FLOPs / attention_flops[128];
    decode rows attn_decode_latency + max(reads x KV bytes / attn_decode_bw, FLOPs / attention_flops[128]), the
    view read once per TILE rows of one stream (timing 22.) or once per stream of one row."""
    k = json.loads(PROFILE.read_text())["kernels"]["H200"]
    rate = json.loads(PROFILE.read_text())["attention_flops"]["H200"]["128"]
    out = {}
    for name, (kk, m) in SHAPES.items():
        for n in (LM_N if name == "lm_head" else MM_N):
            b, f = mm_cost(kk, m, n)
            out[f"mm-{name}-n{n}"] = k["gemm_latency"] + max(b / k["gemm_stream_bw"], f / k["gemm_shape:fp16"])
    for n, kvs in FA_PREFILL.items():
        for kv in kvs:
            out[f"fa-n{n}-kv{kv}"] = k["kernel_time"] + fa_flops(n, kv) / rate
    for n, kv in FA_DECODE:
        reads = -(-n // TILE)
        out[f"fa-n{n}-kv{kv}"] = k["attn_decode_latency"] + max(reads * kv_bytes(kv) / k["attn_decode_bw"],
                                                                 fa_flops(n, kv) / rate)
    for s, kv in FA_SPLIT:
        out[f"fa-n1-kv{kv}-s{s}"] = k["attn_decode_latency"] + max(kv_bytes(kv, s) / k["attn_decode_bw"],
                                                                   fa_flops(1, kv, s) / rate)
    return out


def layer_s(times: dict[str, float], n: int) -> float | None:
    """One layer's seven projections at n columns (q, k, v, o, gate, up, down)."""
    keys = [(f"mm-{s}-n{n}", c) for s, c in PER_LAYER.items()]
    return None if any(times.get(key) is None for key, _ in keys) else sum(times[key] * c for key, c in keys)


# Fixed before the run. Run 15 (split llama-batched-bench, F16 8B): decode steps 8.95 / 11.08 / 9.27 ms at B 16 / 17 /
# 32, so B 17 costs 2.13 ms more than B 16 and 1.81 ms more than B 32: 66 / 57 us a layer over 32 layers.
HYPOTHESES = {
    "H1_cublas_17": {
        "claim": "the F16 matmuls leave mmf for cuBLAS at 17 columns and cuBLAS is slow there: one layer's seven "
                 "projections at n 17 take >= 30 us more than at n 16 and >= 30 us more than at n 32 (run 15's step "
                 "differences: 66 and 57 us a layer, if all of it is the matmuls); the profile's law: +0.3 / -2.0 us",
        "min_excess_s": 30e-6, "run15_excess_s": {"over_n16": 2.13e-3 / LAYERS, "over_n32": 1.81e-3 / LAYERS}},
    "H2_fa_prompt_views": {
        "claim": "512 query rows over 16,384 .. 40,960 cells run faster than the profile's origin law (run 3's "
                 "249.9 TFLOP/s): the law over by >= 5 % there; the latency + rate law (7.39 us + FLOPs / 260.1 "
                 "TFLOP/s, fitted on run 3's views <= 8,192) within 5 % at every view of n 512",
        "origin_over_min": HOLD, "intercept_within": HOLD},
    "H3_decode_tiles": {
        "claim": "one stream's decode rows read the view once per 16 rows (timing 22.): at 33,792 cells n 17 takes "
                 ">= 1.6x n 16 and n 32 within 15 % of n 17; the split layout's 17 streams within 15 % of 17 / 16 "
                 "x its 16 streams",
        "n17_over_n16_min": 1.6, "n32_over_n17_within": 0.15, "split_17_over_16": 17 / 16},
    "H4_kvu_b32_alone": {
        "claim": "no claim on the cause (a diagnosis); the model's figures for each probe that ends (hang_s): a B 32 "
                 "-kvu benchmark takes ~3 s, so a probe that runs to its timeout reproduces run 15's stall "
                 "(kvu32-faoff's figure is -fa on's: roofline has no -fa off)"},
}
HANG = {"kvu32": (1024, 32), "kvu32-pp512": (512, 32), "kvu24": (1024, 24), "kvu32-faoff": (1024, 32)}


def _intercept(n: int, kv: int) -> float:
    return INTERCEPT[0] + fa_flops(n, kv) / INTERCEPT[1]


def predicted() -> dict:
    from validate.engines.cases import checkout_sha
    times = model_times()
    return {"about": "llama.cpp run 17 (llamacpp_ops17.py): the model's per-op seconds on the profile's laws, and "
                     "the hypotheses, fixed before the run", "date": dt.date.today().isoformat(),
            "git_sha": checkout_sha(), "hardware": "H200", "hypotheses": HYPOTHESES, "model_s": times,
            "intercept_s": {f"fa-n512-kv{kv}": _intercept(512, kv) for kv in FA_PREFILL[512]},
            "layer_s": {str(n): layer_s(times, n) for n in MM_N}, "hang_s": hang_predicted()}


def hang_predicted() -> dict[str, dict]:
    """Stage H's probes on the model (llamacpp_host._batched: the planner's batched-bench laws plus timing 22's
    one-stream difference): per probe, T_PP and the decode step (s)."""
    from validate.engines.llamacpp_host import _batched
    rows = {(r["pp"], r["pl"]): r["kvu"] for r in
            _batched({"c": 65536, "npp": [512, 1024], "ntg": 32, "npl": [24, 32]})}
    return {name: rows[key] for name, key in HANG.items()}


def _ratio(a, b):
    return None if a is None or b is None else a / b


def compared(res: Path, pred: dict) -> list[dict]:
    """Per case measured / predicted, then the hypotheses' verdicts as rows (family 'H')."""
    meas = {k: v["us"] * 1e-6 for k, v in perf_lines((res / "ops.txt").read_text()).items()
            if v.get("supported")}
    rows = [{"family": "op", "case": k, "measured": meas.get(k), "predicted": p, "ratio": _ratio(meas.get(k), p)}
            for k, p in pred["model_s"].items()]
    rows += [{"family": "op-intercept", "case": k, "measured": meas.get(k), "predicted": p,
              "ratio": _ratio(meas.get(k), p)} for k, p in pred["intercept_s"].items()]
    lay = {n: layer_s(meas, n) for n in MM_N}
    for n in MM_N:
        rows.append({"family": "layer", "case": f"n{n}", "measured": lay[n], "predicted": pred["layer_s"][str(n)],
                     "ratio": _ratio(lay[n], pred["layer_s"][str(n)])})

    def verdict(name, value, held):
        rows.append({"family": "H", "case": name, "measured": value, "predicted": None,
                     "ratio": None if held is None else ("held" if held else "refuted")})

    h1 = HYPOTHESES["H1_cublas_17"]["min_excess_s"]
    e16 = None if None in (lay[17], lay[16]) else lay[17] - lay[16]
    e32 = None if None in (lay[17], lay[32]) else lay[17] - lay[32]
    verdict("H1 layer n17 - n16 (s)", e16, None if e16 is None else e16 >= h1)
    verdict("H1 layer n17 - n32 (s)", e32, None if e32 is None else e32 >= h1)
    over = [pred["model_s"][f"fa-n512-kv{kv}"] / meas[f"fa-n512-kv{kv}"] - 1 for kv in FA_PREFILL[512]
            if kv >= ORIGIN_MIN_FA and f"fa-n512-kv{kv}" in meas]
    verdict("H2 origin law over at >= 16,384 (min)", min(over) if over else None,
            None if not over else min(over) >= HOLD)
    icp = [abs(_intercept(512, kv) / meas[f"fa-n512-kv{kv}"] - 1) for kv in FA_PREFILL[512]
           if f"fa-n512-kv{kv}" in meas]
    verdict("H2 intercept law |err| (max)", max(icp) if icp else None, None if not icp else max(icp) <= HOLD)
    r = _ratio(meas.get("fa-n17-kv33792"), meas.get("fa-n16-kv33792"))
    verdict("H3 n17 / n16 at 33,792", r, None if r is None else r >= HYPOTHESES["H3_decode_tiles"]["n17_over_n16_min"])
    r = _ratio(meas.get("fa-n32-kv33792"), meas.get("fa-n17-kv33792"))
    verdict("H3 n32 / n17 at 33,792", r, None if r is None else abs(r - 1) <= 0.15)
    r = _ratio(meas.get("fa-n1-kv1280-s17"), meas.get("fa-n1-kv1280-s16"))
    verdict("H3 split 17 / 16 streams", r, None if r is None else abs(r / (17 / 16) - 1) <= 0.15)
    from validate.engines.llamacpp_host import _batched_rows
    for name, (pp, pl) in HANG.items():
        got = _batched_rows(res / f"hang-{name}.log").get((pp, pl)) if (res / f"hang-{name}.log").is_file() else None
        p = pred["hang_s"][name]
        rows.append({"family": "hang T_PP", "case": name, "measured": got and got["t_pp"],
                     "predicted": p["prefill_s"], "ratio": got and got["t_pp"] / p["prefill_s"]})
        rows.append({"family": "hang step", "case": name, "measured": got and got["t_tg"] / got["tg"],
                     "predicted": p["decode_step_s"], "ratio": got and got["t_tg"] / got["tg"] / p["decode_step_s"]})
    return rows


def main() -> None:
    p, _t, _pr = parser()
    dispatch(p.parse_args(), "llamacpp_ops17 (llamacpp_run17.sh)", test_lines, predicted, compared,
             lambda rows: show_rows(rows, 13, 40))


if __name__ == "__main__":
    main()
