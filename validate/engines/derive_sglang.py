"""SGLang's time profile from its own tiny-model measurements (never from the runs it is judged on):
roofline/engines/profiles/sglang.json.

python -m validate.engines.derive_sglang RUN_DIR [--micro MICRO_RUN_DIR] [--replay MICRO4] [--eager RUN3B]
                                        [--hardware H200] [--out PROFILE]

The same mechanisms as vLLM's (validate/engines/derive.py; roofline/engines/timing.py 1, 2, 3, 5, 6), measured on
SGLang's tiny-llama (2 layers of width 256, Llama-3's vocabulary: its GPU work ~0.1 ms, roofline's own prediction):
- host work per step: the offline Engine's decode steps at B = 1 .. 256 (lat_sglang.py), host = step_s + per_seq_s x B
  by relative least squares; overlap: SGLang's overlap scheduler (server_info disable_overlap_schedule False: the
  next batch is prepared while the GPU runs this one, a step = max(GPU, host)).
- capture sizes: the decode CUDA-graph batch sizes the engine logged capturing.
- a request's own cost: the tiny model's offline prefill of 128 tokens (B = 1, one output token).
- the API server: the tiny server's median TPOT at concurrency 1, 16, 64 (the same fit), and its per-request cost,
  the server's median TTFT at concurrency 1 less the request's own cost (0 where the offline request costs more: the
  offline Engine's call pays its own IPC).
With --micro (a run with stage M, micro_sglang.py: SGLang's own kernels alone on that GPU), mechanisms 4 and 9:
- the decode attention's law on that GPU (kernels.<hardware> attn_decode_latency, attn_decode_bw): sgl_kernel's FA3
  flash_attn_with_kvcache on SGLang's pool of one-token pages, t = alpha + KV bytes / rate (derive.fit_affine,
  relative least squares) over every page-1 shape timed (GQA 32/8 and MHA 32/32, head dim 128, B 1 .. 256,
  L 1,056 .. 16,416); no in-situ excess per tile is set (attn_decode_program: SGLang's FA3 in its own steps ran
  within 3-9 % of it alone, either side: the run's profiler census, validate/notes/2026-11-30-sglang-h200-run2.md);
- its greedy sampler (temperature 0, torch.argmax over the fp32 logits): sampler.<hardware> = the argmax alone,
  t = latency + B x V / rate (the logits' cast to fp32 is not in it: not timed alone);
- its fused MoE (fused_experts, the Triton runner with SGLang's tuned configs): derive.fused_moe_law, the law fitted
  for vLLM's (grouped_gemm_latency / _bw over M <= 64, grouped_gemm_flops at M = 4,096), and op_kernels as vLLM's;
- its FA3 prefill: attention_flops per head dim at the longest GQA prompt timed.
With --replay (a micro4.json of the same GPU), every case less a one-call CUDA-graph replay's own fixed cost first
(derive.graph_replay of its graph_floor, taken off by derive.less_replay as vLLM's micro.json cases are: a row's FLOP/s
follows its reduced time): each kernel was timed as the one call of a replayed graph, and in the engine's step it is
one of hundreds in one graph.
With --eager (a run of cases-sglang-run3b.json), mechanism 8: a decode batch past the largest capture size, run
without CUDA graphs (eager()); and from the tiny model's start-up log the largest prefill graph SGLang captured
(prefill_capture_tokens: its "breakable" prefill graphs, 4 .. 8,192 tokens on the H200), past which a prefill runs
eagerly. SGLang's drafter and connector are not measured: none is set.
"""

from __future__ import annotations

import argparse
import json
import re
from pathlib import Path

from validate import stored
from validate.engines.derive import fit_affine, fit_host, fused_moe_law, graph_replay, less_replay, prefill_flops

# kernels an op launches outside SGLang's fused MoE call, which micro_sglang.py's fused_moe law times whole
OP_KERNELS = {"routing": 1}
OP_KERNELS_SOURCE = ("sglang 0.5.17 srt/layers/moe/moe_runner/triton_utils/fused_moe.py fused_experts_impl (lines "
                     "418-620): moe_align_block_size, the w13 GEMM, the activation, the w2 GEMM and the sum in the one "
                     "call micro_sglang.py times; outside it the router's topk_softmax (srt/layers/moe/topk.py, one "
                     "kernel) stays the routing op's")

