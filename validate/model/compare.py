"""Predicted against measured: every case of a results file, predicted from the hardware spec alone.

Per case:  APE = |t_predicted - t_measured| / t_measured x 100;
           roofline fraction = t_predicted / t_measured (for ceilings: the fraction of the datasheet peak);
           achieved bandwidth = bytes / t_measured, as a fraction of the reference bandwidth: the
           measured streaming read of the same results file (calibrate.stream_bandwidth) when it has
           ceilings cases, else the datasheet memory_bytes_per_s.
Ceilings:  each results file is predicted with its own device's measured ceilings (`calibrated`: the
           measured section `calibrate` would write, applied in memory), so a catalogue entry left at
           its datasheet figures (H100-SXM: the planner's default) still predicts with the measured law.
Suite:     median and 90th percentile (linear interpolation, numpy.percentile) of the APEs of every
           family except "ceilings" (whose predictions are datasheet peaks), and each family's median.
Kernel efficiency, per family: at its largest quarter of cases (by bytes), the median of the larger of
           achieved bandwidth / the reference bandwidth and achieved FLOP/s / the calibrated bf16 GEMM rate —
           physical work over measured time against the device's measured ceilings, no prediction in it.
           A family whose kernels reach EFFICIENT (0.85, the issue's target for memory-bound kernels) tests
           the model; one below it measures its own kernel's shortfall. The gated suite is the former.
"""

from __future__ import annotations

import numpy as np

from roofline.validation.calibrate import measured_section, stream_bandwidth
from roofline.validation.results_file import ResultsError, case_of
from validate.model.case_clock import at_case_clock, case_mhz, scale
from validate.model.families import FAMILIES

# Device names as the driver reports them -> catalogue entry (first match wins; PCIe before SXM).
DEVICE_HARDWARE = (("H200", "H200"), ("H100 PCIe", "H100-PCIe"), ("H100", "H100-SXM"))
CALIBRATION_FAMILY = "ceilings"
EFFICIENT = 0.85


def hardware_for_device(device: str) -> str:
    """The catalogue name for a device name ('NVIDIA H100 80GB HBM3' -> 'H100-SXM')."""
    for key, name in DEVICE_HARDWARE:
        if key.lower() in device.lower():
            return name
    raise ResultsError(f"hardware: no catalogue entry known for device {device!r}; pass --hardware NAME|PATH")


ONCHIP_FIELDS = ("shared_memory_bytes_per_s", "int32_ops_per_s", "fp32_flops_per_s", "mma_sync_flops_per_s",
                 "f2fp_ops_per_s", "i2f_ops_per_s", "f2i_ops_per_s", "mufu_ops_per_s", "dispatch_ops_per_s",
                 "wgmma_flops_per_s", "wgmma_issue_serial", "wgmma_issue_block", "l2_bytes_per_s", "onchip_source")


def calibrated(hardware, results: dict):
    """`hardware` (extended with its kernel-only rates, validate.model.hardware) with the measured section of
    `results`' ceilings cases (only extended when it has none)."""
    from validate.model.hardware import KernelMeasured, extend

    hardware = extend(hardware)
    if not any(r["family"] == CALIBRATION_FAMILY and r["params"].get("kind") == "read" and r.get("ms")
               for r in results["cases"]):
        return hardware
    from pydantic import ValidationError

    from roofline.errors import describe_validation_error

    try:
        section = measured_section(results, "this results file")
    except ResultsError:
        return hardware
    # the on-chip ceilings are measured by their own microbenchmarks (validate.ops.ceilings.onchip, another results
    # file of the same device): kept from the spec's measured section beside this file's streaming/GEMM ceilings
    kept = hardware.measured.model_dump(include=set(ONCHIP_FIELDS), exclude_none=True) if hardware.measured else {}
    try:
        measured = KernelMeasured(**{**kept, **section})
    except ValidationError as err:  # e.g. ceilings that fit a bandwidth no memory has
        raise ResultsError(describe_validation_error(err, "results: the ceilings' calibration")) from None
    return hardware.model_copy(update={"measured": measured})


