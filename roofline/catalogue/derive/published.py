"""python -m roofline.catalogue.derive.published [--write]

Measured sections (kind 'derived') from published microbenchmarks (published.yaml: each figure with its
repository, commit, file and what it measured) for catalogue devices aiconfigurator has no tables for. With
--write each goes into hardware/derived/<name>.yaml and, unless the catalogue file holds a measured section,
hardware/<name>.yaml (roofline.catalogue.derive.write). `checks` in the same file holds the publishers' figures on
H100-SXM and H200, which tests/test_derived.py compares with the sections measured here.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import yaml

from roofline.catalogue.derive.write import write_device
from roofline.errors import SpecError

DATA = Path(__file__).with_name("published.yaml")
NOTE = ("# Derived by `python -m roofline.catalogue.derive.published --write` from published microbenchmarks "
        "(never by hand)")


def published() -> dict:
    """published.yaml as a mapping."""
    return yaml.safe_load(DATA.read_text())


def section(name: str) -> dict:
    """The measured section (kind 'derived') of catalogue device `name` from published.yaml."""
    entry = published()["devices"].get(name)
    if entry is None:
        raise SpecError(f"published: no entry for {name!r}; have {sorted(published()['devices'])}")
    return {"kind": "derived", **entry}


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="python -m roofline.catalogue.derive.published")
    p.add_argument("--write", action="store_true", help="write hardware/derived/*.yaml and the catalogue files")
    args = p.parse_args(argv)
    try:
        for name in published()["devices"]:
            s = section(name)
            where = write_device(name, s, NOTE) if args.write else "not written"
            print(f"{name}: {s['device']}: read {s['read_bytes_per_s'] / 1e12:.3f} TB/s ({where})")
    except (SpecError, ValueError, OSError) as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
