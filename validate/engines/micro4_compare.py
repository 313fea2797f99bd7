"""micro4's cases measured (validate/results/engines/nvidia-h200-vllm-2026-11-29-micro4/micro4.json) against the
planner's prediction committed before the run (h200-vllm-micro4-predicted.json, micro4_predict.py at 9b98a9a) and
against the current model (the same rows under today's engine profile), per family, with the verdict on each
candidate mechanism of validate/notes/2026-11-29-attribute.md.

python -m validate.engines.micro4_compare [--out REPORT_TXT]
(default validate/results/engines/h200-vllm-micro4-compare.txt: not `<device>-vllm-<date>-compare.txt`, the name
roofline/trust/engines.py reads as an engine run's step-time report)

Every micro4 case is one CUDA-graph replay (graphbench.bench); a replay costs a fixed time of its own besides its
kernels (the intercept of graph_floor's K-kernel chain, derive.graph_replay), which a kernel inside the engine's
graph of a whole step does not pay. So each single-call case is compared as measured less that replay cost ("in
graph"); the planner's rows are a kernel's time inside a step's graph. Verdict thresholds: a family's median error
within 10 % of the in-graph time agrees with the planner; beyond that the mechanism is confirmed (or refuted where
the candidate predicted the opposite sign).
"""

from __future__ import annotations

import argparse
import json
import statistics
from pathlib import Path

from validate.engines.derive import graph_replay, kv_write_law, kv_written_bytes, sampler_law

HERE = Path(__file__).resolve().parent
RESULTS = HERE.parent / "results" / "engines"
RUN = RESULTS / "nvidia-h200-vllm-2026-11-29-micro4" / "micro4.json"
PREDICTED = RESULTS / "h200-vllm-micro4-predicted.json"
OUT = RESULTS / "h200-vllm-micro4-compare.txt"
AGREE = 0.10  # a family's median |error| within this: the planner's law holds


def err(pred: float, meas: float) -> float:
    """Signed error of `pred` against `meas`, %."""
    return (pred / meas - 1) * 100


def _median_abs(errs: list[float]) -> float:
    return statistics.median(abs(e) for e in errs)


def gemm_section(meas: dict, pred: dict, now: dict, replay_s: float) -> tuple[list[str], dict]:
    """Each GEMM case: measured, in graph, the committed row and the current row (decode row at M <= 256, prefill
    row at M >= 512), and the medians by regime: decode M <= 128, M = 192..256, prefill M >= 512."""
    lines = ["GEMMs (cuBLAS via torch.matmul, bf16), us: measured | in graph | row before (err %) | row now (err %)"]
    regimes: dict[str, list[float]] = {"decode M <= 128": [], "decode M 192..256": [], "prefill M >= 512": []}
    for m, p, n in zip(meas["gemm"], pred["gemm"], now["gemm"], strict=True):
        key = "decode_row_s" if "decode_row_s" in p else "prefill_row_s"
        if p["op"] == "lm_head" and key == "prefill_row_s":
            continue  # the prefill graph's LM head runs on the last token only: no row of M tokens to compare
        inside = m["s"] - replay_s
        e_b, e_n = err(p[key], inside), err(n[key], inside)
        regime = ("decode M <= 128" if m["M"] <= 128 else "decode M 192..256" if m["M"] <= 256
                  else "prefill M >= 512")
        regimes[regime].append(e_n)
        lines.append(f"  {p['model']:16s} {p['op']:9s} M={m['M']:5d} {m['s'] * 1e6:8.1f} {inside * 1e6:8.1f} "
                     f"{p[key] * 1e6:8.1f} ({e_b:+6.1f}) {n[key] * 1e6:8.1f} ({e_n:+6.1f})")
    med = {k: statistics.median(v) for k, v in regimes.items() if v}
    lines += [f"  error now, {k}: median {v:+.1f} %, {min(regimes[k]):+.1f} .. {max(regimes[k]):+.1f} % "
              f"({len(regimes[k])} cases)" for k, v in med.items()]
    return lines, {**med, **{f"{k} range": (min(v), max(v)) for k, v in regimes.items() if v}}


def fa3_section(meas: dict, pred: dict, now: dict) -> tuple[list[str], dict]:
    """FA3 paged decode engine-style and plain, window on and off: each against the rows, and the window's and the
    engine-style call's effects as ratios (these compare two replays, so the replay's cost cancels)."""
    lines = ["FA3 decode (Mistral-7B shape, 32 q / 8 KV heads), us: engine-style / plain, no window | window 4096 | "
             "row before | row now"]
    by = {(r["B"], r["L"], r["window"], r["engine_style"]): r["s"] for r in meas["fa3_engine"]}
    window, style = [], []
    for p, n in zip(pred["fa3_engine"], now["fa3_engine"], strict=True):
        b, length = p["B"], p["L"]
        e, pl, ew, pw = (by[(b, length, w, s)] for w, s in ((None, True), (None, False), (4096, True),
                                                             (4096, False)))
        window += [ew / e - 1, pw / pl - 1]
        style += [e / pl - 1, ew / pw - 1]
        lines.append(f"  B={b:4d} L={length:5d} {e * 1e6:7.1f} / {pl * 1e6:7.1f} | {ew * 1e6:7.1f} / {pw * 1e6:7.1f} | "
                     f"{p['s'] * 1e6:7.1f} ({err(p['s'], e):+5.1f}) | {n['s'] * 1e6:7.1f} ({err(n['s'], e):+5.1f})")
    out = {"window_effect_max": max(abs(x) for x in window), "engine_style_median": statistics.median(style)}
    lines.append(f"  window on / off: at most {out['window_effect_max'] * 100:.1f} % apart; engine-style / plain: "
                 f"median {out['engine_style_median'] * 100:+.1f} %")
    return lines, out


