"""The error bands the committed validation supports, read from the lab's compare reports (never typed in).

Two kinds of report are committed beside the measurements (`results_folder()`:
`validate/results/` in a checkout, `roofline/_results/` in the wheel):

- real decoders, `clients/<device>-compare.txt`: one row per timed decode or prefill step of a whole model
  (`Llama-3.1-8B/compiled/decode/b16-c4096  meas ms  pred ms  err %  ...`), written by
  `python -m validate.clients compare`. The planner's fusion levels map onto the clients' modes: `full`
  (torch.compile) -> `compiled`, `none` (eager PyTorch) -> `eager`, `typical` (vLLM / SGLang) -> both pooled.
  `hf-static` rows (Hugging Face's static-cache `generate`, a path no serving engine runs, and which the report's
  own targets leave out) are left out here too.
- kernels, `<device>-compare.txt`: one block per kernel family (`quant_attention: 60 compared, ...`) and one row
  per case (`kivi-2_b1_l1024  measured ms  predicted ms  APE %  ...`). A case counts for the method its name's
  SPEC parses to (quant_attention's `kivi-2_...`, `skvq-k2v2_...`), else for the method its family is named after
  (`xquant`, `zack`, `aquakv`); `fp16_attention` times the uncompressed 16-bit cache's attention, so it counts for
  the bf16 and fp16 baselines (not fp8, whose dequantizing kernel nobody timed). A method with no case is not
  validated at the kernel level: it never borrows another family's error.

A band is the median and the 90th percentile of the absolute percentage error over the rows, with the count.
"""

from __future__ import annotations

import functools
import statistics
from pathlib import Path
from typing import Any

FUSION_MODES = {"full": ("compiled",), "none": ("eager",), "typical": ("compiled", "eager")}
PHASES = ("decode", "prefill")
BASELINE_FAMILY = "fp16_attention"
BASELINE_FAMILY_DTYPES = ("bf16", "fp16")


def method_key(config) -> str:
    """The kernel-validation key of a method config: its method name, or `baseline:<dtype>` for a plain cache."""
    return f"baseline:{config.dtype}" if config.method == "baseline" else config.method


def _float(text: str) -> float | None:
    try:
        return float(text)
    except ValueError:
        return None


