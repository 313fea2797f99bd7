"""Properties of the cost model (issue 3): monotone in bits, context and batch; "no compression" reduces
exactly to the baseline; per-op roofline bookkeeping is self-consistent."""

import pytest
import sympy as sp
from hypothesis import given, settings
from hypothesis import strategies as st

from roofline.catalogue import load_hardware, load_model
from roofline.catalogue.ceiling_sources import with_ceilings
from roofline.costmodel import Roofline, build_graph
from roofline.methods import build_cache, parse_method, presets
from roofline.units import BITS, B, L, P

MODELS = ["Llama-3.1-8B", "Llama-2-7B", "Gemma-2-9B", "Mixtral-8x7B", "Qwen3-8B"]
QUANT_PRESETS = sorted(p for p, (method, _, _) in presets().items() if method != "baseline")
# hand derivations on the datasheet roofline (the catalogue's H100-SXM also has measured ceilings)
H100 = with_ceilings(load_hardware("H100-SXM"), "datasheet")


@settings(max_examples=60, deadline=None)
@given(preset=st.sampled_from(sorted(presets())), model=st.sampled_from(MODELS),
       context=st.integers(1, 300_000), step=st.integers(1, 5000))
def test_reserved_memory_never_decreases_with_context(preset, model, context, step) -> None:
    cache = build_cache(parse_method(preset), load_model(model))
    assert cache.reserved_bytes.subs(L, context + step) >= cache.reserved_bytes.subs(L, context)


@settings(max_examples=40, deadline=None)
@given(preset=st.sampled_from(QUANT_PRESETS), model=st.sampled_from(MODELS),
       context=st.integers(1, 300_000), bits=st.sampled_from([1, 2, 3, 4, 5, 8]), more=st.integers(1, 4))
def test_memory_and_reads_never_decrease_with_bits(preset, model, context, bits, more) -> None:
    cache = build_cache(parse_method(preset), load_model(model), bits=BITS)
    lo, hi = {L: context, BITS: bits}, {L: context, BITS: bits + more}
    assert cache.reserved_bytes.subs(hi) >= cache.reserved_bytes.subs(lo)
    assert cache.read_bytes.subs(hi) >= cache.read_bytes.subs(lo)


@settings(max_examples=25, deadline=None)
@given(preset=st.sampled_from(sorted(presets())), model=st.sampled_from(MODELS),
       batch=st.integers(1, 256), context=st.integers(1, 200_000), step=st.integers(1, 4096))
def test_decode_bytes_and_time_never_decrease_with_context_or_batch(preset, model, batch, context, step) -> None:
    graph = build_graph(load_model(model), parse_method(preset), "decode", occupancy="mean")
    total_bytes, time = graph.total("bytes"), Roofline(H100).time(graph)
    base = {B: batch, L: context}
    for more in ({B: batch, L: context + step}, {B: batch + 1, L: context}):
        assert total_bytes.subs(more) >= total_bytes.subs(base)
        assert time.subs(more) >= time.subs(base)


def test_no_compression_reduces_exactly_to_the_baseline() -> None:
    uncompressed = ["kivi:bits=16,v_bits=16", "innerq:k_bits=16,v_bits=16", "skvq:k_bits=16,v_bits=16",
                    "turboquant:k_bits=16,v_bits=16"]
    for model_name in ("Llama-3.1-8B", "Gemma-2-9B"):
        model = load_model(model_name)
        base = build_cache(parse_method("fp16"), model)
        for spec in uncompressed:
            cache = build_cache(parse_method(spec), model)
            assert sp.simplify(cache.resident_bytes - base.resident_bytes) == 0, spec
            assert sp.simplify(cache.read_bytes - base.read_bytes) == 0, spec
            assert cache.asymptotic_bits() == 16


def test_uncompressed_kivi_graph_equals_baseline_graph() -> None:
    model = load_model("Llama-3.1-8B")
    g16 = build_graph(model, parse_method("kivi:bits=16,v_bits=16"), "decode")
    base = build_graph(model, parse_method("fp16"), "decode")
    for attr in ("matmul_flops", "vector_flops", "bytes"):
        assert sp.simplify(g16.total(attr) - base.total(attr)) == 0


