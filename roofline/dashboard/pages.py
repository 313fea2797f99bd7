"""The slow pages' data (claims, validation reports) computed once and kept by content
(roofline.numbers.codegen.cached_json: memory, then disk). How far to trust a number on the page is
roofline.trust's (the ceilings' source and the error bands of the committed validation), beside each plan row."""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Any

from roofline.errors import RooflineError, one_line

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
    from roofline.dashboard.appdata import results_files
    from roofline.numbers import codegen

    catalogue = [p for k in ("hardware", "models") for p in catalogue_dir(k).glob("*.yaml")]
    return codegen.content_key(f"app-{kind}", _files_digest(catalogue), _files_digest(results_files()))


def cached(kind: str, compute):
    """`compute()` once per content key (memory, then disk): a page's data survives a server restart."""
    from roofline.numbers import codegen

    return codegen.cached_json(data_key(kind), compute)


def claims_rows() -> list[dict[str, Any]]:
    """dashboard.appdata.claims_rows, kept by content."""
    from roofline.dashboard import appdata as dashboard

    return cached("claims", dashboard.claims_rows)


def validation_reports() -> list[dict[str, Any]]:
    """One comparison per committed results file ({"file", "error"} for one that cannot be read), kept by content."""
    from roofline.dashboard import appdata as dashboard

    def compute() -> list[dict[str, Any]]:
        out = []
        for path in dashboard.results_files():
            try:
                out.append(dashboard.validation_report(path))
            except (RooflineError, ValueError, OSError) as err:
                out.append({"file": path.name, "error": one_line(str(err))})
        return out

    return cached("validation", compute)
