"""The architectures added to the Hugging Face import in issue 15: KV bytes per token (and state bytes per sequence
for the state-space layers) computed by hand from each shipped config.json (provenance in its SOURCE.md), and
`roofline plan --model <config.json>` running on them."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from roofline.accounting import (
    kv_bytes,
    kv_bytes_per_token,
    parameter_count,
    state_bytes_per_layer_rank,
    state_heads_per_rank,
)
from roofline.catalogue import load_model
from roofline.catalogue.hf import model_from_hf_config
from roofline.cli import main
from roofline.errors import SpecError

DATA = Path(__file__).resolve().parents[1] / "data" / "hf"


def _model(name: str):
    return load_model(str(DATA / name / "config.json"))


def _config(name: str) -> dict:
    return json.loads((DATA / name / "config.json").read_text())


# bf16 K and V: 2 tensors x KV heads x head_dim x 2 bytes per full-attention layer; windowed layers drop out of the
# per-token figure once the context passes their window (they are capped in kv_bytes).
@pytest.mark.parametrize(("name", "per_token"), [
    ("Qwen1.5-MoE-A2.7B", 24 * 2 * 16 * (2048 // 16) * 2),  # 24 layers, MHA 16 heads of 128
    ("Command-R-v01", 40 * 2 * 64 * (8192 // 64) * 2),  # num_key_value_heads 64 (MHA), head_dim 8192 / 64
    ("Command-R7B", (32 // 4) * 2 * 8 * 128 * 2),  # sliding_window_pattern 4: layers 3, 7, ..., 31 are global
    ("OLMo-2-0425-1B", 16 * 2 * 16 * (2048 // 16) * 2),
    ("Phi-3.5-MoE", 32 * 2 * 8 * (4096 // 32) * 2),
    ("GLM-4-9B-chat", 40 * 2 * 2 * 128 * 2),
    ("GLM-4-9B-0414", 40 * 2 * 2 * 128 * 2),
    ("Falcon-7B-instruct", 32 * 2 * 1 * (4544 // 71) * 2),  # multi_query: ONE K/V head although num_kv_heads 71
    ("Falcon-40B", 60 * 2 * 8 * (8192 // 128) * 2),  # new_decoder_architecture: num_kv_heads 8
    ("Starcoder2-3B", 0),  # every layer slides (window 4096): nothing grows with the context past 4096
])
def test_bf16_kv_bytes_per_token_by_hand(name, per_token):
    assert kv_bytes_per_token(_model(name)) == per_token


def test_windowed_models_cap_at_the_window():
    sc2 = _model("Starcoder2-3B")
    # 30 layers x 2 x 2 KV heads x 128 x 2 B = 30,720 B per token, held for at most 4,096 tokens
    assert kv_bytes(sc2, context=100_000) == 30 * 2 * 2 * 128 * 2 * 4096
    assert kv_bytes(sc2, context=1000) == 30 * 2 * 2 * 128 * 2 * 1000
    r7b = _model("Command-R7B")
    # 8 global layers hold all 20,000 tokens, 24 sliding ones 4,096; 4,096 B per token per layer
    assert kv_bytes(r7b, context=20_000) == 4096 * (8 * 20_000 + 24 * 4096)
    assert [r7b.layer_attention(i).kind for i in (0, 2, 3, 31)] == ["sliding", "sliding", "full", "full"]


def test_falcon_kv_heads_follow_the_variant():
    base = _config("Falcon-7B-instruct")
    assert model_from_hf_config(base, name="f").num_kv_heads == 1  # multi_query
    assert model_from_hf_config(base | {"multi_query": False}, name="f").num_kv_heads == 71  # MHA: num_kv_heads
    newer = base | {"new_decoder_architecture": True, "num_kv_heads": 1}
    assert model_from_hf_config(newer, name="f").num_kv_heads == 1
    assert _model("Falcon-40B").norms_per_layer == 2  # ln_attn and ln_mlp
    assert _model("Falcon-7B-instruct").mlp == "plain"
    assert _model("Falcon-7B-instruct").intermediate_size == 4 * 4544  # FalconConfig: ffn_hidden_size = 4 d


def test_moe_shapes_and_active_parameters():
    qwen = _model("Qwen1.5-MoE-A2.7B")
    assert (qwen.moe.num_experts, qwen.moe.experts_per_token, qwen.moe.shared_width) == (60, 4, 5632)
    # published: 14.3 B total, 2.7 B activated (Qwen1.5-MoE-A2.7B model card)
    counts = parameter_count(qwen)
    assert round(counts.total / 1e9, 1) == 14.3 and round(counts.active / 1e9, 1) == 2.7
    phi = parameter_count(_model("Phi-3.5-MoE"))
    # published: 41.9 B total, 6.6 B active (Phi-3.5-MoE-instruct model card)
    assert round(phi.total / 1e9, 1) == 41.9 and round(phi.active / 1e9, 1) == 6.6


def test_unsupported_qwen2_moe_layouts_are_one_line_errors():
    data = _config("Qwen1.5-MoE-A2.7B")
    for key, value in (("decoder_sparse_step", 2), ("mlp_only_layers", [0])):
        with pytest.raises(SpecError, match=rf"^cfg\.json: {key}: .* not supported"):
            model_from_hf_config(data | {key: value}, where="cfg.json", name="q")


@pytest.mark.parametrize(("name", "tp"), [("Qwen1.5-MoE-A2.7B", 1), ("Command-R-v01", 2), ("Command-R7B", 1),
                                        ("OLMo-2-0425-1B", 1), ("Phi-3.5-MoE", 2), ("GLM-4-9B-chat", 1),
                                        ("GLM-4-9B-0414", 1), ("Falcon-7B-instruct", 1), ("Falcon-40B", 2),
                                        ("Starcoder2-3B", 1)])
def test_plan_runs_on_the_config(name, tp, capsys):
    path = str(DATA / name / "config.json")
    code = main(["plan", "--model", path, "--method", "bf16", "--method", "kivi-2", "--context", "2048",
                 "--tp", str(tp), "--json"])
    report = json.loads(capsys.readouterr().out)
    assert code == 0
    by_method = {row["method"]: row for row in report["results"]}
    assert set(by_method) == {"bf16", "kivi-2"}
    # one sequence of 2,048 tokens on one GPU: the hand-derived cache (bf16) over tp's share of the KV heads
    model = _model(name)
    share = max(1, model.num_kv_heads // tp) / model.num_kv_heads
    assert by_method["bf16"]["kv_bytes_per_sequence"] == pytest.approx(float(kv_bytes(model, context=2048)) * share)


def test_recurrent_state_per_gpu_splits_by_its_own_heads(capsys):
    # Qwen3-Next-80B-A3B (tests/data/hf/Qwen3-Next-80B-A3B/config.json): 2 KV heads, Gated DeltaNet with 16 key and
    # 32 value heads of 128, conv kernel 4. At tp = 4 each GPU keeps a replica of one of the 2 KV heads (half the
    # attention cache) but only a quarter of the recurrent state: 8 value heads and 4 key heads.
    model = load_model("Qwen3-Next-80B-A3B")
    attention = 12 * 2 * 2 * 256 * 2 * 2048 // 2  # 12 full layers, K+V, 2 heads x 256, bf16, 2,048 tokens, 1 of 2 heads
    state = 36 * (8 * 128 * 128 + 3 * (2 * 4 * 128 + 8 * 128)) * 2  # 36 DeltaNet layers: recurrent + conv, bf16
    assert state_bytes_per_layer_rank(model, 4) == (8 * 128 * 128 + 3 * (2 * 4 * 128 + 8 * 128)) * 2
    code = main(["plan", "--model", "Qwen3-Next-80B-A3B", "--method", "bf16", "--context", "2048", "--tp", "4",
                 "--json"])
    row = json.loads(capsys.readouterr().out)["results"][0]
    assert code == 0
    assert row["kv_bytes_per_sequence"] == attention + state
    with pytest.raises(ValueError, match="tp: 3 does not divide the 32 recurrent value heads"):
        state_heads_per_rank(model, 3)


def test_a_window_as_long_as_the_context_is_full_attention():
    # a window as long as max_position_embeddings (131,072 here) never slides anything out: full attention
    phi = model_from_hf_config(_config("Phi-3.5-MoE") | {"sliding_window": 131072}, name="p")
    assert phi.layer_counts() == {"full": 32}
    shorter = model_from_hf_config(_config("Phi-3.5-MoE") | {"sliding_window": 4096}, name="p")
    assert shorter.layer_counts() == {"sliding": 32}
