"""The two-command CLI of a lab run module (run18.py, run19.py): `predict OUT.json` before the run, `compare RESULTS
--predicted P [--out REPORT]` after it (the report printed, and written where --out says)."""

from __future__ import annotations

import argparse
import json
from collections.abc import Callable
from pathlib import Path


def main(doc: str, predict: Callable[[Path], None], compare: Callable[[Path, dict], str]) -> None:
    p = argparse.ArgumentParser(description=doc.splitlines()[0])
    sub = p.add_subparsers(dest="cmd", required=True)
    sub.add_parser("predict").add_argument("out", type=Path)
    c = sub.add_parser("compare")
    c.add_argument("results", type=Path)
    c.add_argument("--predicted", type=Path, required=True)
    c.add_argument("--out", type=Path)
    a = p.parse_args()
    if a.cmd == "predict":
        predict(a.out)
        return
    text = compare(a.results, json.loads(a.predicted.read_text()))
    if a.out:
        a.out.write_text(text)
    print(text, end="")
