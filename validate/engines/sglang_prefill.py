"""SGLang's served prefill step taken apart (session 28): run 3's Qwen3-30B-A3B server against roofline's op rows.

python -m validate.engines.sglang_prefill                       the tables of validate/notes/2026-11-30-sglang-28.md
python -m validate.engines.sglang_prefill predict OUT.json      roofline's figures for micro_sglang.py's extend group
python -m validate.engines.sglang_prefill compare RESULT.json PREDICTED.json    the stage's result against them

Three readings of the same step, none of them the judged served figures' own fit:
- served: the server log's back-to-back prefills (sglang_steps.log_prefills: a line's gap since the previous prefill
  line; the lower decile by prompts in the batch is the step when the GPU runs prefills back to back under the
  overlap loop), run 3's Qwen3-30B-A3B, every prompt 1,024 tokens, beside roofline's step at the same size (the burst
  clock the served runs are priced at: serving.clock);
- in the engine, apart: run 2c's profiler census of the offline Engine (lat_sglang.py profiled: `out1_kernels` is
  the census of generate(out=1), one prefill and the one decode step the overlap loop launches before the prefill's
  result shows the request done; less one decode step of the case's own per-step census, it is the prefill's
  kernels), at 1 x 1,024 tokens (one forward) and 16 x 1,024 (two forwards of 8 x 1,024: chunked_prefill_size 8,192),
  per op class beside roofline's op rows;
- alone: run 2b's SGLang fused_experts at Qwen3-30B-A3B's shape (micro-moe.json) and FA3 prefill (micro.json), each
  less a one-call replay's fixed cost (derive.graph_replay of micro4), beside roofline's op at the same size.
"""

from __future__ import annotations

import datetime as dt
import json
import math
import re
import subprocess
import sys
from functools import cache
from pathlib import Path

import numpy as np

from validate import stored
from validate.engines.sglang_steps import log_prefills

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1] / "validate" / "results" / "engines"
MODEL = "Qwen3-30B-A3B"
RUN3 = ROOT / "nvidia-h200-sglang-2026-11-30-run3"
RUNS3 = ("rate4", "rate12", "rate24", "rate36", "conc32")  # the server log's order (Qwen3-30B-A3B-marks.txt)
CENSUS = ROOT / "nvidia-h200-sglang-2026-11-30-run2c" / f"{MODEL}-lat.json"
MICRO_MOE = ROOT / "nvidia-h200-sglang-2026-11-30-run2b" / "micro-moe.json"
MICRO_FA3 = ROOT / "nvidia-h200-sglang-2026-11-30-run2b" / "micro.json"
MICRO4 = ROOT / "nvidia-h200-vllm-2026-11-29-micro4" / "micro4.json"
EXTEND = HERE / "micro-sglang-extend.json"
PROMPT = 1024
CHUNK = 8192  # the server's chunked_prefill_size (server_info): 8 prompts of 1,024 at most in one step
# SGLang's kernels by roofline op class (run 2c's census names); 'q_copy': the copy SGLang's extend makes of q
# (flashattention_backend.py:1454 q.contiguous() of the split view, qwen3_moe.py:627), roofline's op of that name
# since the profile's graph_ops (timing.py 14.)
CLASSES = (("experts", r"fused_moe_kernel|act_and_mul|moe_sum_reduce|moe_align_block_size|count_and_sort_expert"
                       r"|FillFunctor<float>"),
           ("routing", r"_router_triton_kernel"),
           ("attention", r"FlashAttnFwdSm90|prepare_varlen_num_blocks|FlashAttnFwdCombine"),
           ("q_copy", r"elementwise_kernel<128, 4, at::native::gpu_kernel_impl_nocast<at::native::direct_copy"),
           ("norms and residuals", r"FusedAddRMSNorm|RMSNormKernel"),
           ("qk_norm", r"fused_qknorm"),
           ("rope and kv_update", r"fused_rope_store"),
           ("dense GEMMs", r"nvjet|splitKreduce"))
OPS = {"experts": ("experts",), "routing": ("routing",), "attention": ("attention",), "q_copy": ("q_copy",),
       "norms and residuals": ("attn_norm", "mlp_norm", "attn_residual", "mlp_residual", "final_norm"),
       "qk_norm": ("qk_norm",), "rope and kv_update": ("rope", "kv_update"),
       "dense GEMMs": ("qkv_proj", "o_proj", "router", "lm_head"), "other": ("embedding",)}
