"""Gemma-3n's and Gemma-4's import (roofline.catalogue.hf_archs_gemma): the tiny transformers models past their
window, the default configs' caches by hand, and the refusals.

The expected cache of Gemma3nTextConfig's defaults is derived by hand: 35 layers, every fifth full
(layer_types (i + 1) % 5 == 0), the last num_kv_shared_layers = 15 reuse earlier caches, so layers 0-19 keep one:
4 full and 16 sliding (window 512); per token and layer 2 (K, V) x 2 KV heads x head_dim 256 x 2 bytes (bf16) =
2,048 bytes. At 1,024 tokens (engine convention: W per sliding layer): (4 x 1,024 + 16 x 512) x 2,048 = 25,165,824.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

pytest.importorskip("transformers")
sys.path.insert(0, str(Path(__file__).parent))
sys.path.insert(0, str(Path(__file__).parents[2] / "benchmarks"))

from hf_coverage import classify, default_config  # noqa: E402
from hf_exactness import measure  # noqa: E402

from roofline.accounting import kv_bytes, parameter_count  # noqa: E402
from roofline.catalogue.hf import model_from_hf_config  # noqa: E402
from roofline.errors import SpecError  # noqa: E402
from roofline.kv.builder import standard_cache  # noqa: E402
from roofline.units import L  # noqa: E402

TYPES = [("gemma3n_text", "Gemma3nForCausalLM"), ("gemma3n", "Gemma3nForConditionalGeneration"),
         ("gemma4_text", "Gemma4ForCausalLM"), ("gemma4", "Gemma4ForConditionalGeneration"),
         ("gemma4_unified_text", "Gemma4UnifiedForCausalLM"),
         ("gemma4_unified", "Gemma4UnifiedForConditionalGeneration")]


@pytest.mark.parametrize(("model_type", "architecture"), TYPES)
def test_past_the_window_parameters_and_cache_match_transformers(model_type, architecture):
    # 24 tokens > the toy's window 16: transformers keeps 15 per sliding layer, none in the 2 shared layers
    got = measure(model_type, architecture, context=24)
    assert got["roofline_params"] == got["hf_params"]
    assert got["roofline_cache_bytes"] == got["hf_cache_bytes"]


@pytest.mark.parametrize(("model_type", "architecture"), TYPES)
def test_default_types_import(model_type, architecture):
    assert classify(model_type, architecture)[0] == "imported"


def _default():
    return model_from_hf_config(default_config("gemma3n_text", "Gemma3nForCausalLM"), "gemma3n/config.json", "g")


def test_default_cache_by_hand():
    assert kv_bytes(_default(), "bf16", 1024) == (4 * 1024 + 16 * 512) * 2 * 2 * 256 * 2


def test_shared_layers_hold_nothing_but_read_the_owners_cache():
    model = _default()
    cache = standard_cache("bf16", model, None)
    held = sum(layer.count * sum(layer.resident().values()) for layer in cache.layers).subs(L, 1024)
    assert held == 25_165_824
    shared = [layer for layer in cache.layers if not layer.kv_projection]
    assert sum(layer.count for layer in shared) == 15
    assert all(sum(t.read.values()) != 0 for layer in shared for t in layer.tensors)


def test_shared_layers_have_no_kv_weights():
    # the same model without sharing has 15 x (2 x 2,048 x 512 K/V weights + 256 k_norm weights) more
    model = _default()
    unshared = model.model_copy(update={"kv_shared_layers": 0})
    assert parameter_count(unshared).total - parameter_count(model).total == 15 * (2 * 2048 * 512 + 256)


@pytest.mark.parametrize(("key", "value", "rule"), [
    ("intermediate_size", [16384] * 34 + [8192], "per-layer widths"),
    ("num_kv_shared_layers", 35, "leaves none"),
    ("altup_num_inputs", 0, "positive integer"),
])
def test_refusals_name_the_key(key, value, rule):
    data = default_config("gemma3n_text", "Gemma3nForCausalLM") | {key: value}
    with pytest.raises(SpecError, match=f"{key}: .*{rule}"):
        model_from_hf_config(data, "gemma3n/config.json", "g")


def test_a_shared_layer_without_an_owner_of_its_kind_is_refused():
    # with 31 of 35 layers shared, layers 0-3 (all sliding) keep caches: the shared full layers have no owner
    data = default_config("gemma3n_text", "Gemma3nForCausalLM") | {"num_kv_shared_layers": 31}
    with pytest.raises(SpecError, match="kv_shared_layers"):
        model_from_hf_config(data, "gemma3n/config.json", "g")


def test_engines_page_only_the_layers_that_keep_a_cache():
    # vLLM gives a shared layer no KV spec of its own (kv_sharing_target_layer_name): layers 0-19 only
    from roofline.engines.base import stage_kinds

    assert stage_kinds(_default(), 1) == {("sliding", 512): 16, ("full", None): 4}


def _gemma4():
    return model_from_hf_config(default_config("gemma4_text", "Gemma4ForCausalLM"), "gemma4/config.json", "g4")


def test_gemma4_default_cache_by_hand():
    # Gemma4TextConfig defaults: 30 layers, layer i full when (i + 1) % 6 == 0 (5 full, 25 sliding of 512),
    # 4 KV heads; sliding layers head_dim 256, full layers global_head_dim 512. Per token, bf16:
    # sliding 2 x 4 x 256 x 2 = 4,096 B, full 2 x 4 x 512 x 2 = 8,192 B. At 1,024 tokens (engine: W = 512):
    assert kv_bytes(_gemma4(), "bf16", 1024) == 25 * 512 * 4096 + 5 * 1024 * 8192


def test_gemma4_full_layers_project_at_their_own_head_dim():
    # q, k, v, o and the q / k norms of a full layer at 512 instead of 256: d = 2,304, 8 heads, 4 KV heads
    model = _gemma4()
    uniform = model.model_copy(update={"attention": [a.model_copy(update={"head_dim": None})
                                                     for a in model.attention]})
    per_layer_extra = 2304 * (8 + 4 + 4 + 8) * 256 + 2 * 256
    assert parameter_count(model).total - parameter_count(uniform).total == 5 * per_layer_extra


def test_gemma4_with_kv_sharing_matches_transformers(monkeypatch):
    # the last 2 of 4 layers (sliding 16, full 24) reuse layers 0 and 1's caches: no k/v weights, no cache
    import hf_exactness

    tiny = dict(hf_exactness.TINY_BY_TYPE["gemma4_text"], num_kv_shared_layers=2)
    monkeypatch.setitem(hf_exactness.TINY_BY_TYPE, "gemma4_text", tiny)
    got = measure("gemma4_text", "Gemma4ForCausalLM", context=24)
    assert got["roofline_params"] == got["hf_params"]
    assert got["hf_cache_bytes"] == 15 * 2 * 2 * 16 * 4 + 24 * 2 * 2 * 24 * 4  # layer 0: W - 1 = 15 tokens
    assert got["roofline_cache_bytes"] == got["hf_cache_bytes"]


@pytest.mark.parametrize(("key", "value"), [("attention_k_eq_v", True), ("enable_moe_block", True),
                                            ("use_double_wide_mlp", True)])
def test_gemma4_unmodelled_mechanisms_are_refused_by_key(key, value):
    data = default_config("gemma4_text", "Gemma4ForCausalLM") | {key: value}
    with pytest.raises(SpecError, match=f"{key}: True: .* not modelled"):
        model_from_hf_config(data, "gemma4/config.json", "g4")


def test_gemma4_assistant_is_refused():
    outcome, detail = classify("gemma4_unified_assistant", "Gemma4UnifiedAssistantForCausalLM")
    assert outcome == "refused" and "architectures: " in detail and "target model" in detail


def test_engines_and_methods_refuse_mixed_head_dims():
    from roofline.engines.base import check_heads
    from roofline.methods.registry import build_cache, parse_method

    with pytest.raises(SpecError, match="--engine: vLLM: layers of different head_dim"):
        check_heads(_gemma4(), 1, "vLLM")
    with pytest.raises(SpecError, match="does not apply: its layers differ in head_dim"):
        build_cache(parse_method("kivi"), _gemma4())


@pytest.mark.parametrize(("model_type", "architecture"), [("gemma3n_text", "Gemma3nForCausalLM"),
                                                          ("gemma4_text", "Gemma4ForCausalLM")])
def test_full_size_parameters_match_transformers_on_the_meta_device(model_type, architecture):
    # the default (full-size) config instantiated without memory: transformers' own parameter count
    import torch
    import transformers

    with torch.device("meta"):
        model = getattr(transformers, architecture)(transformers.CONFIG_MAPPING[model_type]())
    expected = sum(p.numel() for p in model.parameters())
    spec = model_from_hf_config(default_config(model_type, architecture), f"{model_type}/config.json", model_type)
    assert parameter_count(spec).total == expected
