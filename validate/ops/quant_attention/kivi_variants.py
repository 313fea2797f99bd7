"""KIVI variants of the fast kernel's middle loop (issue 14 item 1, validate/notes/2026-11-23-kivi-kernel-variants.md):
their sm_90 static counts, lone-warp
chains and the family's prediction, computed on the CPU before any GPU run:

    PYTHONPATH=<triton 3.6>:. python -m validate.ops.quant_attention.kivi_variants [OUT.json]

A variant is (tiled_kernel VAR bits, register cap), at LAUNCH's warps and stages: "old" is the kernel KIVI ran before
qall-r128 became its default (VAR 0, no register cap; named "default" in kivi-variants-predicted.json and
nvidia-h{100,200}-kivi-variants.json, which were written before), "qall" shares one unmasked q per half between the
NSUB q.k dots of a step (tiled_kernel.QALL), "qall-r128" is the same capped at 128 registers (old's 4 programs per SM):
LAUNCH's KIVI default since (validate/notes/2026-11-23-kivi-kernel-variants.md). Each variant names its VAR bits and
cap explicitly, so its numbers do not
move with LAUNCH. Counts as structure.py
(validate.common.sass.cubin_counts), chains as validate/chains.py; the prediction is
validate.model.families.quant_attention.predict with the variant's structure and chain in place of the committed
ones (`swapped`). Run with Triton 3.6.0 (the GPU's); nothing is timed.
"""

from __future__ import annotations

import contextlib
import json
import sys
import tempfile
from pathlib import Path

from validate.common.sm90 import ROOT
from validate.ops.quant_attention import tiled_kernel
from validate.ops.quant_attention.kernel import HEAD_DIM, HEADS, KV_HEADS, sm90_spec

OUT = ROOT / "validate" / "results" / "experiments" / "kivi-variants-predicted.json"
METHODS = ("kivi-2", "kivi-4")
SHAPES = ((8, 65536), (32, 16384), (8, 131072), (1, 16384))  # (batch, context)
# name -> (VAR bits, maxnreg or None: no cap)
VARIANTS = {"old": (0, None), "qall": (tiled_kernel.QALL.value, None), "qall-r128": (tiled_kernel.QALL.value, 128)}
FORMERLY = {"old": "default"}  # the names the files written before the rename give a variant


def spec(method: str, variant: str) -> dict:
    """The validate.common.sm90 compile spec of `method`'s middle kernel as `variant` launches it (its VAR bits and
    "maxnreg" in place of LAUNCH's)."""
    var, cap = VARIANTS[variant]
    s = sm90_spec(method)
    return s | {"constexprs": s["constexprs"] | {"VAR": var}, "maxnreg": cap}


def structure(method: str, variant: str, workdir: Path) -> dict:
    """structure.py's counts of `method`'s middle kernel as `variant` (structure.spec_structure)."""
    from validate.ops.quant_attention.structure import spec_structure

    return spec_structure(spec(method, variant), workdir)


def shared_ops(method: str, variant: str, workdir: Path) -> dict:
    """Loop counts per warp-step of LDSM, LDS, STS, STSM, LDGSTS, BAR, HMMA, LDL/STL (opcode family -> count): the
    longest loop of the variant's SASS (validate.common.chain.region_bounds)."""
    from collections import Counter

    from validate.common.chain import region_bounds
    from validate.common.sass import instructions, opcode
    from validate.common.spec_chain import sass_of

    sass, _ = sass_of(spec(method, variant), workdir)
    lo, hi = region_bounds(sass, "loop")
    ops = Counter(opcode(t).split(".")[0] for a, t, _ in instructions(sass) if lo <= a <= hi)
    return {k: ops[k] for k in ("LDSM", "LDS", "STS", "STSM", "LDGSTS", "BAR", "HMMA", "HFMA2", "PRMT", "LDL", "STL")}


