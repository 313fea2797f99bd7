"""Which catalogue device each aiconfigurator system is, and writing its derived section into the YAML files.

The files are rewritten as text (comments kept): the top-level `measured:` block, with the comment line above it
that names its origin, is replaced, and the result is validated as a Hardware spec before an atomic rename.
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

import yaml

from roofline.catalogue.derive.section import derived_section
from roofline.catalogue.derive.tables import Database, DatabaseError
from roofline.catalogue.loading import parse_text, validate
from roofline.catalogue.store import catalogue_dir, load_hardware
from roofline.specs import Hardware

# aiconfigurator system (systems/<system>.yaml) -> catalogue name. rtx_pro_6000_server is the Server Edition of the
# GB202 board the catalogue's RTX-PRO-6000 (Workstation Edition) describes: same 188 SMs, 96 GB GDDR7 at
# 1.792 TB/s and 600 W (systems/rtx_pro_6000_server.yaml; NVIDIA RTX PRO 6000 Blackwell datasheets). b60 is the
# Intel Arc Pro B60 (systems/b60.yaml, vLLM XPU tables). Systems with a yaml but no tables in 0.12.0 (a100_pcie,
# a30, h100_pcie, l4) are not listed.
SYSTEMS = {"a100_sxm": "A100-80GB", "b200_sxm": "B200", "b300_sxm": "B300", "gb200": "GB200", "gb300": "GB300",
           "h100_sxm": "H100-SXM", "h200_sxm": "H200", "l40s": "L40S", "rtx_pro_6000_server": "RTX-PRO-6000",
           "b60": "Arc-Pro-B60"}
BANDWIDTH_TOLERANCE = 0.05  # database datasheet bandwidth vs the catalogue's: further apart is another SKU
DERIVED_DIR = "derived"
NOTE = ("# Derived by `python -m roofline.catalogue.derive --package aiconfigurator_core-{v}-*.whl --write` "
        "(never by hand)")


def derive_device(db: Database, system: str, name: str, backend: str) -> dict:
    """The derived section of catalogue device `name` from `system`'s tables, after checking that the system's
    datasheet bandwidth (gpu.mem_bw) is the catalogue's within BANDWIDTH_TOLERANCE."""
    hardware = load_hardware(name)
    theirs = float(db.system_spec(system)["gpu"]["mem_bw"])
    if abs(theirs / hardware.memory_bytes_per_s - 1) > BANDWIDTH_TOLERANCE:
        raise DatabaseError(f"{system}: gpu.mem_bw {theirs:g} B/s is not {name}'s memory_bytes_per_s "
                            f"{hardware.memory_bytes_per_s:g} within {BANDWIDTH_TOLERANCE:.0%}")
    return derived_section(db, system, hardware.l2_cache_bytes, backend)


def with_section(text: str, section: dict, note: str) -> str:
    """`text` with its top-level `measured:` block (and the origin comment above it) replaced by `section`."""
    lines = text.splitlines()
    start = next((i for i, line in enumerate(lines) if line.startswith("measured:")), None)
    if start is not None:
        end = start + 1
        while end < len(lines) and (not lines[end].strip() or lines[end][0] in " \t#"):
            end += 1
        lines = lines[:start] + lines[end:]
        if start > 0 and lines[start - 1].startswith(("# Measured by", "# Derived by")):
            lines.pop(start - 1)
    while lines and not lines[-1].strip():
        lines.pop()
    block = yaml.safe_dump({"measured": section}, sort_keys=False, default_flow_style=None, width=120)
    return "\n".join(lines + [note, block.rstrip("\n")]) + "\n"


def _replace(path: Path, text: str) -> None:
    """Validate `text` as a Hardware spec, then write it to `path` by an atomic rename."""
    validate(Hardware, parse_text(text, str(path)), str(path))
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(text)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def write_device(name: str, section: dict, note: str | None = None) -> str:
    """Write hardware/derived/<name>.yaml, and hardware/<name>.yaml unless it holds a measured or calibrated
    section, with `note` (default: the aiconfigurator command) above the section; returns the files written."""
    source = catalogue_dir("hardware") / f"{name}.yaml"
    text = source.read_text()
    note = note or NOTE.format(v=section["source"].split()[1])
    new_text = with_section(text, section, note)
    out = source.parent / DERIVED_DIR / source.name
    out.parent.mkdir(exist_ok=True)
    _replace(out, new_text)
    current = (yaml.safe_load(text) or {}).get("measured")
    if current and current.get("kind", "measured") != "derived":
        return f"{out.parent.name}/{out.name}; {source.name} keeps its {current.get('kind', 'measured')} section"
    _replace(source, new_text)
    return f"{out.parent.name}/{out.name} and {source.name}"
