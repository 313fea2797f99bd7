"""The hierarchical roofline's prediction for shared_kernel (decode(variant="shared")), from its sm_90 structure
(structure/xquant.json, keys shared, shared_tail, mha_shared) with the same rates and rules as fused_kernel's
(validate.model.families.xquant.structured): executed counts per warp and program-step x program-steps x wave
factor, timed by Roofline as the attention op of xquant:bits=2. A program-step is BLOCK_N tokens of HPP KV heads.
No GPU; nothing is fitted to a timing.

    PYTHONPATH=. python -m validate.ops.xquant.shared_model [OUT.json]

writes, per committed device (validate/results/nvidia-h{100,200}.json, ceilings calibrated from that file as
`validate compare` does) and per fused / mha_fused case of the grid (cases.py): the new kernel's predicted time,
the old kernel's predicted and measured time, and the bench subset's (variant_bench.py) cases marked; and
XQuant-CL's update through U_kv^T (acc16_up) at its new and old tiles (structure.py --acc), timed as acc_op.
"""

from __future__ import annotations

import json
import sys
from dataclasses import replace
from pathlib import Path

from validate.common.sm90 import ROOT

OUT = ROOT / "validate" / "results" / "experiments" / "xquant-shared-predicted.json"
DEVICES = {"H100-SXM": "nvidia-h100.json", "H200": "nvidia-h200.json"}
NAMES = {"fused": ("shared", "shared_tail"), "mha_fused": ("mha_shared", None)}


