"""KV-cache methods: one module each, registered by import. See base.py for the interface."""

from roofline.methods import baseline, innerq, kivi, kvquant, skvq, turboquant  # noqa: F401  (registers)
from roofline.methods.base import MethodConfig, build_cache, methods, parse_method, presets
from roofline.methods.layout import CacheModel, ExtraOp, LayerCache, TensorLayout

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
