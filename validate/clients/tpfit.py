"""python -m validate.clients.tpfit predict|calibrate|compare   (pure Python: roofline, no torch)

predict    --hardware H200 --gpus 2 --out FILE    all-reduce times from the scale-up link and tp decode steps
           (roofline's compiled-client prediction at tp), written and committed before the run
calibrate  --results FILE --hardware-file FILE    fit the ring model (latency + bandwidth) to the measured
           all-reduces into the spec's scale_up link (its source note says so)
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

from validate.clients.calibrate import latency_bandwidth

SIZES = [16 << 10 << k for k in range(15)]  # validate/clients/tp.py's (16 KB .. 256 MB)
SHAPES = [(1, 1024), (1, 8192), (16, 4096), (64, 2048), (64, 8192)]


def fit_link(rows: list[dict]) -> dict[str, float]:
    """{"bytes_per_s", "latency_s"} of the ring model fitted to measured all-reduce rows (params.bytes, ms):
    t = alpha + (2 (n-1)/n S) / bw, latency = alpha / (2 (n-1))."""
    n = rows[0]["params"]["gpus"]
    alpha, bw = latency_bandwidth([2 * (n - 1) / n * r["params"]["bytes"] for r in rows],
                                  [r["ms"] * 1e-3 for r in rows])
    return {"bytes_per_s": float(f"{bw:.4g}"), "latency_s": float(f"{alpha / (2 * (n - 1)):.4g}")}


def calibrate(results_path: Path, hardware_file: Path) -> dict:
    """Write the fitted link into `hardware_file`'s scale_up (bytes_per_s, latency_s) and its source."""
    from roofline.catalogue.loading import parse_text, validate
    from roofline.specs import Hardware

    results = json.loads(results_path.read_text())
    rows = [r for r in results["cases"] if r.get("family") == "allreduce" and r.get("ms")]
    fit = fit_link(rows)
    text = hardware_file.read_text()
    block = re.search(r"^scale_up:\n((?:  .*\n)+)", text, re.M)
    body = re.sub(r"^  bytes_per_s: .*$", f"  bytes_per_s: {fit['bytes_per_s']:.4g}     # fitted: {results_path}",
                  block.group(1), flags=re.M)
    body = re.sub(r"^  latency_s: .*$", f"  latency_s: {fit['latency_s']:.4g}", body, flags=re.M)
    text = text[:block.start(1)] + body + text[block.end(1):]
    env = results["env"]
    note = (f"Fitted by `python -m validate.clients.tpfit calibrate` from {results_path}: ring all-reduce t = "
            f"2(n-1)/n S / bytes_per_s + 2(n-1) latency_s, relative least squares over {len(rows)} NCCL all-reduces "
            f"of 16 KB .. 256 MB (bf16, CUDA graph) on {env['gpus']} x {env['device']} ({env['date']}, driver "
            f"{env['driver']}, NCCL {env['nccl']}, NVLS off); datasheet NVLink 4: 900 GB/s bidirectional per GPU.")
    text = re.sub(r'^  scale_up: ".*"$', lambda _m: f'  scale_up: "{note}"', text, count=1, flags=re.M)
    validate(Hardware, parse_text(text, str(hardware_file)), str(hardware_file))
    hardware_file.write_text(text)
    return fit


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
