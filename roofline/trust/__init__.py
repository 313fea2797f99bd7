"""How far to trust a number: where its ceilings come from and the error band the committed validation supports.

Floor: below report/ and cli/, above planner/ and analysis/ (validation/ supplies the results folder). Every figure
is computed from the committed data (roofline.trust.bands reads the lab's compare reports; roofline.trust.source the
catalogue's measured sections against their datasheets), never typed in.

A plan row's trust has two parts:
- the ceilings: measured here / calibrated by the user / derived from a database / estimated from a sibling /
  datasheet only, with the real decoders' error where it was measured (decode and prefill bands);
- the method's kernels: the kernel cases timed for that method on the device, or "not validated" for a method no
  kernel case covers (it never borrows another family's error).
"""

from __future__ import annotations

import functools
from typing import Any

from roofline.trust.bands import decoder_bands, kernel_bands, method_key, pooled_decoder_bands
from roofline.trust.source import SOURCES, datasheet_gap, datasheet_line, source_kind

__all__ = ["SOURCES", "ceilings_trust", "datasheet_gap", "datasheet_line", "method_trust", "plan_trust",
           "source_kind"]


def _band_text(phase: str, b: dict[str, Any] | None) -> str:
    if not b:
        return f"{phase} not validated"
    return f"{phase} ±{b['median_ape_pct']:.1f} % (median; p90 {b['p90_ape_pct']:.1f} %, {b['cases']} steps)"


@functools.lru_cache(maxsize=1)
def _measured_devices() -> tuple[tuple[str, str, str | None], ...]:
    """(name, source, client_source) of the catalogue devices measured here."""
    from roofline.catalogue import hardware_names, load_hardware

    out = []
    for name in hardware_names():
        m = load_hardware(name).measured
        if m is not None and not m.estimate and getattr(m, "kind", "measured") == "measured":
            out.append((name, m.source, m.client_source))
    return tuple(out)


def ceilings_trust(hardware, fusion: str = "typical") -> dict[str, Any]:
    """{"source", "decode", "prefill", "validated_on", "text"} for a device as the plan uses it (after
    with_ceilings): the real decoders' error bands where this device's ceilings were measured, the devices measured
    here pooled for a calibration (same microbenchmarks, not validated on the user's device itself), nothing for a
    database-derived, estimated or datasheet-only section (each says why)."""
    kind = source_kind(hardware)
    m = hardware.measured
    out: dict[str, Any] = {"source": kind, "decode": None, "prefill": None, "validated_on": None}
    if kind == "measured":
        bands = decoder_bands(m.client_source, fusion)
        if bands and (bands["decode"] or bands["prefill"]):
            out.update(decode=bands["decode"], prefill=bands["prefill"], validated_on=hardware.name,
                       models=bands["models"], file=bands["file"])
            text = (f"ceilings measured on this device; real decoders ({len(bands['models'])} models) on it: "
                    f"{_band_text('decode', bands['decode'])}, {_band_text('prefill', bands['prefill'])}")
        else:
            text = "ceilings measured on this device; no real decoder validated on it"
    elif kind == "calibrated":
        devices = _measured_devices()
        pooled = pooled_decoder_bands([c for _n, _s, c in devices if c], fusion)
        names = ", ".join(n for n, _s, _c in devices)
        if pooled:
            out.update(decode=pooled["decode"], prefill=pooled["prefill"], validated_on=names)
        text = (f"ceilings calibrated by you ({m.source}); not validated on your device itself; with the same "
                f"microbenchmarks on {names or 'no device'}: {_band_text('decode', (pooled or {}).get('decode'))}")
    elif kind == "derived":
        text = (f"ceilings derived from a measured database ({m.source}); not validated against real decoders on "
                f"this device")
    elif kind == "estimated":
        origin = m.estimate.split(":", 1)[0]  # "estimate from H100-SXM, H200: rates at ..." (catalogue.ceilings)
        text = (f"ceilings not measured on this device: {origin} (their datasheet fractions carried over); not "
                f"validated on this device")
    else:
        text = datasheet_line()
    out["text"] = text
    return out


def method_trust(spec: str, hardware) -> dict[str, Any]:
    """{"kernels": band + families + presets, or None; "text"} for the method `spec` on `hardware`: the kernel cases
    timed for its method where the device's ceilings were measured; "not validated" for a method none covers."""
    from roofline.methods import parse_method

    config = parse_method(spec)
    key = method_key(config)
    m = hardware.measured
    bands = kernel_bands(m.source) if m is not None and source_kind(hardware) == "measured" else {}
    b = bands.get(key)
    if b is None:
        where = "on this device" if bands else "here (no kernel measured on this device)"
        return {"kernels": None, "text": f"{key} kernels not validated {where}"}
    return {"kernels": b, "text": f"{key} kernels ±{b['median_ape_pct']:.1f} % ({b['cases']} cases)"}


def plan_trust(result: dict[str, Any], hardware) -> dict[str, Any]:
    """Adds `trust` to a plan result (the ceilings' source and bands) and to each row (its method's kernels and
    a short text for the table); returns the plan-level trust."""
    trust = ceilings_trust(hardware, result.get("fusion", "typical"))
    result["trust"] = trust
    for row in result["results"]:
        bits = row.get("effective_bits")
        method = (method_trust(row["method"], hardware) if bits is not None and bits == bits else
                  {"kernels": None, "text": "state-space layers: no kernel of theirs timed, not validated"})
        decode = trust["decode"]
        row["trust"] = {"source": trust["source"], "decode_band_pct": decode["median_ape_pct"] if decode else None,
                        "kernels": method["kernels"], "kernels_text": method["text"],
                        "text": _row_text(trust, method)}
    return trust


def _row_text(trust: dict[str, Any], method: dict[str, Any]) -> str:
    """The table's short trust cell: the ceilings' source and decode band, and the kernels' state."""
    head = trust["source"] + (f" ±{trust['decode']['median_ape_pct']:.0f}%" if trust["decode"] else "")
    kern = method["kernels"]
    return head + ("; kern " + (f"±{kern['median_ape_pct']:.0f}%" if kern else "n/v"))
