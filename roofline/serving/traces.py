"""Trace files for `simulate --trace`: one request per row, its arrival time and its prompt and output tokens.

Accepted, recognised from the file's first line:
- The project's CSV: rows `arrival_s,prompt_tokens,output_tokens` (arrival in seconds from the trace's start), with
  or without that header row; blank lines and lines starting with # are skipped.
- A CSV whose header names the three columns, in any order, other columns ignored (and listed in a note):
  `arrival_s` / `TIMESTAMP` / `Timestamp`, `prompt_tokens` / `ContextTokens` / `Request tokens`, `output_tokens` /
  `GeneratedTokens` / `Response tokens` (names matched without case). The Azure LLM inference traces 2023 and
  2024 have the columns TIMESTAMP,ContextTokens,GeneratedTokens, TIMESTAMP a date and time such as
  `2023-11-16 18:15:46.6805900` (Azure/AzurePublicDataset AzureLLMInferenceDataset2023.md and
  AzureLLMInferenceDataset2024.md); BurstGPT's have Timestamp (seconds), Model, Request tokens, Response tokens,
  Total tokens, Log Type (HPMLL/BurstGPT README, release v1.1). A date-and-time column becomes seconds after the
  earliest row (a time without a zone is read as UTC).
- Mooncake's JSON lines `{"timestamp": MS, "input_length": N, "output_length": N, "hash_ids": [...]}`, timestamp
  the arrival in milliseconds since the first request (kvcache-ai/Mooncake mooncake_trace.jsonl at d21da178, as
  ai-dynamo/dynamo benchmarks/data_generator/README.md documents it). hash_ids name each prompt's 512-token blocks
  (the same id chain, the same content): they are returned with the rows for serving.prefix.hash_blocks; a file
  whose ids do not count ceil(input_length / 512) blocks keeps its rows and a note says its ids are not replayed.
A file opening with `{` that is one JSON document (a benchmark's result, e.g. vLLM's --save-result) holds no arrival
times and is refused, as is a URL (download it first) and anything else, in one line naming the file, the line and
the rule.

Every count is a whole number from 1 to MAX_TOKENS; every arrival a finite number of seconds from 0 to
MAX_ARRIVAL_S. The bound on arrivals keeps the simulated clock exact to well under a step: a float64 time of 1e8 s
has a resolution (ulp) of 1.5e-8 s, while an absolute clock (Unix time, 1.7e9 s) given as `arrival_s` would also
make the offered rate n / last arrival ~1e-6 of the true one; such a file is refused with that hint. Rows are sorted
by arrival (stable) and none is dropped. A file whose first row arrives after 0 (a window cut from a longer log:
BurstGPT's Timestamp counts from the whole log's first day) is replayed from that row, every arrival moved earlier by
it and a note saying so: the run starts at 0 (its rates are over the window, not over the idle time before it).

A file in its plain form (serving.traces_fast: no quoting, comments or ragged rows; fixed-width dates; Mooncake's
lines as json.dumps writes them) is read whole and converted by columns, with the same rows and notes; any other is
read line by line (a day of Azure's trace, ~1 M requests, is ~37 MB; Mooncake's JSON lines with their hash_ids ~108 MB
per million). Either way up to MAX_ROWS rows; a file past that, a file with NUL bytes in its first HEAD_BYTES
(a binary file), one that is not UTF-8 and a CSV field past csv's field limit are refused in one line.
"""

from __future__ import annotations

import csv
import itertools
import json
import math
from collections.abc import Iterable, Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import NamedTuple

import numpy as np

from roofline.errors import SpecError
from roofline.serving.trace_rules import (  # noqa: F401  (BLOCK_TOKENS, MAX_* and TRACE_COLUMNS re-exported)
    BLOCK_TOKENS,
    MAX_ARRIVAL_S,
    MAX_TOKENS,
    TRACE_COLUMNS,
    BlockIds,
)
from roofline.serving.trace_rules import header_index as _header_index
from roofline.serving.trace_rules import is_header as _is_header
from roofline.serving.trace_rules import number as _number

# Rows of one trace: four days of ~1 M requests (a day's CLI run under vLLM's scheduler: benchmarks/serving_scale.md,
# session 21, with bench_trace_cli.py).
MAX_ROWS = 1 << 22
HEAD_BYTES = 1 << 16  # bytes looked at for NULs before reading: a binary file is refused at once
EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
MOONCAKE_KEYS = {"timestamp": "arrival_s", "input_length": "prompt_tokens", "output_length": "output_tokens"}


class TraceFile(NamedTuple):
    """A trace's rows sorted by arrival; `blocks`: Mooncake's hash_ids per row in the same order (None without)."""

    arrival_s: np.ndarray
    prompt_tokens: np.ndarray
    output_tokens: np.ndarray
    notes: list[str]
    blocks: list[list[int]] | BlockIds | None = None


