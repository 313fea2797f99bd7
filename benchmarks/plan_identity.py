"""Byte-identity check of `roofline plan --json` across a change (not a test: minutes of CPU).

    python benchmarks/plan_identity.py write OUT.json [--tp 1 2 8] [--model NAME ...]
    python benchmarks/plan_identity.py compare BEFORE.json AFTER.json

`write` runs `roofline plan --json` (every preset that applies, the default scenario) for every catalogue model at
each tp, in bf16 and, where that is refused (the model does not fit), in fp8 ("<model> tp<n> fp8"), in one process
(roofline.cli.main, stdout and stderr captured), with an empty compile cache (ROOFLINE_CACHE_DIR set to a fresh
folder unless already set), and stores {"<model> tp<n>": {"rc", "stdout", "stderr"}}. `compare` reports every key
whose output differs (exit status 1 if any, 0 if all are byte-identical). Run `write` with PYTHONPATH at two
checkouts (before and after an edit to the compiled code), then `compare`.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import os
import sys
import tempfile
import time
from pathlib import Path


def catalogue_models() -> list[str]:
    """Names of the catalogue's models (models/*.yaml of the checkout on PYTHONPATH)."""
    import roofline

    root = Path(roofline.__file__).resolve().parent.parent / "models"
    return sorted(p.stem for p in root.glob("*.yaml"))


def run_plan(argv: list[str]) -> dict:
    """roofline.cli.main(argv) with its output captured: {"rc", "stdout", "stderr"}."""
    from roofline.cli import main

    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        rc = main(argv)
    return {"rc": rc, "stdout": out.getvalue(), "stderr": err.getvalue()}


def write(path: str, tps: list[int], models: list[str] | None) -> None:
    if "ROOFLINE_CACHE_DIR" not in os.environ:
        os.environ["ROOFLINE_CACHE_DIR"] = tempfile.mkdtemp(prefix="roofline-identity-")
    out = {}
    for model in models or catalogue_models():
        for tp in tps:
            for dtype in ("bf16", "fp8"):
                key, start = f"{model} tp{tp}" + ("" if dtype == "bf16" else f" {dtype}"), time.process_time()
                out[key] = run_plan(["plan", "--model", model, "--tp", str(tp), "--weight-dtype", dtype, "--json"])
                print(f"{key}: rc {out[key]['rc']}, {time.process_time() - start:.1f} s CPU", file=sys.stderr,
                      flush=True)
                if out[key]["rc"] == 0:
                    break
    Path(path).write_text(json.dumps(out, indent=1, sort_keys=True))


def compare(before: str, after: str) -> int:
    a, b = json.loads(Path(before).read_text()), json.loads(Path(after).read_text())
    differ = sorted(k for k in a.keys() | b.keys() if a.get(k) != b.get(k))
    for key in differ:
        print(f"differs: {key}")
    plans = sum(1 for v in a.values() if v["rc"] == 0)
    print(f"{len(a.keys() & b.keys())} scenarios compared ({plans} planned, {len(a) - plans} refused), "
          f"{len(differ)} differ")
    return 1 if differ else 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="cmd", required=True)
    w = sub.add_parser("write")
    w.add_argument("out")
    w.add_argument("--tp", type=int, nargs="+", default=[1, 2, 8])
    w.add_argument("--model", nargs="+")
    c = sub.add_parser("compare")
    c.add_argument("before")
    c.add_argument("after")
    args = parser.parse_args()
    if args.cmd == "write":
        write(args.out, args.tp, args.model)
        return 0
    return compare(args.before, args.after)


if __name__ == "__main__":
    sys.exit(main())
