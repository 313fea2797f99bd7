"""llama.cpp run 5 (llamacpp_run5.sh): where a decode step's time goes past one token, and a prompt ubatch's time
past its kernels, read off a kernel timeline (cupti_trace.c; the lent machine has no Nsight Systems).

Two misses of the model as it stood (note 2026-11-30-llamacpp-h200-run4.md) that no op-level run could settle:
- decode at B >= 2 pays eager_layer_s (run 3's F16 step B 2 - B 1, 38 us a layer past its matmuls' own n 2 - n 1);
  Q8_0 / Q6_K steps at B 2..8 then read 28-38 % over: is the excess the F16 path's GPU work (kernels the isolated
  MUL_MAT does not run, or the same kernels slower in the step), or host time the GPU waits on?
- a 512-token ubatch is 12-20 % faster in the model than llama-bench: ~3 ms a ubatch past its kernels' laws. GPU idle
  (the host's per-ubatch work) or kernels slower in the step?
  python -m validate.engines.llamacpp_trace predict OUT.json [--cases llamacpp_cases_run5.json]
  python -m validate.engines.llamacpp_trace compare RESDIR --predicted PRED.json
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from validate.engines.cases import checkout_sha, prediction_parser, read_cases, write_prediction

CASES_NAME = "llamacpp_cases_run5.json"
VOCAB_ROW = 128_256 * 4  # one row of Llama-3's logits, F32: the copy that ends a step (kernel_trace)
# the planner's ops to kernel_trace's categories
OP_CATEGORY = {"qkv_proj": "matmul", "o_proj": "matmul", "mlp_up": "matmul", "mlp_down": "matmul",
               "lm_head": "matmul", "attention": "attention", "attention_reduce": "attention", "attn_norm": "norm",
               "mlp_norm": "norm", "final_norm": "norm", "rope": "rope", "kv_update": "kv-write",
               "attn_residual": "elementwise", "mlp_residual": "elementwise", "mlp_act": "elementwise",
               "embedding": "rows"}
HYPOTHESES = {
    "decode": "F16 at B >= 2: the step's excess over the model's GPU ops (eager_layer_s, ~1.2 ms) is GPU time (the "
              "step's busy time within 10 % of its wall; the matmuls' in-step time over their n-2 laws by most of "
              "the excess), not host gaps. Q8_0 at B 2 / 8: busy time within 10 % of the model's GPU ops without "
              "eager_layer_s (its batched matmul path has no such excess).",
    "prefill": "A 512-token ubatch: the GPU idles >= 2 ms of the step (host per-ubatch work before the kernels: graph "
               "build, inputs, the KQ mask), and its kernels sum within 10 % of the model's GPU ops.",
}


def weight_flag(q: str) -> str:
    return "fp16" if q == "F16" else f"gguf:{q}"


def _categories(rows: list[dict]) -> dict[str, float]:
    out: dict[str, float] = {}
    for r in rows:
        c = OP_CATEGORY.get(r["name"], "other")
        out[c] = out.get(c, 0.0) + r["count"] * r["time_s"] * 1e6
    return out


def predict(hardware: str, cases: dict, name: str = CASES_NAME) -> dict:
    """The planner's step per (type, B) at the decode phase's mid context and per prompt length: the whole step,
    its GPU ops by kernel_trace category (us) and the host term eager_host_s, with the hypotheses."""
    from roofline.catalogue.store import load_hardware, load_model
    from validate.engines import llamacpp_predict as lp
    model, hw = load_model(cases["model"]), load_hardware(hardware)
    d = cases["decode"]
    out = {}
    for q in cases["quants"]:
        lp.WEIGHT_DTYPE = weight_flag(q)
        dec = []
        for b in d["npl"]:
            ctx = d["npp"] + d["ntg"] // 2
            pm = lp.phases(model, hw, b, d["npp"] + d["ntg"])
            cats = _categories(pm.rows("decode", b, ctx))
            dec.append({"B": b, "context": ctx, "step_us": float(pm.decode_time(b, ctx)) * 1e6,
                        "gpu_ops_us": sum(cats.values()), "by_category_us": cats,
                        "eager_host_us": float(pm.eager_host_s(b)) * 1e6})
        pre = []
        for p in cases["prefill"]:
            pm = lp.phases(model, hw, 1, p + 1)
            cats = _categories(pm.rows("prefill", 1, p))
            pre.append({"n_prompt": p, "prefill_us": float(pm.prefill_time(1, p)) * 1e6,
                        "gpu_ops_us": sum(cats.values()), "by_category_us": cats})
        out[q] = {"decode": dec, "prefill": pre}
    return {"about": f"llama.cpp run 5 ({name}): the planner's steps and their GPU ops by category, before the "
                     "kernel timeline", "hardware": hardware, "git_sha": checkout_sha(), "hypotheses": HYPOTHESES,
            "quants": out}


def _group(summary: dict, rank: int = 0) -> dict | None:
    g = summary.get("groups") or []
    return g[rank] if len(g) > rank else None


def compare(res: Path, pred: dict) -> list[str]:
    """Lines: per (type, B) the traced step against the untraced one and the model; the GPU's busy time, its
    idle, the kernels by category against the model's."""
    from validate.engines.llamacpp_logs import batched_rows, bench_entries
    lines = []
    for q, p in pred["quants"].items():
        log = res / f"batched-{q}.log"
        plain = {r["pl"]: r["t_tg_s"] / r["tg"] * 1e6 for r in batched_rows(log.read_text())} if log.is_file() else {}
        for variant in ("trace", "nograph"):
            for d in p["decode"]:
                f = res / f"{variant}-{q}-b{d['B']}.json"
                if not f.is_file():
                    continue
                g = _group(json.loads(f.read_text()))
                if g is None:
                    continue
                m = g["median"]
                lines.append(f"{q:5} {variant:7} B {d['B']:3}: engine {plain.get(d['B'], float('nan')):8.1f} us  "
                             f"traced wall {m['wall_us']:8.1f}  busy {m['busy_us']:8.1f}  idle "
                             f"{m['wall_us'] - m['busy_us']:7.1f}  kernels {g['kernels_per_step']:5}  "
                             f"launch calls {m['launch_calls']:5.0f}  | model {d['step_us']:8.1f} (GPU ops "
                             f"{d['gpu_ops_us']:8.1f} + host {d['eager_host_us']:7.1f})")
                cats = sorted(set(m["by_category_us"]) | set(d["by_category_us"]))
                lines.append("      " + "  ".join(f"{c} {m['by_category_us'].get(c, 0):.0f}/"
                                                  f"{d['by_category_us'].get(c, 0):.0f}" for c in cats)
                             + "   (traced / model us)")
        bench = res / f"bench-{q}.json"
        got = bench_entries(bench.read_text()) if bench.is_file() else []
        f = res / f"trace-{q}-pp.json"
        summ = json.loads(f.read_text()) if f.is_file() else {"groups": []}
        for e in p["prefill"]:
            meas = next((x["avg_s"] * 1e6 for x in got if x["n_prompt"] == e["n_prompt"] and x["n_gen"] == 0), None)
            # the prompt's group: kernels per step grow with its ubatches; the longer prompt has more
            gs = sorted(summ["groups"], key=lambda g: g["kernels_per_step"])
            g = gs[p["prefill"].index(e)] if len(gs) == len(p["prefill"]) else None
            m = g["median"] if g else None
            lines.append(f"{q:5} pp{e['n_prompt']:5}: engine {meas if meas else float('nan'):9.1f} us  " + (
                f"traced wall {m['wall_us']:9.1f}  busy {m['busy_us']:9.1f}  idle {m['wall_us'] - m['busy_us']:8.1f}  "
                f"gaps>20us {g['gaps_over_20us_first'][:8]}" if m else "no trace group")
                + f"  | model {e['prefill_us']:9.1f} (GPU ops {e['gpu_ops_us']:9.1f})")
            if m:
                cats = sorted(set(m["by_category_us"]) | set(e["by_category_us"]))
                lines.append("      " + "  ".join(f"{c} {m['by_category_us'].get(c, 0):.0f}/"
                                                  f"{e['by_category_us'].get(c, 0):.0f}" for c in cats)
                             + "   (traced / model us)")
    return lines


def main() -> None:
    if len(sys.argv) > 1 and sys.argv[1] == "compare":
        import argparse
        p = argparse.ArgumentParser(prog="llamacpp_trace compare")
        p.add_argument("cmd")
        p.add_argument("res", type=Path)
        p.add_argument("--predicted", type=Path, required=True)
        a = p.parse_args()
        for f, flag in ((a.res, "RESDIR"), (a.predicted, "--predicted")):
            if not f.exists():
                p.error(f"{flag}: {f} does not exist")
        print("\n".join(compare(a.res, json.loads(a.predicted.read_text()))))
        return
    if sys.argv[1:2] != ["predict"]:
        print("usage: python -m validate.engines.llamacpp_trace {predict OUT.json [--cases F] | compare RESDIR "
              "--predicted PRED.json}", file=sys.stderr)
        sys.exit(2)
    p = prediction_parser(CASES_NAME)
    p.prog = "llamacpp_trace predict"
    a = p.parse_args(sys.argv[2:])
    write_prediction(a.out, predict(a.hardware, read_cases(p, a.cases), a.cases))


if __name__ == "__main__":
    main()
