"""Fresh shapes: cases outside the committed grids, drawn with a seed, predicted before they are measured.

    python -m validate.fresh draw --seed S --count N --out CASES.json
    python -m validate.fresh predict --cases CASES.json --hardware H100-SXM --out PREDICTED.json
    python -m validate bench --cases CASES.json --out RESULTS.json          (on the GPU)
    python -m validate compare --results RESULTS.json

Each drawn case takes a random case of a family's full grid as its template (method, variant, policy, heads) and
replaces its batch and context with values no grid case of that family has: batch in [2, the grid's largest],
context log-uniform in [2,048, 196,608] (a multiple of 16), batch x context at most the grid's largest product
(the family's memory was sized for it).
The draw and the predictions are committed before the GPU run; the comparison then uses the same `predict` the
committed grids use (nothing in it sees the measurement).
"""

from __future__ import annotations

import argparse
import json
import math
import random
import re
import sys
from pathlib import Path

from roofline.validation.results_file import Case, ResultsError

SKIP = ("ceilings",)  # the ceilings measure the device itself: no shape to draw


def _grid(family) -> list[Case]:
    """The family's full grid less the variants it added after the committed draw (its `undrawn`, e.g. xquant's
    materialized_cublas): a template pool of a new length would change every later draw of a seed."""
    undrawn = getattr(family, "undrawn", ())
    return [c for c in family.cases(False) if c.params.get("variant") not in undrawn]


def draw(families, seed: int, count: int) -> list[Case]:
    """`count` cases spread over `families` in turn (SKIP excepted), each outside its family's grid."""
    rng = random.Random(seed)
    pool = [f for f in families if f.name not in SKIP]
    out: list[Case] = []
    for i in range(count):
        family = pool[i % len(pool)]
        grid = _grid(family)
        batches = {c.params["batch"] for c in grid}
        contexts = {c.params["context"] for c in grid}
        most = max(c.params["batch"] * c.params["context"] for c in grid)
        template = rng.choice(grid)
        while True:
            batch = rng.randint(2, max(batches))
            context = 16 * round(math.exp(rng.uniform(math.log(2048), math.log(196_608))) / 16)
            if batch not in batches and context not in contexts and batch * context <= most:
                break
        params = {**template.params, "batch": batch, "context": context}
        stem = re.sub(r"_?b\d+_l\d+", "", template.name)
        out.append(Case(family.name, f"fresh-{stem + '_' if stem else ''}b{batch}_l{context}", params))
    return out


def load_cases(path: Path) -> list[Case]:
    """The cases of a draw file (ResultsError naming the file and the rule when it is not one)."""
    try:
        rows = json.loads(Path(path).read_text())["cases"]
        return [Case(r["family"], r["name"], dict(r["params"])) for r in rows]
    except (OSError, ValueError, KeyError, TypeError) as err:
        raise ResultsError(f"cases: {path} is not a draw file ({{'cases': [{{family, name, params}}]}}): "
                           f"{type(err).__name__}") from None


def predict(cases: list[Case], hardware_name: str) -> list[dict]:
    """Each case's prediction (the family's `predict`, from the spec alone)."""
    from validate.model.families import FAMILIES
    from validate.model.hardware import load_hardware

    hardware = load_hardware(hardware_name)
    rows = []
    for case in cases:
        p = FAMILIES[case.family].predict(case, hardware)
        rows.append({**case.as_dict(), "predicted_ms": None if p["time_s"] is None else p["time_s"] * 1e3,
                     "bound": p.get("bound")})
    return rows


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="validate.fresh", description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)
    d = sub.add_parser("draw")
    d.add_argument("--seed", type=int, required=True)
    d.add_argument("--count", type=int, default=24)
    d.add_argument("--out", type=Path, required=True)
    p = sub.add_parser("predict")
    p.add_argument("--cases", type=Path, required=True)
    p.add_argument("--hardware", required=True)
    p.add_argument("--out", type=Path, required=True)
    args = parser.parse_args(argv)
    try:
        if args.command == "draw":
            from validate.ops import FAMILIES

            cases = draw(FAMILIES, args.seed, args.count)
            args.out.write_text(json.dumps({"seed": args.seed, "cases": [c.as_dict() for c in cases]}, indent=1))
            print(f"fresh: {len(cases)} cases -> {args.out}")
        else:
            rows = predict(load_cases(args.cases), args.hardware)
            args.out.write_text(json.dumps({"hardware": args.hardware, "cases": rows}, indent=1))
            print(f"fresh: {len(rows)} predictions on {args.hardware} -> {args.out}")
    except ResultsError as err:
        print(f"validate.fresh: {err}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
