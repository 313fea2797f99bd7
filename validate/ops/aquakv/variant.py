"""Old against new AQUA-KV reconstruction on one GPU: the launched kernel (kernel.reconstruct, big tiles from
kernel.BIG_ROWS rows) and each variant, timed with validate.common.harness.graph_ms on the family's grid
(cases.BATCHES x cases.CONTEXTS), each checked against the torch reference (reference.reference) on the same inputs.

    python -m validate.ops.aquakv.variant OUT.json        (about 1-2 minutes on an H100)

Variants: "tuned", the same kernel with the big 128 x 256 tiles from kernel.TUNED_BIG_ROWS rows on; "preinit",
"tuned" with the residual dequantized into the GEMM's initial accumulator (predict_kernel's PREINIT: the epilogue's
issue moves before the first wgmma, where the pipeline's first loads are in flight). The model's
prediction of this run, committed before it: validate/results/experiments/aquakv-variant-predicted.json
(`predicted`, written by `python -m validate.ops.aquakv.variant --predict OUT.json`, no GPU).
"""

from __future__ import annotations

import json
import sys
from functools import partial
from pathlib import Path

from validate.ops.aquakv import cases, kernel

VARIANTS = {"tuned": {"big_rows": kernel.TUNED_BIG_ROWS},
            "preinit": {"big_rows": kernel.TUNED_BIG_ROWS, "preinit": True}}
NOTE = ("tuned: the model puts the 64x128 tiles at the shared-memory ceiling and the 128x256 ones at wgmma + issue, so "
        "the big tiles from 3,200 rows save 11-22 % (H100) and 2-14 % (H200) where they replace the small ones (rows "
        "3,968-31,744). preinit: "
        "the model charges issue in series with the wgmma time wherever it executes, so it predicts preinit 1 % "
        "slower than tuned (more integer instructions); a measured gain would say the epilogue's issue overlaps the "
        "pipeline's first loads, which the model does not count (the big tiles' committed runs: 2-10 % under).")
TOLERANCE = 1e-2  # relative RMS against the fp32 torch reference, stored in bf16 (the family's own check)


def grid() -> list[dict]:
    """The family's cases' params (batch x context at Llama-3.2-3B's heads)."""
    return [c.params for c in cases.AquaKVReconstruct().cases(quick=False)]


def calls() -> dict:
    """name -> reconstruct with that launch's keyword arguments ("old": the launched kernel)."""
    return {"old": kernel.reconstruct, **{name: partial(kernel.reconstruct, **kw) for name, kw in VARIANTS.items()}}


def measure(params: dict) -> dict:
    """Milliseconds (graph_ms over rotated input sets) and relative RMS against the torch reference of every call."""
    import torch

    from validate.common.harness import graph_ms, rotation_count
    from validate.common.testing import relative_rms
    from validate.ops.aquakv.reference import reference
    from validate.ops.aquakv.storage import Predictors, random_layer, storage

    kv_dim = params["num_kv_heads"] * params["head_dim"]
    t = storage(params["method"], kv_dim)

    def make():
        k, v, k_prev, v_prev = random_layer(t, params["batch"], params["context"], kv_dim, "cuda")
        return k, v, k_prev, v_prev, Predictors.random(kv_dim, "cuda"), torch.empty_like(k_prev), \
            torch.empty_like(v_prev)

    probe = make()
    set_bytes = sum(x.numel() * x.element_size() for xs in kernel.kernel_io(*probe).values() for x in xs)
    sets = [probe] + [make() for _ in range(rotation_count(set_bytes) - 1)]
    want = reference(*probe[:5])
    from validate.model.families import aquakv as fam

    out = {"rows": int(probe[2].shape[0] * probe[2].shape[1]), "flops": fam.work(params)["flops"]}
    for name, call in calls().items():
        got = call(*probe[:5])
        error = max(relative_rms(g, w) for g, w in zip(got, want, strict=True))
        out[name] = {"ms": graph_ms(call, sets), "check_rel_rms": error, "ok": bool(error < TOLERANCE)}
    del want, sets, probe
    torch.cuda.empty_cache()
    return out


def predict(hardware_names=("H100-SXM", "H200")) -> dict:
    """The model's time of each call on each grid case (validate.model.families.aquakv, structure/aquakv.json,
    the catalogue's measured sections), ms."""
    from validate.model.families import aquakv as fam
    from validate.model.hardware import load_hardware

    out = {}
    for hw_name in hardware_names:
        hw = load_hardware(hw_name)
        rows = {}
        for p in grid():
            name = f"{p['method']}_b{p['batch']}_l{p['context']}"
            row = {"rows": fam.rows(p)}
            for call, kw in {"old": {}, **VARIANTS}.items():
                pred = fam.predict_params(p, hw, big_rows=kw.get("big_rows"),
                                          variant="preinit" if kw.get("preinit") else "")
                row[call] = {"ms": pred["time_s"] * 1e3, "bound": pred["bound"], "launches": pred["structure"]}
            rows[name] = row
        out[hw_name] = rows
    return out


def main(argv: list[str]) -> int:
    """`python -m validate.ops.aquakv.variant [--predict] OUT.json` (module docstring)."""
    if len(argv) not in (1, 2) or (len(argv) == 2 and argv[0] != "--predict"):
        print("usage: python -m validate.ops.aquakv.variant [--predict] OUT.json", file=sys.stderr)
        return 2
    out = Path(argv[-1])
    if argv[0] == "--predict":
        doc = {"source": "python -m validate.ops.aquakv.variant --predict (no GPU): validate.model.families.aquakv"
                         " with validate/model/structure/aquakv.json and the catalogue's measured sections",
               "note": NOTE, "predicted": predict()}
    else:
        from validate.common.harness import environment

        results = {}
        for p in grid():
            name = f"{p['method']}_b{p['batch']}_l{p['context']}"
            results[name] = measure(p)
            print(name, json.dumps(results[name]), flush=True)
        doc = {"env": environment(), "measured": results,
               "all_ok": all(r[c]["ok"] for r in results.values() for c in calls())}
    out.write_text(json.dumps(doc, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
