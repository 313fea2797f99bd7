"""The hierarchical roofline's prediction for decode / materialize(dequant="pairs") (deq_pairs.py), from their
sm_90 compiles, before the GPU run of deq_bench.py. No GPU; nothing is fitted to a timing.

    PYTHONPATH=<triton 3.6>:. python -m validate.ops.xquant.deq_model [OUT.json]

Compiles fused_kernel (GQA middle and fp16-window programs, MHA) and remat_kernel (middle, window) with PACKED at
the pairs launch (launch.PAIRS_R_BLOCK for fused_kernel, REMAT_R_BLOCK / REMAT_STAGES for remat_kernel), as
structure.py compiles the committed ones (validate/results/experiments/deq-structure.json; structure/xquant.json
is left as it is), then predicts each bench case (BENCH) on each committed device exactly as
families.xquant.predict_params predicts the committed kernels (executed work into the Roofline op, contention by
MVA, DRAM a ceiling) with these structures in place of the committed ones. The lone-warp chains (the MVA's delay,
structure/chains.json) are the committed kernels': the new loops' own chains are not measured, so where a launch
is latency-bound the prediction is the old kernel's latency.
"""

from __future__ import annotations

import json
import sys
import tempfile
from pathlib import Path
from unittest import mock

from validate.common.sm90 import ROOT

OUT = ROOT / "validate" / "results" / "experiments" / "deq-bench-predicted.json"
STRUCTURE = ROOT / "validate" / "results" / "experiments" / "deq-structure.json"
DEVICES = {"H100-SXM": "nvidia-h100.json", "H200": "nvidia-h200.json"}
BENCH = [(v, b, n) for v in ("fused", "materialized") for b, n in ((8, 16384), (32, 65536), (1, 4096))] + \
    [("mha_fused", 1, 4096), ("mha_fused", 8, 16384)]


def compile_pairs() -> dict:
    """Structure entries (structure.kernel_structure) of the five launches with PACKED, keyed as structure.NAMES."""
    from validate.ops.xquant import launch as xk
    from validate.ops.xquant.cases import sm90_specs
    from validate.ops.xquant.structure import ACC_KERNELS, NAMES, kernel_structure

    out = {}
    with tempfile.TemporaryDirectory() as tmp:
        for name, spec in zip(NAMES, [s for s in sm90_specs() if s["kernel"] not in ACC_KERNELS], strict=True):
            ce = {**spec["constexprs"], "PACKED": True}
            if spec["kernel"] == "fused_kernel":
                ce["R"] = xk.PAIRS_R_BLOCK
            out[name] = kernel_structure({**spec, "constexprs": ce}, Path(tmp))
            print(name, {k: out[name][k] for k in ("registers", "static_spills", "shared_bytes")},
                  out[name]["executed"]["instructions"], flush=True)
    return out


def predict(p: dict, hardware, kernels: dict | None) -> dict:
    """families.xquant.predict_params of case `p`, with `kernels` (name -> structure) in place of the committed
    structures of those names (None: the committed ones)."""
    from validate.model import kernel_structure as ks
    from validate.model.families import xquant as family

    if kernels is None:
        return family.predict_params(p, hardware)
    original = ks.structure

    def swapped(fam: str, name: str, params: dict, hw):
        got = original(fam, name, params, hw)
        return kernels.get(name, got) if got is not None else None

    with mock.patch.object(ks, "structure", swapped):
        return family.predict_params(p, hardware)


def main(out: Path = OUT) -> dict:
    """Compile, predict every BENCH case on each committed device, write both files."""
    from validate.common.harness import committed_devices
    from validate.ops.xquant import cases

    kernels = compile_pairs()
    STRUCTURE.write_text(json.dumps({"source": "validate/ops/xquant/deq_model.py (PACKED, launch.py's pairs tiles)",
                                     "kernels": kernels}, indent=1) + "\n")
    devices = {}
    for name, hardware, measured in committed_devices(DEVICES, "xquant"):
        rows = []
        for variant, batch, context in BENCH:
            p = cases.params(variant, batch, context)
            new, old = predict(p, hardware, kernels), predict(p, hardware, None)
            rows.append({"case": cases.case_name(p), "variant": variant, "batch": batch, "context": context,
                         "pairs_ms": new["time_s"] * 1e3, "pairs_bound": new["bound"],
                         "pairs_issue_ms": new.get("issue_s", 0.0) * 1e3, "old_predicted_ms": old["time_s"] * 1e3,
                         "old_bound": old["bound"], "old_measured_ms": measured.get(cases.case_name(p)),
                         "predicted_speedup": old["time_s"] / new["time_s"]})
            print(name, rows[-1], flush=True)
        devices[name] = {"results": f"validate/results/{DEVICES[name]}", "rows": rows}
    doc = {"source": "validate/ops/xquant/deq_model.py (committed before the GPU run of "
                     "validate/ops/xquant/deq_bench.py)", "structure": str(STRUCTURE.relative_to(ROOT)),
           "devices": devices}
    Path(out).write_text(json.dumps(doc, indent=1) + "\n")
    return doc


if __name__ == "__main__":
    main(Path(sys.argv[1]) if len(sys.argv) > 1 else OUT)
