"""The kernel families, listed explicitly: each gives its measurement grid, runs a case on the GPU, and
predicts the same case from the roofline spec alone.

`run` returns at least {"ms": median milliseconds, "bytes": int, "flops": int} (or {"skipped": reason});
`predict` returns {"time_s", "bytes", "flops", "bound"} with time_s None where the spec has no figure.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol, runtime_checkable

if TYPE_CHECKING:
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


def families() -> tuple[Family, ...]:
    """The families, imported on first use (so a standalone device script under validate.ops, such as
    ceilings.onchip, runs on a box without the roofline package's dependencies)."""
    from validate.ops.aquakv.cases import AquaKVReconstruct
    from validate.ops.ceilings.cases import Ceilings
    from validate.ops.fp16_attention.cases import FP16Attention
    from validate.ops.quant_attention.cases import QuantAttention
    from validate.ops.xquant.cases import XQuantFamily
    from validate.ops.zack.cases import ZackAttention

    global _FAMILIES
    if _FAMILIES is None:
        _FAMILIES = (Ceilings(), FP16Attention(), QuantAttention(), XQuantFamily(), AquaKVReconstruct(),
                     ZackAttention())
    return _FAMILIES


_FAMILIES: tuple[Family, ...] | None = None


def __getattr__(name: str):
    """`FAMILIES` (module attribute, PEP 562): the families, imported on first access."""
    if name == "FAMILIES":
        return families()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def get(name: str) -> Family:
    """The family called `name`."""
    for family in families():
        if family.name == name:
            return family
    raise KeyError(f"family: unknown {name!r}; valid: {', '.join(sorted(f.name for f in families()))}")
