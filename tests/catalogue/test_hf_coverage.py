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
