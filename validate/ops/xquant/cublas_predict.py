"""The roofline's prediction of XQuant's cuBLAS materialized path (cases variant "materialized_cublas"), committed
before its GPU run. No GPU; nothing is fitted to a timing.

    python -m validate.ops.xquant.cublas_predict [OUT.json [CASES.json]]

Writes CASES.json (default validate/results/experiments/cublas-cases.json: the grid's materialized_cublas cases as a
validate.fresh draw file, so that `python -m validate bench --cases` runs only them) and OUT.json (default
cublas-predicted.json): per device (H100-SXM, H200: the catalogue specs, which `validate compare` uses for a results
file without ceilings cases), per case: families.xquant.predict (cublas_ops on the roofline, the GEMM at the measured
GEMM ceiling times its tile wave factor, materialized's attention, the fixed per-kernel costs) with its kernels'
parts, the GEMM's and the whole remat's share of the GEMM ceiling, and beside it fused's and materialized's
predictions and committed measurements (validate/results/nvidia-h{100,200}.json). Per batch, `crossover`: the
smallest context (a multiple of G = 128) from which the predicted cuBLAS path stays at or below the predicted fused
kernel, and the same against fused's committed measurements on the grid.

The assumptions the numbers rest on, recorded in OUT.json ("assumptions"): cuBLAS's tile (families.xquant.GEMM_TILE)
and that its GEMM at r = H_kv d_h = 1024 runs at the 8192^3 ceiling once its tiles fill the SMs; one cuBLAS kernel per
torch.bmm; the family's per-kernel time for every kernel (the clients' gemm_latency_s, 4.9 us on the H100, is not
used); intermediate buffers (x^K, x^V, K, V) round-trip through DRAM even where L2 would hold them.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from validate.common.sm90 import ROOT

EXPERIMENTS = ROOT / "validate" / "results" / "experiments"
OUT, CASES = EXPERIMENTS / "cublas-predicted.json", EXPERIMENTS / "cublas-cases.json"
DEVICES = {"H100-SXM": "nvidia-h100.json", "H200": "nvidia-h200.json"}
VARIANT = "materialized_cublas"
ASSUMPTIONS = [
    "cuBLAS's bf16 GEMM tile is 128 x 256 (families.xquant.GEMM_TILE), one CTA per SM at a time: B L <= 2048 is one "
    "wave of <= 128 CTAs at one SM's share of the ceiling each (12.5 us on the H100)",
    "the GEMM (N = K = 1024) reaches the measured 8192^3 ceiling (gemm_flops_per_s) over whole waves; its DRAM traffic "
    "(x read, K and V written) is half its compute time and hides under it",
    "one CUDA kernel per torch.bmm (the bench records the kernels it ran: gemm_kernels)",
    "each kernel pays the family's per-kernel time (measured kernel_overhead_s, 1.0 us), not the clients' cuBLAS "
    "gemm_latency_s (4.9 us on the H100)",
    "x^K, x^V and K, V go through DRAM between the kernels (no L2 reuse), as materialized's K, V do",
]


def grid_cases() -> list:
    """The full grid's materialized_cublas cases, in grid order (batch, then context)."""
    from validate.ops.xquant.cases import XQuantFamily

    return [c for c in XQuantFamily().cases(False) if c.params["variant"] == VARIANT]


def _ms(variant: str, batch: int, context: int, hardware) -> float:
    from roofline.validation.results_file import Case
    from validate.model.families import xquant as family
    from validate.ops.xquant.cases import params

    return family.predict(Case("xquant", variant, params(variant, batch, context)), hardware)["time_s"] * 1e3


def crossover(batch: int, hardware, contexts: list[int], group: int = 128) -> dict:
    """Where the predicted cuBLAS path stops losing to the predicted fused kernel: "grid_context", the smallest grid
    context from which it is no slower at every larger grid context; "context", the smallest multiple of `group` in
    the bracket below that grid context from which it stays no slower through the bracket (both step with the waves
    of the GEMM's tiles and of fused's programs, so the bracket is scanned, not bisected; None: fused stays ahead
    at the longest context)."""
    def ahead(n: int) -> bool:
        return _ms(VARIANT, batch, n, hardware) <= _ms("fused", batch, n, hardware)

    grid = [ahead(n) for n in contexts]
    if not grid[-1]:
        return {"context": None, "grid_context": None}
    start = max((i for i, ok in enumerate(grid) if not ok), default=-1) + 1
    if start == 0:
        return {"context": contexts[0], "grid_context": contexts[0]}
    first = contexts[start]
    for n in range(contexts[start] - group, contexts[start - 1], -group):  # down from the grid context
        if not ahead(n):
            break
        first = n
    return {"context": first, "grid_context": contexts[start]}