TINY = "tiny-llama"
# BLOCK_SIZE_M per key of SGLang's tuned fused-MoE config on the H200 at Qwen3-30B-A3B's shape (sglang 0.5.17 srt/
# layers/moe/moe_runner/triton_utils/configs/triton_3_6_0/E=128,N=768,device_name=NVIDIA_H200.json; the down GEMM
# reuses it: "Down MoE config file not found", run 3's start-up log); micro-extend.json's rows record the one picked
BLOCK_M = {1: 16, 2: 16, 4: 16, 8: 16, 16: 16, 24: 16, 32: 16, 48: 16, 64: 16, 96: 16, 128: 16, 256: 32, 512: 64,
           1024: 128, 1536: 128, 2048: 128, 3072: 128, 4096: 128}
BLOCK_M_SOURCE = ("sglang 0.5.17 srt/layers/moe/moe_runner/triton_utils/configs/triton_3_6_0/"
                  "E=128,N=768,device_name=NVIDIA_H200.json BLOCK_SIZE_M per key (picked at the key nearest M, "
                  "fused_moe_triton_config.py:300; rows padded to it, fused_moe.py:418-419)")
GRAPH_OPS_SOURCE = ("sglang 0.5.17 srt/layers/attention/flashattention_backend.py:1454 (extend) and :1910 (decode): "
                    "q.contiguous() of q, a strided view of the fused qkv output (srt/models/qwen3_moe.py:627)")


def derive(run: Path) -> dict:
    lat = json.loads((run / f"{TINY}-lat.json").read_text())
    info = lat["server_info"]
    batches = [d["B"] for d in lat["decode"]]
    steps = [d["decode_step_s"] for d in lat["decode"]]
    step_s, per_seq_s = fit_host(batches, steps)
    request = min(lat["prefill"], key=lambda p: p["P"])
    served = [(c, json.loads(stored.read_text(run / f"{TINY}-conc{c}.jsonl").splitlines()[-1])) for c in (1, 16, 64)]
    server_step_s, server_per_seq_s = fit_host([c for c, _ in served], [m["median_tpot_ms"] * 1e-3 for _, m in served])
    ttft = served[0][1]["median_ttft_ms"] * 1e-3
    startup = "\n".join(json.loads((run / f"{TINY}-startup.json").read_text())["log"])
    sizes = [int(s) for s in re.findall(r"Capture target decode CUDA graph begin.*?bs=\[([\d, ]+)\]",
                                        startup)[-1].split(",")]
    prefill = re.findall(r"Capture target prefill CUDA graph begin.*?num_tokens=\[([\d, ]+)\]", startup)
    prefill_tokens = max(int(x) for x in prefill[-1].split(",")) if prefill else 0
    src = f"{run}/{TINY}"
    return {"version": f"sglang {info.get('version', '')}", "step_s": step_s, "per_seq_s": per_seq_s,
            "overlap": not info["disable_overlap_schedule"], "capture_sizes": sorted(sizes),
            "prefill_capture_tokens": prefill_tokens,
            "api_request_s": max(0.0, ttft - request["median_s"]), "request_s": request["median_s"],
            "server_step_s": server_step_s, "server_per_seq_s": server_per_seq_s, "kernels": {},
            "sources": {"step_s": f"{src}-lat.json decode (B, step) fitted host = a + b B",
                        "per_seq_s": f"{src}-lat.json decode (B, step) fitted host = a + b B",
                        "overlap": f"{src}-lat.json server_info.disable_overlap_schedule = "
                                   f"{info['disable_overlap_schedule']}",
                        "capture_sizes": f"{src}-startup.json 'Capture target decode CUDA graph begin' bs",
                        "prefill_capture_tokens": f"{src}-startup.json 'Capture target prefill CUDA graph begin' "
                                                  "num_tokens, the largest",
                        "request_s": f"{src}-lat.json prefill P={request['P']} (B = 1, one output token)",
                        "api_request_s": f"{src}-conc1.jsonl median_ttft_ms less request_s (at least 0)",
                        "server_step_s": f"{src}-conc{{1,16,64}}.jsonl median_tpot_ms against concurrency",
                        "kernels": "not measured: the device's own laws"},
            "fit_residuals": {"host": [round(s / (step_s + per_seq_s * b) - 1, 4)
                                       for b, s in zip(batches, steps, strict=True)]}}


