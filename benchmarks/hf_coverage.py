"""How many of transformers' generative model types roofline imports from their default config.json.

    PYTHONPATH=. python benchmarks/hf_coverage.py [--json OUT.json] [--list]

For every model type of transformers' MODEL_FOR_CAUSAL_LM_MAPPING_NAMES and
MODEL_FOR_IMAGE_TEXT_TO_TEXT_MAPPING_NAMES (transformers.models.auto.modeling_auto), builds the type's default
config (CONFIG_MAPPING[type]()), writes it as a config.json would be saved (to_dict(), with `architectures` set to
the mapping's class name) and runs roofline's import on it (roofline.catalogue.hf.model_from_hf_config). Each type
ends in one of: imported; refused (a one-line SpecError, grouped by the config key it names); not a decoder LM
(NOT_DECODER_LM below: encoder models with a causal head, decoders of encoder-decoder models, non-text outputs,
which hold no decoder-only KV cache the planner could model); config error (transformers itself cannot build or
run a model from its own default config: the config class raises, or, for a type roofline refuses,
tests/catalogue/hf_exactness.transformers_error finds that the model class fails on that config both as a toy with
the default's nulls kept and at full size on the meta device, with the same error, e.g. DeepseekV2Config's null
num_experts_per_tok reaching torch.topk). A type roofline imports is never reclassified. A traceback from roofline
is counted as `crash` and is a bug.

The issue's target (>= 90 %) is over the types that hold a KV cache or a recurrent state: every type but the
config errors and NOT_DECODER_LM.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
import warnings
from collections import Counter
from collections.abc import Iterator

# Causal-LM heads on encoder architectures (bidirectional encoders run with is_decoder) and the decoder halves of
# encoder-decoder models: their cache holds cross-attention K/V of an encoder output, not a decoder-only stack.
NOT_DECODER_LM = frozenset({
    "bart", "bert", "bert-generation", "big_bird", "bigbird_pegasus", "blenderbot", "blenderbot-small",
    "camembert", "data2vec-text", "electra", "ernie", "marian", "mbart", "mvp", "pegasus", "plbart", "prophetnet",
    "rembert", "roberta", "roberta-prelayernorm", "roc_bert", "roformer", "trocr", "whisper", "xlm",
    "xlm-roberta", "xlm-roberta-xl", "xlnet", "xmod", "megatron-bert", "reformer", "vision-encoder-decoder",
    "pix2struct", "udop", "florence2", "t5gemma2", "pp_formulanet", "musicgen", "musicgen_melody", "moshi",
    "blip", "git", "kosmos-2", "kosmos-2.5", "pi0", "evolla", "moss_transcribe_diarize", "blt", "cpmant",
    "diffusion_gemma",
})


def generative_types() -> dict[str, str]:
    """{model type: class name} of transformers' causal-LM and image-text-to-text mappings (causal-LM first)."""
    from transformers.models.auto.modeling_auto import (
        MODEL_FOR_CAUSAL_LM_MAPPING_NAMES,
        MODEL_FOR_IMAGE_TEXT_TO_TEXT_MAPPING_NAMES,
    )

    return dict(MODEL_FOR_IMAGE_TEXT_TO_TEXT_MAPPING_NAMES) | dict(MODEL_FOR_CAUSAL_LM_MAPPING_NAMES)


def default_config(model_type: str, architecture: str) -> dict:
    """The config.json transformers would save for `model_type` at its defaults (JSON round-tripped)."""
    from transformers import CONFIG_MAPPING

    data = CONFIG_MAPPING[model_type]().to_dict()
    data["architectures"] = [architecture]
    return json.loads(json.dumps(data, default=str))


