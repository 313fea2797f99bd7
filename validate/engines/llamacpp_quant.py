"""llama.cpp run 4 on one H200: GGUF-quantized weights (llamacpp_run4.sh, llamacpp_cases_run4.json) — the test file of
its ops, roofline's prediction written BEFORE the run, the readers of what it captures and the compare.

  python -m validate.engines.llamacpp_quant testfile GGML_H OUT     the --test-file of test-backend-ops (stage O)
  python -m validate.engines.llamacpp_quant predict OUT_JSON [--hardware H200]
  python -m validate.engines.llamacpp_quant compare RESDIR --predicted PRED [--out JSON]

Test file (make_test_cases_from_file in tests/test-backend-ops.cpp: "op type ne0..3 n_params params.. n_src (type
ne0..3 nb0..3).. name"; every line here is named, and test_generic_op prints `name=` first in its vars, which the
parser keys on). Op, type and GLU numbers are read from the run's own ggml.h, not assumed.
  mm-TYPE-SHAPE-nN   MUL_MAT: weights TYPE [k, m] times F32 activations [k, n] -> F32 [m, n], the 8B's projections
                     (llamacpp_mech.SHAPES: qo, kv, gate_up, down per layer), TYPE each of ops.weights, n each of
                     ops.n_decode and ops.n_prefill; lm_head for ops.lm_head_weights (the presets' output types) at
                     ops.lm_head_n (test-backend-ops quantizes its random [4096, 128256] on the host: few cases)
  SMALL-nN           the small ops of a Llama decode layer at n tokens (src/models/llama.cpp build_arch_graph, what
                     llm_graph builds): rms_norm [4096, n] (eps 1e-5), mul by the [4096] norm weight, add of two
                     [4096, n], rope of q [128, 32, n] and k [128, 8, n] (mode 0, 128 dims, base 500000, Llama-3.1's
                     [64] rope_freqs as src2), set_rows of k / v [1024, n] F32 rows into an F16 [1024, 32768] cache
                     (I64 row ids), glu (SWIGLU split) of gate and up [14336, n]
Per op a console line (print_perf_console): "  OP(name=...,...):  N runs - T us/run - K kB/run - G GB/s".

Prediction (predict): per file type of cases.quants, `roofline capacity --engine llamacpp` and the planner's steps
with `--weight-dtype gguf:TYPE` (llamacpp_predict's memory and steps, the llama.cpp time profile in force: the run
judges it, nothing here is fitted), the weights split as llama.cpp loads them (the token embedding in CPU_Mapped, the
rest on CUDA0); the ops from the profile's matmul law on the quantized bytes; the small ops' hypothesis as numbers.
"""

from __future__ import annotations

import datetime as dt
import json
import re
import statistics
import struct
import subprocess
from pathlib import Path

from validate.engines.cases import add_cases, read_cases
from validate.engines.llamacpp_logs import MIB, batched_rows, bench_entries, server_memory
from validate.engines.llamacpp_mech import SHAPES, dispatch, fmt, ggml_op_number, parser
from validate.engines.llamacpp_mech import perf_lines as mech_perf_lines

HERE = Path(__file__).resolve().parent
CASES_NAME = "llamacpp_cases_run4.json"
CASES = json.loads((HERE / CASES_NAME).read_text())
HIDDEN, KV_DIM, FFN, HEADS, KV_HEADS, HEAD_DIM, CACHE = 4096, 1024, 14336, 32, 8, 128, 32768
ANSI = re.compile(r"\x1b\[[0-9;]*m")
PERF = re.compile(r"^\s*(?P<op>[A-Z_0-9]+)\(name=(?P<name>[^,]+),.*\):\s+(?P<runs>\d+) runs - +(?P<us>[0-9.]+) us/run"
                  r" - +(?P<kb>\d+) kB/run - +(?P<gbs>[0-9.]+) GB/s\s*$")
