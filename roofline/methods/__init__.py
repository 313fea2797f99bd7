"""KV-cache methods: one module each, registered by import. See base.py for the interface."""

from roofline.kv.layout import CacheModel, ExtraOp, LayerCache, TensorLayout
from roofline.methods import (  # noqa: F401  (importing registers each method)
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
from roofline.methods.base import MethodConfig, build_cache, methods, parse_method, presets

__all__ = [
    "CacheModel",
    "ExtraOp",
    "LayerCache",
    "MethodConfig",
    "build_cache",
    "TensorLayout",
    "methods",
    "parse_method",
    "presets",
]