# BLOCK_SIZE_M of SGLang's tuned config for this shape (sglang 0.5.17 srt/layers/moe/moe_runner/triton_utils/configs/
# triton_3_6_0/E=128,N=768,device_name=NVIDIA_H200.json), picked at the key nearest M (fused_moe_triton_config.py:300);
# moe_align_block_size pads each expert's rows to a multiple of it (fused_moe.py:418-419)
BLOCK_M = {1: 16, 2: 16, 4: 16, 8: 16, 16: 16, 24: 16, 32: 16, 48: 16, 64: 16, 96: 16, 128: 16, 256: 32, 512: 64,
           1024: 128, 1536: 128, 2048: 128, 3072: 128, 4096: 128}


@cache
def phases():
    """roofline's SGLang step model of Qwen3-30B-A3B on the H200 at the burst clock (the served runs' and a lone
    call's), page 1, chunks of 8,192 tokens."""
    from roofline.catalogue.loading import validate
    from roofline.catalogue.store import load_hardware, load_model
    from roofline.costmodel.device import burst_options, roofline_for
    from roofline.engines.timing import engine_options
    from roofline.methods.registry import parse_method
    from roofline.planner.phases import PhaseModel
    from roofline.specs import Workload

    hw = load_hardware("H200")
    wl = validate(Workload, {"batch": 1, "context_tokens": CHUNK, "engine": "sglang", "page_tokens": 1,
                             "prefill_chunk_tokens": CHUNK}, "workload")
    roof = roofline_for(hw, tp=1, options=burst_options(hw, engine_options("sglang", hw)))
    return PhaseModel.build(load_model(MODEL), hw, wl, parse_method("bf16"), roofline=roof)


def op_rows(prompts: int, prompt: int = PROMPT) -> dict[str, dict]:
    """roofline's prefill op rows for `prompts` prompts of `prompt` tokens, by op name."""
    return {r["name"]: r for r in phases().rows("prefill", prompts, prompt)}


def model_step_s(prompts: int) -> float:
    """roofline's prefill step of `prompts` prompts of 1,024 tokens: its ops and the sampler (the GPU's step)."""
    return sum(r["time_s"] * r["count"] for r in op_rows(prompts).values()) + phases().sampler_s(prompts)


def served(log: str) -> dict[int, dict]:
    """Per prompts in a prefill batch: the back-to-back gaps of run 3's Poisson runs at 12, 24, 36 req/s pooled (the
    first line of each run left out), how many, their lower decile and median; and the lines' facts over every run."""
    out: dict[int, dict] = {}
    for key in RUNS3:
        for seqs, tokens, gap in log_prefills(log, key, RUNS3)[1:]:
            if tokens != seqs * PROMPT:
                raise ValueError(f"{key}: a prefill of {tokens} tokens for {seqs} prompts")
            if key in ("rate12", "rate24", "rate36"):
                out.setdefault(seqs, {"gaps": []})["gaps"].append(gap)
    for row in out.values():
        g = np.array(row.pop("gaps"))
        row.update(n=len(g), q10_s=float(np.quantile(g, 0.1)), median_s=float(np.median(g)))
    return dict(sorted(out.items()))


def line_facts(log: str) -> dict:
    """The prefill lines between the runs' marks: their count, those not on a prefill CUDA graph, cached tokens."""
    lines = [x for key in RUNS3 for x in _run_lines(log, key) if "Prefill batch" in x]
    return {"lines": len(lines), "cuda_graph_false": sum("cuda graph: False" in x for x in lines),
            "cached_tokens": sum(int(m[1]) for x in lines if (m := re.search(r"#cached-token: (\d+)", x)))}


def _run_lines(log: str, key: str) -> list[str]:
    from validate.engines.sglang_steps import run_lines
    return run_lines(log, key, RUNS3)


def census(index: int, forwards: int) -> dict[str, float]:
    """Seconds per prefill forward by op class from run 2c's profile case `index`: the out=1 census less one decode
    step of the case's own per-step census, over its `forwards` prefill forwards."""
    case = json.loads(CENSUS.read_text())["profile"][index]
    out1, step = case["out1_kernels"], case["kernels"]
    by: dict[str, float] = {}
    for name in set(out1) | set(step):
        s = (out1.get(name, {}).get("s", 0.0) - step.get(name, {}).get("s", 0.0)) / forwards
        cls = next((k for k, pattern in CLASSES if re.search(pattern, name)), "other")
        by[cls] = by.get(cls, 0.0) + s
    return by