def eager(run: Path, profile: dict) -> dict:
    """Mechanism 8 for SGLang: a decode batch past the largest captured batch runs without CUDA graphs (run 3's
    Qwen3-30B-A3B server logged 'cuda graph: False' at #running-req 259-360). lat_sglang.py's decode steps of the
    narrow models of `run` (models.py NARROW: the judged layer structures at negligible widths) at B past the largest
    capture size, each less that model's own graphed step extended to B (its step at the largest capture size plus
    its graphed per-sequence slope, from its smallest B timed to the largest captured), by least squares on
    (1, layers, layers with routed experts) over every such (model, B): eager_step_s, eager_layer_s,
    eager_moe_layer_s, as derive.eager_host does for vLLM's prefills past its capture sizes."""
    import numpy as np

    from roofline.accounting import moe_layer_count
    from validate.engines.predict import model_of

    top = max(profile["capture_sizes"])
    points = []
    for path in sorted(run.glob("*-lat.json")):
        lat = json.loads(path.read_text())
        steps = {d["B"]: d["decode_step_s"] for d in lat["decode"]}
        low = min(steps)
        slope = (steps[top] - steps[low]) / (top - low)
        model = model_of(path.name.removesuffix("-lat.json"))
        for b in sorted(x for x in steps if x > top):
            points.append({"model": path.name.removesuffix("-lat.json"), "B": b, "layers": model.num_layers,
                           "moe_layers": moe_layer_count(model), "wall_s": steps[b],
                           "excess_s": steps[b] - (steps[top] + slope * (b - top))})
    if len({p["model"] for p in points}) < 3:
        raise SystemExit(f"--eager {run}: needs three narrow models' decode past B {top}")
    a = np.array([[1.0, p["layers"], p["moe_layers"]] for p in points])
    y = np.array([p["excess_s"] for p in points])
    (step, layer, moe), *_ = np.linalg.lstsq(a, y, rcond=None)
    values = {"eager_step_s": max(0.0, float(step)), "eager_layer_s": float(layer), "eager_moe_layer_s": float(moe)}
    for p in points:
        fit = values["eager_step_s"] + layer * p["layers"] + moe * p["moe_layers"]
        p["fit_residual"] = round(fit / p["excess_s"] - 1, 4)
    src = (f"{run}/*-lat.json decode past B {top} less the model's graphed step extended to B, least squares on "
           "(1, layers, layers with routed experts)")
    return {**profile, **values, "sources": {**profile["sources"], **dict.fromkeys(values, src)},
            "fit_residuals": {**profile.get("fit_residuals", {}), "eager": points}}