def _reference_bandwidth(results: dict, hardware) -> tuple[float, str]:
    read = stream_bandwidth(results, "read")
    if read is not None:
        return read, "measured streaming read"
    return hardware.memory_bytes_per_s, "datasheet"


def _row(row: dict, hardware, reference: float) -> dict:
    out = {"name": row["name"], "params": row["params"], "measured_ms": row.get("ms"), "predicted_ms": None,
           "ape_pct": None, "roofline_fraction": None, "bytes": row.get("bytes"), "flops": row.get("flops"),
           "bound": None, "achieved_bytes_per_s": None, "bandwidth_fraction": None, "achieved_flops_per_s": None,
           "note": ""}
    if row.get("ms") is None:
        out["note"] = f"not measured: {row.get('skipped') or row.get('error')}"
        return out
    family = FAMILIES.get(row["family"])
    if family is None:
        out["note"] = f"family {row['family']!r} not registered here"
    else:
        try:
            pred = family.predict(case_of(row), at_case_clock(hardware, row))
        except (ValueError, KeyError, TypeError) as err:
            out["note"] = f"no prediction: {err}"
        else:
            out["bound"] = pred["bound"]
            if scale(hardware, row) < 1:
                out["note"] = f"at {case_mhz(row):.0f} MHz"  # the on-chip rates at the case's clock (case_clock)
            if pred.get("time_s") is not None:
                out["predicted_ms"] = pred["time_s"] * 1e3
                out["ape_pct"] = abs(out["predicted_ms"] - row["ms"]) / row["ms"] * 100
                out["roofline_fraction"] = out["predicted_ms"] / row["ms"]
            if out["bytes"] is None:  # a bench without roofline: the prediction's op is the same work
                out["bytes"], out["flops"] = pred["bytes"], pred["flops"]
    seconds = row["ms"] * 1e-3
    if out["bytes"]:
        out["achieved_bytes_per_s"] = out["bytes"] / seconds
        out["bandwidth_fraction"] = out["achieved_bytes_per_s"] / reference
    if out["flops"]:
        out["achieved_flops_per_s"] = out["flops"] / seconds
    return out


def _stats(apes: list[float]) -> dict:
    if not apes:
        return {"cases": 0, "median_ape_pct": None, "p90_ape_pct": None}
    return {"cases": len(apes), "median_ape_pct": float(np.median(apes)),
            "p90_ape_pct": float(np.percentile(apes, 90))}


def _gemm_reference(hardware) -> float:
    m = hardware.measured
    if m is not None and "bf16" in m.gemm_flops_per_s:
        return m.gemm_flops_per_s["bf16"]
    return hardware.bf16_dense_flops_per_s