def measured_crossover(rows: list[dict], batch: int) -> int | None:
    """The smallest grid context from which the predicted cuBLAS path is at or below fused's committed time."""
    mine = [r for r in rows if r["batch"] == batch and r["fused_measured_ms"] is not None
            and r["context"] % 128 == 0]
    ahead = [r["predicted_ms"] <= r["fused_measured_ms"] for r in mine]
    if not ahead or not ahead[-1]:
        return None
    return mine[max((i for i, ok in enumerate(ahead) if not ok), default=-1) + 1]["context"]


def device_rows(hardware, measured: dict) -> list[dict]:
    """One row per grid case (module docstring)."""
    from validate.model.families import xquant as family
    from validate.ops.xquant.cases import case_name, params

    rows = []
    for case in grid_cases():
        p = case.params
        pred = family.predict(case, hardware)
        parts = {f"{k}_ms": v["time_s"] * 1e3 for k, v in pred["parts"].items()}
        others = {}
        for variant in ("fused", "materialized"):
            name = case_name(params(variant, p["batch"], p["context"]))
            others[f"{variant}_predicted_ms"] = _ms(variant, p["batch"], p["context"], hardware)
            others[f"{variant}_measured_ms"] = measured.get(name)
        rows.append({"case": case.name, "batch": p["batch"], "context": p["context"],
                     "predicted_ms": pred["time_s"] * 1e3, "remat_ms": pred["remat_s"] * 1e3, **parts,
                     "bound": pred["bound"], "kernels": pred["kernels"], "gemm_bound": pred["parts"]["gemm"]["bound"],
                     "gemm_ceiling_fraction": pred["gemm_ceiling_fraction"],
                     "remat_ceiling_fraction": pred["remat_ceiling_fraction"], **others})
        print(hardware.name, {k: round(v, 4) if isinstance(v, float) else v for k, v in rows[-1].items()}, flush=True)
    return rows


def main(out: Path = OUT, cases_out: Path = CASES) -> dict:
    """Write the cases file and the predictions (module docstring)."""
    from roofline.validation.results_file import load
    from validate.model.families import xquant as family
    from validate.model.hardware import load_hardware
    from validate.ops.xquant.cases import BATCHES, CONTEXTS

    Path(cases_out).write_text(json.dumps({"source": "validate/ops/xquant/cublas_predict.py: the grid's "
                                                     f"{VARIANT} cases",
                                           "cases": [c.as_dict() for c in grid_cases()]}, indent=1) + "\n")
    devices = {}
    for name, file in DEVICES.items():
        hardware = load_hardware(name)
        committed = load(ROOT / "validate" / "results" / file)
        measured = {r["name"]: r.get("ms") for r in committed["cases"] if r["family"] == "xquant"}
        rows = device_rows(hardware, measured)
        cross = {b: {**crossover(b, hardware, list(CONTEXTS)),
                     "measured_fused_grid_context": measured_crossover(rows, b)} for b in BATCHES}
        print(name, "crossover", cross, flush=True)
        devices[name] = {"results": f"validate/results/{file}", "gemm_flops_per_s": hardware.measured.gemm_flops_per_s,
                         "sm_count": hardware.sm_count, "rows": rows, "crossover_vs_fused": cross}
    doc = {"source": "validate/ops/xquant/cublas_predict.py (committed before the GPU run of "
                     f"`python -m validate bench --cases {Path(cases_out).relative_to(ROOT)}`)",
           "gemm_tile": list(family.GEMM_TILE), "assumptions": ASSUMPTIONS,
           "cases": str(Path(cases_out).relative_to(ROOT)), "devices": devices}
    Path(out).write_text(json.dumps(doc, indent=1) + "\n")
    return doc


if __name__ == "__main__":
    main(*(Path(a) for a in sys.argv[1:3]))
