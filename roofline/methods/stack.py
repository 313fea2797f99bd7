"""Composition: dimension reduction -> quantization -> eviction, as one CacheModel.

Spec syntax: parts joined by '+', e.g. `zack-50+kvquant-4+keyformer-50`. Whatever the order written,
the mechanism applies ZACK's reduced widths, then the quantizer's TensorQuants on those widths, then the
eviction budget on the tokens, through the one builder (kv.builder.standard_cache): each part alone is the
same code path, so a stack's storage and decode cost agree with its parts by construction.
"""

from __future__ import annotations

from typing import ClassVar

from pydantic import Field, SerializeAsAny, model_validator

from roofline.kv.builder import Extras, standard_cache
from roofline.kv.layout import CacheModel
from roofline.lazy import sp
from roofline.methods.base import MethodConfig
from roofline.methods.eviction import Eviction
from roofline.methods.zack import Zack
from roofline.specs import Model


class Stack(MethodConfig):
    """A composition, dimension reduction (ZACK) -> quantization -> eviction, at least two parts, built as
    one CacheModel through the same builder as each part alone."""
    method: ClassVar[str] = "stack"
    family: ClassVar[str] = "stack"
    summary: ClassVar[str] = "reduction -> quantization -> eviction"

    reduce: Zack | None = Field(None, description="Dimension reduction (ZACK).")
    quant: SerializeAsAny[MethodConfig] | None = Field(None, description="A K/V quantizer (any with a QuantPlan).")
    evict: Eviction | None = Field(None, description="Eviction budget.")

    @model_validator(mode="after")
    def _parts_fit(self) -> Stack:
        if self.quant is not None and type(self.quant).kv_quant is MethodConfig.kv_quant:
            raise ValueError(f"quant: {self.quant.method} is not a K/V quantizer and cannot be stacked")
        if sum(part is not None for part in (self.reduce, self.quant, self.evict)) < 2:
            raise ValueError("reduce: a stack needs at least two of reduce, quant, evict")
        return self

    def label(self) -> str:
        """The spec it was parsed from, else its parts' labels joined by '+' (reduce, quant, evict)."""
        if self._spec:
            return self._spec
        return "+".join(p.label() for p in (self.reduce, self.quant, self.evict) if p is not None)

    def cache(self, model: Model, bits: sp.Expr | None = None) -> CacheModel:
        """The quantizer's QuantPlan on ZACK's reduced widths, capped at the eviction budget, with every
        part's extras merged; `bits` replaces the quantizer's main bit-width (sweeps)."""
        extras = Extras()
        for part in (self.reduce, self.quant, self.evict):
            if part is not None:
                extras = extras.merged(part.extras(model))
        return standard_cache(
            self.label(), model,
            self.quant.kv_quant(model) if self.quant else None, bits,
            shape=self.reduce.shape(model) if self.reduce else None,
            token_budget=self.evict.token_budget() if self.evict else None,
            extras=extras,
        )

    def _parts(self) -> tuple[MethodConfig, ...]:
        return tuple(p for p in (self.reduce, self.quant, self.evict) if p is not None)

    def limits(self, model: Model, probe) -> dict:
        """The parts' limits, merged."""
        out: dict = {}
        for part in self._parts():
            out.update(part.limits(model, probe))
        return out

    def attention_imbalance(self, model: Model, batch: int, sm_count: int) -> float:
        """The reduction's imbalance (the quantizer and eviction keep heads uniform)."""
        return self.reduce.attention_imbalance(model, batch, sm_count) if self.reduce else 1.0


def stack_from_parts(parts: list[MethodConfig], spec: str) -> Stack:
    """Sort parsed parts into reduce / quant / evict; two of one kind is an error naming the kind."""
    slots: dict[str, MethodConfig] = {}
    for part in parts:
        slot = {"reduction": "reduce", "eviction": "evict"}.get(part.family, "quant")
        if slot in slots:
            raise ValueError(f"{slot}: {slots[slot].label()!r} and {part.label()!r} both fill it")
        slots[slot] = part
    stack = Stack(**slots)
    stack._spec = spec
    return stack
