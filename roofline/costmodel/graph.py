"""The whole model as ops, per phase (prefill of P tokens, or one decode step at context L), per GPU."""

from __future__ import annotations

from dataclasses import dataclass, replace

from roofline.accounting import moe_layer_count
from roofline.costmodel.attention import attention_block
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
from roofline.lazy import sp
from roofline.methods import CacheModel, MethodConfig, build_cache
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
) -> Graph:
    """Ops of `phase` ('decode': one token per sequence at context L; 'prefill': P tokens per sequence).

    `occupancy` says how full the methods' residual windows are taken to be (units.window_occupancy):
    'exact' at this L, 'mean' over a flush block (for averages), 'peak'. `fusion` sets the kernels each op
    launches (costmodel.fusion: 'none' eager, 'typical' vLLM/SGLang, 'full' torch.compile). `ep` replicas share
    the routed experts (blocks.moe_mlp, with the dispatch and combine all-to-alls); `expert_weight_dtype` stores
    the routed experts (None: weight_dtype).
    """
    if phase not in ("decode", "prefill"):
        raise ValueError(f"phase: {phase!r} is not 'decode' or 'prefill'")
    key = None
    if not isinstance(method, CacheModel):
        # graphs are immutable: a workload change (batch, context) reuses them; specs are frozen, so their
        # JSON names them exactly
        key = (model.model_dump_json(), type(method).__name__, method.model_dump_json(), phase, tp,
               weight_dtype, compute_dtype, act_bytes, fused, str(bits), occupancy, check_level(fusion), ep,
               expert_weight_dtype)
        if key in _GRAPHS:
            return _GRAPHS[key]
    check_ep(model, ep)
    experts = (ep, expert_weight_dtype or "")
    graph = _build_graph(model, method, phase, tp, weight_dtype, compute_dtype, act_bytes, fused, bits, occupancy,
                         experts)
    graph = replace(graph, ops=tuple(apply_fusion(list(graph.ops), fusion)))
    if key is not None:
        if len(_GRAPHS) >= _GRAPH_CACHE_SIZE:
            _GRAPHS.pop(next(iter(_GRAPHS)))
        _GRAPHS[key] = graph
    return graph


def _build_graph(model, method, phase, tp, weight_dtype, compute_dtype, act_bytes, fused, bits, occupancy,
                 experts: tuple[int, str] = (1, "")) -> Graph:
    from roofline.units import B, P
    cache = method if isinstance(method, CacheModel) else build_cache(method, model, bits)
    shard = Shard.of(model, tp)
    tokens = B if phase == "decode" else B * P

    def ctx(group: str, count: int) -> Ctx:
        return Ctx(model, shard, weight_dtype, act_bytes, compute_dtype, group, count, *experts)

    top = ctx("model", 1)
    ops: list[Op] = [top.op("embedding", traffic=traffic(weights=tokens * model.hidden_size * top.wb,
                                                          act_write=tokens * model.hidden_size * act_bytes))]
    seen_groups: dict[str, int] = {}
    for layer in cache.layers:
        label = _group_label(layer)
        seen_groups[label] = seen_groups.get(label, 0) + 1
        if seen_groups[label] > 1:
            label = f"{label}#{seen_groups[label]}"
        lc = ctx(label, layer.count)
        ops += attention_block(lc, layer, cache.method, phase, fused)
        ops.append(residual_add(lc, "attn_residual", tokens))

    n_moe = moe_layer_count(model)
    for label, count, moe in (("mlp", model.num_layers - n_moe, False), ("moe", n_moe, True)):
        if count == 0 or model.mlp == "none":  # pure Mamba: the mixer is the whole layer
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
    if occupancy != "exact":
        ops = [_smoothed(op, occupancy) for op in ops]
    return Graph(model=model, method=cache.method, phase=phase, tp=tp, ops=tuple(ops), cache=cache)


def _smoothed(op: Op, how: str) -> Op:
    return replace(op, matmul_flops=window_occupancy(op.matmul_flops, how),
                   vector_flops=window_occupancy(op.vector_flops, how),
                   traffic={k: window_occupancy(v, how) for k, v in op.traffic.items()},
                   int_ops=window_occupancy(op.int_ops, how), shared_bytes=window_occupancy(op.shared_bytes, how))
