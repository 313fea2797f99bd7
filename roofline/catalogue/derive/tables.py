"""Reading aiconfigurator's measured per-op tables: where they are, which backend version, with provenance.

Layout of the `aiconfigurator-core` wheel (0.12.0; github.com/ai-dynamo/aiconfigurator, aic-core/src/
aiconfigurator_core/systems): systems/<system>.yaml (the node: datasheet bandwidth, NVLink, GPUs per node),
systems/data/<system>/<op family>/<backend>/<version>/<table>.parquet (one row per measured kernel call, `latency`
in milliseconds), systems/query_versions.yaml (the 'current' version of each backend per system, the one
aiconfigurator itself queries). Needs pandas and pyarrow (the optional extra `aic`); never imported at plan time.
"""

from __future__ import annotations

import re
import tempfile
import zipfile
from dataclasses import dataclass
from pathlib import Path

import yaml

PACKAGE = "aiconfigurator_core"


class DatabaseError(ValueError):
    """The database is missing, unreadable, or lacks a table or a row a ceiling needs."""


@dataclass(frozen=True)
class Database:
    """An unpacked aiconfigurator_core package: its root folder and version."""

    root: Path  # the aiconfigurator_core folder
    version: str

    @property
    def systems(self) -> Path:
        return self.root / "systems"

    def system_spec(self, system: str) -> dict:
        """systems/<system>.yaml as a mapping."""
        path = self.systems / f"{system}.yaml"
        if not path.is_file():
            raise DatabaseError(f"system: {system!r} has no {path.relative_to(self.root.parent)}")
        return yaml.safe_load(path.read_text())

    def current_version(self, system: str, backend: str) -> str | None:
        """The 'current' version query_versions.yaml gives `backend` on `system` (its override, else the default)."""
        path = self.systems / "query_versions.yaml"
        if not path.is_file():
            return None
        spec = yaml.safe_load(path.read_text())
        slot = (spec.get("overrides") or {}).get(system, {}).get(backend) or spec.get("defaults", {}).get(backend)
        return (slot or {}).get("current")

    def table_path(self, system: str, family: str, backend: str, table: str, version: str | None = None) -> Path:
        """systems/data/<system>/<family>/<backend>/<version>/<table>.parquet: the given version, else the system's
        current one when it has the table, else the newest version that has it."""
        base = self.systems / "data" / system / family / backend
        have = sorted((p.parent.name for p in base.glob(f"*/{table}.parquet")), key=_version_key)
        if not have:
            raise DatabaseError(f"{system}: no {family}/{backend}/*/{table}.parquet in aiconfigurator {self.version}")
        wanted = version or self.current_version(system, backend)
        chosen = wanted if wanted in have else have[-1]
        if version is not None and version not in have:
            raise DatabaseError(f"{system}: {family}/{backend}/{version}/{table}.parquet is absent; have {have}")
        return base / chosen / f"{table}.parquet"

    def read(self, path: Path):
        """The table at `path` (a pandas DataFrame), latency in milliseconds as stored."""
        import pandas as pd

        return pd.read_parquet(path)

    def relative(self, path: Path) -> str:
        """`path` as it sits inside the package (aiconfigurator_core/...)."""
        return str(path.relative_to(self.root.parent))


def _version_key(version: str) -> tuple:
    """'1.3.0rc20' -> (1, 3, 0, 'rc', 20): numeric parts compare as numbers."""
    return tuple(int(p) if p.isdigit() else p for p in re.findall(r"\d+|[a-z]+", version))


def open_database(path: Path) -> Database:
    """A Database from an aiconfigurator_core folder, the folder holding it (an unpacked wheel), or the wheel file
    itself (`pip download aiconfigurator-core`), unpacked into a temporary folder."""
    path = Path(path)
    if path.is_file() and path.suffix == ".whl":
        out = Path(tempfile.mkdtemp(prefix="aic-"))
        with zipfile.ZipFile(path) as wheel:
            names = [n for n in wheel.namelist() if n.startswith(f"{PACKAGE}/systems/") or ".dist-info/" in n]
            wheel.extractall(out, members=names)
        path = out
    root = path if path.name == PACKAGE else path / PACKAGE
    if not (root / "systems").is_dir():
        raise DatabaseError(f"--package: {path} is not an aiconfigurator-core wheel or folder (no {PACKAGE}/systems)")
    return Database(root=root, version=_package_version(root))


def _package_version(root: Path) -> str:
    """Version from the wheel's dist-info METADATA beside the package folder."""
    for meta in sorted(root.parent.glob("aiconfigurator_core-*.dist-info/METADATA")):
        for line in meta.read_text().splitlines():
            if line.startswith("Version:"):
                return line.split(":", 1)[1].strip()
    raise DatabaseError(f"--package: no aiconfigurator_core-*.dist-info/METADATA beside {root} (version unknown)")