def model_classes(prompts: int) -> dict[str, float]:
    """roofline's prefill ops of `prompts` prompts of 1,024 tokens summed by CLASSES (seconds a step)."""
    rows = op_rows(prompts)
    return {cls: sum(rows[n]["time_s"] * rows[n]["count"] for n in names if n in rows) for cls, names in OPS.items()}


def replay_s() -> float:
    """A one-call CUDA-graph replay's own fixed cost (micro4's graph_floor), which every case timed alone carries."""
    from validate.engines.derive import graph_replay
    return graph_replay(json.loads(MICRO4.read_text()))[0]


def block_m(m: int) -> int:
    """BLOCK_SIZE_M SGLang's tuned config gives a fused MoE call of m tokens (the key nearest m)."""
    return BLOCK_M[min(BLOCK_M, key=lambda x: abs(x - m))]


def padded_ratio(m: int, experts: int = 128, topk: int = 8) -> float:
    """Expected rows the fused MoE's GEMMs run (each expert's routed rows padded to BLOCK_SIZE_M) over the rows routed,
    m tokens routed uniformly to top-k of E experts: an expert's rows ~ Binomial(m, k / E)."""
    block, p = block_m(m), topk / experts
    n = np.arange(m + 1)
    logpmf = np.array([math.lgamma(m + 1) - math.lgamma(i + 1) - math.lgamma(m - i + 1) for i in n]) \
        + n * math.log(p) + (m - n) * math.log1p(-p)
    padded = float(np.sum(np.exp(logpmf) * np.ceil(n / block) * block))
    return padded / (m * p)


def experts_s(m: int) -> float:
    """roofline's routed-experts op of one layer at m tokens (seconds)."""
    return op_rows(1, m)["experts"]["time_s"]


def attention_s(prompts: int, prompt: int) -> float:
    """roofline's prefill attention op of one layer for `prompts` prompts of `prompt` tokens (seconds)."""
    return op_rows(prompts, prompt)["attention"]["time_s"]


def analyse() -> None:
    log = stored.read_text(RUN3 / f"{MODEL}-server.log", newline="")
    print(f"run 3's {MODEL} prefill lines: {line_facts(log)}")
    print("\nserved prefill steps (rates 12, 24, 36 pooled) against roofline's step (burst clock), ms:")
    print("prompts  tokens    n   log q10  log median  roofline  err vs q10")
    rows = served(log)
    for k, r in rows.items():
        m = model_step_s(k)
        print(f"{k:7d} {k * PROMPT:7d} {r['n']:4d} {r['q10_s'] * 1e3:9.1f} {r['median_s'] * 1e3:11.1f} "
              f"{m * 1e3:9.2f} {(m / r['q10_s'] - 1) * 100:+9.1f} %")
    for index, forwards, prompts in ((0, 1, 1), (1, 2, 8)):
        cen, mod = census(index, forwards), model_classes(prompts)
        q10 = rows.get(prompts, {}).get("q10_s")
        print(f"\n{prompts} x {PROMPT} tokens, one forward: run 2c's census {sum(cen.values()) * 1e3:.2f} ms (served "
              f"q10 {q10 * 1e3:.1f} ms), roofline {sum(mod.values()) * 1e3:.2f} ms + sampler "
              f"{phases().sampler_s(prompts) * 1e3:.3f}")
        print("  op class              census ms  roofline ms   census - roofline")
        for cls in OPS:
            print(f"  {cls:20s} {cen.get(cls, 0.0) * 1e3:10.3f} {mod[cls] * 1e3:12.3f} "
                  f"{(cen.get(cls, 0.0) - mod[cls]) * 1e3:+12.3f}")
    rep = replay_s()
    layers = phases().model.num_layers
    print(f"\nfused MoE at {MODEL}'s shape, one layer, us (alone: run 2b less the replay's {rep * 1e6:.2f} us; in "
          "the engine: run 2c's census, the experts class over 48 layers):")
    print("     M  BLOCK_M  padded rows / routed  alone  in the engine  roofline  roofline vs alone")
    situ = {PROMPT: census(0, 1)["experts"] / layers, 8 * PROMPT: census(1, 2)["experts"] / layers}
    alone = {r["M"]: r["s"] - rep for r in json.loads(MICRO_MOE.read_text())["fused_moe"] if r["E"] == 128}
    for m in sorted(set(alone) | set(situ)):
        if m < 256:
            continue
        a, s, ours = alone.get(m), situ.get(m), experts_s(m)
        print(f"{m:6d} {block_m(m):8d} {padded_ratio(m):21.3f} {a * 1e6 if a else float('nan'):6.1f} "
              f"{s * 1e6 if s else float('nan'):14.1f} {ours * 1e6:9.1f} "
              f"{(ours / a - 1) * 100 if a else float('nan'):+13.1f} %")
    print("\nFA3 prefill, one layer, one prompt of P tokens (alone: run 2b GQA 32/8 less the replay), us:")
    print("     P  alone  roofline (Qwen3's 32/4)  roofline vs alone")
    for r in json.loads(MICRO_FA3.read_text())["fa3_prefill"]:
        if r["hk"] < r["hq"]:
            ours, a = attention_s(1, r["P"]), r["s"] - rep
            print(f"{r['P']:6d} {a * 1e6:6.1f} {ours * 1e6:24.1f} {(ours / a - 1) * 100:+17.1f} %")
    at = census(0, 1)["attention"] / layers, census(1, 2)["attention"] / layers
    cp = census(0, 1)["q_copy"] / layers, census(1, 2)["q_copy"] / layers
    print(f"in the engine (run 2c, per layer): attention 1 x {PROMPT} {at[0] * 1e6:.1f} us, 8 x {PROMPT} "
          f"{at[1] * 1e6:.1f} us (roofline {attention_s(1, PROMPT) * 1e6:.1f} / {attention_s(8, PROMPT) * 1e6:.1f}); "
          f"q copy {cp[0] * 1e6:.1f} / {cp[1] * 1e6:.1f} us ({2 * PROMPT * 4096 * 2 / cp[0] / 1e12:.2f} / "
          f"{2 * 8 * PROMPT * 4096 * 2 / cp[1] / 1e12:.2f} TB/s of q read and written)")


