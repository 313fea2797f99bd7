"""The fast kernel's structure for the hierarchical roofline: compile the middle loop of every bench preset for
sm_90 on the CPU (validate.common.sm90) exactly as tiled_launch launches it (kernel.sm90_spec: plan, LAUNCH's warps,
stages, VAR bits and register cap) and write its static counts (validate.common.sass) to
validate/model/structure/quant_attention.json.

    PYTHONPATH=. python -m validate.ops.quant_attention.structure [OUT.json]

Run it with the Triton version the GPU results were measured with (their env.triton): another version
compiles another loop. No GPU is needed; nothing here is timed.
"""

from __future__ import annotations

import json
import sys
import tempfile
from pathlib import Path

from validate.common.sass import cubin_counts
from validate.common.sm90 import ROOT, compile_sm90
from validate.ops.quant_attention import tiled_launch
from validate.ops.quant_attention.cases import METHODS
from validate.ops.quant_attention.kernel import HEAD_DIM, HEADS, KV_HEADS, sm90_spec
from validate.ops.quant_attention.tiled_kernel import fast_decode_kernel

OUT = ROOT / "validate" / "model" / "structure" / "quant_attention.json"


def method_structure(method: str, workdir: Path) -> dict:
    """Warps, stages, tokens per step, registers, shared memory per program and the loop's counts of the
    middle kernel (TAIL=False) for `method` at the bench's heads, compiled from kernel.sm90_spec (LAUNCH's
    warps, stages, VAR bits and register cap)."""
    return spec_structure(sm90_spec(method, heads=HEADS, kv_heads=KV_HEADS, dim=HEAD_DIM), workdir)


def spec_structure(s: dict, workdir: Path) -> dict:
    """`method_structure`'s counts of the fast kernel compiled from the sm_90 spec `s` (kernel.sm90_spec's form,
    whose constexprs and register cap a kernel variant may replace: kivi_variants)."""
    compiled = compile_sm90(fast_decode_kernel, s["signature"], s["constexprs"], num_warps=s["num_warps"],
                            num_stages=s["num_stages"], maxnreg=s["maxnreg"])
    counts = cubin_counts(compiled.asm["cubin"], workdir)
    return {"warps": s["num_warps"], "stages": s["num_stages"],
            "step_tokens": tiled_launch.step_tokens(s["constexprs"]), "shared_bytes": int(compiled.metadata.shared),
            **counts}


def main(out: Path = OUT) -> dict:
    """Compile every preset and write the JSON (module docstring)."""
    import triton

    with tempfile.TemporaryDirectory() as tmp:
        kernels = {m: method_structure(m, Path(tmp)) for m in METHODS}
    doc = {"source": "validate/ops/quant_attention/structure.py: fast_decode_kernel (TAIL=False) compiled for "
                     "sm_90 on a CPU, cuobjdump -sass of the longest loop (one 'step' of step_tokens tokens)",
           "triton": triton.__version__, "architecture": "hopper", "capability": 90,
           "heads": HEADS, "kv_heads": KV_HEADS, "head_dim": HEAD_DIM, "kernels": kernels}
    Path(out).write_text(json.dumps(doc, indent=1) + "\n")
    return doc


if __name__ == "__main__":
    main(Path(sys.argv[1]) if len(sys.argv) > 1 else OUT)
