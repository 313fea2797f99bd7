"""Requests to simulate: arrival times and (prompt, output) lengths, from distributions or a trace file.

Length distributions (the CLI's DIST): `4096` (fixed), `uniform:1024:4096` (integers, both ends included),
`lognormal:mean=2048,sigma=0.5[,max=N]` (mean of the distribution, sigma of its log; draws rounded to at
least 1 token and, with max, clipped at N). Arrivals: Poisson at a rate (exponential gaps), or the trace.
A trace is a CSV file of rows `arrival_s,prompt_tokens,output_tokens` (an optional header row naming those
columns; blank lines and lines starting with # are skipped), or one of the public formats serving.traces reads.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from roofline.errors import SpecError
from roofline.serving.traces import MAX_ARRIVAL_S, MAX_TOKENS, TRACE_COLUMNS  # noqa: F401  (re-exported)


@dataclass(frozen=True)
class LengthDist:
    """A distribution of token counts (see the module docstring for the syntax)."""

    kind: str
    low: float
    high: float
    sigma: float = 0.0

    @classmethod
    def parse(cls, text: str, field: str) -> LengthDist:
        """Parse DIST; errors name `field` (e.g. --prompt-tokens)."""
        text = text.strip()
        try:
            if text.isdigit():
                return cls._checked(cls("fixed", int(text), int(text)), field, text)
            kind, _, rest = text.partition(":")
            if kind == "uniform":
                low, high = (int(x) for x in rest.split(":"))
                return cls._checked(cls("uniform", low, high), field, text)
            if kind == "lognormal":
                args = dict(kv.split("=", 1) for kv in rest.split(","))
                unknown = set(args) - {"mean", "sigma", "max"}
                if unknown or "mean" not in args or "sigma" not in args:
                    raise ValueError
                high = float(args["max"]) if "max" in args else math.inf
                return cls._checked(cls("lognormal", float(args["mean"]), high, float(args["sigma"])), field, text)
        except SpecError:
            raise
        except ValueError:
            pass
        raise SpecError(f"{field}: {text!r} is not a length distribution: use N, uniform:LO:HI or "
                        "lognormal:mean=M,sigma=S[,max=N]")

    @classmethod
    def _checked(cls, dist: LengthDist, field: str, text: str) -> LengthDist:
        ok = dist.low >= 1 and dist.high >= dist.low and dist.sigma >= 0 and math.isfinite(dist.sigma)
        if dist.kind == "lognormal":
            ok = ok and math.isfinite(dist.low)
        else:  # counts past MAX_TOKENS would overflow int64 draws (the lognormal draws are clipped there)
            ok = ok and dist.high <= MAX_TOKENS
        if not ok:
            raise SpecError(f"{field}: {text!r} needs lengths from 1 to {MAX_TOKENS:,}, low <= high and sigma >= 0")
        return dist

    def sample(self, rng: np.random.Generator, n: int) -> np.ndarray:
        """n integer lengths >= 1."""
        if self.kind == "fixed":
            return np.full(n, int(self.low), dtype=np.int64)
        if self.kind == "uniform":
            return rng.integers(int(self.low), int(self.high) + 1, size=n, dtype=np.int64)
        mu = math.log(self.low) - self.sigma ** 2 / 2  # so the mean of the draws is `low`
        draws = np.rint(rng.lognormal(mu, self.sigma, size=n))
        return np.clip(draws, 1, min(self.high, MAX_TOKENS)).astype(np.int64)


@dataclass(frozen=True)
class Requests:
    """Arrival times (s, sorted) and token counts of the requests of one simulation."""

    arrival_s: np.ndarray
    prompt_tokens: np.ndarray
    output_tokens: np.ndarray
    prefix: Any = None  # serving.prefix.PrefixTree: content the prompts share (None: nothing shared)

    def __len__(self) -> int:
        return len(self.arrival_s)

    @property
    def max_tokens(self) -> int:
        """The longest sequence any request reaches (prompt + output)."""
        return int((self.prompt_tokens + self.output_tokens).max())

    def first(self, n: int) -> Requests:
        """The first n requests by arrival."""
        if self.prefix is not None:
            raise ValueError("serving: cut the requests before giving them a shared prefix")
        return Requests(self.arrival_s[:n], self.prompt_tokens[:n], self.output_tokens[:n])

    def at_rate(self, rate: float) -> Requests:
        """The same requests with arrival gaps scaled so the mean rate is `rate` (common random numbers
        across a rate search: the arrival pattern keeps its shape)."""
        scale = self.offered_rate / rate
        return Requests(self.arrival_s * scale, self.prompt_tokens, self.output_tokens, self.prefix)

    @property
    def offered_rate(self) -> float:
        """Requests per second offered: n / last arrival."""
        last = float(self.arrival_s[-1])
        return len(self) / last if last > 0 else math.inf

    def check_positions(self, max_positions: int, prompt_field: str, output_field: str) -> None:
        """A request beyond the model's positions is an input error naming the length field."""
        total = self.prompt_tokens + self.output_tokens
        worst = int(np.argmax(total))
        if total[worst] > max_positions:
            field = prompt_field if self.prompt_tokens[worst] > max_positions // 2 else output_field
            raise SpecError(f"{field}: a request of {int(self.prompt_tokens[worst]):,} prompt + "
                            f"{int(self.output_tokens[worst]):,} output tokens exceeds the model's "
                            f"{max_positions:,} max positions")


def poisson_requests(rate: float, n: int, prompt: LengthDist, output: LengthDist, seed: int) -> Requests:
    """n requests with exponential gaps of mean 1/rate, lengths drawn from the distributions."""
    if not rate > 0:
        raise SpecError(f"--rate: {rate} must be a positive number of requests per second (inf: all at once)")
    rng = np.random.default_rng(seed)
    arrivals = np.cumsum(rng.exponential(1.0 / rate, size=n)) if math.isfinite(rate) else np.zeros(n)
    if arrivals[-1] > MAX_ARRIVAL_S:  # the clock's resolution there would swallow a step (serving.traces)
        raise SpecError(f"--rate: {rate:g} req/s spreads {n:,} requests over {arrivals[-1]:.3g} s, past the "
                        f"{MAX_ARRIVAL_S:.0e} s a simulated clock resolves to a step; give a rate >= "
                        f"{n / MAX_ARRIVAL_S:.3g}")
    return Requests(arrivals, prompt.sample(rng, n), output.sample(rng, n))


def load_trace(path: str | Path) -> Requests:
    """Every row (arrival_s, prompt_tokens, output_tokens) of a trace file, sorted by arrival
    (serving.traces.read_trace: the formats accepted, the bounds on each field); a malformed row is an error naming
    the file, line and column. Nothing is cut here: the caller decides, and says so, if it replays fewer rows
    (Requests.first)."""
    return load_trace_noted(path)[0]


def load_trace_noted(path: str | Path):
    """load_trace, the notes on how the file was read (its format, columns not used) and the rows' shared blocks
    (Mooncake's hash_ids, for serving.prefix.hash_blocks; None without)."""
    from roofline.serving.traces import read_trace

    trace = read_trace(path)
    return Requests(trace.arrival_s, trace.prompt_tokens, trace.output_tokens), trace.notes, trace.blocks
