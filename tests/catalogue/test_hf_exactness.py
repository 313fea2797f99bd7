"""Every architecture roofline imports from transformers' configs, checked against a tiny transformers model.

For each model type of transformers' causal-LM / image-text-to-text mappings whose default config roofline imports
(benchmarks/hf_coverage.py), tests/hf_exactness.measure instantiates a toy of that type (hidden 40, 4 layers) on the
CPU, runs one forward with a cache and compares the parameter count (exact) and the bytes the cache holds (exact,
below every window) with roofline's accounting of the same config.json. The expected numbers come from the torch
modules, never from roofline.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

pytest.importorskip("transformers")
sys.path.insert(0, str(Path(__file__).parent))
sys.path.insert(0, str(Path(__file__).parents[2] / "benchmarks"))

from hf_coverage import NOT_DECODER_LM, classify, generative_types  # noqa: E402
from hf_exactness import measure  # noqa: E402

# Imported types whose toy transformers cannot build or run (named with the reason), or whose numbers differ from
# roofline's for a stated, modelled reason; each is a known gap, listed so that a new mismatch fails.
KNOWN_GAPS = {
    "apertus1p5": "the toy is not built: Apertus1p5Config wants its audio tokens (from audio_token_offset 262,344) "
                  "inside the text vocabulary; its decoder is measured as apertus1p5_text",
    "longcat_flash": "transformers' LongcatFlashExperts allocates gate_up_proj rows for the zero experts, which its "
                     "forward never reads and the checkpoint does not hold; roofline leaves them out "
                     "(tests/catalogue/test_hf_varied.py checks the difference exactly)",
    "xlstm": "xLSTMCache holds seqlen_offset, an int64 position counter (8 bytes), besides the state roofline counts "
             "(tests/catalogue/test_hf_varied.py checks the difference exactly)",
    "phi4_multimodal": "Phi4MultimodalModel holds its image and audio towers (embed_tokens_extend, full size in the "
                       "toy) inside the decoder model; roofline names them in encoders, apart. "
                       "tests/catalogue/test_hf_varied.py checks the decoder and its cache exactly",
}


def _imported() -> list[tuple[str, str]]:
    return [(t, arch) for t, arch in sorted(generative_types().items())
            if t not in NOT_DECODER_LM and classify(t, arch, run_transformers=False)[0] == "imported"]


@pytest.mark.parametrize(("model_type", "architecture"), _imported())
def test_parameters_and_cache_bytes_match_transformers(model_type, architecture):
    if model_type in KNOWN_GAPS:
        pytest.xfail(KNOWN_GAPS[model_type])
    got = measure(model_type, architecture)
    assert got["roofline_params"] == got["hf_params"]
    assert got["roofline_cache_bytes"] == got["hf_cache_bytes"]


@pytest.mark.parametrize(("model_type", "architecture"), [
    ("mistral", "MistralForCausalLM"), ("gemma2", "Gemma2ForCausalLM"), ("cohere2", "Cohere2ForCausalLM"),
    ("gpt_oss", "GptOssForCausalLM"), ("gemma3_text", "Gemma3ForCausalLM"), ("granite_swa", "GraniteSWAForCausalLM"),
    ("afmoe", "AfmoeForCausalLM"), ("flint", "FlintForCausalLM"), ("lara_mini", "LaraMiniForCausalLM"),
])
def test_past_the_window_the_transformers_convention_is_exact(model_type, architecture):
    # 24 prompt tokens > the toy's sliding_window 16: transformers keeps 15 per sliding layer
    got = measure(model_type, architecture, context=24)
    assert got["roofline_cache_bytes"] == got["hf_cache_bytes"]
