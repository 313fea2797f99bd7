"""Build a CacheModel for a K/V (or MLA latent) cache: the one builder every K/V method and every stack
(dimension reduction -> quantization -> eviction) goes through."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field, replace

from pydantic import Field, NonNegativeInt, model_validator

from roofline.accounting import cached_tokens, kv_elements_per_token_layer
from roofline.kv.layout import CacheModel, ExtraOp, LayerCache, TensorLayout
from roofline.kv.quant import TensorQuant, codebook_bytes, tensor_layout
from roofline.lazy import sp
from roofline.specs import AttentionLayer, Model
from roofline.specs.base import Spec


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


UNQUANTIZED = TensorQuant(bits=16, scale_dtype="none", zero_dtype="none")


@dataclass(frozen=True)
class QuantPlan:
    """How a quantizer stores K and V: one TensorQuant each, plus per-layer bit overrides."""

    k: TensorQuant
    v: TensorQuant
    overrides: tuple[LayerOverride, ...] = ()


@dataclass(frozen=True)
class CacheShape:
    """Per-layer K/V widths after dimension reduction (ZACK): channels cached per token and the mean
    per-head dims attention runs with. None: the model's own."""

    k_channels: int
    v_channels: int
    qk_head_dim: sp.Expr
    v_head_dim: sp.Expr


@dataclass(frozen=True)
class Extras:
    """Ops and memory a method adds to every attending layer, beside its cache."""

    decode_ops: tuple[ExtraOp, ...] = ()
    prefill_ops: tuple[ExtraOp, ...] = ()
    fixed_bytes: dict[str, int] = field(default_factory=dict)
    # per-token, per-layer bytes of eviction bookkeeping (accumulated attention scores), resident and
    # read + written each decode step
    score_bytes_per_token: int = 0
    # dimension reduction folded into W_V and W_L (ZACK): V projection output and O projection input widths
    v_out_width: int | None = None
    o_in_width: int | None = None

    def merged(self, other: Extras | None) -> Extras:
        """These extras and `other`'s together: ops concatenated, fixed bytes and score bytes combined,
        `other`'s V/O widths where set; `self` unchanged if `other` is None."""
        if other is None:
            return self
        return Extras(
            decode_ops=self.decode_ops + other.decode_ops, prefill_ops=self.prefill_ops + other.prefill_ops,
            fixed_bytes={**self.fixed_bytes, **other.fixed_bytes},
            score_bytes_per_token=self.score_bytes_per_token + other.score_bytes_per_token,
            v_out_width=other.v_out_width or self.v_out_width, o_in_width=other.o_in_width or self.o_in_width,
        )


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
    """Layers sharing (attention kind, bit override): [(kind, override, count)] in first-seen order."""
    counts: dict[tuple[AttentionLayer, tuple], int] = {}
    for i, ov in enumerate(layer_bits(model, overrides)):
        key = (model.layer_attention(i), ov)
        counts[key] = counts.get(key, 0) + 1
    return [(kind, ov, n) for (kind, ov), n in counts.items()]


def with_bits(q: TensorQuant, bits: float | None) -> TensorQuant:
    """`q` at a layer override's `bits` (16 or more: unquantized, bits 16; storage_bits cleared to follow bits),
    or `q` itself when `bits` is None."""
    if bits is None:
        return q
    if bits >= 16:
        return q.model_copy(update={"bits": 16.0, "storage_bits": None})
    return q.model_copy(update={"bits": bits, "storage_bits": None})


def baseline_elements(model: Model, context=None) -> sp.Expr:
    """Elements of the uncompressed K,V (or MLA latent) cache at `context`, all layers."""
    if context is None:
        from roofline.units import L

        context = L
    shared = model.kv_shared_groups()

    def per_token(kind):
        return kv_elements_per_token_layer(model.at_layer(kind))
    return sp.Add(*(n * per_token(kind) * cached_tokens(kind, context) for kind, n in model.attention_groups().items()),
                  *(-n * per_token(kind) * cached_tokens(kind, context) for kind, n in shared.items()))


def _reading_only(layer: LayerCache, count: int) -> LayerCache:
    """`count` layers of `layer`'s group that attend with another layer's cache: they read what it reads (same
    tokens, same attention FLOPs) but hold and append nothing (Model.kv_shared_layers)."""
    tensors = tuple(replace(t, read=dict(t.read if t.read is not None else t.resident),
                            resident={part: sp.Integer(0) for part in t.resident}, append_bytes=sp.Integer(0))
                    for t in layer.tensors)
    return replace(layer, count=count, tensors=tensors, kv_projection=False)