def band(apes: list[float]) -> dict[str, Any] | None:
    """{"median_ape_pct", "p90_ape_pct", "cases"} of absolute percentage errors (p90: the nearest-rank 90th
    percentile), or None for no rows."""
    if not apes:
        return None
    ordered = sorted(apes)
    p90 = ordered[min(len(ordered) - 1, max(0, -(-9 * len(ordered) // 10) - 1))]
    return {"median_ape_pct": round(statistics.median(ordered), 2), "p90_ape_pct": round(p90, 2),
            "cases": len(ordered)}


def decoder_rows(text: str) -> list[tuple[str, str, str, float]]:
    """(model, mode, phase, signed error %) of every case row of a real-decoder compare report."""
    rows = []
    for line in text.splitlines():
        parts = line.split()
        if len(parts) < 4 or parts[0].count("/") != 3:
            continue
        model, mode, phase, _shape = parts[0].split("/")
        err = _float(parts[3])
        if phase in PHASES and err is not None and None not in (_float(parts[1]), _float(parts[2])):
            rows.append((model, mode, phase, err))
    return rows


def kernel_rows(text: str) -> list[tuple[str, str, float]]:
    """(family, case name, APE %) of every compared case row of a kernel compare report."""
    rows, family = [], None
    for line in text.splitlines():
        if ": " in line and " compared, median APE" in line:
            family = line.split(":", 1)[0].strip()
            continue
        parts = line.split()
        if family is None or len(parts) < 4 or parts[0] == "case":
            continue
        ape = _float(parts[3])
        if ape is not None and _float(parts[1]) is not None and _float(parts[2]) is not None:
            rows.append((family, parts[0], ape))
    return rows


def _report(source: str | None, folder: Path | None, sub: str) -> Path | None:
    """The compare report beside the results file `source` names (`validate/results/[clients/]<stem>.json`)."""
    if not source or not source.split() or folder is None:
        return None
    path = folder / sub / f"{Path(source.split()[0]).stem}-compare.txt"
    return path if path.is_file() else None


@functools.lru_cache(maxsize=64)
def read_report(path: Path) -> str:
    """A committed report's text, read once per process (the reports do not change while it runs)."""
    return path.read_text(encoding="utf-8", errors="replace")


def results_folder() -> Path | None:
    """The committed compare reports: `validate/results/` in a checkout, else the copies the wheel ships in
    `roofline/_results/` (pyproject force-include: the reports only, never raw results); None when neither is
    present."""
    package = Path(__file__).resolve().parents[1]
    for candidate in (package.parent / "validate" / "results", package / "_results"):
        if candidate.is_dir():
            return candidate
    return None


def decoder_bands(client_source: str | None, fusion: str, folder: Path | None = None) -> dict[str, Any] | None:
    """{"decode": band, "prefill": band, "models": [...], "file"} of the real decoders timed on the device whose
    client results file is `client_source`, at the fusion level's modes; None when no report was committed."""
    folder = results_folder() if folder is None else folder
    path = _report(client_source, folder, "clients")
    if path is None:
        return None
    modes = FUSION_MODES.get(fusion, FUSION_MODES["typical"])
    rows = [r for r in decoder_rows(read_report(path)) if r[1] in modes]
    out: dict[str, Any] = {p: band([abs(r[3]) for r in rows if r[2] == p]) for p in PHASES}
    signed = [r[3] for r in rows if r[2] == "decode"]
    out.update(models=sorted({r[0] for r in rows}), modes=list(modes), file=f"clients/{path.name}",
               decode_median_signed_pct=round(statistics.median(signed), 2) if signed else None)
    return out


def kernel_bands(source: str | None, folder: Path | None = None) -> dict[str, dict[str, Any]]:
    """{method name: band + "family" + "presets"} of the kernel cases measured on the device whose results file
    is `source`: a case counts for the method its name's SPEC parses to (`kivi-2_b1_l1024` -> kivi)."""
    from roofline.methods import parse_method, presets

    folder = results_folder() if folder is None else folder
    path = _report(source, folder, "")
    if path is None:
        return {}
    known = set(presets())
    methods = {parse_method(name).method for name in known}
    by_method: dict[str, dict[str, Any]] = {}
    for family, case, ape in kernel_rows(read_report(path)):
        spec = case.split("_", 1)[0]
        if spec in known:
            keys = [method_key(parse_method(spec))]
        elif family == BASELINE_FAMILY:
            keys = [f"baseline:{dtype}" for dtype in BASELINE_FAMILY_DTYPES]
        elif family in methods:
            keys = [family]
        else:
            continue
        for key in keys:
            entry = by_method.setdefault(key, {"apes": [], "families": set(), "presets": set()})
            entry["apes"].append(ape)
            entry["families"].add(family)
            entry["presets"].add(spec if spec in known else family)
    return {m: {**band(e["apes"]), "families": sorted(e["families"]), "presets": sorted(e["presets"]),
                "file": path.name} for m, e in by_method.items()}


def pooled_decoder_bands(client_sources, fusion: str, folder: Path | None = None) -> dict[str, Any] | None:
    """The real decoders' bands over several devices' reports pooled (for ceilings validated only through the
    devices measured here: a user's calibration runs the same microbenchmarks), None when no report exists."""
    folder = results_folder() if folder is None else folder
    modes = FUSION_MODES.get(fusion, FUSION_MODES["typical"])
    rows: dict[str, list[float]] = {p: [] for p in PHASES}
    for client in client_sources:
        path = _report(client, folder, "clients")
        for _model, mode, phase, err in decoder_rows(read_report(path)) if path else ():
            if mode in modes:
                rows[phase].append(abs(err))
    return {p: band(rows[p]) for p in PHASES} if any(rows.values()) else None


def memory_rows(text: str) -> list[tuple[str, str, float]]:
    """(case, reserve, signed error %) of a real-decoder report's memory boundary block
    (`Llama-3.1-8B/memory/b16   default   1.089   31232   31925   31744   +1.64  ABOVE the real limit`: the longest
    context the planner predicts at batch 16 against the longest the decoder really held)."""
    rows, inside = [], False
    for line in text.splitlines():
        if line.startswith("memory boundary"):
            inside = True
            continue
        parts = line.split()
        if inside and len(parts) >= 7 and "/memory/" in parts[0] and (err := _float(parts[6])) is not None:
            rows.append((parts[0], parts[1], err))
    return rows


def capacity_band(client_source: str | None, folder: Path | None = None) -> dict[str, Any] | None:
    """The memory boundary at the planner's default reserve (the `default` rows) with its median signed error
    (positive: the planner promises more context than the decoder held), None when no row was committed."""
    folder = results_folder() if folder is None else folder
    path = _report(client_source, folder, "clients")
    errors = [err for _case, reserve, err in memory_rows(read_report(path)) if reserve == "default"] if path else []
    b = band([abs(e) for e in errors])
    return None if b is None else {**b, "median_signed_pct": round(statistics.median(errors), 2),
                                   "file": f"clients/{path.name}"}