def read_trace(path: str | Path) -> TraceFile:
    """Every row of a trace file, sorted by arrival, and notes on how it was read (module docstring); a file in its
    plain form is read by columns (serving.traces_fast: the same rows and notes), any other line by line."""
    from roofline.serving.traces_fast import read_columns

    text = str(path)
    if "://" in text:
        raise SpecError(f"--trace: {text} is a URL; download the file and give its path")
    try:
        with open(path, "rb") as raw:
            head = raw.read(HEAD_BYTES)
        if b"\0" in head:
            raise SpecError(f"--trace: {path} has a NUL byte at byte {head.index(0):,}: a binary file, not a CSV or "
                            "JSON-lines trace")
        columns = read_columns(path, MAX_ROWS)
        if columns is None:
            with open(path, encoding="utf-8-sig", newline="") as handle:
                rows, notes, blocks = _rows(path, handle)
            columns = (np.array([r[0] for r in rows], dtype=np.float64), np.array([r[1] for r in rows], dtype=np.int64),
                       np.array([r[2] for r in rows], dtype=np.int64), notes, blocks)
    except OSError as err:
        raise SpecError(f"--trace: cannot read {path}: {err.strerror}") from None
    except UnicodeDecodeError:
        raise SpecError(f"--trace: {path} is not UTF-8 text; a trace is a CSV or JSON-lines file") from None
    arrival, prompt, output, notes, blocks = columns
    if not len(arrival):
        raise SpecError(f"--trace: {path} has no rows of {','.join(TRACE_COLUMNS)}")
    order = np.argsort(arrival, kind="stable")
    arrival, prompt, output = arrival[order], prompt[order], output[order]
    if arrival[0] > 0:  # a window cut from a longer log: the run starts at its first request (Trace.horizon_s)
        notes = [*notes, f"--trace: {path} starts at {arrival[0]:,.6g} s; replayed from its first row (every arrival "
                 f"{arrival[0]:,.6g} s earlier: the idle time before it is no part of the run's rates)"]
        arrival = arrival - arrival[0]
    if isinstance(blocks, BlockIds):
        blocks = blocks.take(order)
    elif blocks is not None:
        blocks = [blocks[i] for i in order.tolist()]
    return TraceFile(arrival, prompt, output, notes, blocks)


def _rows(path, handle: Iterable[str]):
    """(rows, notes, blocks) of the lines of an open trace, its format told by its first non-blank line."""
    lines, opening = iter(handle), []
    for line in lines:
        opening.append(line)
        if line.strip():
            break
    stream = itertools.chain(opening, lines)
    if opening and opening[-1].lstrip().startswith(("{", "[")):
        return _json_rows(path, stream)
    return (*_csv_rows(path, stream), None)


def _too_many(path, lineno: int) -> SpecError:
    return SpecError(f"--trace: {path} line {lineno}: more than {MAX_ROWS:,} rows, the most a trace holds (about four "
                     "days of a million requests); split the file")


def _csv_rows(path, lines: Iterable[str]) -> tuple[list[tuple[float, int, int]], list[str]]:
    """Rows of a CSV trace: positional (no header or the project's header) or by the header's names."""
    rows: list[tuple[float, int, int]] = []
    index: tuple[int, int, int] = (0, 1, 2)
    positional, notes, dated = True, [], None
    reader = csv.reader(lines)
    for lineno, row in enumerate(_csv_lines(path, reader), start=1):
        if not row or not "".join(row).strip() or row[0].lstrip().startswith("#"):
            continue
        if len(rows) == MAX_ROWS:
            raise _too_many(path, reader.line_num)
        if not rows and positional and index == (0, 1, 2) and _is_header(row):
            index, ignored = _header_index(path, lineno, row)
            positional = False
            if ignored:
                notes.append(f"--trace: columns {', '.join(ignored)} of {path} not used")
            continue
        if positional and len(row) != 3:
            raise SpecError(f"--trace: {path} line {lineno}: expected 3 fields {','.join(TRACE_COLUMNS)}, got "
                            f"{len(row)}")
        if len(row) <= max(index):
            raise SpecError(f"--trace: {path} line {lineno}: {len(row)} fields, the header names "
                            f"{max(index) + 1}")
        fields = [row[i].strip() for i in index]
        if dated is None:
            dated = not positional and _number(fields[0]) is None
        arrival = _datetime_us(path, lineno, fields[0]) if dated else _arrival_s(path, lineno, fields[0], 1.0)
        rows.append((arrival, _count(path, lineno, TRACE_COLUMNS[1], fields[1]),
                     _count(path, lineno, TRACE_COLUMNS[2], fields[2])))
    if dated and rows:  # whole microseconds since the epoch: the differences are exact
        start = min(r[0] for r in rows)
        rows = [((r[0] - start) / 1e6, r[1], r[2]) for r in rows]
        _check_span(path, max(r[0] for r in rows))
        notes.append(f"--trace: {path} arrival times are dates; replayed as seconds after the earliest row")
    return rows, notes


def _csv_lines(path, reader) -> Iterator[list[str]]:
    """The reader's rows; csv's own refusal (a field past its limit of csv.field_size_limit() characters, 131,072)
    becomes one line naming the file and the line."""
    while True:
        try:
            yield next(reader)
        except StopIteration:
            return
        except csv.Error as err:
            raise SpecError(f"--trace: {path} line {reader.line_num}: {err}; not a trace's CSV row") from None


