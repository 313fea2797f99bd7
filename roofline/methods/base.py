"""The interface every KV method implements (`MethodConfig`), and the preset record a method module lists.

The registry (the explicit list of methods, SPEC parsing, stacking) is methods/registry.py."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, ClassVar

from pydantic import PrivateAttr

from roofline.kv.builder import standard_cache
from roofline.kv.layout import CacheModel
from roofline.lazy import sp
from roofline.specs import Model
from roofline.specs.base import Spec


class MethodConfig(Spec):
    """A KV method's configuration; subclasses set `method` and implement `cache`."""

    method: ClassVar[str]
    family: ClassVar[str] = "quantization"
    summary: ClassVar[str] = ""
    _spec: str | None = PrivateAttr(None)

    def cache(self, model: Model, bits: sp.Expr | None = None) -> CacheModel:
        """What this method stores and does for `model`; `bits` replaces its main bit-width (sweeps).

        K/V quantizers implement `kv_quant` (and optionally `extras`); methods that cache something else
        (XQuant's X, AQUA-KV's residuals) override this."""
        return standard_cache(self.method, model, self.kv_quant(model), bits, extras=self.extras(model))

    def kv_quant(self, model: Model):
        """The QuantPlan (K and V TensorQuants, layer overrides) of a K/V quantizer; None if not one."""
        return None

    def extras(self, model: Model):
        """Ops and fixed memory the method adds to every attending layer (kv.builder.Extras), or None."""
        return None

    def not_applicable(self, model: Model) -> str | None:
        """Why this method cannot apply to `model` (one line), or None. Methods see only the attention
        layers (kv.hybrid.attention_view); one that needs adjacent attention layers refuses hybrids."""
        return None

    def limits(self, model: Model, probe) -> dict[str, Any]:
        """Method-specific limits for a plan row (e.g. XQuant's remat limit). `probe` is the planner's
        access to the cost model at the plan's point (planner.limits.Probe): `probe.remat_limit(config)`,
        `probe.model_flops_per_token()`, `probe.batch`, `probe.context`, `probe.sm_count`. Default: none."""
        return {}

    def plan_notes(self, model: Model, probe, data: dict[str, Any]) -> list[str]:
        """A method's own words on why its plan row looks as it does (`data`: the row's numbers so far; `probe`:
        as for `limits`). Default: none."""
        return []

    def attention_imbalance(self, model: Model, batch: int, sm_count: int) -> float:
        """Decode attention's makespan over its balanced time on `sm_count` SMs (1: balanced heads)."""
        return 1.0

    def label(self) -> str:
        """The spec it was parsed from (e.g. 'kivi-2'), else `name:key=value,...` of non-default fields."""
        if self._spec:
            return self._spec
        changed = {k: v for k, v in self.model_dump().items() if v != type(self).model_fields[k].default}
        args = ",".join(f"{k}={_fmt(v)}" for k, v in changed.items())
        return f"{self.method}:{args}" if args else self.method


@dataclass(frozen=True)
class Preset:
    """A named configuration of a method (e.g. 'kivi-2'): the method's name, its fields, a description."""

    name: str
    method: str
    description: str
    fields: dict[str, Any] = field(default_factory=dict)


def preset(name: str, method: str, description: str, **fields: Any) -> Preset:
    """A preset record for a method module's PRESETS tuple."""
    return Preset(name, method, description, fields)


def _fmt(value: Any) -> str:
    if isinstance(value, list | tuple):
        return "/".join(_fmt(v) for v in value)
    return str(value)
