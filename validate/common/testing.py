"""Helpers of the kernel checks (the bench's and the tests')."""

from __future__ import annotations


def relative_rms(got, want) -> float:
    """sqrt(mean((got - want)^2) / mean(want^2))."""
    want = want.float()
    return float(((got.float() - want).pow(2).mean() / want.pow(2).mean()).sqrt())