def predict(out: Path) -> None:
    """roofline's figure for each case of micro_sglang.py's extend group (EXTEND), one call as the op row charges it
    and as the stage times it (plus one replay's fixed cost), with the in-engine census where run 2c has the size."""
    cases, rep, layers = json.loads(EXTEND.read_text()), replay_s(), phases().model.num_layers
    situ = {1: census(0, 1), 8: census(1, 2)}
    moe = []
    for m in cases["moe"]["M"]:
        ours = experts_s(m)
        k = m // PROMPT if m % PROMPT == 0 else None
        moe.append({"M": m, "block_m": block_m(m), "padded_ratio": round(padded_ratio(m), 4), "roofline_s": ours,
                    "roofline_alone_s": ours + rep,
                    "engine_s": situ[k]["experts"] / layers if k in situ else None})
    att = []
    for k, p in cases["attention"]["prompts"]:
        ours = attention_s(k, p)
        att.append({"k": k, "P": p, "roofline_s": ours, "roofline_alone_s": ours + rep,
                    "engine_s": situ[k]["attention"] / layers if p == PROMPT and k in situ else None})
    a = cases["attention"]
    copy, gemm = [], []
    for t in cases["tokens"]:
        k = t // PROMPT
        copy.append({"T": t, "bytes": 2 * t * a["hq"] * a["d"] * 2, "roofline_s": 0.0,
                     "engine_s": situ[k]["q_copy"] / layers if k in situ else None})
        rows = op_rows(k)
        for name, _, _ in cases["gemm"]:
            gemm.append({"op": name, "T": t, "roofline_s": rows[name]["time_s"],
                         "roofline_alone_s": rows[name]["time_s"] + rep})
    sha = subprocess.run(["git", "rev-parse", "HEAD"], capture_output=True, text=True).stdout.strip()
    doc = {"about": "roofline's figures for micro_sglang.py's extend group (validate/engines/micro-sglang-extend.json),"
                    " written before the run by validate.engines.sglang_prefill predict: each kernel as roofline's op "
                    "row charges it in SGLang's prefill step at the burst clock (roofline_s; _alone_s adds a one-call "
                    f"replay's fixed cost, {rep * 1e6:.2f} us, as the stage times it), and the same kernels in the "
                    "engine where run 2c's census has the size (engine_s, per layer). The hypothesis the run tests: "
                    "the fused MoE alone runs above roofline's op at M 1,024-3,072 and below it from 5,120 (tile "
                    "padding to BLOCK_SIZE_M, padded_ratio); FA3's extend call on 1,024-token prompts runs near 25 us "
                    "a prompt a layer, far above roofline's 660 TFLOP/s law; q's copy costs ~9-10 ns a token a layer, "
                    "an op roofline's graph lacks (roofline_s 0).",
           "git_sha": sha, "date": dt.date.today().isoformat(), "replay_s": rep,
           "fused_moe": moe, "fa3_extend": att, "q_copy": copy, "gemm": gemm}
    out.write_text(json.dumps(doc, indent=1) + "\n")
    print(f"wrote {out}")


