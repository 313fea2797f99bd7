"""Base class shared by every spec: strict, frozen, described, within plausible ranges."""

from __future__ import annotations

from typing import ClassVar

from pydantic import BaseModel, ConfigDict, model_validator

from roofline.specs.bounds import Bound, check


class Spec(BaseModel):
    """Frozen pydantic model that rejects unknown keys; every field carries a description.

    BOUNDS maps a field to its plausible range (roofline.specs.bounds): outside the hard range is a
    validation error naming the field; outside the soft range, a line of `plausibility_warnings()`.
    """

    model_config = ConfigDict(extra="forbid", frozen=True, validate_default=True)
    BOUNDS: ClassVar[dict[str, Bound]] = {}

    @model_validator(mode="after")
    def _within_bounds(self) -> Spec:
        check(self.__dict__, type(self).BOUNDS)
        return self

    def plausibility_warnings(self) -> list[str]:
        """Figures inside the hard range but outside the usual one, as 'field.path: ...' lines."""
        out = check(self.__dict__, type(self).BOUNDS)
        for name, value in self.__dict__.items():
            items = value if isinstance(value, list) else [value]
            for i, item in enumerate(items):
                if isinstance(item, Spec):
                    where = f"{name}[{i}]" if isinstance(value, list) else name
                    out += [f"{where}.{line}" for line in item.plausibility_warnings()]
        return list(dict.fromkeys(out))
