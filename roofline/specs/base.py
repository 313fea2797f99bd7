"""Base class shared by every spec: strict, frozen, described, within plausible ranges."""

from __future__ import annotations

from typing import ClassVar

from pydantic import BaseModel, ConfigDict, model_validator

from roofline.specs.bounds import Bound, check

NAME_CHARS = 200


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

    @model_validator(mode="after")
    def _one_line_name(self) -> Spec:
        """A spec's name heads every table, CSV row and dashboard label: one line of at most NAME_CHARS printable
        characters (a newline in --name split `plan`'s header in two)."""
        name = self.__dict__.get("name")
        if isinstance(name, str) and (not name or len(name) > NAME_CHARS or not name.isprintable()):
            raise ValueError(f"name: {name!r} must be 1 to {NAME_CHARS} printable characters on one line (no "
                             "newline, tab or other control character)")
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
