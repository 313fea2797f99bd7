"""python -m validate.clients.tpfit predict|calibrate|compare   (pure Python: roofline, no torch)

predict    --hardware H200 --gpus 2 --out FILE    all-reduce times from the scale-up link and tp decode steps
           (roofline's compiled-client prediction at tp), written and committed before the run
calibrate  --results FILE --hardware-file FILE    the spec's scale_up bytes_per_s := the bus bandwidth of the
           largest measured all-reduce (its source note says so); the all-reduce's latencies are NCCL's
           constants (roofline.costmodel.collectives), nothing is fitted
compare    --results FILE --hardware H200 [--out FILE]   the tables of roofline.validation.tp.compare
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import re
import subprocess
import sys
from pathlib import Path

SIZES = [16 << 10 << k for k in range(15)]  # validate/clients/tp.py's (16 KB .. 256 MB)
SHAPES = [(1, 1024), (1, 8192), (16, 4096), (64, 2048), (64, 8192)]


def bus_bandwidth(rows: list[dict]) -> dict:
    """{"bytes", "bytes_per_s"}: nccl-tests' bus bandwidth 2 (n-1)/n x S / t of the largest measured all-reduce
    (params.bytes, params.gpus, ms), to 4 significant digits: NCCL's Simple protocol near its asymptote."""
    r = max(rows, key=lambda r: r["params"]["bytes"])
    n, size = r["params"]["gpus"], r["params"]["bytes"]
    return {"bytes": size, "bytes_per_s": float(f"{2 * (n - 1) / n * size / (r['ms'] * 1e-3):.4g}")}


def calibrate(results_path: Path, hardware_file: Path) -> dict:
    """Write the measured bus bandwidth into `hardware_file`'s scale_up bytes_per_s, and its source note
    (latency_s stays: the all-to-all's per-hop latency; the all-reduce takes NCCL's constants)."""
    from roofline.catalogue.loading import parse_text, validate
    from roofline.specs import Hardware

    results = json.loads(results_path.read_text())
    rows = [r for r in results["cases"] if r.get("family") == "allreduce" and r.get("ms")]
    bus = bus_bandwidth(rows)
    text = hardware_file.read_text()
    block = re.search(r"^scale_up:\n((?:  .*\n)+)", text, re.M)
    body = re.sub(r"^  bytes_per_s: .*$", f"  bytes_per_s: {bus['bytes_per_s']:.4g}     # measured: {results_path}",
                  block.group(1), flags=re.M)
    text = text[:block.start(1)] + body + text[block.end(1):]
    env = results["env"]
    note = (f"bytes_per_s measured by `python -m validate.clients.tpfit calibrate` from {results_path}: the bus "
            f"bandwidth 2(n-1)/n S / t of its largest NCCL all-reduce ({bus['bytes']} bytes, bf16, CUDA graph; "
            f"NCCL's Simple protocol) on {env['gpus']} x {env['device']} ({env['date']}, driver {env['driver']}, "
            f"NCCL {env['nccl']}, NVLS off), not fitted; the all-reduce's latencies are NCCL's tuner constants "
            "(roofline.costmodel.collectives); latency_s (used by the all-to-all and the pipeline hand-off only) is "
            "left as it was; datasheet NVLink 4: 900 GB/s "
            "bidirectional per GPU.")
    text = re.sub(r'^  scale_up: ".*"$', lambda _m: f'  scale_up: "{note}"', text, count=1, flags=re.M)
    validate(Hardware, parse_text(text, str(hardware_file)), str(hardware_file))
    hardware_file.write_text(text)
    return bus


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="validate.clients.tpfit")
    p.add_argument("what", choices=["predict", "calibrate", "compare"])
    p.add_argument("--hardware", default="H200")
    p.add_argument("--hardware-file", type=Path)
    p.add_argument("--gpus", type=int, default=2)
    p.add_argument("--results", type=Path)
    p.add_argument("--out", type=Path)
    args = p.parse_args(argv)
    from roofline.catalogue import load_hardware
    from roofline.validation import tp

    if args.what == "predict":
        data = tp.predictions(load_hardware(args.hardware), SIZES, SHAPES, args.gpus)
        sha = subprocess.run(["git", "rev-parse", "HEAD"], capture_output=True, text=True).stdout.strip()
        data.update(hardware=args.hardware, gpus=args.gpus, date=dt.date.today().isoformat(), git_sha=sha,
                    note="predicted before the run (scale_up link as in the spec; measured ceilings, fusion full)")
        args.out.write_text(json.dumps(data, indent=1) + "\n")
        print(f"-> {args.out}")
    elif args.what == "calibrate":
        print(calibrate(args.results, args.hardware_file))
    else:
        report = tp.compare(json.loads(args.results.read_text()), load_hardware(args.hardware))
        text = tp.compare_text(report)
        if args.out:
            args.out.write_text(text + "\n")
        print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
