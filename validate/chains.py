"""Lone-warp chains (validate.common.chain) of every kernel the suite launches, compiled for sm_90 on the CPU from
each family's own compile specs (sm90_specs), written to validate/model/structure/chains.json:

    PYTHONPATH=<triton 3.6>:. python -m validate.chains [OUT.json [NAME_PREFIX]]

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
import sys
import tempfile
from pathlib import Path

from validate.common.chain import LATENCY_CYCLES
from validate.common.sm90 import ROOT
from validate.common.spec_chain import chains

OUT = ROOT / "validate" / "model" / "structure" / "chains.json"


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
