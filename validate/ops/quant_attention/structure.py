"""The fast kernel's structure for the hierarchical roofline: compile the middle loop of every bench preset for
sm_90 on the CPU (validate.common.sm90) exactly as tiled_launch launches it (plan, LAUNCH's warps and stages)
and write its static counts (validate.common.sass) to roofline/validation/structure/quant_attention.json.

    PYTHONPATH=. python -m validate.ops.quant_attention.structure [OUT.json]

Run it with the Triton version the GPU results were measured with (their env.triton): another version
compiles another loop. No GPU is needed; nothing here is timed.
"""

from __future__ import annotations

import json
import sys
import tempfile
from pathlib import Path

from validate.common.recipes import recipe
from validate.common.sass import cubin_counts
from validate.common.sm90 import ROOT, compile_sm90
from validate.ops.quant_attention import tiled_launch
from validate.ops.quant_attention.cache import cache_tilings
from validate.ops.quant_attention.cases import METHODS
from validate.ops.quant_attention.kernel import HEAD_DIM, HEADS, KV_HEADS
from validate.ops.quant_attention.tiled_kernel import fast_decode_kernel

OUT = ROOT / "roofline" / "validation" / "structure" / "quant_attention.json"


def method_structure(method: str, workdir: Path) -> dict:
    """Warps, stages, tokens per step, registers, shared memory per program and the loop's counts of the
    middle kernel (TAIL=False) for `method` at the bench's heads."""
    r = recipe(method)
    tk, tv = cache_tilings(r, HEAD_DIM)
    ce = tiled_launch.plan(r, tk, tv, HEADS, KV_HEADS, HEAD_DIM, emu=False)
    warps, _, stages = tiled_launch.launch_defaults(tk, tv)
    compiled = compile_sm90(fast_decode_kernel, tiled_launch.signature(r), {**ce, "TAIL": False},
                            num_warps=warps, num_stages=stages)
    counts = cubin_counts(compiled.asm["cubin"], workdir)
    return {"warps": warps, "stages": stages, "step_tokens": tiled_launch.step_tokens(ce),
            "shared_bytes": int(compiled.metadata.shared), **counts}


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
