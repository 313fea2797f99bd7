"""Base class shared by every spec: strict, frozen, described."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict


class Spec(BaseModel):
    """Frozen pydantic model that rejects unknown keys; every field carries a description."""

    model_config = ConfigDict(extra="forbid", frozen=True, validate_default=True)
