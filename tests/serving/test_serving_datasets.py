"""Dataset length distributions (serving.datasets) reproduce the statistics they are shipped as.

The expected numbers are the published ones (the module docstring cites them): ShareGPT's mean prompt of 161.31
tokens (vLLM paper), the coding agents' output quantiles of SyFI TraceLab's Table 1.
"""

from __future__ import annotations

import numpy as np
import pytest

from roofline.errors import SpecError
from roofline.serving.datasets import dataset


def test_sharegpt_draws_have_the_published_means():
    prompt, output, _ = dataset("sharegpt")
    rng = np.random.default_rng(0)
    assert prompt.sample(rng, 400_000).mean() == pytest.approx(161.31, rel=0.01)
    assert output.sample(rng, 400_000).mean() == pytest.approx(337.99, rel=0.01)


@pytest.mark.parametrize("name,quantiles", [
    ("agentic-claude", {25: 132, 50: 252, 90: 1_671, 99: 6_571}),
    ("agentic-codex", {25: 70, 50: 184, 90: 939, 99: 3_508}),
])
def test_agentic_output_quantiles_are_the_tables(name, quantiles):
    _, output, _ = dataset(name)
    draws = output.sample(np.random.default_rng(1), 400_000)
    for q, value in quantiles.items():
        assert np.percentile(draws, q) == pytest.approx(value, rel=0.03)
    assert draws.min() >= 1


def test_agentic_prompt_is_prefix_plus_append():
    prompt, _, _ = dataset("agentic-codex")
    draws = prompt.sample(np.random.default_rng(2), 200_000)
    # every prompt holds a prefix and at least one appended token: its quantiles exceed the prefix's (Table 1)
    assert np.percentile(draws, 25) > 67_456 and np.median(draws) > 115_584 and np.percentile(draws, 90) > 201_600


def test_unknown_dataset_names_the_flag():
    with pytest.raises(SpecError, match="--dataset"):
        dataset("lmsys")