def kernels(micro_runs: list[Path], hardware: str, profile: dict, replay: Path | None = None) -> dict:
    """`profile` with SGLang's own kernels on `hardware` from micro_sglang.py's micro*.json files in `micro_runs`:
    its decode attention law (page-1 FA3 decode cases), greedy sampler (argmax), fused MoE law (fused_moe rows, the
    law derive.fused_moe_law fits for vLLM's) and FA3 prefill FLOP/s (fa3_prefill rows). `replay`: a micro4.json of
    the same GPU whose graph_floor gives a one-call CUDA-graph replay's own fixed cost (derive.graph_replay), taken
    off every case before the fits by derive.less_replay, the rule vLLM's micro.json laws take (a row's FLOP/s
    follows its reduced time): each case was one call replayed alone, while in the engine's step the kernel is
    one of hundreds in one graph and does not pay it (the census of run 2: FA3 decode 0.0855 ms a call in the 8B's B 64
    steps, 0.094 alone)."""
    rows: dict[str, list[dict]] = {"fa3_decode": [], "argmax": [], "fused_moe": [], "fa3_prefill": []}
    src: dict[str, str] = {}
    replay_s = graph_replay(json.loads(replay.read_text()))[0] if replay else 0.0
    for run in micro_runs:
        for f in sorted(run.glob("micro*.json")):
            micro = json.loads(f.read_text())
            for key in rows:
                if micro.get(key):
                    rows[key] += less_replay(micro[key], replay_s)
                    src[key] = str(f)
    if replay:
        profile["sources"]["replay_s"] = (f"{replay} graph_floor: a one-call replay's fixed cost {replay_s * 1e6:.2f} "
                                          "us, taken off every case of SGLang's kernels alone")
    k: dict = {}
    profile["fit_residuals"] = dict(profile.get("fit_residuals", {}))
    dec = [r for r in rows["fa3_decode"] if r["page"] == 1]
    if dec:
        alpha, rate = fit_affine([r["kv_bytes_read"] for r in dec], [r["s"] for r in dec])
        k.update(attn_decode_latency=alpha, attn_decode_bw=rate)
        profile["sources"]["attn_decode"] = (f"{src['fa3_decode']} fa3_decode page 1 ({len(dec)} shapes), t = alpha "
                                             "+ KV bytes / rate (relative least squares); no in-situ term")
        profile["fit_residuals"]["attn_decode"] = [round((alpha + r["kv_bytes_read"] / rate) / r["s"] - 1, 4)
                                                   for r in dec]
    if rows["argmax"]:
        arg = rows["argmax"]
        lat, per = fit_affine([r["B"] * r["V"] for r in arg], [r["s"] for r in arg])
        profile["sampler"] = {hardware: {"latency_s": lat, "elements_per_s": per}}
        profile["sources"]["sampler"] = f"{src['argmax']} argmax (temperature 0), t = latency + B x V / rate"
        profile["fit_residuals"]["sampler"] = [round((lat + r["B"] * r["V"] / per) / r["s"] - 1, 4) for r in arg]
    moe, moe_sources = fused_moe_law(rows["fused_moe"], src.get("fused_moe", ""))
    if moe:
        k.update(moe)
        profile["sources"].update(moe_sources)
        profile["op_kernels"] = dict(OP_KERNELS)
        profile["sources"]["op_kernels"] = OP_KERNELS_SOURCE
    flops = prefill_flops(rows["fa3_prefill"])
    if flops:
        profile["attention_flops"] = {hardware: {str(d): v for d, v in flops.items()}}
        profile["sources"]["attention_flops"] = f"{src['fa3_prefill']} fa3_prefill, longest prompt, GQA"
    profile["kernels"] = {hardware: k}
    profile["sources"]["kernels"] = "SGLang's own kernels alone (micro_sglang.py), each law's source beside it"
    return profile