def compare(result: Path, predicted: Path) -> None:
    """The stage's result (micro_sglang.py OUT extend) against the prediction, case by case (roofline's alone figure
    against the measured call; the engine's census beside where it exists)."""
    got, pred = json.loads(result.read_text()), json.loads(predicted.read_text())
    keys = {"fused_moe": ("M",), "fa3_extend": ("k", "P"), "q_copy": ("T",), "gemm": ("op", "T")}
    for group, key in keys.items():
        by = {tuple(p[k] for k in key): p for p in pred[group]}
        print(f"{group}: case, measured us, roofline alone us (err %), engine census us")
        for r in got.get(group, []):
            if group == "fused_moe" and r["E"] != 128:
                continue
            p = by.get(tuple(r[k] for k in key))
            if p is None:
                continue
            ours = p.get("roofline_alone_s", p["roofline_s"])
            extra = f" {r['slots']}" if "slots" in r else ""
            engine = f"{p['engine_s'] * 1e6:.1f}" if p.get("engine_s") else "-"
            theirs = f"{ours * 1e6:.1f} ({(ours / r['s'] - 1) * 100:+.1f} %)" if ours else "no op"
            print(f"  {tuple(r[k] for k in key)}{extra}: {r['s'] * 1e6:.1f}, {theirs}, {engine}")
    steps = kernel_steps(got, pred["replay_s"])
    rows = served(stored.read_text(RUN3 / f"{MODEL}-server.log", newline=""))
    print("the step from the kernels alone (48 layers of the fused MoE, FA3 extend on fresh slots, q's copy and the "
          "dense GEMMs, each less the replay's fixed cost; roofline's other ops) against the served log, ms:")
    print("prompts  kernels alone  log q10  err    roofline's step  err")
    for k, step in steps.items():
        q10, ours = rows[k]["q10_s"], model_step_s(k)
        print(f"{k:7d} {step * 1e3:14.2f} {q10 * 1e3:8.1f} {(step / q10 - 1) * 100:+5.1f} % {ours * 1e3:16.2f} "
              f"{(ours / q10 - 1) * 100:+5.1f} %")


def kernel_steps(got: dict, replay: float) -> dict[int, float]:
    """Per k prompts of 1,024 tokens the stage timed at every kernel: the prefill step with the fused MoE, the FA3
    extend call (fresh slots), q's copy and the qkv / o_proj / router GEMMs at their alone times less `replay` (48
    layers), roofline's own figures for every other op and the sampler."""
    def alone(group: str, **key) -> float | None:
        hit = [r for r in got.get(group, []) if all(r.get(k) == v for k, v in key.items())]
        return hit[0]["s"] - replay if hit else None

    layers, out = phases().model.num_layers, {}
    for k in range(1, CHUNK // PROMPT + 1):
        t = k * PROMPT
        parts = [alone("fused_moe", M=t, E=128), alone("fa3_extend", k=k, P=PROMPT, slots="fresh"),
                 alone("q_copy", T=t), *(alone("gemm", op=n, T=t) for n in ("qkv_proj", "o_proj", "router"))]
        if any(x is None for x in parts):
            continue
        rows = op_rows(k)
        timed = sum(rows[n]["time_s"] * rows[n]["count"] for n in ("experts", "attention", "q_copy", "qkv_proj",
                                                                    "o_proj", "router") if n in rows)
        out[k] = layers * sum(parts) + model_step_s(k) - timed
    return out


def main() -> None:
    args = sys.argv[1:]
    if not args:
        analyse()
    elif args[0] == "predict" and len(args) == 2:
        predict(Path(args[1]))
    elif args[0] == "compare" and len(args) == 3:
        compare(Path(args[1]), Path(args[2]))
    else:
        raise SystemExit(__doc__)


if __name__ == "__main__":
    main()
