"""The XQuant kernels' structure for the hierarchical roofline: compile fused_kernel (middle and fp16-window
programs, GQA and MHA) and remat_kernel for sm_90 on the CPU exactly as launch.py launches them (cases.sm90_specs:
BLOCK_N, R_BLOCK / REMAT_R_BLOCK, warps, stages) and write what one warp executes per program-step
(validate.common.sass.executed_counts: the remat loops over the latent run LAT / R times, libdevice's cold
sinf/cosf path left out) with registers, spills and shared memory to validate/model/structure/xquant.json.

    PYTHONPATH=<triton 3.6>:. python -m validate.ops.xquant.structure [OUT.json]
    PYTHONPATH=<triton 3.6>:. python -m validate.ops.xquant.structure --shared [HPP,BLOCK_N,WARPS,STAGES,R ...]

--shared compiles shared_kernel (decode(variant="shared"), shared.py) at launch.py's SHARED_* defaults, or at each
HPP,BLOCK_N,WARPS,STAGES,R given (printed only), and merges it into the file under its own keys (shared,
shared_tail, mha_shared) beside the fused_kernel entries; a program-step there is BLOCK_N tokens of HPP KV heads.
--acc compiles XQuant-CL's accumulator update through U_kv^T, new and old tiles (acc_main).

A program-step: fused_kernel, one trip of its token loop (BLOCK_N tokens of one KV head: the K and V remat GEMMs
[BLOCK_N, LAT] x [LAT, d_h], the attention dots, the online softmax); remat_kernel, the whole program (K and V
of BLOCK_N tokens of one KV head). Run it with the Triton version the GPU results were measured with
(env.triton of validate/results/*.json): another version compiles another kernel. No GPU; nothing is timed.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
import tempfile
from importlib import import_module
from pathlib import Path

from validate.common.sass import executed_counts
from validate.common.sm90 import ROOT, compile_sm90
from validate.ops.xquant import launch as xk
from validate.ops.xquant.cases import HEAD_DIM, HEADS, sm90_specs

OUT = ROOT / "validate" / "model" / "structure" / "xquant.json"
# sm90_specs order: (variant, kernel, tail) -> the structure's name
NAMES = ("fused", "fused_tail", "mha_fused", "materialized", "materialized_tail")
ACC_KERNELS = ("acc_update_kernel", "acc4_words_kernel")  # XQuant-CL's update: --acc
OPCODE = r"^\s*/\*[0-9a-f]+\*/\s+(?:@!?U?P\w+\s+)?([A-Z][A-Z0-9_]*)"


def kernel_structure(spec: dict, workdir: Path) -> dict:
    """Compile one sm90 spec; its launch shape, resources and executed counts per warp and program-step."""
    import triton

    ce = spec["constexprs"]
    kernel = getattr(import_module(spec["module"]), spec["kernel"])
    compiled = compile_sm90(kernel, spec["signature"], ce, spec["num_warps"], spec["num_stages"])
    tool = Path(triton.__file__).parent / "backends" / "nvidia" / "bin" / "cuobjdump"
    path = workdir / "kernel.cubin"
    path.write_bytes(compiled.asm["cubin"])
    sass = subprocess.run([str(tool), "-sass", str(path)], capture_output=True, text=True, check=True).stdout
    usage = subprocess.run([str(tool), "-res-usage", str(path)], capture_output=True, text=True, check=True).stdout
    resources = {"registers": int(re.search(r"REG:(\d+)", usage).group(1)),
                 "stack_bytes": int(re.search(r"STACK:(\d+)", usage).group(1)),
                 "static_spills": sum(1 for op in re.findall(OPCODE, sass, re.M) if op in ("STL", "LDL")),
                 "shared_bytes": int(compiled.metadata.shared)}
    if spec["kernel"] == "acc_update_kernel":  # the whole program: BLOCK_T tokens x BLOCK_D channels
        counts = executed_counts(sass, ce["DW"] // ce["R"], "kernel")
        return {"kernel": spec["kernel"], "block_t": ce["BLOCK_T"], "block_d": ce["BLOCK_D"], "r_block": ce["R"],
                "d": ce["D"], "delta_width": ce["DW"], "warps": spec["num_warps"], "stages": spec["num_stages"],
                **resources, "executed": counts}
    trips = ce["LAT"] // ce["R"]
    region = "kernel" if spec["kernel"] == "remat_kernel" else "outer"
    counts = executed_counts(sass, trips, region)
    remat = 2 * ce["BLOCK_N"] * ce["LAT"] * 2 * ce["HEAD_DIM"] * ce.get("HPP", 1)  # K, V: [BLOCK_N, LAT] x [LAT, d_h]
    if counts["hgmma_flops"] * spec["num_warps"] != remat:
        raise AssertionError(f"{spec['kernel']}: wgmma FLOPs {counts['hgmma_flops']} x warps != remat {remat}")
    hpp = {"heads_per_program": ce["HPP"]} if "HPP" in ce else {}  # shared_kernel's KV heads per program
    return {"kernel": spec["kernel"], "kv_heads": ce["KV_HEADS"], **hpp, "latent": ce["LAT"], "block_n": ce["BLOCK_N"],
            "r_block": ce["R"], "trips": trips, "warps": spec["num_warps"], "stages": spec["num_stages"],
            **resources, "executed": counts}


def main(out: Path = OUT) -> dict:
    """Compile the attention kernels and write the JSON (module docstring)."""
    import triton

    specs = [s for s in sm90_specs() if s["kernel"] not in ACC_KERNELS]
    with tempfile.TemporaryDirectory() as tmp:
        kernels = {name: kernel_structure(spec, Path(tmp)) for name, spec in zip(NAMES, specs, strict=True)}
    doc = {"source": "validate/ops/xquant/structure.py: fused_kernel and remat_kernel compiled for sm_90 on a CPU "
                     "(launch.py's defaults), cuobjdump -sass; 'executed': per warp and program-step",
           "triton": triton.__version__, "architecture": "hopper", "capability": 90, "heads": HEADS,
           "kv_heads": None, "head_dim": HEAD_DIM, "block_n": xk.BLOCK_N, "kernels": kernels}
    Path(out).write_text(json.dumps(doc, indent=1) + "\n")
    return doc


def shared_specs(hpp: int = xk.SHARED_HPP, block_n: int = xk.SHARED_BLOCK_N, warps: int = xk.SHARED_WARPS,
                 stages: int = xk.SHARED_STAGES, r_block: int = xk.SHARED_R_BLOCK) -> dict[str, dict]:
    """sm90 specs of shared_kernel, named as in the structure file: GQA middle and fp16-window programs, MHA."""
    from validate.ops.xquant.shared import rows_pad

    fused = dict(zip(NAMES, (s for s in sm90_specs() if s["kernel"] not in ACC_KERNELS), strict=True))
    out = {}
    for name, old in (("shared", "fused"), ("shared_tail", "fused_tail"), ("mha_shared", "mha_fused")):
        ce = {k: v for k, v in fused[old]["constexprs"].items() if k not in ("GROUP_PAD", "PACKED", "EMU")}
        ce.update(BLOCK_N=block_n, R=r_block, HPP=hpp, ROWS_PAD=rows_pad(hpp, ce["GROUP"]))
        out[name] = {**fused[old], "module": "validate.ops.xquant.shared", "kernel": "shared_kernel",
                     "constexprs": ce, "num_warps": warps, "num_stages": stages}
    return out


def per_token(s: dict) -> dict:
    """A structure entry's executed counts over all warps, per token and KV head (program-step / BLOCK_N HPP)."""
    scale = s["warps"] / (s["block_n"] * s.get("heads_per_program", 1))
    return {k: ({c: n * scale for c, n in v.items()} if isinstance(v, dict) else v * scale)
            for k, v in s["executed"].items() if k not in ("inner_loops", "cold_spans")}


