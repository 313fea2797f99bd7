"""fp32 against pairs dequantization (deq_pairs.py) of XQuant's latents on the GPU:
`python -m validate.ops.xquant.deq_bench OUT.json`. Per case of deq_model.BENCH (GQA fused and materialized at
b8 L16K, b32 L64K, b1 L4K; MHA fused at b1 L4K, b8 L16K): a correctness check of each dequant against the float32
torch reference (cases.check's really quantized latents, one sequence, <= 2048 tokens, output pre-filled with NaN),
CUDA-graph medians over rotated inputs (validate.common.harness, as cases._run_attention times the grid; the
materialized cases: materialize then flash-decode), the achieved remat TFLOP/s and the prediction committed before
the run (validate/results/experiments/deq-bench-predicted.json, deq_model.py) beside each time. The JSON is
rewritten after each case, so a run cut short keeps what it measured.
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

from validate.common import harness
from validate.common.sm90 import ROOT
from validate.common.testing import relative_rms
from validate.ops.xquant import cases
from validate.ops.xquant import launch as xk
from validate.ops.xquant import reference as xref
from validate.ops.xquant.deq_model import BENCH
from validate.ops.xquant.deq_model import OUT as PREDICTED
from validate.ops.xquant.pair_bench import check_inputs, pair_line, pair_row, predictions

DEQUANTS = ("fp32", "pairs")


def check(p: dict, dequant: str) -> float:
    """Relative RMS of the case's kernel with `dequant` against xref.reference (materialized: its K, V decoded by
    flash-decoding) on cases.check's inputs; NaN where the output is not finite."""
    import torch

    q, layer, out = check_inputs(p)
    if p["variant"] == "materialized":
        got = xk.materialized_decode(q, layer, 1, out, dequant=dequant)
    else:
        got = xk.decode(q, layer, None, out, {}, dequant=dequant)
    return relative_rms(got, xref.reference(q, layer)) if torch.isfinite(got).all() else float("nan")


def time_case(p: dict) -> dict:
    """Graph medians (ms) of both dequants on the same rotated inputs."""
    import torch

    from validate.common.flash_decode import decode_splits
    from validate.model.families.xquant import work

    batch, heads, dim, context = p["batch"], p["num_heads"], p["head_dim"], p["context"]
    weights = cases.random_weights(p, "cuda")
    out = {"flops": work(p)["flops"]}
    buf = torch.empty(batch, heads, dim, dtype=torch.bfloat16, device="cuda")
    if p["variant"] == "materialized":
        sms = torch.cuda.get_device_properties(torch.cuda.current_device()).multi_processor_count
        splits = decode_splits(batch * p["num_kv_heads"], context, sms, 128)
        shape = (batch, p["num_kv_heads"], context, dim)

        def make():
            q = torch.randn(batch, heads, dim, dtype=torch.bfloat16, device="cuda")
            kv = tuple(torch.empty(shape, dtype=torch.bfloat16, device="cuda") for _ in "kv")
            return q, cases.random_layer(p, weights, "cuda"), kv

        sets = harness.input_sets(make, cases._set_bytes(p) + 4 * batch * p["num_kv_heads"] * context * dim)
        for d in DEQUANTS:
            out[f"{d}_ms"] = harness.graph_ms(
                lambda q, layer, kv, d=d: xk.materialized_decode(q, layer, splits, buf, kv, dequant=d), sets)
    else:
        def make():
            return (torch.randn(batch, heads, dim, dtype=torch.bfloat16, device="cuda"),
                    cases.random_layer(p, weights, "cuda"))

        sets = harness.input_sets(make, cases._set_bytes(p))
        for d in DEQUANTS:
            state = {}
            out[f"{d}_ms"] = harness.graph_ms(
                lambda q, layer, d=d, state=state: xk.decode(q, layer, None, buf, state, dequant=d), sets)
    out["rotation"] = len(sets)
    del sets
    torch.cuda.empty_cache()
    return out


def main(path: str) -> None:
    env, rows, start = harness.environment(), [], time.time()
    pred = predictions(PREDICTED, env["device"])
    print(env, flush=True)
    for variant, batch, context in BENCH:
        p = cases.params(variant, batch, context)
        row = pair_row(p, (variant, batch, context), cases.case_name(p), DEQUANTS, check, time_case,
                       pred.get(cases.case_name(p), {}),
                       {"predicted_pairs_ms": "pairs_ms", "predicted_fp32_ms": "old_predicted_ms"})
        rows.append(row)
        print(pair_line(row, DEQUANTS, "predicted_pairs_ms", time.time() - start, 24, 3), flush=True)
        Path(path).write_text(json.dumps({"env": {**env, "pairs_r_block": xk.PAIRS_R_BLOCK}, "rows": rows},
                                         indent=1) + "\n")
    bad = [r["case"] for r in rows if not max(r["check_fp32"], r["check_pairs"]) < 2e-2]
    if bad:
        raise SystemExit(f"deq_bench: kernel differs from the torch reference at {bad}")


if __name__ == "__main__":
    if len(sys.argv) < 2:
        raise SystemExit(f"usage: python -m validate.ops.xquant.deq_bench OUT.json (root {ROOT})")
    main(sys.argv[1])
