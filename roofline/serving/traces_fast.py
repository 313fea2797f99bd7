"""A trace file in its plain form read by columns (numpy conversions over whole columns, one regular expression over
a JSON-lines file), for serving.traces.read_trace: the same rows, notes and hash_ids as its line-by-line reader, or
None, and then that reader decides (every refusal and its message stay there).

Plain means a form in which splitting and converting whole columns provably gives what the line-by-line reader
gives row by row:
- CSV: UTF-8 text without `"` (csv's quoting), NUL, `#` (comment lines), a lone `\\r` (csv ends a row there) or a
  line past csv.field_size_limit(); no blank line before the first; every other line holds the same number of commas
  (blank lines skipped, as csv.reader yields them as []). The three columns used are ASCII: token counts digits only
  (str.isdecimal's ASCII case) and arrivals without whitespace (numpy's str -> float64 calls Python's float on each,
  as _arrival_s does); dated arrivals are fixed-width `YYYY-MM-DD HH:MM:SS[.f...]` (separator ' ' or 'T', one to seven
  fractional digits, no zone), read as datetime.fromisoformat reads them (digits past the sixth dropped, a zone-less
  time as UTC) by days_from_civil (H. Hinnant, "chrono-Compatible Low-Level Date Algorithms", 2013).
- Mooncake JSON lines: every line, with no blank one, exactly `{"timestamp": T, "input_length": N, "output_length":
  M, "hash_ids": [H, ...]}` with JSON integers (spaces optional around `:` and `,`), so json.loads of each line
  would give those keys once with those integers.
A value out of its range (a count past MAX_TOKENS, an arrival past MAX_ARRIVAL_S, a date that does not exist) gives
None: the line-by-line reader names its line.
"""

from __future__ import annotations

import csv
import os
import re
import stat
from itertools import repeat
from operator import itemgetter

import numpy as np

from roofline.errors import SpecError
from roofline.serving import trace_rules as rules

_INT = r"(?:0|[1-9][0-9]*)"
_SEP = r" *, *"
MOONCAKE_LINE = re.compile(
    rf'^\{{ *"timestamp" *: *({_INT}){_SEP}"input_length" *: *({_INT}){_SEP}"output_length" *: *({_INT}){_SEP}'
    rf'"hash_ids" *: *\[ *((?:-?{_INT}(?:{_SEP}-?{_INT})*)?) *\] *\}}$', re.M)
MOONCAKE_DUMPS = re.compile(  # the same lines as json.dumps writes them (", " and ": "): tried first, twice as fast
    rf'^\{{"timestamp": ({_INT}), "input_length": ({_INT}), "output_length": ({_INT}), '
    rf'"hash_ids": \[((?:-?{_INT}(?:, -?{_INT})*)?)\]\}}$', re.M)
DATE_SEPARATORS = (b"-", b"-", b" T", b":", b":")  # at characters 4, 7, 10, 13, 16
FRACTION_DIGITS = 7  # Azure's TIMESTAMP; fromisoformat keeps the first six
MAX_BYTES = 1 << 28  # files read whole (the CLI's own limit, report.bounds.MAX_TRACE_BYTES); larger go line by line,
# which stops at MAX_ROWS rows


def read_columns(path, max_rows: int):
    """(arrival_s, prompt_tokens, output_tokens, notes, blocks: BlockIds or None) in file order, or None when the
    file is not plain or holds more than max_rows rows (serving.traces.MAX_ROWS: the line reader refuses it, naming
    the line)."""
    with open(path, "rb") as raw:
        info = os.fstat(raw.fileno())
        if not stat.S_ISREG(info.st_mode) or info.st_size > MAX_BYTES:  # a pipe, or past what is read whole
            return None
        data = raw.read()
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError:
        return None
    if not text or "\0" in text or text[0] in "\r\n":
        return None
    if text.lstrip().startswith(("{", "[")):
        return _mooncake(path, text, max_rows)
    return _csv(path, text, max_rows)


