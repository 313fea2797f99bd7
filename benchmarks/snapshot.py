"""Snapshot the CLI's JSON outputs over a fixed set of scenarios, to prove a refactor keeps behaviour.

    python benchmarks/snapshot.py OUT_DIR          # write one JSON file per scenario
    python benchmarks/snapshot.py OUT_DIR --diff REF_DIR   # and compare with an earlier snapshot
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import sys
from pathlib import Path

SCENARIOS: dict[str, list[str]] = {
    "plan-default": ["plan", "--json"],
    "plan-70b-tp4": ["plan", "--model", "Llama-3.1-70B", "--tp", "4", "--method", "kivi-2", "--method", "xquant-2",
                     "--method", "fp8", "--batch", "8", "--context", "65536", "--json"],
    "plan-moe": ["plan", "--model", "Mixtral-8x7B", "--hardware", "H200", "--method", "bf16", "--method", "skvq",
                 "--json"],
    "plan-mla": ["plan", "--model", "DeepSeek-V3", "--hardware", "H200", "--tp", "8", "--weight-dtype", "fp8",
                 "--method", "bf16", "--method", "kivi-2", "--json"],
    "plan-swa": ["plan", "--model", "Gemma-2-9B", "--method", "bf16", "--method", "innerq-base", "--json"],
    "plan-pp": ["plan", "--model", "Llama-3.1-70B", "--tp", "2", "--pp", "2", "--method", "bf16",
                "--method", "aquakv-2", "--json"],
    "plan-stack": ["plan", "--method", "zack-50+kvquant-4+keyformer-50", "--method", "zack-50", "--json"],
    "plan-a100": ["plan", "--hardware", "A100-80GB", "--model", "Qwen2.5-7B", "--method", "xquant-cl-2",
                  "--method", "turboquant-3", "--batch", "4", "--context", "131072", "--json"],
    "plan-eviction": ["plan", "--method", "h2o-2048", "--method", "keyformer-50", "--json"],
    "plan-sla": ["plan", "--model", "Qwen3-8B", "--method", "bf16", "--method", "kvquant-4", "--tpot-target-ms", "30",
                 "--json"],
    "claims": ["claims", "--json"],
    "limits": ["limits", "remat", "--model", "Llama-3.1-8B", "--hardware", "H200", "--bits", "2", "--json"],
}


def kv_scenarios() -> dict[str, list[str]]:
    from roofline.methods import presets

    return {f"kv-{name}": ["kv", "--model", "Llama-3.1-8B", "--context", "32768", "--batch", "4", "--method", name,
                           "--json"] for name in sorted(presets())}


def run(argv: list[str]) -> object:
    from roofline.cli import main

    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        try:
            code = main(argv)
        except SystemExit as exc:
            code = exc.code
    text = out.getvalue()
    try:
        return {"code": code, "json": json.loads(text)}
    except ValueError:
        return {"code": code, "text": text}


def same(a: object, b: object, rel: float = 1e-9) -> bool:
    """Equal, floats within `rel` (compiled arithmetic may round the last digits differently)."""
    if isinstance(a, float) and isinstance(b, int | float) or isinstance(b, float) and isinstance(a, int | float):
        return a == b or abs(a - b) <= rel * max(abs(a), abs(b))
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(same(a[k], b[k], rel) for k in a)
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(same(x, y, rel) for x, y in zip(a, b, strict=True))
    return a == b


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("out")
    parser.add_argument("--diff")
    args = parser.parse_args()
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    failures = 0
    for name, argv in {**SCENARIOS, **kv_scenarios()}.items():
        result = run(argv)
        (out / f"{name}.json").write_text(json.dumps(result, indent=1, sort_keys=True))
        if args.diff:
            ref = json.loads((Path(args.diff) / f"{name}.json").read_text())
            if not same(ref, json.loads(json.dumps(result))):
                failures += 1
                print(f"DIFF {name}")
    print(f"{failures} scenarios differ" if args.diff else f"wrote {out}")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
