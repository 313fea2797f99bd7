"""Each ceiling of a calibrated hardware file against a catalogue device's measured section, with the % difference
(issue 30's target for `roofline calibrate` on the H200: within 3 % on each ceiling).

A ceiling is a number of the measured section (a dict of them gives one row per key: gemm_flops_per_s.bf16);
provenance (device, dates, versions, sources) is not compared, nor the bandwidth curve's points (its fit is).
"""

from __future__ import annotations

from dataclasses import dataclass

SKIP = {"kind", "device", "date", "driver", "torch", "triton", "source", "client_source", "probe_source",
        "onchip_source", "estimate", "bandwidth_curve"}
TARGET = 0.03


@dataclass(frozen=True)
class Row:
    """One ceiling: its value in each section (None where that section lacks it) and their relative difference."""

    name: str
    calibrated: float | None
    reference: float | None

    @property
    def diff(self) -> float | None:
        """(calibrated - reference) / reference, None unless both are there."""
        if self.calibrated is None or not self.reference:
            return None
        return (self.calibrated - self.reference) / self.reference


def _flat(section) -> dict[str, float]:
    out: dict[str, float] = {}
    for key, value in section.model_dump().items():
        if key in SKIP or value is None:
            continue
        if isinstance(value, dict):
            out.update({f"{key}.{k}": float(v) for k, v in value.items()})
        elif isinstance(value, (int, float)) and not isinstance(value, bool):
            out[key] = float(value)
    return out


def compare(calibrated, reference) -> list[Row]:
    """Rows for every ceiling the calibrated section has (Hardware specs; the reference's measured section)."""
    if calibrated.measured is None:
        raise ValueError(f"{calibrated.name}: measured: has no measured section to compare")
    if reference.measured is None:
        raise ValueError(f"{reference.name}: measured: has no measured section to compare against")
    mine, theirs = _flat(calibrated.measured), _flat(reference.measured)
    return [Row(k, mine[k], theirs.get(k)) for k in mine]


def table(rows: list[Row], reference_name: str) -> str:
    """Plain-text table: ceiling, calibrated, reference, % difference, and whether it is within TARGET."""
    lines = [f"{'ceiling':40s} {'calibrated':>12s} {reference_name:>12s} {'diff':>8s}"]
    for r in rows:
        ref = f"{r.reference:12.4g}" if r.reference is not None else f"{'-':>12s}"
        diff = f"{r.diff * 100:+7.1f}%" if r.diff is not None else f"{'':>8s}"
        flag = "" if r.diff is None else "  ok" if abs(r.diff) <= TARGET else "  > 3%"
        lines.append(f"{r.name:40s} {r.calibrated:12.4g} {ref} {diff}{flag}")
    compared = [r for r in rows if r.diff is not None]
    within = sum(abs(r.diff) <= TARGET for r in compared)
    lines.append(f"{within} of {len(compared)} ceilings within {TARGET:.0%} of {reference_name}'s measured section")
    return "\n".join(lines)
