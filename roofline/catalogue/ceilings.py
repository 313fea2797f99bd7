"""Which ceilings a device's step times use: its datasheet, its measured section, or an estimate of one.

    datasheet  the spec without its measured section: peaks, datasheet bandwidth, no per-kernel time
    measured   the spec's measured section (validate/ calibrate); a device never measured gets an estimate
               carried over from the measured catalogue devices of the same architecture and memory generation
               (HBM3 and HBM3e alike): each rate as the mean of their fractions of datasheet (achieved / peak)
               times this device's datasheet figure, each latency (per-kernel, launch, alpha) as their mean
               seconds; labelled with the devices and the spread of the fractions, (max - min) / mean. With no
               comparable measured device: the datasheet, and the label says so.

One function (`with_ceilings`) serves the CLI, the app and the claims (which use the datasheet explicitly).
"""

from __future__ import annotations

import re
import statistics
from collections.abc import Iterable

from roofline.specs import Hardware, Measured

CEILINGS = ("measured", "datasheet")

# measured rate -> the datasheet figure it is a fraction of (bandwidths of memory_bytes_per_s)
_BANDWIDTHS = ("read_bytes_per_s", "copy_bytes_per_s", "stream_bytes_per_s", "gemm_stream_bytes_per_s",
               "decode_attention_bytes_per_s")
_LATENCIES = ("launch_latency_s", "memory_latency_s", "kernel_overhead_s", "gemm_latency_s",
              "decode_attention_latency_s")


def datasheet(hardware: Hardware) -> Hardware:
    """`hardware` with datasheet ceilings only (no measured section)."""
    return hardware.model_copy(update={"measured": None})


def memory_generation(memory_type: str) -> str:
    """The generation a memory type belongs to: 'HBM3e' -> 'HBM3', 'HBM2e' -> 'HBM2', 'GDDR6X' -> 'GDDR6'."""
    return re.sub(r"(?i)(e|x)$", "", memory_type.strip()).upper()


def comparable(hardware: Hardware, catalogue: Iterable[Hardware]) -> list[Hardware]:
    """The measured devices (not estimates) of `catalogue` with `hardware`'s vendor, architecture and memory
    generation, by name; empty when `hardware` names no architecture or memory type."""
    if not hardware.architecture or not hardware.memory_type:
        return []
    gen = memory_generation(hardware.memory_type)
    out = [h for h in catalogue if h.name != hardware.name and h.measured is not None and not h.measured.estimate
           and h.vendor == hardware.vendor and h.architecture == hardware.architecture and h.memory_type
           and memory_generation(h.memory_type) == gen]
    return sorted(out, key=lambda h: h.name)


def _spread(fractions: list[float]) -> float:
    return (max(fractions) - min(fractions)) / statistics.fmean(fractions)


def _rate(sources: list[Hardware], get, peak, target_peak: float, spreads: dict[str, float], key: str):
    """mean(get(h) / peak(h)) x target_peak over the sources that have the figure (None if one lacks it)."""
    values = [get(h) for h in sources]
    if any(v is None for v in values):
        return None
    fractions = [v / peak(h) for v, h in zip(values, sources, strict=True)]
    spreads[key] = _spread(fractions)
    return statistics.fmean(fractions) * target_peak


def _per_key(sources, target: Hardware, field: str, peak_of, spreads) -> dict:
    """A per-dtype (or per-head-dim) mapping of rates, for the keys every source has and the target has a peak for."""
    keys = set.intersection(*(set(getattr(h.measured, field)) for h in sources))
    out = {}
    for key in sorted(keys):
        if peak_of(target, key) is None:
            continue
        out[key] = _rate(sources, lambda h, k=key: getattr(h.measured, field)[k], lambda h, k=key: peak_of(h, k),
                         peak_of(target, key), spreads, f"{field}.{key}")
    return out


def _dtype_peak(hardware: Hardware, dtype: str) -> float | None:
    return float(hardware.peak_flops_per_s(dtype)) if hardware.has_dtype(dtype) else None


