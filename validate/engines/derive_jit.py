"""moe_jit_key_s (roofline.engines.timing mechanism 12) from jit_probe.py's results, written into engine profiles.

    python -m validate.engines.derive_jit RUN_DIR --into roofline/engines/profiles/vllm.json [--into ...sglang.json]

The compile a new fused-MoE key costs: the median wall of the first calls that compiled (cubins_added > 0) in
RUN_DIR/jit-cold.json and RUN_DIR/jit-warm*.json, each process's first call left out (it carries the process's own
first use: module and CUDA loading, 530-565 ms with nothing compiled in run 18's warm processes). Only this field
and its source change in each profile; the rest of the file is kept as it is (its own derive scripts wrote it).
vLLM's kernel is the one timed; SGLang's copy takes the same arguments (adapted from vLLM's) and its profile takes the
same figure, its source saying so."""

from __future__ import annotations

import argparse
import json
import statistics
from pathlib import Path

from validate import stored


def key_seconds(run: Path) -> tuple[float, list[float], list[str]]:
    walls, files = [], []
    for name in ("jit-cold.json", "jit-warm.json", "jit-warm2.json"):
        f = run / name
        if not stored.exists(f):
            continue
        calls = json.loads(stored.read_text(f))["calls"][1:]
        walls += [c["s"] for c in calls if c["cubins_added"] > 0]
        files.append(str(f))
    if not walls:
        raise SystemExit(f"{run}: no jit_probe.py call that compiled")
    return statistics.median(walls), walls, files


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("run", type=Path)
    p.add_argument("--into", type=Path, action="append", required=True)
    a = p.parse_args()
    value, walls, files = key_seconds(a.run)
    for profile in a.into:
        d = json.loads(profile.read_text())
        d["moe_jit_key_s"] = value
        d["sources"]["moe_jit_key_s"] = (
            f"{', '.join(files)}: median of the {len(walls)} first calls that compiled a new key (two kernels each), "
            f"each process's first call left out ({', '.join(f'{w:.3f}' for w in walls)} s); vLLM 0.24's "
            "fused_experts at E 128, top-k 8, H 2048, I 768" + ("" if "vllm" in profile.name else
                                                                 "; SGLang's copy of the kernel not timed apart"))
        profile.write_text(json.dumps(d, indent=1) + "\n")
        print(f"{profile}: moe_jit_key_s {value:.4f} s")


if __name__ == "__main__":
    main()
