"""The registry: the explicit list of methods and their presets, SPEC parsing, and stacking.

A SPEC is a preset name (`kivi-2`), a method name (`kivi`), `name:key=value,...` (name: a method or a
preset, whose fields the keys override), or parts joined by '+' (a stack: reduction -> quantization ->
eviction, methods/stack.py). Adding a method = one module (config, presets, storage, ops, limits hooks)
plus one line in METHOD_MODULES.
"""

from __future__ import annotations

from functools import cache
from typing import Any

from pydantic import ValidationError

from roofline.catalogue.loading import validate
from roofline.errors import SpecError, describe_validation_error
from roofline.kv.hybrid import attention_view, complete_cache
from roofline.kv.layout import CacheModel
from roofline.lazy import sp
from roofline.methods import (
    aquakv,
    baseline,
    eviction,
    innerq,
    kivi,
    kvquant,
    skvq,
    stack,
    turboquant,
    xquant,
    zack,
)
from roofline.methods.base import MethodConfig, Preset
from roofline.numbers import codegen
from roofline.specs import Model

METHOD_MODULES = (baseline, kivi, kvquant, innerq, skvq, turboquant, xquant, aquakv, zack, eviction)
METHODS: tuple[type[MethodConfig], ...] = (
    baseline.Baseline, kivi.Kivi, kvquant.KVQuant, innerq.InnerQ, skvq.Skvq, turboquant.TurboQuant,
    xquant.XQuant, aquakv.AquaKV, zack.Zack, eviction.Eviction, stack.Stack,
)


@cache
def _tables() -> tuple[dict[str, type[MethodConfig]], dict[str, Preset]]:
    by_name: dict[str, type[MethodConfig]] = {}
    for cls in METHODS:
        if cls.method in by_name:
            raise ValueError(f"method {cls.method!r} listed twice")
        by_name[cls.method] = cls
    by_preset: dict[str, Preset] = {}
    for module in METHOD_MODULES:
        for p in module.PRESETS:
            if p.name in by_preset or (p.name in by_name and p.name != p.method):
                raise ValueError(f"preset {p.name!r} listed twice")
            if p.method not in by_name:
                raise ValueError(f"preset {p.name!r}: unknown method {p.method!r}")
            by_preset[p.name] = p
    return by_name, by_preset


def methods() -> dict[str, type[MethodConfig]]:
    """Every method, by name."""
    return dict(_tables()[0])


def presets() -> dict[str, tuple[str, dict[str, Any], str]]:
    """Every preset: name -> (method, fields, description)."""
    return {name: (p.method, dict(p.fields), p.description) for name, p in _tables()[1].items()}


def parse_method(spec: str) -> MethodConfig:
    """A MethodConfig from a SPEC (see the module docstring); bad input is one SpecError line."""
    by_name, by_preset = _tables()
    if "+" in spec:
        parts = [parse_method(part) for part in spec.split("+")]
        try:
            return stack.stack_from_parts(parts, spec.strip())
        except (ValidationError, ValueError) as err:
            text = describe_validation_error(err, f"method {spec!r}") if isinstance(err, ValidationError) \
                else f"method {spec!r}: {err}"
            raise SpecError(text) from None
    name, _, args = spec.strip().partition(":")
    name = name.strip()
    if name in by_preset:
        method, fields = by_preset[name].method, dict(by_preset[name].fields)
    elif name in by_name:
        method, fields = name, {}
    else:
        valid = ", ".join(sorted(set(by_preset) | set(by_name)))
        raise SpecError(f"method: unknown method or preset {name!r}; valid: {valid}")
    for item in filter(None, (part.strip() for part in args.split(","))):
        key, eq, value = item.partition("=")
        if not eq or not key.strip():
            raise SpecError(f"method {spec!r}: {item!r}: expected key=value")
        fields[key.strip()] = _parse_value(value.strip())
    config = validate(by_name[method], fields, f"method {spec!r}")
    config._spec = spec.strip()
    return config


# methods that lay out their own CacheModel rather than kv.builder.standard_cache (which splits off the
# Model.kv_shared_layers)
OWN_LAYOUT = ("roofline.methods.xquant", "roofline.methods.aquakv")


def _layout_reason(config: MethodConfig, model: Model) -> str:
    """Why a compression method is not modelled on this model's layer layout ('' when it is): layers of
    different head_dim (Gemma-4) take the baseline only; kv-shared layers (Gemma-3n) every method built by
    kv.builder.standard_cache."""
    if config.family != "baseline" and not model.uniform_head_dim:
        return ("its layers differ in head_dim or head counts (AttentionLayer.head_dim / num_heads / num_kv_heads): "
                "only the baseline cache is modelled")
    if model.kv_shared_layers and type(config).__module__ in OWN_LAYOUT:
        return "its kv-shared layers (Model.kv_shared_layers) are not modelled with this method's own layout"
    return ""


def build_cache(config: MethodConfig, model: Model, bits: sp.Expr | None = None) -> CacheModel:
    """config.cache(model), with any rule the model/config pair breaks reported as one SpecError line."""
    where = f"method {config.label()!r} on {model.name}"
    reason = config.not_applicable(model)
    if not reason and config.family != "baseline" and not any(a.attends for a in model.attention):
        reason = "every layer is recurrent: there is no KV cache to compress (the state keeps its dtype)"
    if not reason:
        reason = _layout_reason(config, model)
    if reason:
        raise SpecError(f"{where}: does not apply: {reason}")
    try:
        return complete_cache(config.cache(attention_view(model), bits=bits), model)
    except ValidationError as err:
        raise SpecError(describe_validation_error(err, where)) from None
    except ValueError as err:
        raise SpecError(f"{where}: {err}") from None


_CACHES = codegen.LRU(64)


def shared_cache(config: MethodConfig, model: Model, bits: sp.Expr | None = None) -> CacheModel:
    """build_cache(config, model, bits), built once per content (model, method and its label, bits, the active
    kernel profile) and shared
    (CacheModels are frozen) by `applies` and the graphs and capacity of a plan (costmodel.graph.method_cache).
    Errors are raised (and not kept) as build_cache raises them."""
    from roofline.catalogue import kernel_profiles

    key = (model.model_dump_json(), type(config).__name__, config.model_dump_json(), config.label(), str(bits),
           kernel_profiles.active().name)
    return _CACHES.get_or(key, lambda: build_cache(config, model, bits))


def applies(config: MethodConfig, model: Model) -> str | None:
    """None when `config` applies to `model`, else the one-line reason (build_cache's error), kept by content
    (roofline.numbers.codegen) so a plan over every preset does not rebuild each cache to find out; a cache built to
    find out is the one the plan then uses (shared_cache). The key holds the label: the reason names the SPEC it
    was asked for, and equal configs ('kivi-2', 'kivi:bits=2') share a content key."""

    def check() -> str | None:
        try:
            shared_cache(config, model)
        except SpecError as err:
            return str(err)
        return None

    return codegen.cached_json(codegen.content_key("applies", model, config, config.label()), check)


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
