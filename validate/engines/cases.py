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


def prediction_parser(default: str) -> argparse.ArgumentParser:
    """A predictor's command line: OUT_JSON, --hardware (H200), --cases (`default`)."""
    p = argparse.ArgumentParser()
    p.add_argument("out", type=Path)
    p.add_argument("--hardware", default="H200")
    add_cases(p, default)
    return p


def checkout_sha() -> str:
    """The checkout's commit, which a prediction records (git rev-parse HEAD; '' outside a checkout)."""
    import subprocess

    return subprocess.run(["git", "rev-parse", "HEAD"], capture_output=True, text=True).stdout.strip()


def write_prediction(path: Path, doc: dict) -> None:
    """A prediction's JSON at `path` (its folder made), and the line saying so."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(doc, indent=1) + "\n")
    print(f"wrote {path}")
