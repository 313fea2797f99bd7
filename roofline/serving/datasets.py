"""Request length distributions of public datasets and traces, shipped as their published summary statistics (never
the data): `simulate --dataset NAME` draws prompt and output lengths from them.

- sharegpt, alpaca: the means Kwon et al. report for the datasets vLLM was evaluated on ("Efficient Memory Management
  for Large Language Model Serving with PagedAttention", SOSP 2023, Sec. 6.1 and Fig. 11: ShareGPT prompts average
  161.31 tokens and outputs 337.99; Alpaca 19.31 and 58.45 - "8.4x longer input prompts and 5.8x longer outputs").
  Only the mean is published, so lengths are drawn from the distribution of largest entropy with that mean on the
  positive integers, the geometric (Jaynes 1957, "Information Theory and Statistical Mechanics"): no shape is
  assumed beyond the mean.
- agentic-claude, agentic-codex: per model call of coding agents (SyFI TraceLab, University of Washington,
  https://tracelab.cs.washington.edu/exp/llm_generation/token_length_distribution/, Table 1: average, p25, p50,
  p90 and p99 of the prefix tokens replayed from the cache, the tokens appended, and the output tokens; 357,161 agent
  steps). The prompt is prefix + appended tokens, each drawn from its own quantiles (the table gives marginals,
  not their joint law). Between the published quantiles lengths are log-linear in the probability; below p25 down
  to 1 token at p = 0; above p99 the p90-p99 log-slope continues to p = 1.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from roofline.errors import SpecError

TRACELAB = "SyFI TraceLab token_length_distribution Table 1 (tracelab.cs.washington.edu)"
KWON = "Kwon et al., SOSP 2023 (vLLM), Sec. 6.1"


@dataclass(frozen=True)
class Geometric:
    """Lengths >= 1 with a given mean, geometric (the largest-entropy law with that mean)."""

    mean: float

    def sample(self, rng: np.random.Generator, n: int) -> np.ndarray:
        """n lengths."""
        return rng.geometric(1.0 / self.mean, size=n).astype(np.int64)


@dataclass(frozen=True)
class Quantiles:
    """Lengths drawn by inverting published quantiles (probability -> tokens), log-linear between them."""

    knots: tuple[tuple[float, float], ...]  # (p, tokens) for p in (0.25, 0.5, 0.9, 0.99)

    def _table(self) -> tuple[np.ndarray, np.ndarray]:
        (p90, t90), (p99, t99) = self.knots[-2], self.knots[-1]
        top = math.exp(math.log(t99) + (math.log(t99) - math.log(t90)) / (p99 - p90) * (1 - p99))
        ps = np.array([0.0, *(p for p, _ in self.knots), 1.0])
        logs = np.log(np.array([1.0, *(t for _, t in self.knots), top]))
        return ps, logs

    def sample(self, rng: np.random.Generator, n: int) -> np.ndarray:
        """n lengths >= 1."""
        ps, logs = self._table()
        return np.maximum(1, np.rint(np.exp(np.interp(rng.random(n), ps, logs)))).astype(np.int64)


class Sum:
    """The sum of independent draws (a prompt = cached prefix + appended tokens)."""

    def __init__(self, *parts) -> None:
        self.parts = parts

    def sample(self, rng: np.random.Generator, n: int) -> np.ndarray:
        """n sums."""
        return sum(p.sample(rng, n) for p in self.parts)


def _q(p25: float, p50: float, p90: float, p99: float) -> Quantiles:
    return Quantiles(((0.25, p25), (0.5, p50), (0.9, p90), (0.99, p99)))


DATASETS = {
    "sharegpt": (Geometric(161.31), Geometric(337.99), KWON),
    "alpaca": (Geometric(19.31), Geometric(58.45), KWON),
    "agentic-claude": (Sum(_q(59_949, 126_180, 467_082, 918_111), _q(384, 857, 5_342, 232_206)),
                       _q(132, 252, 1_671, 6_571), TRACELAB),
    "agentic-codex": (Sum(_q(67_456, 115_584, 201_600, 231_040), _q(406, 886, 8_310, 121_009)),
                      _q(70, 184, 939, 3_508), TRACELAB),
}


def dataset(name: str):
    """(prompt distribution, output distribution, source) of a named dataset."""
    if name not in DATASETS:
        raise SpecError(f"--dataset: unknown dataset {name!r}; valid: {', '.join(DATASETS)}")
    return DATASETS[name]