def shared_main(configs: list[tuple[int, int, int, int]], out: Path = OUT) -> dict:
    """Compile shared_kernel; with no `configs`, at the launch defaults, merged into `out` under its own keys."""
    found = {}
    with tempfile.TemporaryDirectory() as tmp:
        for cfg in configs or [()]:
            specs = shared_specs(*cfg)
            names = list(specs) if not cfg else ["shared"]
            for name in names:
                s = kernel_structure(specs[name], Path(tmp))
                found[(cfg, name)] = s
                print(cfg or "default", name, {k: s[k] for k in ("registers", "stack_bytes", "static_spills",
                                                                 "shared_bytes")},
                      {k: round(v, 1) for k, v in per_token(s).items() if not isinstance(v, dict)}, flush=True)
    if not configs:
        doc = json.loads(Path(out).read_text())
        doc["kernels"].update({name: s for (_, name), s in found.items()})
        Path(out).write_text(json.dumps(doc, indent=1) + "\n")
    return found


def acc_main(out: Path = OUT) -> dict:
    """--acc: XQuant-CL's update through U_kv^T (acc16_up) at launch.py's ACC_UP_* tiles ("acc16_up") and at the
    committed results' launch ("acc16_up_old": BLOCK_T, BLOCK_D, R_BLOCK, NUM_WARPS, 3 stages); 'executed': per
    warp and program (BLOCK_T tokens x BLOCK_D channels), merged into `out`."""
    (spec,) = [s for s in sm90_specs() if s["kernel"] == "acc_update_kernel" and s["constexprs"]["UP"]]
    old = {**spec, "constexprs": {**spec["constexprs"], "BLOCK_T": xk.BLOCK_T, "BLOCK_D": xk.BLOCK_D, "R": xk.R_BLOCK},
           "num_warps": xk.NUM_WARPS, "num_stages": 3}
    with tempfile.TemporaryDirectory() as tmp:
        found = {name: kernel_structure(s, Path(tmp)) for name, s in (("acc16_up", spec), ("acc16_up_old", old))}
    doc = json.loads(Path(out).read_text())
    doc["kernels"].update(found)
    Path(out).write_text(json.dumps(doc, indent=1) + "\n")
    return found


if __name__ == "__main__":
    if sys.argv[1:2] == ["--acc"]:
        acc_main()
    elif sys.argv[1:2] == ["--shared"]:
        shared_main([tuple(int(x) for x in a.split(",")) for a in sys.argv[2:]])
    else:
        main(Path(sys.argv[1]) if len(sys.argv) > 1 else OUT)