UNSUPPORTED = re.compile(r"^\s*(?P<op>[A-Z_0-9]+)\(name=(?P<name>[^,]+),.*\):\s+not supported")
# src/llama-quant.cpp:1227 "[%4d/%4d] %-36s - [%s], type = %6s, " then ":1310 "converting to %s .. " and
# :1358 "size = %8.2f MiB -> %8.2f MiB\n"; a tensor kept as it is: :1264 "size = %8.3f MiB\n"; --dry-run: :1246
# "size = %8.2f MiB -> %8.2f MiB (%s)\n" with the target type in parentheses
QUANT_LINE = re.compile(r"\[\s*\d+/\s*\d+\]\s+(?P<name>\S+)\s+- \[(?P<shape>[\d,\s]+)\], type =\s+(?P<src>\w+), "
                        r"(?:converting to (?P<dst>\w+) \.\. )?size =\s+(?P<mib>[\d.]+) MiB(?: ->\s+(?P<new>[\d.]+) MiB"
                        r"(?: \((?P<dry>\w+)\))?)?")
# src/llama-quant.cpp:1381 "%s: quant size  = %8.2f MiB (%.2f BPW)"
QUANT_SIZE = re.compile(r"quant size\s+=\s+([\d.]+) MiB \(([\d.]+) BPW\)")
EPS = 1e-5
ROPE_BASE = 500000.0
# The small ops' hypothesis, fixed before run 4 (validate/notes/2026-11-30-llamacpp-h200-run1.md: B 1's step 12 % over
# the model, ~0.8 ms of llama.cpp's small kernels against ~0.2 in the model): each small op at n 1 is a kernel of ~2.5
# us whatever its bytes (a launch inside the CUDA graph, not its traffic), and a decode layer runs ~7 of them after
# ggml-cuda's fusions (rms_norm+mul twice, rope q, rope k + set_rows k, set_rows v, add twice; glu rides the gate/up
# mat-vec at n 1): 32 x 7 x 2.5 us = 0.56 ms a token.
SMALL_HYPOTHESIS = {"claim": "every small op at n 1 takes 2.0-3.0 us in test-backend-ops (a kernel's floor in a "
                             "graph), within 20 % of it at n 8; a decode layer's small kernels after fusion ~7",
                    "op_s_n1": 2.5e-6, "kernels_per_layer": 7, "step_s_n1": 32 * 7 * 2.5e-6}


def _f32_bits(x: float) -> int:
    return struct.unpack("<i", struct.pack("<f", x))[0]


def enum_value(header: str, enum: str, name: str) -> int:
    """`name`'s value in ggml.h's `enum NAME {..}` (explicit `= N` values honoured, else one past the last)."""
    body = re.search(r"enum " + enum + r" \{(.*?)\};", header, re.S)
    if not body:
        raise ValueError(f"ggml.h: no enum {enum}")
    value = -1
    for entry in re.sub(r"//[^\n]*|/\*.*?\*/", "", body.group(1), flags=re.S).split(","):
        m = re.match(r"\s*(\w+)\s*(?:=\s*(\d+))?", entry)
        if not m or not m.group(1):
            continue
        value = int(m.group(2)) if m.group(2) else value + 1
        if m.group(1) == name:
            return value
    raise ValueError(f"ggml.h: {name} not in enum {enum}")