def _lines(text: str) -> list[str] | None:
    """The text's lines without the blank ones (csv.reader yields [] for them), or None with a lone \\r."""
    if "\r" in text:
        text = text.replace("\r\n", "\n")
        if "\r" in text:
            return None
    lines = text.split("\n")
    return [line for line in lines if line] if "" in lines else lines


def _csv(path, text: str, max_rows: int):
    """A plain CSV's columns (module docstring), else None."""
    if '"' in text or "#" in text:
        return None
    lines = _lines(text)
    if not lines or max(map(len, lines)) > csv.field_size_limit():
        return None
    first = lines[0].split(",")
    if not "".join(first).strip():
        return None
    notes: list[str] = []
    index, header = (0, 1, 2), rules.is_header(first)
    if header:
        try:
            index, ignored = rules.header_index(path, 1, first)
        except SpecError:
            return None
        if ignored:
            notes.append(f"--trace: columns {', '.join(ignored)} of {path} not used")
        lines = lines[1:]
    if not lines or len(lines) > max_rows:
        return None
    commas = lines[0].count(",")
    if (commas != 2 and not header) or commas < max(index) or set(map(str.count, lines, repeat(","))) != {commas}:
        return None
    flat = ",".join(lines).split(",")
    cols = [flat[i::commas + 1] for i in index]
    prompt, output = _counts(cols[1]), _counts(cols[2])
    if prompt is None or output is None:
        return None
    dated = header and rules.number(cols[0][0].strip()) is None
    arrival = _dates(cols[0]) if dated else _seconds(cols[0], 1.0)
    if arrival is None:
        return None
    if dated:
        notes.append(f"--trace: {path} arrival times are dates; replayed as seconds after the earliest row")
    return arrival, prompt, output, notes, None


def _counts(col: list[str]) -> np.ndarray | None:
    """Token counts (_count's rule: ASCII digits, 1 to MAX_TOKENS) of a column, else None."""
    joined = "".join(col)
    if not (joined.isascii() and joined.isdigit()):
        return None
    try:
        values = np.array(col, dtype=np.int64)  # int() of each: '' raises, a number past int64 overflows
    except (ValueError, OverflowError):
        return None
    return values if values.min() >= 1 and values.max() <= rules.MAX_TOKENS else None


def _seconds(col: list[str], unit_s: float) -> np.ndarray | None:
    """Arrivals (_arrival_s's rule: a number x unit_s, finite, from 0 to MAX_ARRIVAL_S) of a column, else None."""
    joined = "".join(col)
    if not joined.isascii() or joined.split() != [joined]:  # no whitespace: float() and str.strip agree trivially
        return None
    try:
        values = np.array(col, dtype=np.float64) * unit_s  # Python's float() of each string
    except ValueError:
        return None
    ok = np.isfinite(values) & (values >= 0) & (values <= rules.MAX_ARRIVAL_S)
    return values if ok.all() else None


def _dates(col: list[str]) -> np.ndarray | None:
    """Dated arrivals as seconds after the earliest (serving.traces._datetime_us, then its span check), else None."""
    width = len(col[0])
    if (width != 19 and not 21 <= width <= 20 + FRACTION_DIGITS) or set(map(len, col)) != {width}:
        return None
    try:
        raw = np.array(col, dtype=f"S{width}")  # ASCII only (UnicodeEncodeError otherwise)
    except UnicodeEncodeError:
        return None
    chars = raw.view(np.uint8).reshape(len(col), width)
    for at, allowed in zip((4, 7, 10, 13, 16), DATE_SEPARATORS, strict=True):
        if not np.isin(chars[:, at], np.frombuffer(allowed, dtype=np.uint8)).all():
            return None
    digit_at = [i for i in range(width) if i not in (4, 7, 10, 13, 16, 19)]
    digits = chars[:, digit_at].astype(np.int64) - ord("0")
    if (digits < 0).any() or (digits > 9).any() or (width > 19 and (chars[:, 19] != ord(".")).any()):
        return None
    us = _epoch_us(digits, width - 20 if width > 19 else 0)
    if us is None:
        return None
    seconds = (us - us.min()) / 1e6
    return seconds if seconds.max() <= rules.MAX_ARRIVAL_S else None


