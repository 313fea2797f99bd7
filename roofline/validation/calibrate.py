"""Turn the "ceilings" measurements into a hardware spec's `measured:` section.

    read_bytes_per_s   median over the LARGEST_SIZES largest read sizes of bytes / time
    copy_bytes_per_s   the same over the copy cases (bytes = read + written)
    gemm_flops_per_s   2 M N K / time per dtype measured (fp8 absent when it was skipped)
    launch_latency_s   the empty-kernel launch time
    bandwidth_curve    every read case as (bytes, bytes / time), by size
    memory_latency_s,  alpha and 1/beta of time = alpha + bytes / stream_bytes_per_s fitted to every read
    stream_bytes_per_s case by least squares on relative residuals (a latency-bandwidth law)
The YAML file is rewritten as text: its `measured:` block (if any) is replaced and every other line,
comments included, is kept; the result is validated as a Hardware spec before an atomic rename.
"""

from __future__ import annotations

import datetime as dt
import os
import statistics
import tempfile
from pathlib import Path

import yaml

from roofline.validation.results_file import ResultsError, measured

LARGEST_SIZES = 3
ROOT = Path(__file__).resolve().parents[2]  # the checkout (a results file's source is relative to it)


def _rate(row: dict, what: str = "bytes") -> float:
    return row[what] / (row["ms"] * 1e-3)


def _stream_rows(results: dict, kind: str) -> list[dict]:
    rows = [r for r in measured(results, "ceilings") if r["params"].get("kind") == kind]
    return sorted(rows, key=lambda r: r["bytes"])


def stream_bandwidth(results: dict, kind: str = "read") -> float | None:
    """Median bytes/s of the LARGEST_SIZES largest `kind` ('read' or 'copy') cases; None without any."""
    rows = _stream_rows(results, kind)
    return statistics.median(_rate(r) for r in rows[-LARGEST_SIZES:]) if rows else None


def latency_bandwidth_fit(results: dict) -> tuple[float, float]:
    """(alpha_s, bytes_per_s) minimizing sum(((alpha + S/bw) - t) / t)^2 over the read cases: linear least
    squares in (alpha, 1/bw) after dividing each equation by its measured time."""
    import numpy as np

    rows = _stream_rows(results, "read")
    if len(rows) < 2:
        raise ResultsError("calibrate: the latency-bandwidth fit needs at least two read sizes")
    sizes = np.array([r["bytes"] for r in rows], dtype=float)
    times = np.array([r["ms"] * 1e-3 for r in rows])
    design = np.stack([1 / times, sizes / times], axis=1)
    (alpha, inverse_bw), *_ = np.linalg.lstsq(design, np.ones_like(times), rcond=None)
    if alpha <= 0 or inverse_bw <= 0:
        raise ResultsError(f"calibrate: latency-bandwidth fit is not physical (alpha {alpha}, 1/bw {inverse_bw})")
    return float(alpha), float(1 / inverse_bw)


def measured_section(results: dict, source: str) -> dict:
    """The `measured:` mapping for roofline.specs.Measured, from a results file's ceilings cases."""
    env = results["env"]
    read, copy = stream_bandwidth(results, "read"), stream_bandwidth(results, "copy")
    gemm = {r["params"]["dtype"]: _rate(r, "flops") for r in measured(results, "ceilings")
            if r["params"].get("kind") == "gemm"}
    launch = [r for r in measured(results, "ceilings") if r["params"].get("kind") == "launch"]
    missing = [name for name, got in (("read", read), ("copy", copy), ("gemm", gemm), ("launch", launch)) if not got]
    if missing:
        raise ResultsError(f"calibrate: the results have no measured ceilings {'/'.join(missing)} cases")
    for key in ("device", "date", "driver", "torch", "triton"):
        if not env.get(key):
            raise ResultsError(f"calibrate: env.{key}: missing from the results")
    return {
        "device": env["device"],
        "date": dt.date.fromisoformat(str(env["date"])[:10]),
        "driver": str(env["driver"]),
        "torch": str(env["torch"]),
        "triton": str(env["triton"]),
        "read_bytes_per_s": _sig(read),
        "copy_bytes_per_s": _sig(copy),
        "gemm_flops_per_s": {dtype: _sig(v) for dtype, v in sorted(gemm.items())},
        "launch_latency_s": _sig(launch[0]["ms"] * 1e-3),
        "memory_latency_s": _sig(latency_bandwidth_fit(results)[0]),
        "stream_bytes_per_s": _sig(latency_bandwidth_fit(results)[1]),
        "bandwidth_curve": [[int(r["bytes"]), _sig(_rate(r))] for r in _stream_rows(results, "read")],
        "source": source,
    }


def _sig(x: float) -> float:
    """Four significant digits: the run-to-run spread of a median is larger than that."""
    return float(f"{x:.4g}")


def replace_measured_block(text: str, section: dict, note: str) -> str:
    """`text` with its top-level `measured:` block (up to the next top-level line) replaced by `section`."""
    lines = text.splitlines()
    start = next((i for i, line in enumerate(lines) if line.startswith("measured:")), None)
    if start is not None:
        end = start + 1
        while end < len(lines) and (not lines[end].strip() or lines[end][0] in " \t"):
            end += 1
        lines = lines[:start] + lines[end:]
    while lines and not lines[-1].strip():
        lines.pop()
    if start is not None and start > 0 and lines[start - 1].startswith("# Measured by"):
        lines.pop(start - 1)
    block = yaml.safe_dump({"measured": section}, sort_keys=False, default_flow_style=None, width=120)
    return "\n".join(lines + [f"# {note}", block.rstrip("\n")]) + "\n"


def _source_path(results_path: Path) -> str:
    path = results_path.resolve()
    return str(path.relative_to(ROOT)) if path.is_relative_to(ROOT) else str(results_path)


def calibrate(results: dict, results_path: Path, hardware_file: Path) -> dict:
    """Write the measured ceilings into `hardware_file`; returns the section written."""
    from roofline.catalogue.loading import parse_text, read_text, validate
    from roofline.specs import Hardware

    section = measured_section(results, _source_path(Path(results_path)))
    text = read_text(Path(hardware_file))
    note = f"Measured by `python -m validate calibrate` from {section['source']}; datasheet figures above stand."
    new_text = replace_measured_block(text, section, note)
    spec = validate(Hardware, parse_text(new_text, str(hardware_file)), str(hardware_file))
    if spec.measured is None:
        raise ResultsError(f"{hardware_file}: measured: the rewritten file lost its measured section")
    hardware_file = Path(hardware_file)
    fd, tmp = tempfile.mkstemp(dir=hardware_file.parent, prefix=f".{hardware_file.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(new_text)
        os.chmod(tmp, hardware_file.stat().st_mode & 0o777)
        os.replace(tmp, hardware_file)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return section
