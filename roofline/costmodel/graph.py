"""The whole model as ops, per phase (prefill of P tokens, or one decode step at context L), per GPU."""

from __future__ import annotations

from dataclasses import dataclass, replace

from roofline.accounting import dense_mlp_layer_count, moe_layer_count
from roofline.catalogue import kernel_profiles
from roofline.costmodel.attention import attention_block, q_copy
from roofline.costmodel.blocks import (
    Ctx,
    Shard,
    allreduce,
    check_ep,
    dense_mlp,
    linear,
    moe_mlp,
    norm,
    residual_add,
)
from roofline.costmodel.fusion import apply_fusion, check_level
from roofline.costmodel.ops import Op, traffic
from roofline.gguf_quant import group_bytes_per_weight, group_types, preset_of
from roofline.lazy import sp
from roofline.methods import CacheModel, MethodConfig, shared_cache
from roofline.numbers.codegen import LRU
from roofline.planned_weights import head_dtype
from roofline.specs import Model
from roofline.units import window_occupancy


@dataclass(frozen=True)
class Graph:
    """Ops of one phase; each op counts `op.count` instances (layers) in a forward pass."""

    model: Model
    method: str
    phase: str
    tp: int
    ops: tuple[Op, ...]
    cache: CacheModel

    def total(self, attr: str) -> sp.Expr:
        """Sum over ops of count x op.<attr> (e.g. 'matmul_flops', 'bytes')."""
        return sp.Add(*(op.count * getattr(op, attr) for op in self.ops))

    def traffic_total(self, cls: str) -> sp.Expr:
        """Bytes of traffic class `cls` (ops.TRAFFIC) over the whole pass: sum of count x op bytes."""
        return sp.Add(*(op.count * op.traffic.get(cls, 0) for op in self.ops))

    def by_name(self) -> dict[str, list[Op]]:
        """The ops grouped by name, in graph order."""
        out: dict[str, list[Op]] = {}
        for op in self.ops:
            out.setdefault(op.name, []).append(op)
        return out


def _group_label(layer) -> str:
    kind = layer.attention
    return f"sliding{kind.window}" if kind.kind == "sliding" else kind.kind


_GRAPHS: dict[tuple, Graph] = {}
_GRAPH_CACHE_SIZE = 256
# the graphs before the occupancy rewrite and the fusion level (decode at 'exact' and at 'mean' share one build),
# the methods' caches (each phase's graph and the capacity side build the same one), and window_occupancy's
# answers per subexpression (the ops of a model share most of theirs): all kept per content, bounded
_RAW = LRU(64)
_OCCUPIED = LRU(20_000)


def method_cache(method: MethodConfig, model: Model, bits: sp.Expr | None = None) -> CacheModel:
    """build_cache(method, model, bits), built once per content (model, method and its label, bits) and shared
    with methods.applies (methods.registry.shared_cache): CacheModels are frozen. Errors are raised (and not kept)
    as build_cache raises them."""
    return shared_cache(method, model, bits)


def build_graph(
    model: Model,
    method: MethodConfig | CacheModel,
    phase: str = "decode",
    *,
    tp: int = 1,
    weight_dtype: str = "bf16",
    compute_dtype: str = "bf16",
    act_bytes: int = 2,
    fused: bool = True,
    bits: sp.Expr | None = None,
    occupancy: str = "exact",
    fusion: str = "typical",
    ep: int = 1,
    expert_weight_dtype: str | None = None,
    kernel_overrides: tuple[tuple[str, int], ...] = (),
    engine_ops: tuple[str, ...] = (),
) -> Graph:
    """Ops of `phase` ('decode': one token per sequence at context L; 'prefill': P tokens per sequence).

    `occupancy` says how full the methods' residual windows are taken to be (units.window_occupancy):
    'exact' at this L, 'mean' over a flush block (for averages), 'peak'. `fusion` sets the kernels each op
    launches (costmodel.fusion: 'none' eager, 'typical' vLLM/SGLang, 'full' torch.compile). `ep` replicas share
    the routed experts (blocks.moe_mlp, with the dispatch and combine all-to-alls); `expert_weight_dtype` stores
    the routed experts (None: weight_dtype). `kernel_overrides` (op name, kernels) replace the fusion level's
    counts (an engine's own fused calls: roofline.engines.timing). `engine_ops` names ops the engine adds to the
    model's ('q_copy': attention.q_copy in every layer of standard attention; roofline.engines.timing 14.).
    """
    if phase not in ("decode", "prefill"):
        raise ValueError(f"phase: {phase!r} is not 'decode' or 'prefill'")
    if occupancy not in ("exact", "mean", "peak"):
        raise ValueError(f"occupancy: {occupancy!r} is not 'exact', 'peak' or 'mean'")
    key = raw_key = None
    if not isinstance(method, CacheModel):
        # graphs are immutable: a workload change (batch, context) reuses them; specs are frozen, so their
        # JSON names them exactly; the kernel profile shapes a quantized cache's shared-memory work
        raw_key = (model.model_dump_json(), type(method).__name__, method.model_dump_json(), phase, tp,
                   weight_dtype, compute_dtype, act_bytes, fused, str(bits), ep, expert_weight_dtype,
                   kernel_profiles.active().name, engine_ops)
        key = (*raw_key, occupancy, check_level(fusion), kernel_overrides)
        if key in _GRAPHS:
            return _GRAPHS[key]
    check_ep(model, ep)
    experts = (ep, expert_weight_dtype or "")

    def raw() -> Graph:
        return _build_graph(model, method, phase, tp, weight_dtype, compute_dtype, act_bytes, fused, bits, experts,
                            engine_ops)

    graph = raw() if raw_key is None else _RAW.get_or(raw_key, raw)
    if occupancy != "exact":
        graph = replace(graph, ops=tuple(_smoothed(op, occupancy) for op in graph.ops))
    graph = replace(graph, ops=tuple(apply_fusion(list(graph.ops), fusion, kernel_overrides)))
    if key is not None:
        if len(_GRAPHS) >= _GRAPH_CACHE_SIZE:
            _GRAPHS.pop(next(iter(_GRAPHS)))
        _GRAPHS[key] = graph
    return graph


