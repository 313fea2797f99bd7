"""The kits' cases files (validate/engines/*.json): the `--cases` flag a predictor or a test-file writer takes, and
its reading, with one line naming the flag where the name is not a file of this folder. Standard library only: the
drivers run it on the GPU machine, where roofline's dependencies may be absent."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

HERE = Path(__file__).resolve().parent


def add_cases(p: argparse.ArgumentParser, default: str) -> None:
    """`--cases NAME` (a file of this folder; `default` when omitted)."""
    p.add_argument("--cases", default=default, help="the cases file (this folder)")


def read_cases(p: argparse.ArgumentParser, name: str) -> dict:
    """The cases file `name` of this folder, or p.error naming --cases (exit 2) where there is none."""
    if not (HERE / name).is_file():
        p.error(f"--cases: {name} must be a file of validate/engines/")
    return json.loads((HERE / name).read_text())
