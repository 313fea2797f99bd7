"""Byte-identity check of `roofline plan --json` across a change (not a test: minutes of CPU).

    python benchmarks/plan_identity.py write OUT.json [--tp 1 2 8] [--model NAME ...] [--no-extra]
    python benchmarks/plan_identity.py compare BEFORE.json AFTER.json

`write` runs `roofline plan --json` (every preset that applies, the default scenario) for every catalogue model at
each tp, in bf16 and, where that is refused (the model does not fit), in fp8 ("<model> tp<n> fp8"), in one process
(roofline.cli.main, stdout and stderr captured), with an empty compile cache (ROOFLINE_CACHE_DIR set to a fresh
folder unless already set), and stores {"<model> tp<n>": {"rc", "stdout", "stderr"}}. Unless --no-extra, also
EXTRA_PLANS (other hardware, tp x pp, engines, weight dtypes, ceilings, fusion, the fit solver) and `roofline
capacity --json` for every model under each engine of CAPACITY_ENGINES, keyed by their argv. `compare` reports
every key whose output differs (exit status 1 if any, 0 if all are equal): byte-identical, or equal JSON whose
numbers agree within a relative 1e-12. Run `write` with PYTHONPATH at two checkouts (before and after an edit to
the compiled code), then `compare`.
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

EXTRA_PLANS = (
    "--model Llama-3.1-70B --hardware H200 --tp 2 --engine vllm",
    "--model Llama-3.1-8B --hardware A100-80GB --engine trtllm --ceilings datasheet",
    "--model Qwen3-30B-A3B --hardware MI300X --engine sglang --weight-dtype fp8",
    "--model Gemma-2-9B --hardware L40S --engine llamacpp --weight-dtype int4 --fusion none",
    "--model DeepSeek-V2-Lite --tp 2 --pp 2 --fusion full",
    "--model Llama-3.1-8B --hardware RTX-4090 --weight-dtype fp8 --fewest-gpus --tpot-target-ms 25",
    "--model Qwen3-8B --hardware B200 --batch 64 --context 131072 --prompt 120000",
    "--model Mixtral-8x7B --hardware H100-SXM --tp 2 --ep 2 --engine vllm",
    "--model Llama-3.2-1B --hardware Jetson-AGX-Orin-64GB --batch 1 --context 8192",
)
CAPACITY_ENGINES = (("vllm", ""), ("sglang", "--tp 2"), ("trtllm", "--hardware H200"), ("llamacpp", "--parallel 4"))


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


def write(path: str, tps: list[int], models: list[str] | None, extra: bool = True) -> None:
    """Run every scenario (see the module's docstring) and store the outputs in `path`."""
    if "ROOFLINE_CACHE_DIR" not in os.environ:
        os.environ["ROOFLINE_CACHE_DIR"] = tempfile.mkdtemp(prefix="roofline-identity-")
    out, begin = {}, time.process_time()
    for model in models or catalogue_models():
        for tp in tps:
            for dtype in ("bf16", "fp8"):
                key, start = f"{model} tp{tp}" + ("" if dtype == "bf16" else f" {dtype}"), time.process_time()
                out[key] = run_plan(["plan", "--model", model, "--tp", str(tp), "--weight-dtype", dtype, "--json"])
                print(f"{key}: rc {out[key]['rc']}, {time.process_time() - start:.1f} s CPU", file=sys.stderr,
                      flush=True)
                if out[key]["rc"] == 0:
                    break
    if extra:
        for args in EXTRA_PLANS:
            out[f"plan {args}"] = run_plan(["plan", *args.split(), "--json"])
        for model in models or catalogue_models():
            for engine, args in CAPACITY_ENGINES:
                key = f"capacity --model {model} --engine {engine} {args}".strip()
                out[key] = run_plan(key.split() + ["--json"])
        print(f"extra: {time.process_time() - begin:.1f} s CPU in all", file=sys.stderr)
    Path(path).write_text(json.dumps(out, indent=1, sort_keys=True))


def close(a: object, b: object, rel: float = 1e-12) -> bool:
    """a == b, numbers within a relative `rel` (JSON structures compared item by item)."""
    if isinstance(a, float | int) and isinstance(b, float | int) and not isinstance(a, bool):
        return a == b or abs(a - b) <= rel * max(abs(a), abs(b))
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(close(a[k], b[k], rel) for k in a)
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(close(x, y, rel) for x, y in zip(a, b, strict=True))
    return a == b


def same(a: dict | None, b: dict | None) -> str:
    """'identical', 'close' (the JSON's numbers within 1e-12) or 'differs'."""
    if a == b:
        return "identical"
    if a is None or b is None or a["rc"] != b["rc"] or a["stderr"] != b["stderr"]:
        return "differs"
    try:
        return "close" if close(json.loads(a["stdout"]), json.loads(b["stdout"])) else "differs"
    except ValueError:
        return "differs"


def compare(before: str, after: str) -> int:
    a, b = json.loads(Path(before).read_text()), json.loads(Path(after).read_text())
    verdicts = {k: same(a.get(k), b.get(k)) for k in sorted(a.keys() | b.keys())}
    differ = [k for k, v in verdicts.items() if v == "differs"]
    for key, verdict in verdicts.items():
        if verdict != "identical":
            print(f"{verdict}: {key}")
    plans = sum(1 for v in a.values() if v["rc"] == 0)
    closes = sum(v == "close" for v in verdicts.values())
    print(f"{len(a.keys() & b.keys())} scenarios compared ({plans} ran, {len(a) - plans} refused), "
          f"{len(verdicts) - len(differ) - closes} byte-identical, {closes} within 1e-12, {len(differ)} differ")
    return 1 if differ else 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="cmd", required=True)
    w = sub.add_parser("write")
    w.add_argument("out")
    w.add_argument("--tp", type=int, nargs="+", default=[1, 2, 8])
    w.add_argument("--model", nargs="+")
    w.add_argument("--no-extra", action="store_true", help="only the catalogue's plans at each tp")
    c = sub.add_parser("compare")
    c.add_argument("before")
    c.add_argument("after")
    args = parser.parse_args()
    if args.cmd == "write":
        write(args.out, args.tp, args.model, not args.no_extra)
        return 0
    return compare(args.before, args.after)


if __name__ == "__main__":
    sys.exit(main())