def _epoch_us(digits: np.ndarray, fraction: int) -> np.ndarray | None:
    """Whole microseconds since the POSIX epoch of validated digit columns (year 4, month 2, day 2, hour 2, minute 2,
    second 2, then `fraction` digits), or None for a date or time datetime refuses."""
    def number(start: int, count: int) -> np.ndarray:
        out = np.zeros(len(digits), dtype=np.int64)
        for k in range(start, start + count):
            out = out * 10 + digits[:, k]
        return out

    year, month, day = number(0, 4), number(4, 2), number(6, 2)
    hour, minute, second = number(8, 2), number(10, 2), number(12, 2)
    kept = min(fraction, 6)
    micro = number(14, kept) * 10 ** (6 - kept)
    leap = (year % 4 == 0) & ((year % 100 != 0) | (year % 400 == 0))
    month_days = np.array([0, 31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31])[np.clip(month, 0, 12)]
    last = month_days + (leap & (month == 2))
    if not ((year >= 1) & (month >= 1) & (month <= 12) & (day >= 1) & (day <= last) & (hour <= 23) & (minute <= 59)
            & (second <= 59)).all():
        return None
    # days_from_civil: March-based years so the leap day ends the year
    y = year - (month <= 2)
    era = y // 400
    yoe = y - era * 400
    doy = (153 * (month + np.where(month > 2, -3, 9)) + 2) // 5 + day - 1
    doe = yoe * 365 + yoe // 4 - yoe // 100 + doy
    days = era * 146097 + doe - 719468
    return ((days * 24 + hour) * 60 + minute) * 60_000_000 + second * 1_000_000 + micro


def _mooncake(path, text: str, max_rows: int):
    """A plain Mooncake JSON-lines file's columns and hash_ids (serving.traces._json_rows's result), else None."""
    if "\r" in text or "\n\n" in text:
        return None
    n = text.count("\n") + (not text.endswith("\n"))
    found = MOONCAKE_DUMPS.findall(text)
    if len(found) != n:
        found = MOONCAKE_LINE.findall(text)
    if len(found) != n or n > max_rows:  # each line matched whole: every line is plain
        return None
    stamp, prompt_text, output_text, ids_text = (list(map(itemgetter(k), found)) for k in range(4))
    arrival = _seconds(stamp, 1e-3)
    prompt, output = _counts(prompt_text), _counts(output_text)
    if arrival is None or prompt is None or output is None:
        return None
    blocks = _ids(ids_text)
    if blocks is None:
        return None
    have, want = blocks.lengths, -(-prompt // rules.BLOCK_TOKENS)
    notes = [f"--trace: {path} is Mooncake JSON lines (timestamp in ms)"]
    bad = np.flatnonzero(have != want)
    if len(bad):
        i = int(bad[0])
        notes.append(f"--trace: its hash_ids are not replayed (line {i + 1}: {int(have[i])} hash_ids for "
                     f"{int(prompt[i]):,} tokens, not {int(want[i])} whole-number ids of {rules.BLOCK_TOKENS}-token "
                     "blocks): no prefix is shared")
        return arrival, prompt, output, notes, None
    return arrival, prompt, output, notes, blocks


def _ids(groups: list[str]) -> rules.BlockIds | None:
    """Each row's hash_ids (a comma-separated group of JSON integers, or empty) as one flat array, or None when one
    is past int64 (the line reader keeps Python's integers)."""
    commas = np.fromiter(map(str.count, groups, repeat(",")), dtype=np.int64, count=len(groups))
    lengths = np.where(np.fromiter(map(bool, groups), dtype=bool, count=len(groups)), commas + 1, 0)
    text = ",".join(filter(None, groups))
    try:
        ids = np.array(text.split(",") if text else [], dtype=np.int64)  # int() of each: '-0' is 0 as in JSON
    except OverflowError:
        return None
    return rules.BlockIds(ids, np.concatenate([[0], np.cumsum(lengths)]).astype(np.int64))
