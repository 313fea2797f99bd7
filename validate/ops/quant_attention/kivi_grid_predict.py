"""The roofline's prediction of the grid's KIVI cases (kivi-2, kivi-4: 2 x 3 batches x 4 contexts) with the kernel
tiled_launch now launches for them (qall-r128: tiled_launch.LAUNCH, validate/notes/2026-11-23-kivi-kernel-variants.md),
committed before they are
re-timed. No GPU; nothing is fitted to a timing.

    PYTHONPATH=. python -m validate.ops.quant_attention.kivi_grid_predict [OUT.json [CASES.json]]

Writes CASES.json (default validate/results/experiments/kivi-grid-cases.json: the 24 cases as a validate.fresh draw
file, names as the grid's, so that `python -m validate bench --probe-clock --cases CASES.json --out X.json` runs
exactly them) and OUT.json (default kivi-grid-predicted.json): per device (H100-SXM <- nvidia-h100.json, H200 <-
nvidia-h200.json), per case, as `python -m validate compare` predicts a row: the catalogue spec with the results
file's measured ceilings (compare.calibrated) at the case's committed probe clock (case_clock.at_case_clock), from
the committed structure and chains (validate/model/structure: qall-r128's) -> "predicted_ms"; beside it the
committed measured ms of the old kernel (VAR 0, no register cap), the prediction of that old kernel at the same
clock ("old_predicted_ms": kivi-variants-predicted.json's "default" structure and chain swapped in, which are the
structure files' KIVI entries before the switch) and the new kernel's prediction at the spec clock
("predicted_spec_ms"). Two columns for reading the run, neither a prediction of record: "projected_ms" = old measured
x predicted / old predicted (the old kernel's measured-to-predicted ratio carried over: the model's KIVI error at the
probe clock, 6-8 % over at large shapes, cancels) and "variants_ms", qall-r128 as the KIVI variants run timed it where
it did (nvidia-h{100,200}-kivi-variants.json, 4 shapes a method). A re-timed case runs at its own clock: its compare
report predicts it there.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from validate.common.sm90 import ROOT
from validate.ops.quant_attention.kivi_variants import METHODS, swapped

EXPERIMENTS = ROOT / "validate" / "results" / "experiments"
OUT, CASES = EXPERIMENTS / "kivi-grid-predicted.json", EXPERIMENTS / "kivi-grid-cases.json"
DEVICES = {"H100-SXM": "nvidia-h100.json", "H200": "nvidia-h200.json"}
VARIANTS_RUN = {"H100-SXM": "nvidia-h100-kivi-variants.json", "H200": "nvidia-h200-kivi-variants.json"}
OLD = EXPERIMENTS / "kivi-variants-predicted.json"  # its "<method>/default": the old kernel's structure and chain
STRUCTURE_KEYS = ("warps", "stages", "step_tokens", "shared_bytes", "registers", "loop")


def grid_cases() -> list:
    """The full grid's kivi-2 and kivi-4 cases, in grid order (method, batch, context)."""
    from validate.ops.quant_attention.cases import QuantAttention

    return [c for c in QuantAttention().cases(False) if c.params["method"] in METHODS]


def _old_kernels() -> dict:
    """method -> (structure, chain) of the old kernel (kivi-variants-predicted.json's "default")."""
    kernels = json.loads(OLD.read_text())["kernels"]
    return {m: ({k: kernels[f"{m}/default"][k] for k in STRUCTURE_KEYS}, kernels[f"{m}/default"]["chain"])
            for m in METHODS}


def _variants_ms(name: str) -> dict:
    """(method, batch, context) -> ms of qall-r128 in the KIVI variants run on catalogue device `name`."""
    rows = json.loads((EXPERIMENTS / VARIANTS_RUN[name]).read_text())["rows"]
    return {(r["method"], r["batch"], r["context"]): r["ms"] for r in rows if r["variant"] == "qall-r128"}


def device_rows(hardware, results: dict, variants: dict) -> list[dict]:
    """One row per grid case (module docstring); `hardware` already calibrated with `results`' ceilings, `variants`
    as _variants_ms."""
    from validate.model.case_clock import at_case_clock, case_mhz
    from validate.model.families import quant_attention as family

    measured = {r["name"]: r for r in results["cases"] if r["family"] == "quant_attention"}
    old = _old_kernels()
    rows = []
    for case in grid_cases():
        p, row = case.params, measured.get(case.name, {})
        if row and row["params"] != p:
            raise ValueError(f"{case.name}: the committed row's params differ from the grid's")
        at_clock = at_case_clock(hardware, row)
        pred = family.predict(case, at_clock)
        spec = family.predict(case, hardware)
        with swapped(p["method"], *old[p["method"]]):
            before = family.predict(case, at_clock)
        out = {"case": case.name, "method": p["method"], "batch": p["batch"], "context": p["context"],
               "probe_mhz": case_mhz(row), "predicted_ms": pred["time_s"] * 1e3, "bound": pred["bound"],
               "resident_programs": pred.get("resident_programs"), "predicted_spec_ms": spec["time_s"] * 1e3,
               "old_measured_ms": row.get("ms"), "old_predicted_ms": before["time_s"] * 1e3,
               "old_splits": row.get("num_splits")}
        out["predicted_over_old_measured"] = out["predicted_ms"] / out["old_measured_ms"] if row.get("ms") else None
        out["projected_ms"] = out["old_measured_ms"] * out["predicted_ms"] / out["old_predicted_ms"] if row.get(
            "ms") else None
        out["variants_ms"] = variants.get((p["method"], p["batch"], p["context"]))
        rows.append(out)
        print(hardware.name, {k: round(v, 4) if isinstance(v, float) else v for k, v in out.items()}, flush=True)
    return rows


def main(out: Path = OUT, cases_out: Path = CASES) -> dict:
    """Write the cases file and the predictions (module docstring)."""
    from roofline.validation.results_file import load
    from validate.model import kernel_structure as ks
    from validate.model.compare import calibrated
    from validate.model.hardware import load_hardware

    Path(cases_out).write_text(json.dumps({"source": "validate/ops/quant_attention/kivi_grid_predict.py: the grid's "
                                                     "kivi-2 and kivi-4 cases", "cases": [c.as_dict() for c in
                                                                                         grid_cases()]}, indent=1)
                               + "\n")
    devices = {}
    for name, file in DEVICES.items():
        results = load(ROOT / "validate" / "results" / file)
        devices[name] = {"results": f"validate/results/{file}",
                         "rows": device_rows(calibrated(load_hardware(name), results), results, _variants_ms(name))}
    structure = ks.kernels("quant_attention")["kernels"]
    doc = {"source": "validate/ops/quant_attention/kivi_grid_predict.py (committed before the GPU run of "
                     f"`python -m validate bench --probe-clock --cases {Path(cases_out).relative_to(ROOT)}`)",
           "kernel": "qall-r128 (tiled_launch.LAUNCH: VAR QALL, maxnreg 128), validate/model/structure "
                     "quant_attention.json and chains.json",
           "structure": {m: {k: structure[m][k] for k in ("registers", "shared_bytes")}
                         | {"wavefronts": structure[m]["loop"]["wavefronts"]} for m in METHODS},
           "clock": "predicted_ms at each case's committed probe clock (as `python -m validate compare`), with the "
                    "results file's measured ceilings; predicted_spec_ms at the spec's boost clock",
           "cases": str(Path(cases_out).relative_to(ROOT)), "devices": devices}
    Path(out).write_text(json.dumps(doc, indent=1) + "\n")
    return doc


if __name__ == "__main__":
    main(*(Path(a) for a in sys.argv[1:3]))
