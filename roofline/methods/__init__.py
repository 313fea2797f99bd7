"""KV-cache methods: one module each (config, presets, storage, ops, limits hooks); registry.py lists them."""

from roofline.kv.layout import CacheModel, ExtraOp, LayerCache, TensorLayout
from roofline.methods.base import MethodConfig
from roofline.methods.registry import applies, build_cache, methods, parse_method, presets, shared_cache

__all__ = [
    "CacheModel",
    "ExtraOp",
    "LayerCache",
    "MethodConfig",
    "applies",
    "TensorLayout",
    "build_cache",
    "methods",
    "parse_method",
    "presets",
    "shared_cache",
]
