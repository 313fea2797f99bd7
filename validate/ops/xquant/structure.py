"""The XQuant kernels' structure for the hierarchical roofline: compile fused_kernel (middle and fp16-window
programs, GQA and MHA) and remat_kernel for sm_90 on the CPU exactly as launch.py launches them (cases.sm90_specs:
BLOCK_N, R_BLOCK / REMAT_R_BLOCK, warps, stages) and write what one warp executes per program-step
(validate.common.sass.executed_counts: the remat loops over the latent run LAT / R times, libdevice's cold
sinf/cosf path left out) with registers, spills and shared memory to roofline/validation/structure/xquant.json.

    PYTHONPATH=<triton 3.6>:. python -m validate.ops.xquant.structure [OUT.json]

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

OUT = ROOT / "roofline" / "validation" / "structure" / "xquant.json"
# sm90_specs order: (variant, kernel, tail) -> the structure's name
NAMES = ("fused", "fused_tail", "mha_fused", "materialized", "materialized_tail")


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
    trips = ce["LAT"] // ce["R"]
    region = "outer" if spec["kernel"] == "fused_kernel" else "kernel"
    counts = executed_counts(sass, trips, region)
    remat = 2 * ce["BLOCK_N"] * ce["LAT"] * 2 * ce["HEAD_DIM"]  # K and V: [BLOCK_N, LAT] x [LAT, d_h]
    if counts["hgmma_flops"] * spec["num_warps"] != remat:
        raise AssertionError(f"{spec['kernel']}: wgmma FLOPs {counts['hgmma_flops']} x warps != remat {remat}")
    ops = re.findall(r"^\s*/\*[0-9a-f]+\*/\s+(?:@!?U?P\w+\s+)?([A-Z][A-Z0-9_]*)", sass, re.M)
    return {"kernel": spec["kernel"], "kv_heads": ce["KV_HEADS"], "latent": ce["LAT"], "block_n": ce["BLOCK_N"],
            "r_block": ce["R"], "trips": trips, "warps": spec["num_warps"], "stages": spec["num_stages"],
            "registers": int(re.search(r"REG:(\d+)", usage).group(1)),
            "stack_bytes": int(re.search(r"STACK:(\d+)", usage).group(1)),
            "static_spills": sum(1 for op in ops if op in ("STL", "LDL")),
            "shared_bytes": int(compiled.metadata.shared), "executed": counts}


def main(out: Path = OUT) -> dict:
    """Compile the attention kernels and write the JSON (module docstring)."""
    import triton

    specs = [s for s in sm90_specs() if s["kernel"] != "acc_update_kernel"]
    with tempfile.TemporaryDirectory() as tmp:
        kernels = {name: kernel_structure(spec, Path(tmp)) for name, spec in zip(NAMES, specs, strict=True)}
    doc = {"source": "validate/ops/xquant/structure.py: fused_kernel and remat_kernel compiled for sm_90 on a CPU "
                     "(launch.py's defaults), cuobjdump -sass; 'executed': per warp and program-step",
           "triton": triton.__version__, "architecture": "hopper", "capability": 90, "heads": HEADS,
           "kv_heads": None, "head_dim": HEAD_DIM, "block_n": xk.BLOCK_N, "kernels": kernels}
    Path(out).write_text(json.dumps(doc, indent=1) + "\n")
    return doc


if __name__ == "__main__":
    main(Path(sys.argv[1]) if len(sys.argv) > 1 else OUT)
