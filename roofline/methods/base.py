"""Method configs, the registry of methods and presets, and `name:key=value,...` spec parsing."""

from __future__ import annotations

from typing import Any, ClassVar

import sympy as sp
from pydantic import Field, NonNegativeInt, PrivateAttr, ValidationError, model_validator

from roofline.catalogue.loading import validate
from roofline.errors import SpecError, describe_validation_error
from roofline.kv.layout import CacheModel
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
        from roofline.kv.builder import standard_cache

        return standard_cache(self.method, model, self.kv_quant(model), bits, extras=self.extras(model))

    def kv_quant(self, model: Model):
        """The QuantPlan (K and V TensorQuants, layer overrides) of a K/V quantizer; None if not one."""
        return None

    def extras(self, model: Model):
        """Ops and fixed memory the method adds to every attending layer (kvcache.Extras), or None."""
        return None

    def label(self) -> str:
        """The spec it was parsed from (e.g. 'kivi-2'), else `name:key=value,...` of non-default fields."""
        if self._spec:
            return self._spec
        changed = {k: v for k, v in self.model_dump().items() if v != type(self).model_fields[k].default}
        args = ",".join(f"{k}={_fmt(v)}" for k, v in changed.items())
        return f"{self.method}:{args}" if args else self.method


class LayerOverride(Spec):
    """Layers [start, stop) stored at other bit-widths (e.g. XQuant's first 3 layers at 4 bits)."""

    start: NonNegativeInt = Field(description="First layer (0-based) of the range.")
    stop: NonNegativeInt = Field(description="One past the last layer of the range.")
    k_bits: float = Field(gt=0, le=16, description="Key (or first tensor) bits in the range; 16 = unquantized.")
    v_bits: float = Field(gt=0, le=16, description="Value (or second tensor) bits in the range; 16 = unquantized.")

    @model_validator(mode="after")
    def _ordered(self) -> LayerOverride:
        if self.stop <= self.start:
            raise ValueError(f"stop: {self.stop} must be above start {self.start}")
        return self


_REGISTRY: dict[str, type[MethodConfig]] = {}
_PRESETS: dict[str, tuple[str, dict[str, Any], str]] = {}


def register(cls: type[MethodConfig]) -> type[MethodConfig]:
    if cls.method in _REGISTRY:
        raise ValueError(f"method {cls.method!r} registered twice")
    _REGISTRY[cls.method] = cls
    return cls


def preset(name: str, method: str, description: str, **fields: Any) -> None:
    """Register a named configuration (e.g. 'kivi-2') of a method."""
    if name in _PRESETS or name in _REGISTRY and name != method:
        raise ValueError(f"preset {name!r} registered twice")
    _PRESETS[name] = (method, fields, description)


def methods() -> dict[str, type[MethodConfig]]:
    _load_all()
    return dict(_REGISTRY)


def presets() -> dict[str, tuple[str, dict[str, Any], str]]:
    _load_all()
    return dict(_PRESETS)


def parse_method(spec: str) -> MethodConfig:
    """A preset name (`kivi-2`), a method name (`kivi`), `name:key=value,...` (name: method or preset),
    or parts joined by '+' (a stack: reduction -> quantization -> eviction)."""
    _load_all()
    if "+" in spec:
        from roofline.methods.stack import stack_from_parts

        parts = [parse_method(part) for part in spec.split("+")]
        try:
            return stack_from_parts(parts, spec.strip())
        except (ValidationError, ValueError) as err:
            text = describe_validation_error(err, f"method {spec!r}") if isinstance(err, ValidationError) \
                else f"method {spec!r}: {err}"
            raise SpecError(text) from None
    name, _, args = spec.strip().partition(":")
    name = name.strip()
    if name in _PRESETS:
        method, fields, _ = _PRESETS[name]
    elif name in _REGISTRY:
        method, fields = name, {}
    else:
        valid = ", ".join(sorted(set(_PRESETS) | set(_REGISTRY)))
        raise SpecError(f"method: unknown method or preset {name!r}; valid: {valid}")
    fields = dict(fields)
    for item in filter(None, (part.strip() for part in args.split(","))):
        key, eq, value = item.partition("=")
        if not eq or not key.strip():
            raise SpecError(f"method {spec!r}: {item!r}: expected key=value")
        fields[key.strip()] = _parse_value(value.strip())
    config = validate(_REGISTRY[method], fields, f"method {spec!r}")
    config._spec = spec.strip()
    return config


def build_cache(config: MethodConfig, model: Model, bits: sp.Expr | None = None) -> CacheModel:
    """config.cache(model), with any rule the model/config pair breaks reported as one SpecError line."""
    where = f"method {config.label()!r} on {model.name}"
    try:
        return config.cache(model, bits=bits)
    except ValidationError as err:
        raise SpecError(describe_validation_error(err, where)) from None
    except ValueError as err:
        raise SpecError(f"{where}: {err}") from None


def _parse_value(text: str) -> Any:
    lowered = text.lower()
    if lowered in ("true", "false"):
        return lowered == "true"
    if lowered in ("none", "null"):
        return None
    for cast in (int, float):
        try:
            return cast(text)
        except ValueError:
            pass
    if "/" in text:  # lists of numbers: 64/64/128
        return [_parse_value(part) for part in text.split("/")]
    return text


def _fmt(value: Any) -> str:
    if isinstance(value, list | tuple):
        return "/".join(_fmt(v) for v in value)
    return str(value)


def _load_all() -> None:
    # Importing the package registers every method module (one module each).
    import roofline.methods  # noqa: F401
