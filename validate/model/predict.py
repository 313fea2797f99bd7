"""Predict one op of the roofline op graph, from the specs alone (no per-kernel fitting).

A measured kernel and its prediction describe the same work by construction: the kernel's bytes and
FLOPs are the op's own sympy expressions (`op_work`), and its time is Roofline.evaluate on that op:
    time_s = max(F_matmul / peak_dtype + F_vector / peak_fp32, bytes / bandwidth, launch floor)
with the measured ceilings when the hardware spec has a `measured` section (roofline.costmodel.device).
"""

from __future__ import annotations

from typing import Any

_GRAPHS: dict[tuple[str, str, str], Any] = {}


def _graph(model, method_config, phase: str):
    """build_graph once per (model, method, phase): sympy graphs are slow to build and immutable."""
    from roofline.costmodel import build_graph

    key = (model.model_dump_json(), f"{type(method_config).__name__}:{method_config.model_dump_json()}", phase)
    if key not in _GRAPHS:
        _GRAPHS[key] = build_graph(model, method_config, phase)
    return _GRAPHS[key]


def find_op(model, method_config, op_name: str, phase: str = "decode"):
    """(graph, op) for the first op named `op_name` of the graph; raises listing the valid names."""
    graph = _graph(model, method_config, phase)
    for op in graph.ops:
        if op.name == op_name:
            return graph, op
    names = ", ".join(sorted({op.name for op in graph.ops}))
    raise KeyError(f"op: no {op_name!r} in the {phase} graph; valid: {names}")


def _symbols(values: dict) -> dict:
    """Accept {"B": 8, "L": 4096} as well as {B: 8, L: 4096} (sympy symbols of roofline.units)."""
    from roofline import units as symbols

    return {getattr(symbols, k) if isinstance(k, str) else k: v for k, v in values.items()}


# Decode attention is flash-decoding: the split kernel (op "attention") and the reduce kernel that merges
# the splits ("attention_reduce") are one measured kernel pair, so asking for one gives both.
COMPANIONS = {"attention": ("attention_reduce",)}


def find_ops(model, method_config, op_name: str, phase: str = "decode"):
    """(graph, [op, companions...]) for `op_name` (see COMPANIONS)."""
    graph, op = find_op(model, method_config, op_name, phase)
    group = [op] + [o for o in graph.ops if o.name in COMPANIONS.get(op_name, ()) and o.group == op.group]
    return graph, group


def op_work(model, method_config, op_name: str, values: dict, phase: str = "decode") -> dict:
    """Hardware-free work of one op instance (and its companions): {"bytes": traffic, "flops": matmul + vector}."""
    from roofline.units import evaluate

    _, ops = find_ops(model, method_config, op_name, phase)
    at = _symbols(values)
    return {"bytes": int(round(sum(evaluate(op.bytes, at) for op in ops))),
            "flops": int(round(sum(evaluate(op.flops, at) for op in ops)))}


def decode_work(model, method_config, op_name: str, params: dict) -> dict:
    """`op_work` of a decode case: B = params["batch"], L = params["context"]."""
    return op_work(model, method_config, op_name, {"B": params["batch"], "L": params["context"]})


def predict_op(model, method_config, op_name: str, values: dict, hardware, phase: str = "decode",
               transform=None) -> dict:
    """Roofline numbers of one op instance (plus its companion kernels) on `hardware`: time_s, bytes, flops,
    bound of the longest kernel (+ the summed split times). `transform` (op -> op): the op `op_name` as the
    measured kernel does it (kernel_structure.with_loop), timed in a graph of that op and its companions."""
    from dataclasses import replace

    from roofline.costmodel import roofline_for

    graph, ops = find_ops(model, method_config, op_name, phase)
    if transform is not None:
        ops = [transform(ops[0]), *ops[1:]]
        graph = replace(graph, ops=tuple(ops))
    # evaluate the whole (cached, compiled once per hardware) graph and keep this kernel's rows
    every = roofline_for(hardware).evaluate(graph, _symbols(values))
    rows = [row for op, row in zip(graph.ops, every, strict=True) if any(op is o for o in ops)]
    top = max(rows, key=lambda r: r["time_s"])
    own = next(r for o, r in zip(graph.ops, every, strict=True) if o is ops[0])  # the op itself, not its companions
    return {"time_s": sum(r["time_s"] for r in rows), "bytes": int(round(sum(r["bytes"] for r in rows))),
            "flops": int(round(sum(r["flops"] for r in rows))), "bound": top["bound"],
            "compute_s": sum(r["compute_s"] for r in rows), "memory_s": sum(r["memory_s"] for r in rows),
            "shared_s": sum(r.get("shared_s", 0.0) for r in rows), "l2_s": sum(r.get("l2_s", 0.0) for r in rows),
            "issue_s": sum(r.get("issue_s", 0.0) for r in rows),
            "kernels": len(rows), "op_s": own["time_s"], "op_memory_s": own["memory_s"]}


def decode_model(name: str, num_heads: int, num_kv_heads: int, head_dim: int, num_layers: int = 1,
                 source: str = "validate: synthetic one-layer model for a kernel case"):
    """A roofline Model (one layer unless told) with these attention heads; the other sizes are arbitrary but
    valid (the attention op depends only on heads, head_dim and the cache)."""
    from roofline.specs import Model

    return Model(name=name, source=source, architecture="LlamaForCausalLM", num_layers=num_layers,
                 hidden_size=num_heads * head_dim, num_heads=num_heads, num_kv_heads=num_kv_heads, head_dim=head_dim,
                 intermediate_size=4 * num_heads * head_dim, vocab_size=32000, tie_word_embeddings=False,
                 max_position_embeddings=1 << 20)


def case_model(prefix: str, params: dict, num_layers: int = 1, source: str | None = None):
    """`decode_model` named `<prefix>-h<H>-kv<H_kv>-d<d_h>` with the heads of a case's params."""
    extra = {"source": source} if source else {}
    return decode_model(f"{prefix}-h{params['num_heads']}-kv{params['num_kv_heads']}-d{params['head_dim']}",
                        params["num_heads"], params["num_kv_heads"], params["head_dim"], num_layers, **extra)
