"""A config.json that omits a true/false key is read as the type's transformers config class defaults it.

save_pretrained drops a key that equals both PretrainedConfig's default and the class's (google/gemma-7b's and
HuggingFaceTB/SmolLM3-3B's config.json carry no tie_word_embeddings: the class ties the head), and hand-written or
trimmed files drop others (a Seed-OSS config without attention_bias). tests/catalogue/test_hf_exactness.py cannot see
this: it saves the config with every key written. Here each decoder type roofline imports (not the multimodal
wrappers, whose text and top-level configs each carry flags) is imported from its default config (CONFIG_MAPPING[
type]().to_dict(), read from transformers, never from roofline) and again with each true/false key removed: the
parameters, the KV bytes at 100 tokens and the head's tying must not change.
"""

from __future__ import annotations

import sys
import warnings
from pathlib import Path

import pytest

pytest.importorskip("transformers")
sys.path.insert(0, str(Path(__file__).parents[2] / "benchmarks"))

from hf_coverage import NOT_DECODER_LM, default_config, generative_types  # noqa: E402

from roofline.accounting import kv_bytes, parameter_count  # noqa: E402
from roofline.catalogue.hf import model_from_hf_config  # noqa: E402
from roofline.errors import SpecError  # noqa: E402

# (type, key): read by a handler shared with a type whose config class defaults the key the other way
KNOWN_GAPS = {("sarvam_moe", "use_qk_norm"): "read by Glm4Moe's handler, whose Glm4MoeConfig defaults it to false "
                                             "(2 x head_dim a layer)"}


def _decoder_defaults() -> list[tuple[str, dict]]:
    """(type, its default config.json) for each plain decoder type transformers can build a default config of."""
    import transformers

    transformers.logging.set_verbosity_error()
    out = []
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for model_type, arch in sorted(generative_types().items()):
            if model_type in NOT_DECODER_LM:
                continue
            try:
                data = default_config(model_type, arch)
            except Exception:  # noqa: BLE001 - transformers' own default failing is hf_coverage's config_error
                continue
            if not any(isinstance(v, dict) and "vocab_size" in v for v in data.values()):  # not a wrapper
                out.append((model_type, data))
    return out


def _figures(data: dict, model_type: str) -> tuple[int, int, bool]:
    model = model_from_hf_config(data, where=f"{model_type}/config.json", name=model_type)
    return parameter_count(model).total, int(kv_bytes(model, "bf16", 100)), model.tie_word_embeddings


def test_an_omitted_true_false_key_reads_as_its_config_class_default():
    wrong = []
    for model_type, data in _decoder_defaults():
        try:
            written = _figures(data, model_type)
        except SpecError:
            continue  # refused types are hf_coverage's business
        for key in [k for k, v in data.items() if isinstance(v, bool)]:
            if (model_type, key) in KNOWN_GAPS:
                continue
            try:
                omitted = _figures({k: v for k, v in data.items() if k != key}, model_type)
            except SpecError:
                continue  # a key whose absence is refused in one line is not read silently
            if omitted != written:
                wrong.append(f"{model_type} without {key} ({data[key]}): {written} -> {omitted}")
    assert not wrong, "; ".join(wrong)