def _json_rows(path, lines: Iterable[str]) -> tuple[list[tuple[float, int, int]], list[str], list[list[int]] | None]:
    """Rows of a Mooncake JSON-lines trace (timestamp in ms) and their hash_ids when every row's ids are
    ceil(input_length / BLOCK_TOKENS) whole numbers (else None, and a note says which line and why); one JSON
    document spanning lines is refused."""
    rows: list[tuple[float, int, int]] = []
    blocks: list[list[int]] = []
    mismatch = None
    for lineno, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        if len(rows) == MAX_ROWS:
            raise _too_many(path, lineno)
        try:
            obj = json.loads(line)
        except ValueError:
            raise SpecError(f"--trace: {path} line {lineno}: not a JSON object per line; a JSON trace is "
                            "Mooncake's JSON lines (timestamp, input_length, output_length), and a benchmark's "
                            "result file holds no arrival times") from None
        if not isinstance(obj, dict) or any(k not in obj for k in MOONCAKE_KEYS):
            keys = ", ".join(MOONCAKE_KEYS)
            raise SpecError(f"--trace: {path} line {lineno}: a JSON-lines trace needs the keys {keys} (Mooncake's "
                            "format); a benchmark's result file holds no arrival times")
        arrival_ms = obj["timestamp"]
        if isinstance(arrival_ms, bool) or not isinstance(arrival_ms, int | float):
            raise SpecError(f"--trace: {path} line {lineno}: timestamp {arrival_ms!r} must be a number of ms")
        arrival = _arrival_s(path, lineno, str(arrival_ms), 1e-3)
        counts = [_count(path, lineno, key, _json_int_text(obj[key])) for key in ("input_length", "output_length")]
        ids = obj.get("hash_ids")
        want = -(-counts[0] // BLOCK_TOKENS)
        ok = (isinstance(ids, list) and len(ids) == want
              and all(isinstance(h, int) and not isinstance(h, bool) for h in ids))
        if not ok and mismatch is None:
            mismatch = (f"line {lineno}: {len(ids) if isinstance(ids, list) else 'no'} hash_ids for "
                        f"{counts[0]:,} tokens, not {want} whole-number ids of {BLOCK_TOKENS}-token blocks")
        blocks.append(ids if ok else [])
        rows.append((arrival, counts[0], counts[1]))
    notes = [f"--trace: {path} is Mooncake JSON lines (timestamp in ms)"]
    if mismatch is not None:
        notes.append(f"--trace: its hash_ids are not replayed ({mismatch}): no prefix is shared")
        return rows, notes, None
    return rows, notes, blocks


def _json_int_text(value) -> str:
    """A JSON value as _count reads it: an integer's digits, anything else its repr (refused there)."""
    return str(value) if isinstance(value, int) and not isinstance(value, bool) else repr(value)


def _arrival_s(path, lineno: int, text: str, unit_s: float) -> float:
    """An arrival time in seconds (`text` in units of unit_s)."""
    where = f"--trace: {path} line {lineno}"
    value = _number(text)
    name = "arrival_s" if unit_s == 1.0 else "timestamp"
    if value is None:
        raise SpecError(f"{where}: {name} {text!r} is not a number")
    seconds = value * unit_s
    if not (seconds >= 0 and math.isfinite(seconds)):
        raise SpecError(f"{where}: {name} {text} must be a finite number >= 0")
    _check_span(path, seconds, where)
    return seconds


def _check_span(path, seconds: float, where: str | None = None) -> None:
    if seconds > MAX_ARRIVAL_S:
        raise SpecError(f"{where or f'--trace: {path}'}: an arrival {seconds:.4g} s after the start is past "
                        f"{MAX_ARRIVAL_S:.0e} s (3 years): an absolute clock (Unix time)? give seconds from the "
                        "trace's first request")


def _datetime_us(path, lineno: int, text: str) -> int:
    """A date and time (ISO 8601, e.g. Azure's TIMESTAMP) as whole microseconds since the POSIX epoch (datetime's
    resolution: Azure's 7th fractional digit, 100 ns, is dropped); a zone-less time is read as UTC."""
    try:
        stamp = datetime.fromisoformat(text)
    except ValueError:
        raise SpecError(f"--trace: {path} line {lineno}: arrival {text!r} is neither seconds nor a date and time "
                        "(YYYY-MM-DD HH:MM:SS[.ffffff])") from None
    if stamp.tzinfo is None:
        stamp = stamp.replace(tzinfo=UTC)
    return (stamp - EPOCH) // timedelta(microseconds=1)


def _count(path, lineno: int, name: str, text: str) -> int:
    """A token count: a whole number from 1 to MAX_TOKENS."""
    text = text.strip()
    if not text.isdecimal() or not 1 <= int(text) <= MAX_TOKENS:
        raise SpecError(f"--trace: {path} line {lineno}: {name} {text!r} must be a whole number >= 1 (and at most "
                        f"{MAX_TOKENS:,})")
    return int(text)