@contextlib.contextmanager
def swapped(method: str, s: dict, chain: dict):
    """The committed structure of `method` (structure/quant_attention.json) and its chain (chains.json) replaced by
    `s` and `chain` inside the block. Both copies of chains.json are patched: kernel_structure.kernels' (the step's
    chain) and fixed_costs.chains' (the launches' pass and step in the fixed costs); each is cached, so its dicts are
    patched and restored."""
    from validate.model import fixed_costs
    from validate.model import kernel_structure as ks

    table = ks.kernels("quant_attention")["kernels"]
    chain_tables = [ks.kernels("chains")["kernels"], fixed_costs.chains()["kernels"]]
    key = f"quant_attention/{method}"
    old = table[method], [c[key] for c in chain_tables]
    table[method] = s
    for c in chain_tables:
        c[key] = chain
    try:
        yield
    finally:
        table[method] = old[0]
        for c, row in zip(chain_tables, old[1], strict=True):
            c[key] = row


def predicted_ms(method: str, batch: int, context: int, hardware) -> dict:
    """The family's prediction (ms, bound, resident programs) of `method` at (batch, context) on `hardware`."""
    from roofline.validation.results_file import Case
    from validate.model.families.quant_attention import predict

    params = {"method": method, "batch": batch, "context": context, "num_heads": HEADS, "num_kv_heads": KV_HEADS,
              "head_dim": HEAD_DIM}
    got = predict(Case("quant_attention", f"{method}_b{batch}_l{context}", params), hardware)
    return {"ms": got["time_s"] * 1e3, "bound": got["bound"], "resident_programs": got.get("resident_programs")}


def main(out: Path = OUT, hardware_names=("H100-SXM", "H200")) -> dict:
    """Counts, chains and predictions of every (method, variant); written to `out` (module docstring)."""
    import triton

    from validate.common.spec_chain import chains
    from validate.model.hardware import load_hardware

    doc = {"source": "python -m validate.ops.quant_attention.kivi_variants (no GPU): sm_90 compile with Triton "
                     f"{triton.__version__}, validate.common.sass / validate.common.spec_chain, "
                     "validate.model.families.quant_attention.predict with the variant's structure and chain, "
                     "the catalogue's measured sections (spec SM clock)",
           "note": "predicted at the spec's SM clock (the compare reports predict at each case's measured clock, "
                   "e.g. kivi-2 b8 L64K old 0.399 ms at 1845 MHz on the H100): compare the ratios to old. The "
                   "model counts shared-memory wavefronts (LDSM/LDS/STS/LDGSTS), not the L1 traffic of global loads",
           "variants": {k: {"VAR": v, "maxnreg": c} for k, (v, c) in VARIANTS.items()},
           "kernels": {}, "predicted": {}}
    with tempfile.TemporaryDirectory() as tmp:
        for method in METHODS:
            for variant in VARIANTS:
                s = structure(method, variant, Path(tmp))
                chain = chains(spec(method, variant), Path(tmp))
                doc["kernels"][f"{method}/{variant}"] = {**s, "ops": shared_ops(method, variant, Path(tmp)),
                                                         "chain": chain}
                print(method, variant, {k: s[k] for k in ("registers", "shared_bytes")}, s["loop"]["wavefronts"],
                      s["loop"]["instructions"], round(chain["step"]), flush=True)
    for hw_name in hardware_names:
        hw = load_hardware(hw_name)
        rows = doc["predicted"][hw_name] = {}
        for method in METHODS:
            for batch, context in SHAPES:
                row = rows[f"{method}_b{batch}_l{context}"] = {}
                for variant in VARIANTS:
                    k = doc["kernels"][f"{method}/{variant}"]
                    s = {key: k[key] for key in ("warps", "stages", "step_tokens", "shared_bytes", "registers", "loop")}
                    with swapped(method, s, k["chain"]):
                        row[variant] = predicted_ms(method, batch, context, hw)
                print(hw_name, method, batch, context, {v: round(r["ms"], 4) for v, r in row.items()}, flush=True)
    Path(out).write_text(json.dumps(doc, indent=1) + "\n")
    return doc


if __name__ == "__main__":
    main(Path(sys.argv[1]) if len(sys.argv) > 1 else OUT)