def share_kv(layers: list[LayerCache], model: Model) -> list[LayerCache]:
    """`layers` with the model's kv_shared_layers split off their groups (the last groups of each kind first: the
    shared layers are the last ones) as reading-only layers; `layers` itself when nothing is shared."""
    out = list(layers)
    for kind, n in model.kv_shared_groups().items():
        for i in range(len(out) - 1, -1, -1):
            layer = out[i]
            if n and layer.attention == kind and layer.tensors:
                take = min(n, layer.count)
                rest = [replace(layer, count=layer.count - take)] if layer.count > take else []
                out[i:i + 1] = rest + [_reading_only(layer, take)]
                n -= take
    return out


def _layer_tensors(model, plan_k, plan_v, tokens, shape: CacheShape | None, sym_bits):
    """(tensors, fixed codebook bytes, qk dim, v dim) for one attending layer."""
    g = model.gqa_group
    if model.mla is not None:
        if shape is not None:
            raise ValueError("method: dimension reduction of MLA latents is not modelled")
        width = model.mla.kv_lora_rank + model.mla.qk_rope_head_dim
        plan_k.check_channels(width, "the MLA latent")
        tensors = (tensor_layout(plan_k, "latent", tokens, width, "channels", model.num_heads, sym_bits, "key",
                                 kv_heads=1),)
        return tensors, codebook_bytes(plan_k, width), sp.Integer(width), sp.Integer(model.mla.kv_lora_rank)
    kc = shape.k_channels if shape else model.kv_dim
    vc = shape.v_channels if shape else model.kv_dim
    plan_k.check_channels(kc, "K")
    plan_v.check_channels(vc, "V")
    heads = model.num_kv_heads
    tensors = (tensor_layout(plan_k, "K", tokens, kc, "channels", g, sym_bits, "key", kv_heads=heads),
               tensor_layout(plan_v, "V", tokens, vc, "tokens", g, sym_bits, "value", kv_heads=heads))
    fixed = codebook_bytes(plan_k, kc) + codebook_bytes(plan_v, vc)
    qk = shape.qk_head_dim if shape else sp.Integer(model.head_dim)
    vd = shape.v_head_dim if shape else sp.Integer(model.head_dim)
    return tensors, fixed, qk, vd


def score_tensor(tokens, bytes_per_token: int) -> TensorLayout:
    """Eviction bookkeeping (H2O/Keyformer accumulated scores): resident metadata, read and rewritten
    each step."""
    return TensorLayout(name="scores", elements=sp.Integer(0), resident={"metadata": tokens * bytes_per_token},
                        channels=0, bits_per_element=sp.Integer(0), append_bytes=tokens * bytes_per_token)


def standard_cache(
    method: str,
    model: Model,
    plan: QuantPlan | None,
    bits: sp.Expr | None = None,
    shape: CacheShape | None = None,
    token_budget=None,
    extras: Extras | None = None,
) -> CacheModel:
    """Every layer caches K and V (or the MLA latent) stored per `plan` (None: unquantized), with widths
    from `shape` (dimension reduction), at most `token_budget` tokens (eviction: a number of tokens or an
    expression of L), and `extras` ops in every attending layer."""
    plan = plan or QuantPlan(UNQUANTIZED, UNQUANTIZED)
    extras = extras or Extras()
    layers, fixed = [], 0
    for kind, (k_bits, v_bits), count in group_layers(model, plan.overrides):
        tokens = cached_tokens(kind)
        if token_budget is not None and kind.kind != "none":
            tokens = sp.Min(tokens, token_budget)
        sym_bits = bits if k_bits is None else None
        tensors, codebooks, qk, vd = _layer_tensors(model.at_layer(kind), with_bits(plan.k, k_bits),
                                                    with_bits(plan.v, v_bits), tokens, shape, sym_bits)
        attending = kind.kind != "none"
        fixed += count * codebooks if attending else 0
        if extras.score_bytes_per_token:
            tensors += (score_tensor(tokens, extras.score_bytes_per_token),)
        layers.append(LayerCache(
            count=count, attention=kind, tensors=tensors if attending else (), tokens=tokens,
            qk_head_dim=qk, v_head_dim=vd, kv_heads=1 if model.mla is not None else model.num_kv_heads,
            decode_ops=extras.decode_ops if attending else (),
            prefill_ops=extras.prefill_ops if attending else (),
            v_out_width=extras.v_out_width, o_in_width=extras.o_in_width,
        ))
    layers = share_kv(layers, model)
    fixed_bytes = dict(extras.fixed_bytes)
    if fixed:
        fixed_bytes["codebooks"] = fixed
    return CacheModel(method=method, layers=tuple(layers), fixed_bytes=fixed_bytes,
                      baseline_elements=baseline_elements(model), baseline_width=_growing_width(model))


def _growing_width(model: Model) -> int:
    """K/V elements per token of one full layer (the layers CacheModel.asymptotic_bits averages over) at its own
    head_dim; the model's when no layer sets one (a model with full layers of two head_dims is not imported)."""
    full = [a for a in model.attention if a.kind == "full"]
    return kv_elements_per_token_layer(model.at_layer(full[0]) if full else model)
