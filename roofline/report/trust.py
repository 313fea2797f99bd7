"""How far to trust a latency on the page: the validation error of its kind of op on the chosen GPU, from the
committed GPU measurements (roofline.validation: results files + compare), and the slow pages' data (claims,
validation reports) computed once and kept by content (roofline.numbers.codegen.cached_json: memory, then disk).

The content key covers roofline's sources (codegen.code_version), the catalogue files and the results files, so an
edit to any of them recomputes; nothing is keyed by time.
"""

from __future__ import annotations

import hashlib
import statistics
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from roofline.errors import RooflineError, one_line

ATTENTION_OPS = ("attention", "attn_qk", "attn_pv")
BASELINE_FAMILY = "fp16_attention"  # the uncompressed cache's attention kernel
CALIBRATION = "ceilings"


_DIGESTS: dict[tuple, str] = {}  # (path, size, mtime_ns) of every file -> their digest: a page's key costs stats


def _files_digest(paths) -> str:
    """sha256 of the files' names and bytes, recomputed only when a file's path, size or mtime changes."""
    files = sorted(Path(p) for p in paths)
    stats = tuple((str(p), st.st_size, st.st_mtime_ns) for p in files for st in (p.stat(),))
    if stats not in _DIGESTS:
        digest = hashlib.sha256()
        for path in files:
            digest.update(path.name.encode())
            digest.update(path.read_bytes())
        if len(_DIGESTS) > 64:  # edited files leave stale entries behind: keep the dictionary small
            _DIGESTS.clear()
        _DIGESTS[stats] = digest.hexdigest()[:16]
    return _DIGESTS[stats]


def data_key(kind: str) -> str:
    """The content key of a page's data: roofline's sources, the catalogue and the committed results files."""
    from roofline.catalogue.store import catalogue_dir
    from roofline.numbers import codegen
    from roofline.report.dashboard import results_files

    catalogue = [p for k in ("hardware", "models") for p in catalogue_dir(k).glob("*.yaml")]
    return codegen.content_key(f"app-{kind}", _files_digest(catalogue), _files_digest(results_files()))


def cached(kind: str, compute):
    """`compute()` once per content key (memory, then disk): a page's data survives a server restart."""
    from roofline.numbers import codegen

    return codegen.cached_json(data_key(kind), compute)


def claims_rows() -> list[dict[str, Any]]:
    """report.dashboard.claims_rows, kept by content."""
    from roofline.report import dashboard

    return cached("claims", dashboard.claims_rows)


def validation_reports() -> list[dict[str, Any]]:
    """One comparison per committed results file ({"file", "error"} for one that cannot be read), kept by content."""
    from roofline.report import dashboard

    def compute() -> list[dict[str, Any]]:
        out = []
        for path in dashboard.results_files():
            try:
                out.append(dashboard.validation_report(path))
            except (RooflineError, ValueError, OSError) as err:
                out.append({"file": path.name, "error": one_line(str(err))})
        return out

    return cached("validation", compute)


def error_index(reports: list[dict[str, Any]]) -> dict[str, dict[str, dict]]:
    """{hardware name: {error class: {"median_ape_pct", "cases", "file"}}} where an error class is a kernel family
    ('fp16_attention', 'zack', ...), a family and the method its cases name ('quant_attention:kivi', via the
    SPEC's method name), or a calibration kind ('ceilings:read', 'ceilings:gemm:bf16')."""
    from roofline.methods import parse_method

    index: dict[str, dict[str, list[float]]] = {}
    files: dict[str, str] = {}
    methods: dict[str, str] = {}
    for entry in reports:
        if "error" in entry:
            continue
        hardware = entry["report"]["hardware"]
        files[hardware] = entry["file"]
        classes = index.setdefault(hardware, {})
        for family, fam in entry["report"]["families"].items():
            for row in fam["rows"]:
                if row["ape_pct"] is None:
                    continue
                names = [family]
                params = row.get("params") or {}
                if params.get("method"):
                    if params["method"] not in methods:
                        methods[params["method"]] = parse_method(params["method"]).method
                    if methods[params["method"]] != family:
                        names.append(f"{family}:{methods[params['method']]}")
                if family == CALIBRATION and params.get("kind"):
                    dtype = params.get("dtype") if params["kind"] == "gemm" else None
                    names.append(":".join(p for p in (family, params["kind"], dtype) if p))
                for name in names:
                    classes.setdefault(name, []).append(row["ape_pct"])
    return {hw: {name: {"median_ape_pct": statistics.median(apes), "cases": len(apes), "file": files[hw]}
                 for name, apes in classes.items()} for hw, classes in index.items()}


def latency_index() -> dict[str, dict[str, dict]]:
    """error_index of the committed results, kept by content."""
    return cached("errors", lambda: error_index(validation_reports()))


def error_class(spec: str, op: str, bound: str, compute_dtype: str, classes: Mapping[str, Any]) -> str | None:
    """The validation class that measured an op like `op` of method `spec`: the method's own kernel family for
    attention and method ops, the streaming read (memory-bound) or the GEMM (compute-bound) for weight ops."""
    from roofline.methods import parse_method

    config = parse_method(spec)
    if op in ATTENTION_OPS or op.startswith(config.method):
        for name in (*(n for n in classes if n.endswith(f":{config.method}") and not n.startswith(CALIBRATION)),
                     config.method):
            if name in classes:
                return name
        return BASELINE_FAMILY if config.family == "baseline" and BASELINE_FAMILY in classes else None
    name = f"{CALIBRATION}:read" if bound == "memory" else f"{CALIBRATION}:gemm:{compute_dtype}"
    return name if name in classes else None


def latency_error(index: Mapping[str, Any], hardware: str, spec: str, phase: Mapping[str, Any],
                  compute_dtype: str) -> dict[str, Any]:
    """{"class", "median_ape_pct", "cases", "text"} for one phase ('decode' or 'prefill' of a plan row) on
    `hardware`: the measured error of its dominant op's kind, or the reason there is none."""
    classes = index.get(hardware)
    if not classes:
        return {"class": None, "median_ape_pct": None, "cases": 0, "text": "not validated on this device"}
    name = error_class(spec, phase["dominant_op"], phase.get("dominant_bound", phase["bound"]), compute_dtype,
                       classes)
    if name is None:
        return {"class": None, "median_ape_pct": None, "cases": 0,
                "text": f"{phase['dominant_op']}: not validated for this method"}
    c = classes[name]
    return {"class": name, "median_ape_pct": c["median_ape_pct"], "cases": c["cases"],
            "text": f"±{c['median_ape_pct']:.1f} % ({name}, {c['cases']} cases)"}
