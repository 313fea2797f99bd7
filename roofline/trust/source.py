"""Where a device's ceilings come from, and how far its datasheet is from what measured devices reach.

Sources, from the hardware spec's measured section (roofline.specs.hardware.Measured) as the planner uses it
(roofline.catalogue.ceilings.with_ceilings):

    measured    measured on the device by this project's microbenchmarks (`kind: measured`, no `estimate`)
    calibrated  a user's `roofline calibrate` on their own device (`kind: calibrated`)
    derived     derived from a measured per-op database, e.g. NVIDIA aiconfigurator (`kind: derived`)
    estimated   carried over from measured devices of the same architecture and memory generation (`estimate`)
    datasheet   no measured section (or `--ceilings datasheet`): peaks no kernel reaches

The datasheet gap is computed from the catalogue's own measured devices: their measured streaming read bandwidth
and large bf16 GEMM rate as fractions of their datasheet figures (e.g. H100-SXM's `measured.read_bytes_per_s`
against `memory_bytes_per_s`, 3.35 TB/s from NVIDIA's H100 datasheet).
"""

from __future__ import annotations

import functools
from typing import Any

SOURCES = ("measured", "calibrated", "derived", "estimated", "datasheet")


def source_kind(hardware) -> str:
    """One of SOURCES for a hardware spec as the plan uses it (after with_ceilings)."""
    m = hardware.measured
    if m is None:
        return "datasheet"
    if m.estimate:
        return "estimated"
    kind = getattr(m, "kind", "measured")  # the shared `Measured.kind` field; absent before it lands: measured
    return kind if kind in SOURCES else "measured"


def _fraction(measured: float | None, peak: float | None) -> float | None:
    return measured / peak if measured and peak else None


def device_gap(hardware) -> dict[str, Any] | None:
    """{"hardware", "read_fraction", "gemm_bf16_fraction"} of one device measured here (None otherwise)."""
    m = hardware.measured
    if m is None or m.estimate or getattr(m, "kind", "measured") != "measured":
        return None
    return {"hardware": hardware.name, "read_fraction": _fraction(m.read_bytes_per_s, hardware.memory_bytes_per_s),
            "gemm_bf16_fraction": _fraction(m.gemm_flops_per_s.get("bf16"), hardware.bf16_dense_flops_per_s)}


@functools.lru_cache(maxsize=1)
def datasheet_gap() -> dict[str, Any]:
    """How far the devices measured here fall below their datasheets: per device and the range over them."""
    from roofline.catalogue import hardware_names, load_hardware

    devices = [g for name in hardware_names() if (g := device_gap(load_hardware(name))) is not None]
    out: dict[str, Any] = {"devices": devices}
    for key in ("read_fraction", "gemm_bf16_fraction"):
        values = [d[key] for d in devices if d[key] is not None]
        out[key] = (min(values), max(values)) if values else None
    return out


def datasheet_line(gap: dict[str, Any] | None = None) -> str:
    """The one line a datasheet-only number carries: real engines run slower, and by how much measured devices
    fall below their datasheets."""
    gap = datasheet_gap() if gap is None else gap
    names = " and ".join(d["hardware"] for d in gap["devices"]) or "no device"
    parts, slower = [], []
    for key, what, phase in (("read_fraction", "of datasheet memory bandwidth", "decode"),
                             ("gemm_bf16_fraction", "of bf16 peak", "prefill")):
        if gap.get(key):
            lo, hi = gap[key]
            parts.append(_span(lo, hi) + f" {what}")
            slower.append(f"{phase} at least {_span(1 / hi - 1, 1 / lo - 1)}")
    if not parts:
        return "datasheet only: not validated on this device; real engines run slower than datasheet peaks"
    return (f"datasheet only, not validated on this device: real engines run slower (the devices measured here, "
            f"{names}, reach {', '.join(parts)}: expect {' and '.join(slower)} slower, before engine overheads)")


def _span(lo: float, hi: float) -> str:
    """'93%' or '71-78%' (one figure when both round alike)."""
    a, b = f"{lo:.0%}", f"{hi:.0%}"
    return a if a == b else f"{a[:-1]}-{b}"


@functools.lru_cache(maxsize=1)
def measured_devices() -> tuple[tuple[str, str, str | None], ...]:
    """(name, source, client_source) of the catalogue devices measured here."""
    from roofline.catalogue import hardware_names, load_hardware

    out = []
    for name in hardware_names():
        m = load_hardware(name).measured
        if m is not None and not m.estimate and getattr(m, "kind", "measured") == "measured":
            out.append((name, m.source, m.client_source))
    return tuple(out)
