"""What a KV method does not see: recurrent-state layers and the DSA indexer, put around its cache.

A KV method compresses the per-token cache of attention layers. `attention_view` shows it the model with
its recurrent ('linear') layers as layers that cache nothing; `complete_cache` then replaces those layers
with their fixed per-sequence state (kept in its own dtype, never compressed) and, for DeepSeek Sparse
Attention, adds the indexer's key cache to every attending layer and caps the tokens attention reads at
the top-k (DeepSeek-V3.2 technical report, §2.1: the indexer scores all L tokens, attention reads k).
"""

from __future__ import annotations

from dataclasses import replace

from roofline.accounting import dtype_bytes, indexer_bytes_per_token_layer
from roofline.kv.layout import CacheModel, LayerCache, TensorLayout
from roofline.lazy import sp
from roofline.specs import AttentionLayer, Model

NO_CACHE = AttentionLayer(kind="none")
RECURRENT = AttentionLayer(kind="linear")


def attention_view(model: Model) -> Model:
    """The model as a KV method sees it: 'linear' layers become layers without a cache (kind 'none'); a
    parallel hybrid (Falcon-H1) loses its mixers."""
    if model.linear_attention is None:
        return model
    attention = [NO_CACHE if a.kind == "linear" else a for a in model.attention]
    return model.model_copy(update={"attention": attention, "linear_attention": None, "linear_parallel": False})


def state_layer(model: Model, count: int) -> LayerCache:
    """`count` recurrent layers: the recurrent state (value_heads x d_k x d_v) and the conv state
    ((kernel - 1) x conv_channels), in the state dtype (the recurrent state at its recurrent_dtype where set), read
    and rewritten whole every decode step."""
    la = model.linear_attention
    assert la is not None
    elements = la.state_elements + la.conv_elements
    total = la.state_elements * dtype_bytes(la.recurrent_state_dtype) + la.conv_elements * dtype_bytes(la.state_dtype)
    state = TensorLayout(name="state", elements=sp.Integer(elements), resident={"state": total},
                         channels=0, role="state", bits_per_element=8 * total / elements, append_bytes=total)
    return LayerCache(count=count, attention=RECURRENT, tensors=(state,), tokens=sp.Integer(0),
                      qk_head_dim=sp.Integer(la.key_head_dim), v_head_dim=sp.Integer(la.value_head_dim),
                      kv_heads=la.value_heads, kv_projection=False)


def _with_indexer(layer: LayerCache, model: Model, keys: bool = True) -> LayerCache:
    """Add the DSA indexer cache (resident, written per token; read by the indexer op, not by attention) where
    the layers run their own indexer (`keys`; SparseAttention.indexer_layers), and cap the tokens attention reads at
    the top-k (a layer reusing another layer's top-k reads as many)."""
    dsa = model.sparse_attention
    assert dsa is not None
    # index keys kept at the model dtype (the transformers convention) are bf16, the planner's model dtype (as
    # LinearAttention.state_dtype's default)
    per_token = indexer_bytes_per_token_layer(model, "bf16")
    tokens = layer.tokens
    indexer = TensorLayout(name="indexer", elements=tokens * dsa.index_head_dim,
                           resident={"indexer": tokens * per_token},
                           channels=0, role="aux", bits_per_element=sp.Integer(0), append_bytes=sp.Integer(per_token),
                           read={})
    kept = sp.Min(tokens, dsa.index_topk)
    share = kept / tokens
    tensors = tuple(replace(t, read={p: v * share for p, v in (t.read if t.read is not None else t.resident).items()})
                    for t in layer.tensors) + ((indexer,) if keys else ())
    return replace(layer, tensors=tensors, tokens=kept)


def _indexed_groups(layer: LayerCache, model: Model) -> list[LayerCache]:
    """An attending group of a DSA model as the layers that run their own indexer and, apart, those that reuse an
    earlier layer's top-k (every DSA layer is full attention, so the group holds all of them)."""
    own = model.indexer_layer_count()
    if own == layer.count:
        return [_with_indexer(layer, model)]
    groups = [_with_indexer(replace(layer, count=own), model)] if own else []
    return groups + [_with_indexer(replace(layer, count=layer.count - own), model, keys=False)]


def _with_convs(layer: LayerCache, model: Model) -> LayerCache:
    """An attending layer of a model with Model.attention_convs (Inkling) plus its four conv states: kernel - 1
    inputs of 2 kv_dim (the layer's own) + 2 hidden_size channels per sequence in the conv dtype, resident whatever
    the context, read whole and one input per channel written each decode step. Role 'aux': it scales with the
    layer's KV share under tensor parallelism, exact for the k / v convs, while the convs on the attention and MLP
    outputs (hidden_size wide, after the all-reduce) would be replicated on every rank."""
    convs = model.attention_convs
    assert convs is not None
    channels = convs.channels(model.at_layer(layer.attention).kv_dim, model.hidden_size)
    size = dtype_bytes(convs.state_dtype)
    total = (convs.kernel - 1) * channels * size
    state = TensorLayout(name="conv_state", elements=sp.Integer((convs.kernel - 1) * channels),
                         resident={"conv_state": total}, channels=0, role="aux", bits_per_element=8 * size,
                         append_bytes=channels * size)
    return replace(layer, tensors=layer.tensors + (state,))


def complete_cache(cache: CacheModel, model: Model) -> CacheModel:
    """`cache` (built on attention_view(model)) with the recurrent layers' states, the DSA indexer and the conv
    states of Model.attention_convs; a parallel hybrid's mixers get one more group of state layers beside its
    attention layers (the cost model gives it the mixer's ops, costmodel.linear)."""
    if model.attention_convs is not None:
        cache = replace(cache, layers=tuple(_with_convs(layer, model) if layer.attention.attends else layer
                                            for layer in cache.layers))
    if model.linear_attention is None and model.sparse_attention is None:
        return cache
    layers, recurrent = [], model.layer_counts().get("linear", 0)
    for layer in cache.layers:
        if model.linear_attention is not None and layer.attention.kind == "none":
            # the view's 'none' groups hold the recurrent layers first, then the model's own mixer-less layers
            # (Model.mlp_layers' MLP blocks), which keep nothing
            states = min(layer.count, recurrent)
            recurrent -= states
            layers += [state_layer(model, states)] if states else []
            layers += [replace(layer, count=layer.count - states)] if layer.count > states else []
        elif model.sparse_attention is not None and layer.attention.attends:
            layers += _indexed_groups(layer, model)
        else:
            layers.append(layer)
    if model.linear_parallel:
        layers.append(state_layer(model, model.state_layers()))
    return replace(cache, layers=tuple(layers))