def _build_graph(model, method, phase, tp, weight_dtype, compute_dtype, act_bytes, fused, bits,
                 experts: tuple[int, str] = (1, ""), engine_ops: tuple[str, ...] = ()) -> Graph:
    """The phase's ops with the windows at their exact occupancy, before the fusion level (build_graph)."""
    from roofline.units import B, P
    cache = method if isinstance(method, CacheModel) else method_cache(method, model, bits)
    shard = Shard.of(model, tp)
    tokens = B if phase == "decode" else B * P

    gguf, types = gguf_group_bytes(model, weight_dtype)

    def ctx(group: str, count: int, dtype: str = weight_dtype) -> Ctx:
        key = group if group in ("model", "mlp", "moe") else "attention"
        own = gguf.get(key) if gguf else None
        return Ctx(model, shard, dtype, act_bytes, compute_dtype, group, count, *experts, weight_bytes=own,
                   weight_type=types.get(key, ""))

    # the embedding, the final norm and the LM head at their stored dtype: bf16 under a quantization layout
    top = ctx("model", 1, head_dtype(model, weight_dtype, experts[1] or weight_dtype))
    ops: list[Op] = [top.op("embedding", traffic=traffic(weights=tokens * model.hidden_size * top.wb,
                                                          act_write=tokens * model.hidden_size * act_bytes))]
    seen_groups: dict[str, int] = {}
    for layer in cache.layers:
        if layer.attention.kind == "none":  # a block without a mixer (Model.mlp_layers' MLP layers): no ops
            continue
        label = _group_label(layer)
        seen_groups[label] = seen_groups.get(label, 0) + 1
        if seen_groups[label] > 1:
            label = f"{label}#{seen_groups[label]}"
        lc = ctx(label, layer.count)
        ops += attention_block(lc, layer, cache.method, phase, fused)
        if "q_copy" in engine_ops and layer.attention.kind != "linear" and not model.mla:
            ops.append(q_copy(lc, layer, tokens))
        ops.append(residual_add(lc, "attn_residual", tokens))

    n_moe = moe_layer_count(model)
    for label, count, moe in (("mlp", dense_mlp_layer_count(model), False), ("moe", n_moe, True)):
        if count == 0:  # pure Mamba (or Model.mlp_layers' mixer blocks): the mixer is the whole layer
            continue
        mc = ctx(label, count)
        ops.append(norm(mc, "mlp_norm", tokens, model.hidden_size))
        ops += moe_mlp(mc, tokens) if moe else dense_mlp(mc, tokens, shard.intermediate)
        ar = allreduce(mc, "mlp_allreduce", tokens)
        ops += [ar] if ar else []
        ops.append(residual_add(mc, "mlp_residual", tokens))

    # only the last position of each sequence needs logits, in prefill as in decode
    ops += [norm(top, "final_norm", B, model.hidden_size),
            linear(top, "lm_head", B, model.hidden_size, shard.vocab)]
    return Graph(model=model, method=cache.method, phase=phase, tp=tp, ops=tuple(ops), cache=cache)


def gguf_group_bytes(model: Model, weight_dtype: str) -> tuple[dict, dict]:
    """A GGUF preset's bytes per weight and quantized GEMM type per op group (gguf_quant.group_bytes_per_weight,
    group_types); ({}, {}) for other dtypes."""
    preset = preset_of(weight_dtype)
    return ({}, {}) if preset is None else (group_bytes_per_weight(model, preset), group_types(model, preset))


def _smoothed(op: Op, how: str) -> Op:
    """`op` with every expression at the windows' `how` occupancy (units.window_occupancy), each distinct
    expression rewritten once per process (_OCCUPIED)."""
    def occupied(expr):
        return _OCCUPIED.get_or((how, expr), lambda: window_occupancy(expr, how))

    return replace(op, matmul_flops=occupied(op.matmul_flops), vector_flops=occupied(op.vector_flops),
                   traffic={k: occupied(v) for k, v in op.traffic.items()}, int_ops=occupied(op.int_ops),
                   shared_bytes=occupied(op.shared_bytes))