def classify(model_type: str, architecture: str, run_transformers: bool = True) -> tuple[str, str]:
    """(outcome, detail) of importing one type's default config: imported / refused / not_decoder_lm /
    config_error / crash. Without run_transformers, a refused type is not tried in transformers (it stays
    refused: for callers that only need the imported ones, at no cost of building models)."""
    from roofline.catalogue.hf import model_from_hf_config
    from roofline.errors import SpecError

    if model_type in NOT_DECODER_LM:
        return "not_decoder_lm", ""
    try:
        data = default_config(model_type, architecture)
    except Exception as exc:  # noqa: BLE001 - transformers' own default config failing is recorded, not raised
        return "config_error", f"{type(exc).__name__}: {str(exc).splitlines()[0][:120]}"
    try:
        model_from_hf_config(data, where=f"{model_type}/config.json", name=model_type)
    except SpecError as exc:
        failure = _transformers_error(model_type, architecture) if run_transformers else None
        if failure is not None:
            return "config_error", f"transformers cannot run its default config: {failure}"
        return "refused", str(exc)
    except Exception as exc:  # noqa: BLE001 - a traceback is the bug this script exists to find
        return "crash", f"{type(exc).__name__}: {exc}"
    return "imported", ""


def _transformers_error(model_type: str, architecture: str) -> str | None:
    """tests/catalogue/hf_exactness.transformers_error: transformers' own failure on the default config, or None."""
    from pathlib import Path

    harness = str(Path(__file__).resolve().parents[1] / "tests" / "catalogue")
    if harness not in sys.path:
        sys.path.insert(0, harness)
    from hf_exactness import transformers_error

    return transformers_error(model_type, architecture)


def reason(detail: str) -> str:
    """The refusal's group: the config key (and rule head) a SpecError line names after the file."""
    body = detail.split("config.json: ", 1)[-1]
    match = re.match(r"(?:text_config: )?([^:]+): (.{0,40})", body)
    if match is None:
        return body[:60]
    key, rule = match.groups()
    if key == "model_type":
        return f"model_type: {rule.split(' (')[0]}"
    return f"{key}: {rule.split(',')[0].split(' (')[0]}"


def survey() -> dict[str, tuple[str, str]]:
    """{model type: (outcome, detail)} over every generative type."""
    import transformers

    transformers.logging.set_verbosity_error()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return {t: classify(t, arch) for t, arch in sorted(generative_types().items())}


def summary(results: dict[str, tuple[str, str]]) -> Iterator[str]:
    """Lines: the counts, the target ratio, refusals grouped by reason."""
    outcomes = Counter(outcome for outcome, _ in results.values())
    eligible = sum(n for outcome, n in outcomes.items() if outcome not in ("not_decoder_lm", "config_error"))
    yield f"types: {len(results)}  " + "  ".join(f"{k}: {v}" for k, v in sorted(outcomes.items()))
    yield f"imported / holding a cache or state: {outcomes['imported']} / {eligible} " \
          f"({100 * outcomes['imported'] / max(eligible, 1):.1f} %)"
    groups: dict[str, list[str]] = {}
    for model_type, (outcome, detail) in results.items():
        if outcome in ("refused", "crash"):
            groups.setdefault(f"{outcome} {reason(detail)}", []).append(model_type)
    for key, types in sorted(groups.items(), key=lambda kv: -len(kv[1])):
        yield f"  {len(types):3d}  {key}: {', '.join(types)}"
    errors = {t: detail for t, (outcome, detail) in results.items() if outcome == "config_error"}
    if errors:
        yield f"config errors (transformers' own default config cannot run; not in the denominator): {len(errors)}"
        for model_type, detail in errors.items():
            yield f"       {model_type}: {detail[:150]}"


def main(argv: list[str] | None = None) -> int:
    """Print the survey; --json writes {type: [outcome, detail]}; --list prints one line per type."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--json", help="write the per-type results to this file")
    parser.add_argument("--list", action="store_true", help="one line per type")
    args = parser.parse_args(argv)
    results = survey()
    for line in summary(results):
        print(line)
    if args.list:
        for model_type, (outcome, detail) in results.items():
            print(f"{model_type:32s} {outcome:15s} {detail[:150]}")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(results, f, indent=1, sort_keys=True)
    return 1 if any(outcome == "crash" for outcome, _ in results.values()) else 0


if __name__ == "__main__":
    sys.exit(main())
