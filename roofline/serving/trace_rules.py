"""What a trace's rows are and how a CSV header names its columns: the bounds every row keeps and the shared-block
ids of Mooncake's rows, for both of serving.traces' readers (line by line there, by columns in serving.traces_fast;
the module docstring of serving.traces says why each bound)."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from roofline.errors import SpecError

TRACE_COLUMNS = ("arrival_s", "prompt_tokens", "output_tokens")
BLOCK_TOKENS = 512  # Mooncake's tokens per hash_id (serving.prefix.MOONCAKE_BLOCK_TOKENS, its evidence there)
MAX_TOKENS = 2 ** 40  # the lognormal lengths' own clip (serving.requests.LengthDist.sample)
MAX_ARRIVAL_S = 1e8  # about 3.2 years; serving.traces' module docstring says why
HEADER_NAMES = {  # lower-cased header name -> the column it fills
    "arrival_s": "arrival_s", "timestamp": "arrival_s",
    "prompt_tokens": "prompt_tokens", "contexttokens": "prompt_tokens", "request tokens": "prompt_tokens",
    "output_tokens": "output_tokens", "generatedtokens": "output_tokens", "response tokens": "output_tokens",
}


@dataclass(frozen=True, eq=False)
class BlockIds:
    """Mooncake's hash_ids of every row, flat (a plain file's, read by columns): row i's are
    ids[offsets[i]:offsets[i + 1]]. Indexed like the list of lists the line reader returns."""

    ids: np.ndarray  # int64
    offsets: np.ndarray  # int64, one more than the rows

    def __len__(self) -> int:
        return len(self.offsets) - 1

    def __getitem__(self, key):
        if isinstance(key, slice):
            return self.take(np.arange(len(self))[key])
        return self.ids[self.offsets[key]:self.offsets[key + 1]].tolist()

    def __iter__(self):
        return (self[i] for i in range(len(self)))

    @property
    def lengths(self) -> np.ndarray:
        """Ids per row."""
        return np.diff(self.offsets)

    def take(self, rows: np.ndarray) -> BlockIds:
        """These rows, in this order."""
        lengths = self.lengths[rows]
        offsets = np.concatenate([[0], np.cumsum(lengths)]).astype(np.int64)
        at = np.repeat(self.offsets[rows] - offsets[:-1], lengths) + np.arange(offsets[-1])
        return BlockIds(self.ids[at], offsets)


def is_header(row: list[str]) -> bool:
    """A first row with a field that is not a number is a header."""
    return any(number(c.strip()) is None for c in row)


def header_index(path, lineno: int, row: list[str]) -> tuple[tuple[int, int, int], list[str]]:
    """The positions of arrival_s, prompt_tokens and output_tokens among a header's names, and the names unused."""
    found: dict[str, int] = {}
    for i, name in enumerate(row):
        column = HEADER_NAMES.get(name.strip().lower())
        if column is not None and column not in found:
            found[column] = i
    missing = [c for c in TRACE_COLUMNS if c not in found]
    if missing:
        raise SpecError(f"--trace: {path} line {lineno}: a comma-separated header must name {', '.join(missing)} "
                        "(accepted: arrival_s|TIMESTAMP|Timestamp, prompt_tokens|ContextTokens|Request tokens, "
                        "output_tokens|GeneratedTokens|Response tokens)")
    used = set(found.values())
    return (found["arrival_s"], found["prompt_tokens"], found["output_tokens"]), [
        row[i].strip() for i in range(len(row)) if i not in used]


def number(text: str) -> float | None:
    try:
        return float(text)
    except (ValueError, OverflowError):
        return None
