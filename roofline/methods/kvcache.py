"""Build a CacheModel for a K/V (or MLA latent) cache stored through the shared quantizer."""

from __future__ import annotations

from collections.abc import Sequence

import sympy as sp

from roofline.accounting import cached_tokens, kv_elements_per_token_layer
from roofline.methods.base import LayerOverride
from roofline.methods.layout import CacheModel, LayerCache
from roofline.methods.quant import TensorQuant, codebook_bytes, tensor_layout
from roofline.specs import AttentionLayer, Model
from roofline.symbols import L


def layer_bits(model: Model, overrides: Sequence[LayerOverride]) -> list[tuple[float | None, float | None]]:
    """Per layer: (k_bits, v_bits) from the overrides, or (None, None) where the config's own apply."""
    bits: list[tuple[float | None, float | None]] = [(None, None)] * model.num_layers
    for o in overrides:
        if o.stop > model.num_layers:
            raise ValueError(f"overrides: layers [{o.start}, {o.stop}) exceed the model's {model.num_layers} layers")
        for i in range(o.start, o.stop):
            bits[i] = (o.k_bits, o.v_bits)
    return bits


def group_layers(model: Model, overrides: Sequence[LayerOverride] = ()) -> list[tuple[AttentionLayer, tuple, int]]:
    """Runs of layers sharing (attention kind, bit override): [(kind, override, count)] in first-seen order."""
    counts: dict[tuple[AttentionLayer, tuple], int] = {}
    for i, ov in enumerate(layer_bits(model, overrides)):
        key = (model.layer_attention(i), ov)
        counts[key] = counts.get(key, 0) + 1
    return [(kind, ov, n) for (kind, ov), n in counts.items()]


def with_bits(q: TensorQuant, bits: float | None) -> TensorQuant:
    if bits is None:
        return q
    if bits >= 16:
        return q.model_copy(update={"bits": 16.0, "storage_bits": None})
    return q.model_copy(update={"bits": bits, "storage_bits": None})


def baseline_elements(model: Model, context=L) -> sp.Expr:
    """Elements of the uncompressed K,V (or MLA latent) cache at `context`, all layers."""
    per_token = kv_elements_per_token_layer(model)
    return sp.Add(*(n * per_token * cached_tokens(kind, context) for kind, n in model.attention_groups().items()))


def standard_cache(
    method: str,
    model: Model,
    k: TensorQuant,
    v: TensorQuant,
    overrides: Sequence[LayerOverride] = (),
    bits: sp.Expr | None = None,
    token_budget: int | None = None,
) -> CacheModel:
    """K and V (or, for MLA, one latent tensor quantized like K) stored per `k`/`v` in every layer.

    `token_budget` caps the tokens a layer holds (eviction, H2O/Keyformer budgets).
    """
    layers = []
    fixed = 0
    for kind, (k_bits, v_bits), count in group_layers(model, overrides):
        tokens = cached_tokens(kind)
        if token_budget is not None:
            tokens = sp.Min(tokens, token_budget)
        kq, vq = with_bits(k, k_bits), with_bits(v, v_bits)
        layer_sym_bits = bits if k_bits is None else None
        g = model.gqa_group
        if model.mla is not None:
            width = model.mla.kv_lora_rank + model.mla.qk_rope_head_dim
            kq.check_channels(width, "the MLA latent")
            tensors = (tensor_layout(kq, "latent", tokens, width, "channels", model.num_heads, layer_sym_bits),)
            fixed += count * codebook_bytes(kq, width)
            qk_dim, v_dim = sp.Integer(width), sp.Integer(model.mla.kv_lora_rank)
        else:
            kq.check_channels(model.kv_dim, "K")
            vq.check_channels(model.kv_dim, "V")
            tensors = (
                tensor_layout(kq, "K", tokens, model.kv_dim, "channels", g, layer_sym_bits),
                tensor_layout(vq, "V", tokens, model.kv_dim, "tokens", g, layer_sym_bits),
            )
            fixed += count * (codebook_bytes(kq, model.kv_dim) + codebook_bytes(vq, model.kv_dim))
            qk_dim = v_dim = sp.Integer(model.head_dim)
        if kind.kind == "none":
            tensors = ()
        layers.append(LayerCache(
            count=count, attention=kind, tensors=tensors, tokens=tokens,
            qk_head_dim=qk_dim, v_head_dim=v_dim,
            kv_heads=1 if model.mla is not None else model.num_kv_heads,
        ))
    return CacheModel(
        method=method,
        layers=tuple(layers),
        fixed_bytes={"codebooks": fixed} if fixed else {},
        baseline_elements=baseline_elements(model),
    )
