"""Old (fused_kernel, one KV head per program) against new (shared_kernel, decode(variant="shared")) XQuant decode
on the GPU: `python -m validate.ops.xquant.variant_bench OUT.json [--quick]`. Per case of shared_model.bench_cases
(GQA b1/b8/b32 x L 1024/8192/65536, MHA b1/b8 x L 1024/8192): a correctness check of each variant against the float32
torch reference (cases.check's really quantized latents, one sequence, <= 2048 tokens, output pre-filled with NaN),
CUDA-graph medians over rotated inputs (validate.common.harness, as cases._run_attention times the grid), the
achieved remat TFLOP/s (validate.model.families.xquant.work's FLOPs), and the prediction committed before
the run (validate/results/experiments/xquant-shared-predicted.json) beside each time; environment as
harness.environment. The JSON is rewritten after each case, so a run cut short keeps what it measured. Last,
XQuant-CL's update through U_kv^T (acc16_up_b8_l16384) at the committed launch's tiles and at launch.ACC_UP_*.
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
from validate.ops.xquant.pair_bench import check_inputs, pair_line, pair_row, predictions
from validate.ops.xquant.shared_model import OUT as PREDICTED
from validate.ops.xquant.shared_model import bench_cases

VARIANTS = ("fused", "shared")


def check(p: dict, variant: str) -> float:
    """Relative RMS of `variant` against xref.reference on cases.check's inputs (NaN-filled output)."""
    import torch

    q, layer, out = check_inputs(p)
    got = xk.decode(q, layer, None, out, {}, variant=variant)
    return relative_rms(got, xref.reference(q, layer)) if torch.isfinite(got).all() else float("nan")


def time_case(p: dict) -> dict:
    """Graph medians (ms) of both variants on the same rotated inputs."""
    import torch

    from validate.model.families.xquant import work

    batch, heads, dim = p["batch"], p["num_heads"], p["head_dim"]
    weights = cases.random_weights(p, "cuda")

    def make():
        return torch.randn(batch, heads, dim, dtype=torch.bfloat16, device="cuda"), cases.random_layer(p, weights,
                                                                                                       "cuda")

    sets = harness.input_sets(make, cases._set_bytes(p))
    out = {"rotation": len(sets), "flops": work(p)["flops"]}
    for variant in VARIANTS:
        buf, state = torch.empty(batch, heads, dim, dtype=torch.bfloat16, device="cuda"), {}
        out[f"{variant}_ms"] = harness.graph_ms(
            lambda q, layer, v=variant, buf=buf, state=state: xk.decode(q, layer, None, buf, state, variant=v), sets)
    del sets
    torch.cuda.empty_cache()
    return out


ACC_OLD = {"block_t": xk.BLOCK_T, "block_d": xk.BLOCK_D, "r_block": xk.R_BLOCK, "num_warps": xk.NUM_WARPS,
           "num_stages": 3}  # the committed results' launch of the update through U_kv^T


def acc_case(batch: int = 8, context: int = 16384) -> dict:
    """XQuant-CL's 16-bit update through U_kv^T (the grid's acc16_up case): old and new tiles, each checked against
    xref.acc_reference (2048 tokens) and timed as cases._run_acc times it."""
    import torch

    from validate.common.quantize import quantize

    p = cases.params("acc_update", batch, context, 16, True)
    d, rec = p["num_heads"] * p["head_dim"], cases.recipes(p)[0]
    u_t = (torch.randn(p["delta_width"], d, device="cuda") * p["delta_width"] ** -0.5).to(torch.bfloat16)
    delta, deq = quantize(torch.randn(1, 1, 2048, p["delta_width"], device="cuda"), rec)
    acc = torch.randn(1, 2048, d, device="cuda").to(torch.bfloat16)
    want = xref.acc_reference(deq[:, 0], acc.clone(), u_t, step=0.05)
    row = {"case": cases.case_name(p)}
    for name, kw in (("old", ACC_OLD), ("new", {})):
        row[f"check_{name}"] = relative_rms(xk.acc_update(delta, acc.clone(), u_t, 0.05, **kw), want)

    def make():
        return (cases.random_tensor(rec, batch, context, p["delta_width"], "cuda"),
                torch.randn(batch, context, d, device="cuda").to(torch.bfloat16))

    sets = harness.input_sets(make, cases._set_bytes(p))
    for name, kw in (("old", ACC_OLD), ("new", {})):
        row[f"{name}_ms"] = harness.graph_ms(lambda dl, ac, kw=kw: xk.acc_update(dl, ac, u_t, 0.05, **kw), sets)
    del sets
    torch.cuda.empty_cache()
    return row


def main(path: str, quick: bool = False) -> None:
    env, rows, start = harness.environment(), [], time.time()
    pred = predictions(PREDICTED, env["device"])
    print(env, flush=True)
    for variant, batch, context in bench_cases()[:3] if quick else bench_cases():
        p = cases.params(variant, batch, context)
        row = pair_row(p, (variant, batch, context), cases.case_name(p), VARIANTS, check, time_case,
                       pred.get(cases.case_name(p), {}),
                       {"predicted_shared_ms": "shared_ms", "predicted_old_ms": "old_predicted_ms"})
        rows.append(row)
        print(pair_line(row, VARIANTS, "predicted_shared_ms", time.time() - start, 22, 2), flush=True)
        Path(path).write_text(json.dumps({"env": {**env, "shared": {
            "hpp": xk.SHARED_HPP, "block_n": xk.SHARED_BLOCK_N, "warps": xk.SHARED_WARPS,
            "stages": xk.SHARED_STAGES, "r_block": xk.SHARED_R_BLOCK}}, "rows": rows}, indent=1) + "\n")
    acc = acc_case()
    print(f"{acc['case']:22s} old {acc['old_ms']:9.4f} ms  new {acc['new_ms']:9.4f} ms  check {acc['check_old']:.1e} / "
          f"{acc['check_new']:.1e}  [{time.time() - start:.0f} s]", flush=True)
    doc = json.loads(Path(path).read_text())
    Path(path).write_text(json.dumps({**doc, "acc_update": [acc]}, indent=1) + "\n")
    bad = [r["case"] for r in rows if not max(r["check_fused"], r["check_shared"]) < 2e-2]
    bad += [acc["case"]] if not max(acc["check_old"], acc["check_new"]) < 1e-2 else []
    if bad:
        raise SystemExit(f"variant_bench: kernel differs from the torch reference at {bad}")


if __name__ == "__main__":
    if len(sys.argv) < 2:
        raise SystemExit(f"usage: python -m validate.ops.xquant.variant_bench OUT.json [--quick] (root {ROOT})")
    main(sys.argv[1], "--quick" in sys.argv[2:])
