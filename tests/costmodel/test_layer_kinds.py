"""The 2025 layer kinds: KV bytes by hand from the published configs, the cost model's new ops, and methods
that cannot apply saying so."""

from __future__ import annotations

import pytest
import sympy as sp

from roofline.accounting import kv_bytes, kv_bytes_per_token, state_bytes_per_sequence
from roofline.catalogue import load_model
from roofline.costmodel import build_graph
from roofline.costmodel.attention import causal_pairs
from roofline.errors import SpecError
from roofline.methods import applies, build_cache, parse_method
from roofline.specs import AttentionLayer
from roofline.units import B, L, P


@pytest.mark.parametrize(("name", "per_token"), [
    ("gpt-oss-120b", 18 * 2 * 8 * 64 * 2),  # 18 full layers (the 18 sliding ones hold <= 128 tokens)
    ("Gemma-3-27B", 10 * 2 * 16 * 128 * 2),  # 62 layers, every 6th global
    ("Llama-4-Scout-17B-16E", 12 * 2 * 8 * 128 * 2),  # every 4th layer global (NoPE), others chunked 8192
    ("DeepSeek-V3.2-Exp", 61 * (576 * 2 + 128 + 4)),  # MLA latent bf16 + DSA indexer (fp8 + scale)
    ("Qwen3-Next-80B-A3B", 12 * 2 * 2 * 256 * 2),  # 12 gated-attention layers of 48
    ("Qwen3-30B-A3B", 48 * 2 * 4 * 128 * 2),
    ("GLM-4.5-Air", 46 * 2 * 8 * 128 * 2),
    ("Kimi-K2", 61 * 576 * 2),
])
def test_bf16_bytes_per_token_from_the_configs(name, per_token):
    assert kv_bytes_per_token(load_model(name)) == per_token


def test_windowed_layers_cap_and_state_is_per_sequence():
    scout = load_model("Llama-4-Scout-17B-16E")
    assert kv_bytes(scout, context=100_000) == 12 * 4096 * 100_000 + 36 * 4096 * 8192
    nxt = load_model("Qwen3-Next-80B-A3B")
    # 36 Gated DeltaNet layers: (32 x 128 x 128 state + 3 x (2 x 16 x 128 + 32 x 128) conv) x 2 B
    assert state_bytes_per_sequence(nxt) == 36 * (32 * 128 * 128 + 3 * 8192) * 2
    assert kv_bytes(nxt, context=1000, batch=2) == 2 * (12 * 2048 * 1000 + state_bytes_per_sequence(nxt))


def test_methods_compress_attention_layers_only():
    nxt = load_model("Qwen3-Next-80B-A3B")
    fp8 = build_cache(parse_method("fp8"), nxt)
    parts = {k: v.subs(L, 1000) for k, v in fp8.resident_parts().items()}
    assert parts["data"] == 12 * 1024 * 1000  # fp8 K,V: half the bf16 bytes
    assert parts["state"] == state_bytes_per_sequence(nxt)  # the state keeps its dtype


@pytest.mark.parametrize(("spec", "model"), [("aquakv-2", "Qwen3-Next-80B-A3B"), ("xquant-cl-2", "Qwen3-Next-80B-A3B"),
                                             ("aquakv-2", "DeepSeek-V3")])
def test_a_method_that_cannot_apply_says_so(spec, model):
    with pytest.raises(SpecError, match=r"^method .*: "):
        build_cache(parse_method(spec), load_model(model))
    assert applies(parse_method(spec), load_model(model)).startswith(f"method {spec!r}")
    assert applies(parse_method("bf16"), load_model(model)) is None


def test_gated_deltanet_decode_ops():
    nxt = load_model("Qwen3-Next-80B-A3B")
    graph = build_graph(nxt, parse_method("bf16"), "decode")
    rec = graph.by_name()["recurrence"][0]
    state = 32 * 128 * 128 * 2
    assert rec.count == 36
    assert rec.matmul_flops.subs(B, 1) == 7 * 32 * 128 * 128  # Gated DeltaNet step: 7 d_k d_v per head
    assert rec.traffic["kv_read"].subs(B, 1) == state and rec.traffic["kv_write"].subs(B, 1) == state


def test_dsa_reads_top_k_tokens_and_scores_all():
    v32 = load_model("DeepSeek-V3.2-Exp")
    ops = build_graph(v32, parse_method("bf16"), "decode").by_name()
    at = {B: 1, L: 32768}
    assert ops["attention"][0].traffic["kv_read"].subs(at) == 2048 * 576 * 2  # top-2048 latents read
    assert ops["indexer"][0].traffic["kv_read"].subs(at) == 32768 * 132  # the indexer reads every key
    assert ops["indexer"][0].matmul_flops.subs(at) == 2 * 64 * 128 * 32768


def test_chunked_prefill_pairs():
    chunked = AttentionLayer(kind="chunked", window=8)
    assert causal_pairs(sp.Integer(16), chunked) == 2 * (8 * 9 // 2)  # two whole chunks
    assert causal_pairs(P, AttentionLayer(kind="full"), topk=4).subs(P, 6) == 10 + 2 * 4


def test_sinks_add_one_logit_per_head():
    oss = load_model("gpt-oss-20b")
    no_sinks = oss.model_copy(update={"attention": [a.model_copy(update={"sinks": False}) for a in oss.attention]})
    with_s = build_graph(oss, parse_method("bf16"), "decode").by_name()["attention"][0]
    without = build_graph(no_sinks, parse_method("bf16"), "decode").by_name()["attention"][0]
    assert (with_s.vector_flops - without.vector_flops).subs(B, 1) == 5 * 64  # softmax FLOPs x 64 heads
