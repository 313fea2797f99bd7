"""The laws the planner prices ops at, fitted to timings (standard library only: it runs beside torch on a GPU box).

latency_bandwidth fits time = alpha + bytes / bytes_per_s by least squares on relative residuals,
minimizing sum(((alpha + S / bw) - t) / t)^2: linear in (alpha, 1/bw) after dividing each equation by its
measured time, the same fit as roofline.validation.calibrate.latency_bandwidth_fit and
validate.clients.calibrate.latency_bandwidth (there solved with numpy's lstsq; here by the 2 x 2 normal equations).
"""

from __future__ import annotations

import statistics
from collections.abc import Sequence


class FitError(ValueError):
    """A fit that cannot be made or is not physical (the message names the law)."""


def latency_bandwidth(sizes: Sequence[float], times_s: Sequence[float], law: str = "fit") -> tuple[float, float]:
    """(alpha_s, bytes_per_s) of time = alpha + size / bytes_per_s, relative least squares (see the module)."""
    if len(sizes) != len(times_s) or len(sizes) < 2:
        raise FitError(f"{law}: the latency-bandwidth fit needs at least two (size, time) points")
    if any(t <= 0 for t in times_s) or any(s <= 0 for s in sizes):
        raise FitError(f"{law}: sizes and times must be positive")
    # rows (1/t, S/t) . (alpha, inv) = 1: normal equations A^T A x = A^T 1
    a11 = sum(1 / t ** 2 for t in times_s)
    a12 = sum(s / t ** 2 for s, t in zip(sizes, times_s, strict=True))
    a22 = sum((s / t) ** 2 for s, t in zip(sizes, times_s, strict=True))
    b1 = sum(1 / t for t in times_s)
    b2 = sum(s / t for s, t in zip(sizes, times_s, strict=True))
    det = a11 * a22 - a12 * a12
    if det <= 0 or det < 1e-12 * a11 * a22:
        raise FitError(f"{law}: the sizes do not span a latency-bandwidth law (all equal?)")
    alpha = (b1 * a22 - b2 * a12) / det
    inverse = (a11 * b2 - a12 * b1) / det
    if alpha <= 0 or inverse <= 0:
        raise FitError(f"{law}: latency-bandwidth fit is not physical (alpha {alpha:.3g} s, 1/bw {inverse:.3g} s/B)")
    return alpha, 1 / inverse


def median(values: Sequence[float]) -> float:
    """statistics.median (named here so the callers read as the lab's definitions do)."""
    return float(statistics.median(values))


def sig(x: float) -> float:
    """Four significant digits, as the lab writes measured figures: run-to-run spread is larger than that."""
    return float(f"{x:.4g}")
