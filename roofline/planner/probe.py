"""What a method's limits hook may ask of the cost model at a plan's point (MethodConfig.limits).

The planner hands each method a Probe instead of the method importing the cost model (a floor above it):
the method decides which of its limits to report; the probe computes them at this model, device and workload.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from roofline.costmodel import remat_balance as costmodel_limits
from roofline.numbers import codegen
from roofline.specs import Hardware, Model, Workload

_TOKENS: dict[int, tuple[Any, int]] = {}  # id(config) -> (config, token): Probe memo keys without hashing fields
_NEXT = itertools.count(1)


def _token(config) -> int:
    """A small int standing for `config` in the memo's keys (a pydantic model hashes all its fields on every
    lookup): one per config object, never reused (a counter), and the table holds the object, so its id is not
    reused while the entry lives. Equal configs that are different objects get different tokens, which costs a
    recomputation, never a wrong answer."""
    hit = _TOKENS.get(id(config))
    if hit is not None and hit[0] is config:
        return hit[1]
    if len(_TOKENS) >= 256:
        _TOKENS.clear()
    token = next(_NEXT)
    _TOKENS[id(config)] = (config, token)
    return token


@dataclass(frozen=True)
class Probe:
    """The plan's point: the model, the device, the workload and the context a row reports at."""

    model: Model
    hardware: Hardware
    workload: Workload
    context: int
    # answers already given for this (model, device, method) — the planner's, so warm points skip the content
    # keys (JSON of the specs) of the disk cache; configs enter its keys as _token()s; None: none kept
    memo: codegen.LRU | None = field(default=None, compare=False, repr=False)

    def _recall(self, key: tuple, compute: Callable[[], Any]) -> Any:
        return compute() if self.memo is None else self.memo.get_or(key, compute)


    @property
    def batch(self) -> int:
        """Sequences decoded together: the workload's batch."""
        return self.workload.batch

    @property
    def sm_count(self) -> int:
        """Streaming multiprocessors of the device (hardware.sm_count)."""
        return self.hardware.sm_count

    def cached(self, config, name: str, compute) -> Any:
        """`compute()` (a JSON-able value of this model, config and context) once, kept by content (codegen)."""
        def stored() -> Any:
            return codegen.cached_json(codegen.content_key("probe", self.model, config, name, self.context), compute)

        return self._recall(("probe", name, self.context, _token(config)), stored)

    def remat_limit(self, config) -> dict[str, Any]:
        """l* of a rematerializing config at the workload's batch and compute dtype (costmodel.limits), kept by
        content (codegen)."""
        w = self.workload

        def stored() -> dict[str, Any]:
            key = codegen.content_key("remat-limit", self.model, self.hardware, config, w.batch, w.compute_dtype)
            return codegen.cached_json(key, lambda: costmodel_limits.remat_limit(self.model, self.hardware, config,
                                                                                 w.batch, w.compute_dtype))

        return self._recall(("remat", w.batch, w.compute_dtype, _token(config)), stored)

    def model_flops_per_token(self, baseline) -> float:
        """The model's own decode FLOPs per token at the plan's context, with the `baseline` cache (compiled once
        per model and baseline, roofline.numbers.codegen)."""
        def build():
            from roofline.units import L

            return [L], {"f": costmodel_limits.model_flops_per_token(self.model, baseline)}, {}

        def load() -> Callable:
            return codegen.compiled(codegen.content_key("model-flops", self.model, baseline), build)[0]["f"]

        return float(self._recall(("model-flops", _token(baseline)), load)(self.context))
