"""A config.json that omits tie_word_embeddings ties the LM head as the type's transformers config class defaults it.

Real files do omit it (google/gemma-7b, HuggingFaceTB/SmolLM3-3B), and the class default then decides whether the
head is a second vocab x hidden matrix. tests/catalogue/test_hf_exactness.py cannot see this: it saves the config
with every key written. Here each decoder type roofline imports (not the multimodal wrappers, whose text and
top-level configs each carry a flag) is imported from its default config with the key removed, and the head roofline
counts is compared with CONFIG_MAPPING[type]().tie_word_embeddings, read from transformers, never from roofline.
"""

from __future__ import annotations

import sys
import warnings
from pathlib import Path

import pytest

pytest.importorskip("transformers")
sys.path.insert(0, str(Path(__file__).parents[2] / "benchmarks"))

from hf_coverage import NOT_DECODER_LM, default_config, generative_types  # noqa: E402

from roofline.catalogue.hf import model_from_hf_config  # noqa: E402
from roofline.errors import SpecError  # noqa: E402


def _decoders_without_the_key() -> list[tuple[str, dict, bool]]:
    """(type, its default config.json less tie_word_embeddings, transformers' default) for each plain decoder."""
    import transformers

    transformers.logging.set_verbosity_error()
    cases = []
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for model_type, arch in sorted(generative_types().items()):
            if model_type in NOT_DECODER_LM:
                continue
            try:
                data = default_config(model_type, arch)
            except Exception:  # noqa: BLE001 - transformers' own default failing is hf_coverage's config_error
                continue
            if any(isinstance(v, dict) and "vocab_size" in v for v in data.values()):
                continue  # a wrapper: its text_config holds the decoder
            tied = data.pop("tie_word_embeddings", None)
            if isinstance(tied, bool):
                cases.append((model_type, data, tied))
    return cases


def test_an_omitted_tie_key_follows_the_config_class_default():
    wrong = []
    for model_type, data, tied in _decoders_without_the_key():
        try:
            model = model_from_hf_config(data, where=f"{model_type}/config.json", name=model_type)
        except SpecError:
            continue  # refused types are hf_coverage's business
        if model.tie_word_embeddings != tied:
            wrong.append(f"{model_type}: transformers {tied}, roofline {model.tie_word_embeddings}")
    assert not wrong, "; ".join(wrong)
