"""The lone-warp chain of one sm_90 compile spec (validate.common.chain over the spec's SASS), shared by
validate/chains.py (every kernel of the suite, written to structure/chains.json) and the kernels' variant scripts
(e.g. validate.ops.quant_attention.kivi_variants), which must not import the other families through validate.chains.
"""

from __future__ import annotations

import subprocess
from importlib import import_module
from pathlib import Path

from validate.common.chain import (
    LATENCY_CYCLES,
    chain_cycles,
    executed_stream,
    fetch_intervals,
    local_cycles,
    region_bounds,
)
from validate.common.sass import cold_spans, instructions
from validate.common.sm90 import compile_sm90


def sass_of(spec: dict, workdir: Path) -> tuple[str, dict]:
    """The SASS of one compile spec and its resources (registers, stack bytes a thread, shared bytes a program)."""
    import re

    import triton

    kernel = getattr(import_module(spec["module"]), spec["kernel"])
    compiled = compile_sm90(kernel, spec["signature"], spec["constexprs"], spec["num_warps"], spec["num_stages"],
                            maxnreg=spec.get("maxnreg"))
    tool = Path(triton.__file__).parent / "backends" / "nvidia" / "bin" / "cuobjdump"
    path = workdir / "kernel.cubin"
    path.write_bytes(compiled.asm["cubin"])
    sass = subprocess.run([str(tool), "-sass", str(path)], capture_output=True, text=True, check=True).stdout
    usage = subprocess.run([str(tool), "-res-usage", str(path)], capture_output=True, text=True, check=True).stdout
    return sass, {"registers": int(re.search(r"REG:(\d+)", usage).group(1)),
                  "stack_bytes": int(re.search(r"STACK:(\d+)", usage).group(1)),
                  "shared_bytes": int(compiled.metadata.shared)}


def resident(res: dict, warps: int) -> int:
    """Programs an SM holds (65536 registers allocated per warp in units of 256, 228 KB of shared memory with 1 KB
    reserved a program, 64 warps, 32 programs: CUDA C++ Programming Guide, compute capability 9.0)."""
    per_warp = -(-max(res["registers"], 1) * 32 // 256) * 256
    return max(1, min(65536 // (per_warp * warps), 228 * 1024 // (res["shared_bytes"] + 1024), 64 // warps, 32))


def chains(spec: dict, workdir: Path) -> dict:
    """{"pass", "step", "warps", "ldl_cycles", "step_body_bytes"} of one compile spec (module docstring): LDL at
    local_cycles of the SM's resident programs, the step's instructions at their fetch_intervals."""
    sass, res = sass_of(spec, workdir)
    ce, warps = spec["constexprs"], spec["num_warps"]
    trips = ce["LAT"] // ce["R"] if "LAT" in ce and "R" in ce else 1
    n = resident(res, warps)
    ldl = local_cycles(n * (res["shared_bytes"] + 1024), n * warps * 32 * res["stack_bytes"])
    latency = LATENCY_CYCLES | {"LDL": ldl}

    def cycles(region: str, k: int, fetch: bool = False) -> float:
        stream = executed_stream(sass, region, k)
        return chain_cycles(stream, latency, fetch_intervals(sass, region, k) if fetch else None)["cycles"]

    out = {"warps": warps, "ldl_cycles": ldl}
    if spec["kernel"] == "remat_kernel":  # one token block per program; its loops walk the latent, `trips` times
        return {"pass": cycles("kernel", trips), "step": None, **out}
    try:
        step = cycles("loop", trips, fetch=True)
    except ValueError:  # no loop: the pass is all
        return {"pass": cycles("kernel", 1), "step": None, **out}
    lo, hi = region_bounds(sass, "loop")
    ins = instructions(sass)
    cold = cold_spans(ins)
    body = 16 * sum(1 for a, _, _ in ins if lo <= a <= hi and not any(c0 <= a < c1 for c0, c1 in cold))
    # the pass with its loop once: the straight-line chain with one trip replaced by the step (nested loops x trips)
    return {"pass": cycles("kernel", 1) - cycles("loop", 1) + step, "step": step, **out, "step_body_bytes": body}
