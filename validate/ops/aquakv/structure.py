"""AQUA-KV's reconstruction kernel's structure for the hierarchical roofline: compile predict_kernel for sm_90 on
the CPU exactly as kernel.reconstruct launches it (cases.sm90_specs: the K launch, one input of d_kv rows of W,
and the V launch, two inputs, each with the small tiles used below kernel.BIG_ROWS rows and the big ones from
there) and write what one warp executes per program (validate.common.sass.executed_counts over the whole kernel:
Triton unrolls its GEMM loop, d_kv / BLOCK_K k-steps per input, so the kernel has no loop left) and the bytes its
wgmma operands read from shared memory (`wgmma_shared_bytes`: no LDS/LDSM wavefronts, but bytes the model
charges at the same shared-memory rate), with registers, spills and shared memory to
validate/model/structure/aquakv.json.

    PYTHONPATH=<triton 3.6>:. python -m validate.ops.aquakv.structure [OUT.json]

The variants' compiles (cases.variant_specs: "preinit") are named '<variant>_<tiles>_<k|v>'.
A program: one BLOCK_M x BLOCK_N tile of K^ (or V^): the GEMM over d_kv (2 d_kv) inputs, then the epilogue
(bias, the residual's codes and scales, a*u + c, the bf16 store). Run it with the Triton version the GPU results
were measured with (env.triton of validate/results/*.json): another version compiles another kernel. No GPU;
nothing is timed.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
import tempfile
from importlib import import_module
from pathlib import Path

from validate.common.sass import executed_counts, instructions, opcode
from validate.common.sm90 import ROOT, compile_sm90

OUT = ROOT / "validate" / "model" / "structure" / "aquakv.json"


def wgmma_shared_bytes(sass: str) -> int:
    """Shared-memory bytes one warp's wgmma operands read over the kernel (no loops: the GEMM loop is unrolled; checked
    by the caller): each HGMMA.64xNxK of a warpgroup reads B (K x N) and, when A comes by descriptor too (one gdesc
    operand, no A registers), A (64 x K) from shared memory at 2 B per bf16 value; a warp's share is a quarter."""
    total = 0
    for _, text, _ in instructions(sass):
        op = opcode(text)
        if not op.startswith("HGMMA."):
            continue
        m, n, k = (int(x) for x in re.match(r"HGMMA\.(\d+)x(\d+)x(\d+)", op).groups())
        operands = text.split(None, 1)[1] if not text.startswith("@") else text.split(None, 2)[2]
        a_in_shared = re.match(r"\s*R\d+,\s*gdesc", operands) is not None
        total += (k * n + (m * k if a_in_shared else 0)) * 2
    return total // 4


def kernel_structure(spec: dict, workdir: Path) -> dict:
    """Compile one sm90 spec; its tile, resources and executed counts per warp and program."""
    import triton

    ce = spec["constexprs"]
    kernel = getattr(import_module(spec["module"]), spec["kernel"])
    compiled = compile_sm90(kernel, spec["signature"], ce, spec["num_warps"], spec["num_stages"],
                            divisible=tuple(spec.get("divisible", ())))
    tool = Path(triton.__file__).parent / "backends" / "nvidia" / "bin" / "cuobjdump"
    path = workdir / "kernel.cubin"
    path.write_bytes(compiled.asm["cubin"])
    sass = subprocess.run([str(tool), "-sass", str(path)], capture_output=True, text=True, check=True).stdout
    usage = subprocess.run([str(tool), "-res-usage", str(path)], capture_output=True, text=True, check=True).stdout
    inputs = 2 if ce["TWO_INPUTS"] else 1
    trips = ce["D"] // ce["BLOCK_K"]
    counts = executed_counts(sass, trips, "kernel")
    if counts["inner_loops"]:
        raise AssertionError(f"{spec['kernel']}: the GEMM loop is no longer unrolled; count its wgmma bytes per trip")
    counts["wgmma_shared_bytes"] = wgmma_shared_bytes(sass)
    gemm = 2 * ce["BLOCK_M"] * ce["BLOCK_N"] * inputs * ce["D"]  # [BLOCK_M, inputs D] x [inputs D, BLOCK_N]
    mma = counts["hgmma_flops"] + counts["hmma_flops"]
    if mma * spec["num_warps"] != gemm:
        raise AssertionError(f"{spec['kernel']}: tensor-core FLOPs {mma} x warps != the tile's GEMM {gemm}")
    ops = re.findall(r"^\s*/\*[0-9a-f]+\*/\s+(?:@!?U?P\w+\s+)?([A-Z][A-Z0-9_]*)", sass, re.M)
    return {"kernel": spec["kernel"], "inputs": inputs, "d_kv": ce["D"], "group": ce["G"],
            "block_m": ce["BLOCK_M"], "block_n": ce["BLOCK_N"], "block_k": ce["BLOCK_K"], "k_steps": trips,
            "warps": spec["num_warps"], "stages": spec["num_stages"],
            "registers": int(re.search(r"REG:(\d+)", usage).group(1)),
            "stack_bytes": int(re.search(r"STACK:(\d+)", usage).group(1)),
            "static_spills": sum(1 for op in ops if op in ("STL", "LDL")),
            "shared_bytes": int(compiled.metadata.shared), "executed": counts}


def names(specs: list[dict]) -> list[str]:
    """Structure names of cases.sm90_specs: '[<variant>_]<tiles>_<k|v>' (tiles: 'small' below the launcher's
    big-tile rows, 'big' from there)."""
    return [f"{spec['variant'] + '_' if spec.get('variant') else ''}{tiles(spec)}_"
            f"{'v' if spec['constexprs']['TWO_INPUTS'] else 'k'}" for spec in specs]


def tiles(spec: dict) -> str:
    """'big' for the spec of the launcher's big tiles, else 'small'."""
    return "big" if spec["rows"] >= spec["big_rows"] else "small"


def main(out: Path = OUT) -> dict:
    """Compile the launches (module docstring) and write the JSON."""
    import triton

    from validate.ops.aquakv.cases import HEAD_DIM, HEADS, KV_HEADS, METHOD, sm90_specs, variant_specs

    specs = sm90_specs() + variant_specs()
    with tempfile.TemporaryDirectory() as tmp:
        kernels = {name: {**kernel_structure(spec, Path(tmp)), "variant": spec.get("variant", ""),
                          "tiles": tiles(spec), "rows_from": spec["big_rows"] if tiles(spec) == "big" else 0}
                   for name, spec in zip(names(specs), specs, strict=True)}
    doc = {"source": "validate/ops/aquakv/structure.py: predict_kernel compiled for sm_90 on a CPU (kernel.py's "
                     "tiles), cuobjdump -sass; 'executed': per warp and program (one output tile)",
           "triton": triton.__version__, "architecture": "hopper", "capability": 90, "method": METHOD,
           "heads": HEADS, "kv_heads": KV_HEADS, "head_dim": HEAD_DIM, "kernels": kernels}
    Path(out).write_text(json.dumps(doc, indent=1) + "\n")
    return doc


if __name__ == "__main__":
    main(Path(sys.argv[1]) if len(sys.argv) > 1 else OUT)