def kv_section(meas: dict, pred: dict, now: dict, replay_s: float) -> tuple[list[str], dict]:
    """reshape_and_cache_flash at T tokens: in graph against kv_update's row before and now, and the law."""
    a, rate = kv_write_law(meas, replay_s)
    lines = [f"KV write (reshape_and_cache_flash), us: measured | in graph | row before (err %) | row now (err %);  "
             f"law: {a * 1e6:.2f} us + written bytes / {rate / 1e9:.0f} GB/s"]
    before, after = [], []
    for m, p, n in zip(meas["kv_write"], pred["kv_write"], now["kv_write"], strict=True):
        inside = m["s"] - replay_s
        before.append(err(p["s"], inside))
        after.append(err(n["s"], inside))
        lines.append(f"  {m['model']:16s} T={m['T']:5d} ({kv_written_bytes(m) / 1e6:5.2f} MB) {m['s'] * 1e6:6.1f} "
                     f"{inside * 1e6:6.1f} {p['s'] * 1e6:6.2f} ({before[-1]:+6.1f}) {n['s'] * 1e6:6.2f} "
                     f"({after[-1]:+6.1f})")
    out = {"median_before": _median_abs(before), "median_now": _median_abs(after), "worst_now": max(map(abs, after))}
    lines.append(f"  median |err| before {out['median_before']:.1f} %, now {out['median_now']:.1f} % "
                 f"(worst now {out['worst_now']:.1f} %)")
    return lines, out


def sampler_section(meas: dict, pred: dict, replay_s: float, engine) -> tuple[list[str], dict]:
    """The sampler (fp32 cast + gumbel_sample) alone, in graph, beside the engine's own steps (prof.py) and the law
    the profile now carries."""
    a, rate = sampler_law(meas, replay_s)
    lines = [f"sampler (fp32 cast, / temperature, gumbel_sample), us: cast | cast+sample | in graph | in the engine's "
             f"steps | planner before | now (err %);  law: {a * 1e6:.1f} us + B x V / {rate / 1e9:.1f} G/s"]
    now_err, engine_ratio = [], []
    for m, p in zip(meas["sampler"], pred["sampler"], strict=True):
        inside = m["cast_and_sample_s"] - replay_s
        now_s = engine.sampler_s("H200", m["B"], m["V"])
        now_err.append(err(now_s, inside))
        eng = p.get("in_engine_s")
        if eng:
            engine_ratio.append(inside / eng - 1)
        lines.append(f"  B={m['B']:4d} V={m['V']:7d} {m['cast_s'] * 1e6:6.1f} {m['cast_and_sample_s'] * 1e6:6.1f} "
                     f"{inside * 1e6:6.1f} {eng * 1e6 if eng else float('nan'):6.1f} {p['s'] * 1e6:4.1f} "
                     f"{now_s * 1e6:6.1f} ({now_err[-1]:+5.1f})")
    out = {"median_now": _median_abs(now_err), "alone_over_engine_median": statistics.median(engine_ratio)}
    lines.append(f"  now: median |err| {out['median_now']:.1f} %; alone is "
                 f"{out['alone_over_engine_median'] * 100:+.1f} % (median) of the engine's own sampler kernels")
    return lines, out


def graph_section(meas: dict, pred: dict, engine) -> tuple[list[str], dict]:
    """K dependent one-element kernels in one replay: the replay's fixed cost and the per-kernel slope against the
    device's kernel_overhead_s (the planner before) and the engine's kernel_time (now)."""
    replay_s, per_kernel = graph_replay(meas)
    now_k = engine.kernel_ceilings("H200").get("kernel_time", 0.0)
    lines = [f"graph floor: replay {replay_s * 1e6:.2f} us + K x {per_kernel * 1e6:.3f} us (least squares); planner "
             f"before: K x {pred['graph_floor'][0]['kernel_overhead_s'] * 1e6:.3f} us; engine kernel_time now "
             f"{now_k * 1e6:.3f} us"]
    for m, p in zip(meas["graph_floor"], pred["graph_floor"], strict=True):
        lines.append(f"  K={m['kernels']:4d} measured {m['s'] * 1e6:7.1f} us | planner before {p['s'] * 1e6:7.1f} "
                     f"({err(p['s'], m['s'] - replay_s):+5.1f} % of the replay less its fixed cost)")
    return lines, {"replay_s": replay_s, "per_kernel_s": per_kernel,
                   "kernel_overhead_s": pred["graph_floor"][0]["kernel_overhead_s"]}