def test_per_op_roofline_numbers_are_consistent() -> None:
    model = load_model("Llama-3.1-8B")
    roof = Roofline(H100)
    graph = build_graph(model, parse_method("kivi-2"), "decode")
    rows = roof.evaluate(graph, {B: 8, L: 32_768})
    for row in rows:
        # the hierarchical roofline: the op takes its slowest ceiling (DRAM, compute, shared memory, L2, latency)
        ceilings = {"compute": row["compute_s"], "memory": row["memory_s"], "shared-memory": row["shared_s"],
                    "l2": row["l2_s"], "latency": row["latency_s"]}
        assert row["time_s"] == max(ceilings.values())
        assert abs(sum(row["traffic"].values()) - row["bytes"]) <= 1e-6 * max(row["bytes"], 1)
        assert row["ridge_flops_per_byte"] == H100.bf16_dense_flops_per_s / H100.memory_bytes_per_s
        if row["bytes"] and row["time_s"] > max(row["compute_s"], row["memory_s"]):
            assert row["bound"] == max(ceilings, key=ceilings.get)  # an on-chip ceiling binds and is named
        elif row["bytes"]:
            assert row["bound"] in ("compute", "issue") if row["compute_s"] > row["memory_s"] else row["bound"] == \
                "memory"
    total = sum(r["count"] * r["time_s"] for r in rows)
    assert abs(total - float(roof.time(graph).subs({B: 8, L: 32_768}))) < 1e-12


def test_decode_step_by_hand_llama31_8b_batch1() -> None:
    # batch 1, bf16: every matmul is memory bound, so the step is (weights + KV + activations) / bandwidth
    # plus the norms etc.; weights alone: 8,030,261,248 params x 2 B (embedding: one row read)
    model = load_model("Llama-3.1-8B")
    graph = build_graph(model, parse_method("bf16"), "decode")
    weights = graph.traffic_total("weights").subs({B: 1})
    embedding_table = 128_256 * 4096 * 2
    assert weights == 2 * 8_030_261_248 - embedding_table + 4096 * 2
    kv = graph.traffic_total("kv_read").subs({B: 1, L: 4096})
    assert kv == 4096 * 131_072
    time = float(Roofline(H100).time(graph).subs({B: 1, L: 4096}))
    floor = float(graph.total("bytes").subs({B: 1, L: 4096})) / 3.35e12
    assert floor * (1 - 1e-12) <= time < floor * 1.001


def test_prefill_attention_flops_causal_by_hand() -> None:
    # causal attention over P tokens: 2 * H * (d_qk + d_v) * P(P+1)/2 per sequence
    model = load_model("Llama-3.1-8B")
    graph = build_graph(model, parse_method("bf16"), "prefill")
    (attn,) = [op for op in graph.ops if op.name == "attention"]
    assert attn.matmul_flops.subs({B: 2, P: 1000}) == 2 * 2 * 32 * 256 * 1000 * 1001 // 2


def test_expressions_stay_exact() -> None:
    # integer arithmetic must not leak floats into the byte counts (Float != Integer in sympy)
    model = load_model("Llama-3.1-8B")
    for name in presets():
        graph = build_graph(model, parse_method(name), "decode")
        for op in graph.ops:
            for expr in (op.matmul_flops, op.vector_flops, *op.traffic.values()):
                assert not sp.sympify(expr).atoms(sp.Float), (name, op.name, expr)


def test_piecewise_linear_integral_is_exact() -> None:
    from roofline.units import piecewise_linear_integral

    # ∫_0^20 max(2L, L + 10) dL = ∫_0^10 (L + 10) + ∫_10^20 2L = 150 + 300
    assert piecewise_linear_integral(sp.Max(2 * L, L + 10), L, 0, 20) == pytest.approx(450, rel=1e-12)
    # ∫_0^10 min(L, 4) dL = 8 + 24; a constant integrates to c (hi - lo)
    assert piecewise_linear_integral(sp.Min(L, 4), L, 0, 10) == pytest.approx(32, rel=1e-12)
    assert piecewise_linear_integral(sp.Integer(3), L, 2, 5) == 9
    # nested: max(min(L, 6), 10 - L) on [0, 10]: 10 - L to L = 5, then L to 6, then 6
    expected = (10 + 5) / 2 * 5 + (5 + 6) / 2 * 1 + 6 * 4
    assert piecewise_linear_integral(sp.Max(sp.Min(L, 6), 10 - L), L, 0, 10) == pytest.approx(expected, rel=1e-12)
