"""Families of measured kernels: each gives its measurement grid, runs a case on the GPU, and predicts
the same case from the roofline spec alone.

A family registers on import of `validate.families` (its __init__ imports each module). `run` returns
at least {"ms": median milliseconds, "bytes": int, "flops": int} (or {"skipped": reason}); `predict`
returns {"time_s", "bytes", "flops", "bound"} with time_s None where the spec has no figure.
"""

from __future__ import annotations

from typing import Protocol, runtime_checkable

from roofline.validation.results_file import Case


@runtime_checkable
class Family(Protocol):
    name: str

    def cases(self, quick: bool) -> list[Case]:
        """The measurement grid (a few points when `quick`)."""
        ...

    def run(self, case: Case) -> dict:
        """Measure on the GPU: {"ms": median, "bytes": int, "flops": int, ...extras}."""
        ...

    def predict(self, case: Case, hardware) -> dict:
        """From the roofline spec alone: {"time_s", "bytes", "flops", "bound"}."""
        ...


FAMILIES: dict[str, Family] = {}


def register(family):
    """Register a family instance (or a class, instantiated with no arguments); returns what it was given."""
    instance = family() if isinstance(family, type) else family
    if not isinstance(instance, Family):
        raise TypeError(f"register: {instance!r} lacks name/cases/run/predict")
    if instance.name in FAMILIES:
        raise ValueError(f"register: family {instance.name!r} registered twice")
    FAMILIES[instance.name] = instance
    return family


def families() -> dict[str, Family]:
    """Every registered family (imports validate.families, which registers them)."""
    import validate.families  # noqa: F401  (registers on import)

    return FAMILIES


def get(name: str) -> Family:
    known = families()
    if name not in known:
        raise KeyError(f"family: unknown {name!r}; valid: {', '.join(sorted(known))}")
    return known[name]
