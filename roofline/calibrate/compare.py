"""Each ceiling of a calibrated hardware file against a catalogue device's measured section, with the % difference
(issue 30's target for `roofline calibrate` on the H200: within 3 % on each ceiling).

A ceiling is a number of the measured section (a dict of them gives one row per key: gemm_flops_per_s.bf16);
provenance (device, dates, versions, sources) is not compared, nor the bandwidth curve's points (its fit is).
"""

from __future__ import annotations

from dataclasses import dataclass

# each fitted law time = latency + bytes / bandwidth, and the bytes its lab fit spanned: the H200's read sizes
# (1 MiB .. 4 GiB, validate/ops/ceilings/cases.py READ_SIZES), weights 2 N K of the skinny model GEMMs (3072 x 3072
# .. 128256 x 4096, validate/clients/micro.py GEMM_SHAPES), KV bytes of the one-query cases (b1 l4096 .. b64 l4096,
# micro.DECODE) and the active experts' weights of the grouped calls (b1's two w2 .. eight w13 of Mixtral-8x7B)
LAWS = {"memory": ("memory_latency_s", "stream_bytes_per_s", 1 << 20, 4 << 30),
        "gemm": ("gemm_latency_s", "gemm_stream_bytes_per_s", 2 * 3072 * 3072, 2 * 128256 * 4096),
        "decode_attention": ("decode_attention_latency_s", "decode_attention_bytes_per_s", 16777216, 1073741824),
        "grouped_gemm": ("grouped_gemm_latency_s", "grouped_gemm_stream_bytes_per_s", 234881024, 1879048192)}
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


def law_rows(calibrated, reference) -> list[tuple[str, float, float]]:
    """(law, % difference of the calibrated law's time from the reference's at the smallest and at the largest
    bytes of LAWS' span) for each law both sections fit. A fit's latency is poorly determined when the bytes
    dominate every point (the grouped GEMM's: 1 % on its smallest point moves it 7 %), the time it predicts is not."""
    out = []
    for law, (alpha_key, bw_key, low, high) in LAWS.items():
        mine = getattr(calibrated.measured, alpha_key, None), getattr(calibrated.measured, bw_key, None)
        theirs = getattr(reference.measured, alpha_key, None), getattr(reference.measured, bw_key, None)
        if not all(mine) or not all(theirs):
            continue
        ends = [(mine[0] + n / mine[1]) / (theirs[0] + n / theirs[1]) - 1 for n in (low, high)]
        out.append((law, ends[0], ends[1]))
    return out


def table(rows: list[Row], reference_name: str, laws: list[tuple[str, float, float]] | None = None) -> str:
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
    if laws:
        lines.append(f"{'law: time = latency + bytes / bandwidth':40s} {'smallest':>12s} {'largest':>12s}  bytes")
        lines += [f"{law:40s} {small * 100:+11.1f}% {large * 100:+11.1f}%" for law, small, large in laws]
    return "\n".join(lines)
