"""`kv --convention`: whose cache the bytes follow (an engine's tokens, or transformers' cache), derived by hand."""

from __future__ import annotations

import json

import pytest
from cli_run import run


def _kv(capsys, *argv):
    rc, out, err = run(capsys, "kv", "--json", *argv)
    assert rc == 0, err
    return json.loads(out)


def test_sliding_layers_keep_w_minus_one_tokens_under_transformers(capsys):
    # Mistral-7B-v0.1: 32 layers, all sliding W = 4096; K and V of 8 heads x 128 in bf16 = 4096 B per token-layer;
    # transformers' DynamicSlidingWindowLayer keeps the last W - 1 = 4095 tokens, an engine attends over 4096
    per_token_layer = 2 * 8 * 128 * 2
    engine = _kv(capsys, "--model", "Mistral-7B-v0.1", "--context", "8192")
    hf = _kv(capsys, "--model", "Mistral-7B-v0.1", "--context", "8192", "--convention", "transformers")
    assert engine["convention"] == "engine" and hf["convention"] == "transformers"
    assert engine["kv_bytes"] == 32 * 4096 * per_token_layer
    assert hf["kv_bytes"] == 32 * 4095 * per_token_layer


def test_conv_state_keeps_kernel_columns_under_transformers(capsys):
    # Qwen3-Next-80B-A3B: 36 Gated DeltaNet layers (3 of every 4 of 48), conv over q, k, v:
    # 2 x 16 x 128 + 32 x 128 = 8192 channels; transformers keeps kernel (4) columns, an engine kernel - 1,
    # one more bf16 column per layer: 36 x 8192 x 2 B, context 1024 < every window (none) so attention is equal
    engine = _kv(capsys, "--model", "Qwen3-Next-80B-A3B", "--context", "1024")
    hf = _kv(capsys, "--model", "Qwen3-Next-80B-A3B", "--context", "1024", "--convention", "transformers")
    assert hf["kv_bytes"] - engine["kv_bytes"] == 36 * 8192 * 2


def test_below_the_window_both_conventions_agree(capsys):
    engine = _kv(capsys, "--model", "Gemma-2-9B", "--context", "1000")
    hf = _kv(capsys, "--model", "Gemma-2-9B", "--context", "1000", "--convention", "transformers")
    assert hf["kv_bytes"] == engine["kv_bytes"]


def test_help_states_both_conventions(capsys):
    rc, out, _ = run(capsys, "kv", "--help")
    assert rc == 0 and "W - 1 tokens" in out and "kernel - 1 conv" in out


@pytest.mark.parametrize("value", ["vllm", ""])
def test_unknown_convention_is_refused_with_status_2(capsys, value):
    rc, _, err = run(capsys, "kv", "--context", "10", "--convention", value)
    assert rc == 2 and "--convention" in err