def kernel_efficiency(rows: list[dict], gemm: float, reference: float) -> float | None:
    """Median over the largest quarter of cases of max(bandwidth fraction, FLOP/s over the GEMM rate)."""
    done = [r for r in rows if r["measured_ms"] and r["bytes"]]
    if not done:
        return None
    done.sort(key=lambda r: r["bytes"])
    top = done[-max(1, len(done) // 4):]
    return float(np.median([max(r["bytes"] / (r["measured_ms"] * 1e-3) / reference,
                                (r["flops"] or 0) / (r["measured_ms"] * 1e-3) / gemm) for r in top]))


def compare(results: dict, hardware) -> dict:
    """Rows per family, per-family APE statistics and the suite summary (ceilings excluded), predicted with
    the results' own measured ceilings (`calibrated`)."""
    hardware = calibrated(hardware, results)
    reference, ref_source = _reference_bandwidth(results, hardware)
    families: dict[str, dict] = {}
    for row in results["cases"]:
        fam = families.setdefault(row["family"], {"rows": []})
        fam["rows"].append(_row(row, hardware, reference))
    suite, gated = [], []
    gemm = _gemm_reference(hardware)
    for name, fam in families.items():
        apes = [r["ape_pct"] for r in fam["rows"] if r["ape_pct"] is not None]
        fam.update(_stats(apes))
        fam["kernel_efficiency"] = kernel_efficiency(fam["rows"], gemm, reference)
        fam["at_ceiling"] = fam["kernel_efficiency"] is not None and fam["kernel_efficiency"] >= EFFICIENT
        if name != CALIBRATION_FAMILY:
            suite += apes
            gated += apes if fam["at_ceiling"] else []
    return {
        "hardware": hardware.name,
        "device": results["env"].get("device"),
        "reference_bytes_per_s": reference,
        "reference_source": ref_source,
        "measured_source": hardware.measured.source if hardware.measured is not None else None,
        "families": families,
        "summary": {**_stats(suite), "per_family": {n: f["median_ape_pct"] for n, f in families.items()
                                                    if n != CALIBRATION_FAMILY},
                    "gated": {**_stats(gated), "families": [n for n, f in families.items()
                                                            if n != CALIBRATION_FAMILY and f["at_ceiling"]]}},
    }


def _fmt(value, spec: str, scale: float = 1.0) -> str:
    """`value * scale` formatted by `spec`, or '-' right-aligned to the spec's width."""
    if value is None:
        width = "".join(ch for ch in spec.split(".")[0] if ch.isdigit())
        return "-".rjust(int(width or 0))
    return format(value * scale, spec)


def render(report: dict) -> str:
    """The report as text tables: one per family, then the summary."""
    lines = [f"device {report['device']}  hardware spec {report['hardware']} with the measured ceilings of "
             f"{report['measured_source'] or 'none (datasheet only)'}  bandwidth reference "
             f"{report['reference_bytes_per_s'] / 1e12:.3f} TB/s ({report['reference_source']})"]
    head = (f"{'case':<22}{'measured ms':>13}{'predicted ms':>14}{'APE %':>9}{'GB/s':>9}{'of ref':>8}"
            f"{'of roof':>9}  bound     note")
    for name, fam in report["families"].items():
        lines += ["", f"{name}: {fam['cases']} compared, median APE {_fmt(fam['median_ape_pct'], '.1f')} %, "
                  f"kernel efficiency {_fmt(fam['kernel_efficiency'], '.0%')} of the measured ceilings", head]
        for r in fam["rows"]:
            lines.append(f"{r['name']:<22}{_fmt(r['measured_ms'], '13.4f')}{_fmt(r['predicted_ms'], '14.4f')}"
                         f"{_fmt(r['ape_pct'], '9.1f')}{_fmt(r['achieved_bytes_per_s'], '9.0f', 1e-9)}"
                         f"{_fmt(r['bandwidth_fraction'], '8.0%')}{_fmt(r['roofline_fraction'], '9.0%')}"
                         f"  {r['bound'] or '-':<9} {r['note'][:110]}")
    s = report["summary"]
    lines += ["", f"suite (excluding {CALIBRATION_FAMILY}): {s['cases']} cases, median APE "
              f"{_fmt(s['median_ape_pct'], '.1f')} %, 90th percentile {_fmt(s['p90_ape_pct'], '.1f')} %"]
    lines += [f"  {n}: median APE {_fmt(v, '.1f')} %" for n, v in s["per_family"].items()]
    g = s["gated"]
    names = ", ".join(g["families"]) or "none"
    lines += [f"gated suite (kernels at >= {EFFICIENT:.0%} of the measured ceilings: {names}):"
              f" {g['cases']} cases, median APE {_fmt(g['median_ape_pct'], '.1f')} %, 90th percentile "
              f"{_fmt(g['p90_ape_pct'], '.1f')} %"]
    return "\n".join(lines)