def verdicts(gemm: dict, fa3: dict, kv: dict, smp: dict, floor: dict) -> list[str]:
    """One line per candidate mechanism of the attribute note, decided by the figures above."""
    ratio = floor["per_kernel_s"] / floor["kernel_overhead_s"] - 1
    out = ["VERDICTS (candidates of validate/notes/2026-11-29-attribute.md)"]
    d128, pre = gemm.get("decode M <= 128", 0.0), gemm.get("prefill M >= 512", 0.0)
    lo, hi = gemm.get("decode M <= 128 range", (0.0, 0.0))
    out.append(f"- GEMMs at decode M: the rows run {d128:+.1f} % (median; {lo:+.1f} .. {hi:+.1f} %) of cuBLAS alone at "
               "M <= 128: "
               + ("CONFIRMED, shape by shape (Llama's mlp_down and mlp_up at M = 128-192 slowest, as in the engine; "
                  "Qwen3's qkv alone faster than its row): cuBLAS's tile choice per shape, the device's GEMM law and "
                  "not an engine figure; not applied here" if abs(d128) > 100 * AGREE / 2
                  else "the planner's law holds alone"))
    out.append(f"- GEMMs at prefill M (rows {pre:+.1f} % of cuBLAS alone, median): "
               + ("CONFIRMED: alone they run at the burst rate (about the device's gemm_shape 730 TFLOP/s, not the "
                  "sustained 660 the planner charges), as in the engine (Qwen3 qkv 57 us in both); but one rate for "
                  "all M would move the decode GEMMs at M = 256-384 (compute-bound in the law) the wrong way: the "
                  "device's GEMM law near the ridge, not applied here" if pre > 100 * AGREE / 2
                  else "the planner's rate holds alone"))
    out.append(f"- Mistral's window in FA3's AOT scheduler: REFUTED (window on / off within "
               f"{fa3['window_effect_max'] * 100:.1f} %; engine-style {fa3['engine_style_median'] * 100:+.1f} % over "
               "plain) at max_seqlen_k = L, where FA3 drops a window wider than max_seqlen_k - 1; the engine captures "
               "with max_seqlen_k = max_model_len and its profile names Mistral's decode kernel Is_local (128-row "
               "tile): micro5_window.py tests that")
    out.append(f"- KV write floor: CONFIRMED (the row was {kv['median_before']:.0f} % off the kernel in graph; the "
               f"engine's law now {kv['median_now']:.1f} % median, worst {kv['worst_now']:.1f} %: the kernel's time "
               "goes by tokens more than bytes, so a 4-KV-head model's long write is under): in the profile")
    out.append(f"- small kernel in a graph replay: {floor['per_kernel_s'] * 1e6:.2f} us against "
               f"{floor['kernel_overhead_s'] * 1e6:.2f} ({ratio * 100:+.0f} %): CONFIRMED as a per-kernel time, but it "
               "explains ~0.3 us of the 1-2 us a small kernel costs over its row in the engine: the engine's small "
               "kernels are slow themselves (the KV write alone matches its in-engine 2.4-3.0 us)")
    out.append(f"- sampler: CONFIRMED (alone {smp['alone_over_engine_median'] * 100:+.0f} % of the engine's own "
               f"sampler kernels at the same (B, V), the planner had 0): mechanism 9 of the profile, law within "
               f"{smp['median_now']:.1f} % (median)")
    return out


def report() -> str:
    """The whole report (module docstring)."""
    from roofline.engines.timing import timing
    from validate.engines.micro4_predict import predict

    meas = json.loads(RUN.read_text())
    pred = json.loads(PREDICTED.read_text())
    now = predict(pred["hardware"], pred["engine"])
    engine = timing(pred["engine"])
    replay_s, _ = graph_replay(meas)
    head = [f"micro4 on {meas['device']} (torch {meas['torch']}): {RUN.relative_to(HERE.parent.parent)} against "
            f"{PREDICTED.name} (committed at {pred['git_sha'][:7]}, before the run) and the current model",
            f"each single-call case is compared less the replay's own fixed cost {replay_s * 1e6:.2f} us "
            "(graph_floor's intercept)", ""]
    g_lines, g = gemm_section(meas, pred, now, replay_s)
    f_lines, f = fa3_section(meas, pred, now)
    k_lines, k = kv_section(meas, pred, now, replay_s)
    s_lines, s = sampler_section(meas, pred, replay_s, engine)
    r_lines, r = graph_section(meas, pred, engine)
    body = [*g_lines, "", *f_lines, "", *k_lines, "", *s_lines, "", *r_lines, "", *verdicts(g, f, k, s, r)]
    return "\n".join(head + body) + "\n"


def main() -> None:
    """Print the report and write it to --out."""
    ap = argparse.ArgumentParser(prog="python -m validate.engines.micro4_compare")
    ap.add_argument("--out", type=Path, default=OUT)
    a = ap.parse_args()
    text = report()
    print(text, end="")
    a.out.write_text(text)


if __name__ == "__main__":
    main()
