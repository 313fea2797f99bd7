"""Gemma-3n's import (roofline.catalogue.hf_archs_gemma): the tiny transformers model past its window, the default
(E4B-shaped) config's cache by hand, and the refusals.

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

TYPES = [("gemma3n_text", "Gemma3nForCausalLM"), ("gemma3n", "Gemma3nForConditionalGeneration")]


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