def estimate_measured(hardware: Hardware, catalogue: Iterable[Hardware]) -> Measured | None:
    """An estimated measured section for `hardware` from its comparable measured devices (see the module
    docstring for the rule), or None when there are none."""
    sources = comparable(hardware, catalogue)
    if not sources:
        return None
    spreads: dict[str, float] = {}
    fields: dict = {}
    for name in _BANDWIDTHS:
        fields[name] = _rate(sources, lambda h, n=name: getattr(h.measured, n), lambda h: h.memory_bytes_per_s,
                             hardware.memory_bytes_per_s, spreads, name)
    for name in _LATENCIES:
        values = [getattr(h.measured, name) for h in sources]
        fields[name] = None if any(v is None for v in values) else statistics.fmean(values)
    fields["gemm_flops_per_s"] = _per_key(sources, hardware, "gemm_flops_per_s", _dtype_peak, spreads)
    fields["gemm_shape_flops_per_s"] = _per_key(sources, hardware, "gemm_shape_flops_per_s", _dtype_peak, spreads)
    fields["attention_flops_per_s"] = _per_key(sources, hardware, "attention_flops_per_s",
                                               lambda h, _d: _dtype_peak(h, "bf16"), spreads)
    names = ", ".join(h.name for h in sources)
    worst = max(spreads, key=spreads.get)
    label = (f"estimate from {names}: rates at their mean fraction of datasheet (read "
             f"{fields['read_bytes_per_s'] / hardware.memory_bytes_per_s:.0%} of {hardware.memory_bytes_per_s / 1e12:g}"
             f" TB/s, spread {spreads['read_bytes_per_s']:.2%}; largest spread {spreads[worst]:.1%} in {worst}), "
             f"latencies their mean")
    ms = [h.measured for h in sources]
    return Measured(device=f"{hardware.name} (estimate)", date=max(m.date for m in ms),
                    driver=_joined(m.driver for m in ms), torch=_joined(m.torch for m in ms),
                    triton=_joined(m.triton for m in ms), source=_joined(m.source for m in ms),
                    client_source=_joined(m.client_source for m in ms if m.client_source) or None,
                    estimate=label, **{k: v for k, v in fields.items() if v is not None and v != {}})


def _joined(values: Iterable[str]) -> str:
    return ", ".join(dict.fromkeys(values))


def _catalogue() -> list[Hardware]:
    from roofline.catalogue.store import hardware_names, load_hardware

    return [load_hardware(name) for name in hardware_names()]


def with_ceilings(hardware: Hardware, ceilings: str = "measured",
                  catalogue: Iterable[Hardware] | None = None) -> Hardware:
    """`hardware` with the ceilings asked for: 'datasheet' (no measured section) or 'measured' (its own
    measured section, else an estimate from comparable measured devices of `catalogue` (default: the shipped
    catalogue), else the datasheet). `ceilings_label` says which one a spec carries."""
    if ceilings not in CEILINGS:
        raise ValueError(f"ceilings: {ceilings!r} is not one of {', '.join(CEILINGS)}")
    if ceilings == "datasheet":
        return datasheet(hardware)
    if hardware.measured is not None:
        return hardware
    estimate = estimate_measured(hardware, _catalogue() if catalogue is None else catalogue)
    return hardware if estimate is None else hardware.model_copy(update={"measured": estimate})


def ceilings_label(hardware: Hardware, asked: str = "measured") -> str:
    """Which ceilings the step times use: the measured section (device, date, source), an estimate (from which
    devices, with its spread) or the datasheet (and why: `asked` for, or nothing to measure from)."""
    m = hardware.measured
    if m is None and asked == "datasheet":
        return "datasheet (as asked: peaks and datasheet bandwidth, no per-kernel time)"
    if m is None:
        if hardware.architecture and hardware.memory_type:
            return (f"datasheet (no measured section for {hardware.name}, and no measured {hardware.architecture} "
                    f"device with {memory_generation(hardware.memory_type)}-generation memory to estimate from)")
        return f"datasheet (no measured section for {hardware.name})"
    if m.estimate:
        return m.estimate
    return f"measured on {m.device} ({m.date}, {m.source})"
