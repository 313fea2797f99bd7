"""State-space architectures from their config.json (tests/data/hf/<name>/, provenance in SOURCE.md): the state
bytes per sequence and KV bytes per token by hand, the per-GPU state under tensor parallelism, the cost model's
recurrent ops, and `roofline plan` on each."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from roofline.accounting import kv_bytes_per_token, moe_layer_count, parameter_count, state_bytes_per_sequence
from roofline.catalogue import load_model
from roofline.cli import main
from roofline.costmodel import build_graph
from roofline.engines import EngineOptions, capacity
from roofline.errors import SpecError
from roofline.methods import build_cache, parse_method
from roofline.units import B, P

DATA = Path(__file__).resolve().parents[1] / "data" / "hf"


def _model(name: str):
    return load_model(str(DATA / name / "config.json"))


# bf16 states. Mamba-1: d_inner = expand x hidden channels, each a d_state state, conv keeps (kernel - 1) x d_inner.
# Mamba-2: n_heads x d_state x head_dim state, conv over x, B, C: (kernel - 1) x (d_inner + 2 n_groups d_state).
@pytest.mark.parametrize(("name", "state", "per_token"), [
    ("Mamba-2.8B", 64 * (2 * 2560 * 16 + 3 * 2 * 2560) * 2, 0),  # 64 layers, d_inner 5120, d_state 16, conv 4
    ("Mamba-Codestral-7B", 64 * (128 * 128 * 64 + 3 * (128 * 64 + 2 * 8 * 128)) * 2, 0),  # 128 heads of 64, 8 groups
    # 32 layers: attention at i % 8 == 4 (4 layers, 8 KV heads of 4096 / 32), Mamba-1 in the other 28
    ("Jamba-1.5-Mini", 28 * (2 * 4096 * 16 + 3 * 2 * 4096) * 2, 4 * 2 * 8 * 128 * 2),
    # every one of 44 layers attends (2 KV heads of 128) and runs a Mamba-2 mixer: 24 heads of 128, 1 group, d_state 256
    ("Falcon-H1-7B", 44 * (24 * 256 * 128 + 3 * (24 * 128 + 2 * 1 * 256)) * 2, 44 * 2 * 2 * 128 * 2),
])
def test_state_and_kv_bytes_by_hand(name, state, per_token):
    model = _model(name)
    assert state_bytes_per_sequence(model) == state
    assert kv_bytes_per_token(model) == per_token
    cache = build_cache(parse_method("bf16"), model)
    assert cache.reserved_parts()["state"] == state  # the state is in the planner's cache, in its dtype


def test_layouts():
    jamba = _model("Jamba-1.5-Mini")
    assert [jamba.layer_attention(i).kind for i in (3, 4, 12, 28, 31)] == ["linear", "full", "full", "full", "linear"]
    assert moe_layer_count(jamba) == 16  # expert_layer_period 2, offset 1: the odd layers
    assert jamba.linear_attention.dt_rank == 256
    mamba = _model("Mamba-2.8B")
    assert mamba.linear_attention.dt_rank == 160 and mamba.mlp == "none" and mamba.tie_word_embeddings
    assert _model("Falcon-H1-7B").state_layers() == 44


def test_parameter_counts_match_the_published_sizes():
    # Mamba-2.8B: 2.8 B (state-spaces/mamba-2.8b-hf); Codestral Mamba: 7.3 B; Jamba-1.5-Mini: 52 B total, 12 B
    # active (AI21 model card); Falcon-H1-7B: 7.6 B (TII)
    assert round(parameter_count(_model("Mamba-2.8B")).total / 1e9, 1) == 2.8
    assert round(parameter_count(_model("Mamba-Codestral-7B")).total / 1e9, 1) == 7.3
    jamba = parameter_count(_model("Jamba-1.5-Mini"))
    assert round(jamba.total / 1e9) == 52 and round(jamba.active / 1e9) == 12
    assert round(parameter_count(_model("Falcon-H1-7B")).total / 1e9, 1) == 7.6


def test_state_per_gpu_when_tp_exceeds_the_groups(capsys):
    # Codestral Mamba at tp 16: 128 / 16 = 8 heads per GPU, but only 8 groups of B and C for 16 GPUs: each GPU keeps
    # one whole group (a replica), never half of one. Per layer: 8 x 128 x 64 state + 3 x (8 x 64 + 2 x 1 x 128) conv.
    per_layer = (8 * 128 * 64 + 3 * (8 * 64 + 2 * 1 * 128)) * 2
    code = main(["plan", "--model", str(DATA / "Mamba-Codestral-7B" / "config.json"), "--method", "bf16",
                 "--context", "4096", "--tp", "16", "--json"])
    row = json.loads(capsys.readouterr().out)["results"][0]
    assert code == 0
    assert row["kv_bytes_per_sequence"] == 64 * per_layer
    assert 64 * per_layer > state_bytes_per_sequence(_model("Mamba-Codestral-7B")) / 16  # more than a 1/16 slice


def test_recurrent_ops_decode_and_prefill():
    mamba = _model("Mamba-2.8B")
    decode = build_graph(mamba, parse_method("bf16"), "decode").by_name()
    rec = decode["recurrence"][0]
    state = 5120 * 16 * 2  # d_inner x d_state, bf16
    assert rec.count == 64
    assert rec.vector_flops.subs(B, 1) == 6 * 5120 * 16  # exp(dt A) h + dt B x, y = C h: 6 per element
    assert rec.traffic["kv_read"].subs(B, 1) == state and rec.traffic["kv_write"].subs(B, 1) == state
    assert decode["x_proj"][0].matmul_flops.subs(B, 1) == 2 * 5120 * (160 + 2 * 16)
    assert "mlp_up" not in decode  # no MLP in a Mamba layer
    prefill = build_graph(mamba, parse_method("bf16"), "prefill").by_name()["recurrence"][0]
    assert prefill.vector_flops.subs({B: 1, P: 1000}) == 1000 * 6 * 5120 * 16
    assert prefill.traffic["kv_write"].subs(B, 1) == state  # the final state, once
    h1 = build_graph(_model("Falcon-H1-7B"), parse_method("bf16"), "decode")
    linear = [op for op in h1.ops if op.group == "linear"]
    assert {op.name for op in linear} >= {"in_proj", "conv1d", "recurrence", "out_proj"}
    assert "attn_norm" not in {op.name for op in linear}  # the mixer shares the attention's input norm
    rec = next(op for op in linear if op.name == "recurrence")
    assert rec.count == 44 and rec.matmul_flops.subs(B, 1) == 5 * 24 * 256 * 128  # Mamba-2 step, 24 heads


def test_methods_and_engines_that_cannot_apply_say_so():
    with pytest.raises(SpecError, match="every layer is recurrent: there is no KV cache to compress"):
        build_cache(parse_method("kivi-2"), _model("Mamba-2.8B"))
    build_cache(parse_method("aquakv-2"), _model("Falcon-H1-7B"))  # parallel: attention layers stay adjacent
    with pytest.raises(SpecError, match=r"^--engine: vllm's layout of a parallel attention \+ Mamba hybrid"):
        capacity(_model("Falcon-H1-7B"), "vllm", EngineOptions(kv_memory_bytes=10 * 2**30))


@pytest.mark.parametrize(("name", "tp", "methods"), [("Mamba-2.8B", 1, ["bf16"]),
                                                     ("Mamba-Codestral-7B", 2, ["bf16"]),
                                                     ("Jamba-1.5-Mini", 2, ["bf16", "kivi-2"]),
                                                     ("Falcon-H1-7B", 2, ["bf16", "kivi-2"])])
def test_plan_runs_on_the_config(name, tp, methods, capsys):
    args = ["plan", "--model", str(DATA / name / "config.json"), "--context", "2048", "--tp", str(tp), "--json"]
    code = main(args + [arg for m in methods for arg in ("--method", m)])
    report = json.loads(capsys.readouterr().out)
    assert code == 0
    assert [row["method"] for row in report["results"]] == methods
    assert all(row["kv_bytes_per_sequence"] > 0 for row in report["results"])


def test_ideal_engine_counts_the_state_by_its_own_heads():
    # Qwen3-Next at tp 4, 2,048-token requests in a 1 GiB pool: per request one of the 2 KV heads of its 12 attention
    # layers (2 x 256 x 2 B per layer and token) and a quarter of its 36 DeltaNet states (8 value, 4 key heads).
    model = load_model("Qwen3-Next-80B-A3B")
    attention = 12 * 2 * 1 * 256 * 2 * 2048
    state = 36 * (8 * 128 * 128 + 3 * (2 * 4 * 128 + 8 * 128)) * 2
    result = capacity(model, "ideal", EngineOptions(tp=4, max_model_len=2048, kv_memory_bytes=2**30))
    assert result.max_concurrency == pytest.approx(2**30 / (attention + state))