def test_lines(header: str) -> list[str]:
    """Run 4's cases in the order they run (a timeout keeps the first): the small ops, then MUL_MAT per weight type
    at decode n, at prefill n, lm_head."""
    op = {n: ggml_op_number(header, f"GGML_OP_{n}") for n in
          ("MUL_MAT", "RMS_NORM", "MUL", "ADD", "ROPE", "SET_ROWS", "GLU")}
    ty = {n: enum_value(header, "ggml_type", f"GGML_TYPE_{n.upper()}") for n in
          ("f32", "f16", "i32", "i64", *CASES["ops"]["weights"])}
    swiglu = enum_value(header, "ggml_glu_op", "GGML_GLU_OP_SWIGLU")
    f32 = ty["f32"]

    def line(o: str, out_type: int, ne: tuple, params: list[int], srcs: list[tuple[int, tuple]], name: str) -> str:
        s = [op[o], out_type, *ne, len(params), *params, len(srcs)]
        for t, sne in srcs:
            s += [t, *sne, 0, 0, 0, 0]
        return " ".join(map(str, s)) + f" {name}"

    def vec(d: int, n: int, t: int = f32) -> tuple[int, tuple]:
        return t, (d, n, 1, 1)

    out = []
    rope = [0, HEAD_DIM, 0, 0, 131072, _f32_bits(ROPE_BASE), _f32_bits(1.0), _f32_bits(0.0), _f32_bits(1.0),
            _f32_bits(32.0), _f32_bits(1.0)]
    for n in CASES["ops"]["small_n"]:
        out.append(line("RMS_NORM", f32, (HIDDEN, n, 1, 1), [_f32_bits(EPS)], [vec(HIDDEN, n)], f"rms_norm-n{n}"))
        out.append(line("MUL", f32, (HIDDEN, n, 1, 1), [], [vec(HIDDEN, n), vec(HIDDEN, 1)], f"mul-n{n}"))
        out.append(line("ADD", f32, (HIDDEN, n, 1, 1), [], [vec(HIDDEN, n), vec(HIDDEN, n)], f"add-n{n}"))
        for who, heads in (("q", HEADS), ("k", KV_HEADS)):
            out.append(line("ROPE", f32, (HEAD_DIM, heads, n, 1), rope,
                            [(f32, (HEAD_DIM, heads, n, 1)), (ty["i32"], (n, 1, 1, 1)),
                             (f32, (HEAD_DIM // 2, 1, 1, 1))],
                            f"rope_{who}-n{n}"))
        out.append(line("SET_ROWS", ty["f16"], (KV_DIM, CACHE, 1, 1), [],
                        [vec(KV_DIM, n), (ty["i64"], (n, 1, 1, 1))], f"set_rows-n{n}"))
        out.append(line("GLU", f32, (FFN, n, 1, 1), [swiglu, 0], [vec(FFN, n), vec(FFN, n)], f"glu-n{n}"))
    layer = [(s, km) for s, km in SHAPES.items() if s != "lm_head"]
    for w in CASES["ops"]["weights"]:
        for n in (*CASES["ops"]["n_decode"], *CASES["ops"]["n_prefill"]):
            for s, (k, m) in layer:
                out.append(line("MUL_MAT", f32, (m, n, 1, 1), [], [vec(k, m, ty[w]), vec(k, n)], f"mm-{w}-{s}-n{n}"))
    for w in CASES["ops"]["lm_head_weights"]:
        for n in CASES["ops"]["lm_head_n"]:
            k, m = SHAPES["lm_head"]
            out.append(line("MUL_MAT", f32, (m, n, 1, 1), [], [vec(k, m, ty[w]), vec(k, n)], f"mm-{w}-lm_head-n{n}"))
    return out


def perf_lines(text: str) -> dict[str, dict]:
    """test-backend-ops perf's console lines by case name (llamacpp_mech.perf_lines, keyed on `name=`)."""
    return mech_perf_lines(text, (PERF, UNSUPPORTED), key=lambda m: m["name"])


def quant_log(text: str) -> dict:
    """llama-quantize's log: per tensor its shape, source type, target type (the source where kept) and size in
    bytes after (as printed, MiB to 0.01 / 0.001), and the totals line."""
    tensors = {}
    for m in QUANT_LINE.finditer(text):
        new = m["new"] or m["mib"]
        tensors[m["name"]] = {"shape": [int(x) for x in m["shape"].split(",")], "src": m["src"],
                              "type": m["dst"] or m["dry"] or m["src"], "bytes": float(new) * MIB}
    total = QUANT_SIZE.search(text)
    return {"tensors": tensors, "quant_bytes": float(total.group(1)) * MIB if total else None,
            "bpw": float(total.group(2)) if total else None}


# ggml's block sizes and bytes per block (ggml/src/ggml.c type_traits, ggml-common.h): only what the ops' bytes need
BLOCK = {"f32": (1, 4), "f16": (1, 2), "q8_0": (32, 34), "q4_0": (32, 18), "q4_K": (256, 144), "q6_K": (256, 210)}


def mm_bytes(w: str, k: int, m: int, n: int) -> tuple[float, float]:
    """Bytes (TYPE weights, F32 activations in and out) and FLOPs of one [k, m] x [k, n] matmul."""
    blk, size = BLOCK[w]
    return k * m // blk * size + 4 * k * n + 4 * m * n, 2.0 * k * m * n


def profile_ops() -> dict[str, float]:
    """Run 4's MUL_MAT cases on llama.cpp's time profile as it stands (roofline/engines/profiles/llamacpp.json,
    laws from run 3's F16 matmuls): n 1 gemv_latency + bytes / gemv_bw; n 2..64 gemm_latency + bytes /
    gemm_stream_bw; past 64 the larger of that and FLOPs / the fp16 GEMM rate."""
    k = json.loads((Path(__file__).resolve().parents[2] / "roofline/engines/profiles/llamacpp.json").read_text())[
        "kernels"]["H200"]
    out = {}
    for w in CASES["ops"]["weights"]:
        for name, (kk, m) in SHAPES.items():
            if name == "lm_head" and w not in CASES["ops"]["lm_head_weights"]:
                continue
            ns = CASES["ops"]["lm_head_n"] if name == "lm_head" else (*CASES["ops"]["n_decode"],
                                                                         *CASES["ops"]["n_prefill"])
            for n in ns:
                b, f = mm_bytes(w, kk, m, n)
                out[f"mm-{w}-{name}-n{n}"] = (k["gemv_latency"] + b / k["gemv_bw"] if n == 1 else
                                               max(k["gemm_latency"] + b / k["gemm_stream_bw"],
                                                   f / k["gemm_shape:fp16"]))
    return out


def weight_flag(q: str) -> str:
    return f"gguf:{q}"


def predict(hardware: str, ops_only: bool = False) -> dict:
    """The prediction; `ops_only`: the ops and the small ops' hypothesis alone (the planner's gguf:TYPE steps and
    memory not yet written: the file says so)."""
    from validate.engines import llamacpp_predict as lp  # the planner; only the predict step needs it
    per_quant = {}
    for q in [] if ops_only else CASES["quants"]:
        lp.WEIGHT_DTYPE = weight_flag(q)
        lp.CASES = {**CASES, "memory": [[CASES["batched"]["c"], max(CASES["batched"]["npl"])]],
                    "batched": {**CASES["batched"], "npp": [CASES["batched"]["npp"]]},
                    "prefill": CASES.get("prefill", []), "tg": CASES.get("tg", {"n": 1, "depth": []})}
        mem = lp.memory(hardware)
        from roofline.catalogue.store import load_model
        from roofline.gguf_quant import gguf_weights
        w = gguf_weights(load_model(CASES["model"]), q)
        for m in mem:  # llama.cpp loads token_embd in the host's CPU_Mapped buffer, the rest on CUDA0
            m["weights_split"] = {"gpu_bytes": w.gpu_bytes, "cpu_bytes": w.token_embd_bytes}
        per_quant[q] = {"memory": mem, **lp.steps(hardware)}
    sha = subprocess.run(["git", "rev-parse", "HEAD"], capture_output=True, text=True).stdout.strip()
    planner = ("no planner rows: written before the planner had gguf:TYPE weights" if ops_only else
               "the planner with --weight-dtype gguf:TYPE under engine llamacpp (its memory rules, its time profile "
               "from run 3's F16 matmuls)")
    return {"about": f"llama.cpp run 4 (llamacpp_run4.sh, {CASES_NAME}): {planner}; the ops on the "
                     "llama.cpp profile's laws (run 3's F16 matmuls, bytes of the quantized blocks), the small ops' "
                     "hypothesis", "ops_only": ops_only,
            "hardware": hardware, "git_sha": sha, "date": dt.date.today().isoformat(), "quants": per_quant,
            "ops_s": profile_ops() if "ops" in CASES else {}, "small_hypothesis": SMALL_HYPOTHESIS}


def ape(meas, pred) -> float | None:
    return None if meas is None or not pred else 100.0 * (pred - meas) / meas


def compare(res: Path, pred: dict) -> list[dict]:
    """Rows (family, case, measured, predicted, signed error % of predicted against measured)."""
    rows = []

    def add(fam: str, case: str, meas, pr) -> None:
        rows.append({"family": fam, "case": case, "measured": meas, "predicted": pr, "err_pct": ape(meas, pr)})

    for q, p in pred["quants"].items():
        log = res / f"batched-{q}.log"
        text = log.read_text() if log.is_file() else ""
        mem = server_memory(text)
        buf = mem.get("model_buffer_bytes", {})
        pm = p["memory"][0]
        split = pm.get("weights_split") or {}
        add("mem", f"{q} CUDA0 model buffer", buf.get("CUDA0"), split.get("gpu_bytes"))
        add("mem", f"{q} CPU_Mapped model buffer", buf.get("CPU_Mapped"), split.get("cpu_bytes"))
        add("mem", f"{q} weights total", sum(buf.values()) if buf else None, pm.get("weights_bytes"))
        add("mem", f"{q} KV buffer", (mem.get("kv_buffer_bytes") or {}).get("CUDA0"), pm.get("kv_bytes"))
        qf = res / f"quant-{q}.log"
        if qf.is_file():
            ql = quant_log(qf.read_text())
            add("quantize", f"{q} quant size (llama-quantize)", ql["quant_bytes"], pm.get("weights_bytes"))
        steps = {r["pl"]: r for r in batched_rows(text)}
        for b in p["batched"]:
            r = steps.get(b["pl"])
            add("decode", f"{q} B{b['pl']}", r["t_tg_s"] / r["tg"] if r else None, b["decode_step_s"])
            add("prefill-batched", f"{q} {b['pl']}x{b['pp']}", r["t_pp_s"] if r else None, b["prefill_s"])
        for kind, key in (("pp", "prefill"), ("tg", "tg")):
            f = res / f"bench-{q}-{kind}.json"
            got = bench_entries(f.read_text()) if f.is_file() and f.stat().st_size else []
            for e in p[key]:
                if kind == "pp":
                    m = next((x["avg_s"] for x in got if x["n_prompt"] == e["n_prompt"] and x["n_gen"] == 0), None)
                    add("prefill", f"{q} pp{e['n_prompt']}", m, e["prefill_s"])
                else:
                    m = next((x["avg_s"] / x["n_gen"] for x in got if x["n_gen"] == e["n_gen"]
                              and x["n_depth"] == e["n_depth"]), None)
                    add("decode-tg", f"{q} tg{e['n_gen']} d{e['n_depth']}", m, e["decode_step_s"])
    ops_txt = res / "ops.txt"
    meas = perf_lines(ops_txt.read_text()) if ops_txt.is_file() else {}
    for key, pr in pred["ops_s"].items():
        m = meas.get(key, {})
        add("op-mm" if m.get("supported", True) else "op-unsupported", key,
            m["us"] / 1e6 if m.get("supported") else None, pr)
    h = pred["small_hypothesis"]
    for key, m in sorted(meas.items()):
        if not key.startswith("mm-") and m.get("supported"):
            add("op-small", key, m["us"] / 1e6, h["op_s_n1"])
    return rows


def summary(rows: list[dict]) -> dict[str, dict]:
    """Per family: cases with both sides, median and worst |error| %."""
    out = {}
    for fam in dict.fromkeys(r["family"] for r in rows):
        errs = [abs(r["err_pct"]) for r in rows if r["family"] == fam and r["err_pct"] is not None]
        out[fam] = {"n": len(errs), "median_abs_pct": statistics.median(errs) if errs else None,
                    "worst_abs_pct": max(errs) if errs else None}
    return out


def main() -> None:
    global CASES, CASES_NAME
    p, t, pr = parser()
    add_cases(t, CASES_NAME)
    pr.add_argument("--ops-only", action="store_true", help="the ops and the hypothesis alone (predict's docstring)")
    add_cases(pr, CASES_NAME)
    a = p.parse_args()
    if a.cmd in ("testfile", "predict"):
        CASES_NAME, CASES = a.cases, read_cases(p, a.cases)
    dispatch(a, "llamacpp_quant (llamacpp_run4.sh)", test_lines, lambda: predict(a.hardware, a.ops_only), compare,
             _show)


def _show(rows: list[dict]) -> None:
    print(f"{'family':16} {'case':34} {'measured':>12} {'predicted':>12} {'err %':>8}")
    for r in rows:
        print(f"{r['family']:16} {r['case']:34} {fmt(r['measured']):>12} {fmt(r['predicted']):>12} "
              f"{fmt(r['err_pct']):>8}")
    for fam, s in summary(rows).items():
        print(f"{fam:16} n {s['n']:3d}  median |err| {fmt(s['median_abs_pct'])} %  worst {fmt(s['worst_abs_pct'])} %")


if __name__ == "__main__":
    main()
