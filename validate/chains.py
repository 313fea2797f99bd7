"""Lone-warp chains (validate.common.chain) of every kernel the suite launches, compiled for sm_90 on the CPU from
each family's own compile specs (sm90_specs), written to roofline/validation/structure/chains.json:

    PYTHONPATH=/tmp/h14/t36:. python -m validate.chains [OUT.json [NAME_PREFIX]]

Per kernel (named "<family>/<kernel>[/tail]"): "pass" = cycles of one warp through the whole kernel with every
loop once (prologue, one step, epilogue), "step" = cycles of one trip of its longest loop (xquant's fused kernel:
the outer loop with its nested remat loops run `trips` times; the pass counts that step once); remat_kernel (one
token block per program): its latent loops `trips` times, no step. Each chain reads LDL at
validate.common.chain.local_cycles of the SM's resident programs ("ldl_cycles"), and the step's instructions at the
fetch cycles of the code they run from (fetch_intervals; "step_body_bytes"). Run it with the Triton version the
results were measured with (3.6.0): no GPU, nothing timed.
"""

from __future__ import annotations

import json
import subprocess
import sys
import tempfile
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
from validate.common.sm90 import ROOT, compile_sm90

OUT = ROOT / "roofline" / "validation" / "structure" / "chains.json"


def _sass(spec: dict, workdir: Path) -> tuple[str, dict]:
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
    sass, res = _sass(spec, workdir)
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


def specs() -> dict[str, dict]:
    """name -> compile spec of every kernel of the suite's launchers (fixed_costs.LAUNCHERS), at the bench heads."""
    from validate.ops.aquakv.cases import sm90_specs as aquakv
    from validate.ops.fp16_attention.cases import sm90_specs as fp16
    from validate.ops.quant_attention.cases import METHODS
    from validate.ops.quant_attention.kernel import sm90_spec
    from validate.ops.xquant.cases import sm90_specs as xquant
    from validate.ops.xquant.structure import NAMES
    from validate.ops.zack.cases import sm90_specs as zack

    out = {f"fp16_attention/{s['kernel']}": s for s in fp16()}
    for method in METHODS:
        out[f"quant_attention/{method}"] = sm90_spec(method)
        out[f"quant_attention/{method}/tail"] = sm90_spec(method, tail=True)
    xs = xquant()
    out.update({f"xquant/{name}": s for name, s in zip(NAMES, xs, strict=False)})
    out.update({f"xquant/acc_update/{i}": s for i, s in enumerate(xs[len(NAMES):])})
    out.update({f"zack/{s['kernel']}": s for s in zack()})
    out.update({f"aquakv/{s['kernel']}": s for s in aquakv()})
    return out


def main(out: Path = OUT, only: str = "") -> dict:
    """Compile every kernel (or those whose name starts with `only`, merged into `out`) and write the JSON."""
    import triton

    with tempfile.TemporaryDirectory() as tmp:
        kernels = json.loads(Path(out).read_text())["kernels"] if only and Path(out).exists() else {}
        for name, spec in specs().items():
            if only and not name.startswith(only):
                continue
            kernels[name] = chains(spec, Path(tmp))
            print(name, kernels[name], flush=True)
    from validate.common.chain import FETCH_LEVELS, LOCAL_CYCLES, WGMMA_CYCLES

    doc = {"source": "validate/chains.py: each family's sm90 compile specs, cuobjdump -sass, "
                     "validate.common.chain (a lone warp's chain, cycles)", "triton": triton.__version__,
           "architecture": "hopper", "latency_cycles": LATENCY_CYCLES,
           "wgmma_cycles": {f"n{n}": {"latency": lat, "interval": gap} for n, (lat, gap) in WGMMA_CYCLES.items()},
           "local_cycles": LOCAL_CYCLES, "fetch_levels": [list(x) for x in FETCH_LEVELS],
           "stalls_source": "PREDICTED (validate/results/experiments/stalls-predicted.json) until "
                            "validate.ops.ceilings.stalls runs", "kernels": kernels}
    Path(out).write_text(json.dumps(doc, indent=1) + "\n")
    return doc


if __name__ == "__main__":
    main(Path(sys.argv[1]) if len(sys.argv) > 1 else OUT, sys.argv[2] if len(sys.argv) > 2 else "")
