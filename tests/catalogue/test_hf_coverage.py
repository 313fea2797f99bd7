"""transformers' own default config of every generative model type either imports or is refused in one line."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

pytest.importorskip("transformers")
sys.path.insert(0, str(Path(__file__).parents[2] / "benchmarks"))

from hf_coverage import summary, survey  # noqa: E402


@pytest.fixture(scope="module")
def results():
    return survey()


def test_no_default_config_raises_a_traceback(results):
    crashes = {t: d for t, (outcome, d) in results.items() if outcome == "crash"}
    assert not crashes


def test_every_refusal_is_one_line_naming_the_file_and_a_key(results):
    for model_type, (outcome, detail) in results.items():
        if outcome == "refused":
            assert "\n" not in detail
            assert detail.startswith(f"{model_type}/config.json: "), detail


def test_summary_counts_every_type(results):
    head = next(summary(results))
    assert head.startswith(f"types: {len(results)} ")


# Read in transformers 5.24's configuration_*.py / modeling_*.py: each default leaves a key null (or absent) that its
# modeling code uses unguarded. gemma4_assistant's config class itself refuses its defaults.
TRANSFORMERS_CONFIG_ERRORS = {
    "chameleon": "vocabulary_map",  # ChameleonConfig: None; ChameleonImageVocabularyMapping reads .get
    "dbrx": "rope_theta",  # DbrxAttentionConfig has none; DbrxAttention reads it
    "deepseek_v2": "num_experts_per_tok",  # None; DeepseekV2Moe's torch.topk(k=None)
    "deepseek_ocr2": "mlp_layer_types",  # text_config: None; DeepseekOcr2 decoder layers index it
    "dots1": "n_routed_experts",  # None; Dots1's expert weights torch.empty(None, ...)
    "lfm2_moe": "layer_types",  # None; Lfm2MoeDecoderLayer indexes config.layer_types
    "qwen4_exp": "indexer_head_dim", "qwen4_exp_text": "indexer_head_dim",  # indexer_* all None
    "gemma4_assistant": "validate_architecture",
}


def test_config_errors_are_transformers_own_and_reported_apart(results):
    errors = {t for t, (outcome, _) in results.items() if outcome == "config_error"}
    assert errors == set(TRANSFORMERS_CONFIG_ERRORS)
    for model_type in errors - {"gemma4_assistant"}:
        assert results[model_type][1].startswith("transformers cannot run its default config: ")
    lines = list(summary(results))
    assert any(line.startswith(f"config errors (transformers' own default config cannot run; not in the "
                               f"denominator): {len(errors)}") for line in lines)


def test_the_denominator_excludes_config_errors_and_non_decoders(results):
    imported = sum(outcome == "imported" for outcome, _ in results.values())
    eligible = sum(outcome in ("imported", "refused", "crash") for outcome, _ in results.values())
    assert f"imported / holding a cache or state: {imported} / {eligible} " in list(summary(results))[1]