def extend(path: Path, hardware: str, profile: dict, replay: Path | None = None) -> dict:
    """`profile` with the laws of SGLang's served prefill step on `hardware` (module docstring, timing.py 14.) from
    micro_sglang.py's extend group (`path`, micro-extend.json: each kernel alone at the served sizes), every case less
    a one-call replay's fixed cost (derive.less_replay, `replay` as kernels() takes it):
    - the fused MoE's padded rows: the tuned config's BLOCK_SIZE_M per key (BLOCK_M, checked against the block each
      row recorded) and grouped_gemm_flops re-taken as FLOP/s of the rows the GEMMs run (2 x padded rows x 3 H I /
      t, relative least squares through the origin) over the rows well past the ridge (t at least twice the
      weights' stream law of kernels(): grouped_gemm_latency + active weight bytes / grouped_gemm_bw);
    - FA3's extend call: t = attn_prefill_latency + (query token, head) rows x attn_prefill_row + causal FLOPs /
      attn_flops (roofline's 4 d h P (P + 1) / 2 a prompt), relative least squares over every fresh-slot case (k
      prompts of 1,024, one prompt of 2,048-8,192): a fixed cost a call (FA3's prepare_varlen_num_blocks with no
      scheduler metadata, the launch), a cost per 128-query tile of a head (its Q load, epilogue and the masked
      half of its diagonal tile), the rate of the rest;
    - q's copy: t = copy_latency + bytes read and written / copy_bw (derive.fit_affine), and the op in the graph."""
    import numpy as np

    micro = json.loads(path.read_text())
    replay_s = graph_replay(json.loads(replay.read_text()))[0] if replay else 0.0
    k = profile["kernels"][hardware]
    moe = less_replay([r for r in micro["fused_moe"] if r["E"] == 128], replay_s)
    for r in moe:
        picked = BLOCK_M[min(BLOCK_M, key=lambda key: abs(key - r["M"]))]
        if r["block_m"] != picked:
            raise SystemExit(f"{path}: fused_moe M {r['M']} ran BLOCK_SIZE_M {r['block_m']}, the table {picked}")
    stream = [r for r in moe if r["s"] >= 2 * (k["grouped_gemm_latency"] + r["active_weight_bytes"]
                                               / k["grouped_gemm_bw"])]
    work = [2 * r["padded_rows"] * 3 * r["H"] * r["I"] for r in stream]
    rate = sum(w * w / r["s"] ** 2 for w, r in zip(work, stream, strict=True)) / sum(
        w / r["s"] for w, r in zip(work, stream, strict=True))
    k["grouped_gemm_flops"] = rate
    k.update({f"moe_block_m:{key}": float(b) for key, b in BLOCK_M.items()})
    att = [r for r in less_replay(micro["fa3_extend"], replay_s) if r["slots"] == "fresh"]
    feats = np.array([[1.0, r["k"] * r["P"] * r["hq"], 4 * r["d"] * r["hq"] * r["k"] * r["P"] * (r["P"] + 1) / 2]
                      for r in att])
    t = np.array([r["s"] for r in att])
    (a, row, inv), *_ = np.linalg.lstsq(feats / t[:, None], np.ones(len(att)), rcond=None)
    k.update(attn_prefill_latency=float(a), attn_prefill_row=float(row))
    profile["attention_flops"] = {hardware: {str(d): 1.0 / float(inv) for d in sorted({r["d"] for r in att})}}
    copy = less_replay(micro["q_copy"], replay_s)
    k["copy_latency"], k["copy_bw"] = fit_affine([r["bytes"] for r in copy], [r["s"] for r in copy])
    profile["graph_ops"] = ["q_copy"]
    src = profile["sources"]
    src["grouped_gemm_flops"] = (f"{path} fused_moe M in {[r['M'] for r in stream]} (t at least twice the weights' "
                                 "stream law): 2 x padded rows x 3 H I / t, relative least squares")
    src["moe_block_m"] = BLOCK_M_SOURCE
    src["attention_flops"] = src["attn_prefill"] = (
        f"{path} fa3_extend fresh slots ({len(att)} cases), t = latency + k P hq x per row + 4 d hq k P (P + 1) / 2 "
        "/ rate (relative least squares)")
    src["copy"] = f"{path} q_copy ({len(copy)} sizes), t = latency + bytes read and written / rate"
    src["graph_ops"] = GRAPH_OPS_SOURCE
    fits = profile.setdefault("fit_residuals", {})
    fits["grouped_gemm_flops"] = [round(w / rate / r["s"] - 1, 4) for w, r in zip(work, stream, strict=True)]
    fits["attn_prefill"] = [round(float(f @ [a, row, inv]) / r["s"] - 1, 4) for f, r in zip(feats, att, strict=True)]
    fits["copy"] = [round((k["copy_latency"] + r["bytes"] / k["copy_bw"]) / r["s"] - 1, 4) for r in copy]
    return profile


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("run", type=Path)
    p.add_argument("--micro", type=Path, action="append", default=[],
                   help="a run with micro_sglang.py's micro*.json (repeatable): SGLang's kernels on --hardware")
    p.add_argument("--replay", type=Path, help="a micro4.json of the same GPU (graph_floor): the one-call replay's "
                   "fixed cost taken off SGLang's kernels alone")
    p.add_argument("--eager", type=Path, help="a run of the narrow models' decode past the capture sizes "
                   "(cases-sglang-run3b.json): mechanism 8")
    p.add_argument("--extend", type=Path, help="micro_sglang.py's extend group (micro-extend.json, stage X): the "
                   "served prefill step's kernels alone (timing.py 14.); needs --micro")
    p.add_argument("--hardware", default="H200")
    p.add_argument("--out", type=Path, default=Path("roofline/engines/profiles/sglang.json"))
    a = p.parse_args()
    profile = derive(a.run)
    if a.micro:
        profile = kernels(a.micro, a.hardware, profile, a.replay)
    if a.extend:
        profile = extend(a.extend, a.hardware, profile, a.replay)
    if a.eager:
        profile = eager(a.eager, profile)
    a.out.write_text(json.dumps(profile, indent=1) + "\n")
    print(a.out.read_text(), end="")


if __name__ == "__main__":
    main()