def _cdiv(a: int, b: int) -> int:
    return -(-a // b)


def launches(p: dict, s: dict) -> list[tuple[str, int, int]]:
    """(structure name, programs, program-steps) of decode(variant="shared"): B x H_kv/HPP x parts programs over
    the nq quantized tokens (launch.fused_splits: min(64, nq / BLOCK_N) splits), B x H_kv/HPP x blocks steps;
    one BLOCK_N-token program per block of the fp16 K window (GQA)."""
    batch, kv, context, group = p["batch"], p["num_kv_heads"], p["context"], p["group_size"]
    block_n, hpp = s["block_n"], s["heads_per_program"]
    mid_name, tail_name = NAMES[p["variant"]]
    nq = context if p["variant"] == "mha_fused" else context // group * group
    blocks, tail = _cdiv(nq, block_n), _cdiv(context - nq, block_n)
    programs = batch * kv // hpp
    splits = max(1, min(64, blocks))
    chunk = _cdiv(_cdiv(max(nq, 1), splits), block_n) * block_n
    out = [(mid_name, programs * _cdiv(nq, chunk), programs * blocks)] if nq else []
    return out + ([(tail_name, programs * tail, programs * tail)] if tail else [])


def predict_shared(p: dict, hardware, doc: dict) -> dict:
    """Roofline numbers of the case's attention op with shared_kernel's executed work in it (module docstring)."""
    from roofline.costmodel import roofline_for
    from roofline.methods import parse_method
    from validate.model import kernel_structure as ks
    from validate.model.predict import case_model, predict_op

    scale = roofline_for(hardware).matmul_peak("bf16") / ks.mma_sync_rate(hardware)
    fields = {}
    for name, programs, steps in launches(p, doc["kernels"][NAMES[p["variant"]][0]]):
        s = doc["kernels"][name]
        work = ks.executed_work(s, steps * ks.wave_factor(programs, hardware.sm_count), scale)
        fields = {k: fields.get(k, 0) + v for k, v in work.items()}
    return predict_op(case_model("xquant", p), parse_method(p["method"]), "attention",
                      {"B": p["batch"], "L": p["context"]}, hardware, transform=lambda op: replace(op, **fields))


def predict_acc(p: dict, hardware, s: dict) -> dict:
    """XQuant-CL's update (families.xquant.acc_op, the same Roofline evaluation as predict_params) with the executed
    work of the acc_update_kernel structure `s`: one program per BLOCK_T tokens x BLOCK_D channels of a sequence."""
    from roofline.costmodel import Roofline, roofline_for
    from roofline.methods import parse_method
    from roofline.units import B, L
    from validate.model import kernel_structure as ks
    from validate.model.families.xquant import acc_op
    from validate.model.predict import case_model, find_op

    programs = p["batch"] * _cdiv(p["context"], s["block_t"]) * (s["d"] // s["block_d"])
    scale = roofline_for(hardware).matmul_peak("bf16") / ks.mma_sync_rate(hardware)
    fields = ks.executed_work(s, programs * ks.wave_factor(programs, hardware.sm_count), scale)
    graph, _ = find_op(case_model("xquant", p, num_layers=2), parse_method(p["method"]), "attention")
    op = replace(acc_op(p), **fields)
    return Roofline(hardware).evaluate(replace(graph, ops=(op,)), {B: p["batch"], L: p["context"]})[0]


def bench_cases() -> list[tuple[str, int, int]]:
    """variant_bench.py's subset: GQA b1/b8/b32 x L 1024/8192/65536, MHA b1/b8 x L 1024/8192."""
    return [("fused", b, n) for b in (1, 8, 32) for n in (1024, 8192, 65536)] + \
        [("mha_fused", b, n) for b in (1, 8) for n in (1024, 8192)]


def main(out: Path = OUT) -> dict:
    """Predict every fused / mha_fused grid case and the bench subset on each committed device; write the JSON."""
    from validate.common.harness import committed_devices
    from validate.model.families import xquant as family
    from validate.ops.xquant import cases

    doc = json.loads((ROOT / "validate" / "model" / "structure" / "xquant.json").read_text())
    grid = {(c.params["variant"], c.params["batch"], c.params["context"]) for c in cases.XQuantFamily().cases(False)
            if c.params["variant"] in NAMES}
    wanted = sorted(grid | set(bench_cases()))
    devices = {}
    for name, hardware, measured in committed_devices(DEVICES, "xquant"):
        rows = []
        for variant, batch, context in wanted:
            p = cases.params(variant, batch, context)
            new, old = predict_shared(p, hardware, doc), family.predict_params(p, hardware)
            rows.append({"case": cases.case_name(p), "variant": variant, "batch": batch, "context": context,
                         "in_bench": (variant, batch, context) in bench_cases(),
                         "shared_ms": new["time_s"] * 1e3, "shared_bound": new["bound"],
                         "shared_issue_ms": new["issue_s"] * 1e3, "shared_compute_ms": new["compute_s"] * 1e3,
                         "shared_memory_ms": new["memory_s"] * 1e3, "old_predicted_ms": old["time_s"] * 1e3,
                         "old_measured_ms": measured.get(cases.case_name(p)),
                         "predicted_speedup": old["time_s"] / new["time_s"]})
        acc = []
        if "acc16_up" in doc["kernels"]:
            for bits, batch, context, up in cases.ACC_GRID:
                p = cases.params("acc_update", batch, context, bits, up)
                if not up:
                    continue
                new, old = (predict_acc(p, hardware, doc["kernels"][k]) for k in ("acc16_up", "acc16_up_old"))
                acc.append({"case": cases.case_name(p), "new_ms": new["time_s"] * 1e3, "new_bound": new["bound"],
                            "old_structure_ms": old["time_s"] * 1e3, "old_bound": old["bound"],
                            "old_predicted_ms": family.predict_params(p, hardware)["time_s"] * 1e3,
                            "old_measured_ms": measured.get(cases.case_name(p)), "bytes": new["bytes"]})
        devices[name] = {"results": f"validate/results/{DEVICES[name]}", "rows": rows, "acc_update": acc}
    kernels = {k: {f: v for f, v in s.items() if f != "executed"} | {"executed": s["executed"]}
               for k, s in doc["kernels"].items() if k in ("fused", "fused_tail", "mha_fused", "shared", "shared_tail",
                                                           "mha_shared", "acc16_up", "acc16_up_old")}
    result = {"source": "validate/ops/xquant/shared_model.py (committed before the GPU run of "
                        "validate/ops/xquant/variant_bench.py)", "triton": doc["triton"], "kernels": kernels,
              "devices": devices}
    Path(out).write_text(json.dumps(result, indent=1) + "\n")
    return result


if __name__ == "__main__":
    main(Path(sys.argv[1]) if len(sys.argv) > 1 else OUT)
