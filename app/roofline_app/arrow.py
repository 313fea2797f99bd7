"""Rows of plain Python values as pyarrow Tables, built from buffers.

pyarrow's conversion of Python objects (Table.from_pylist, pa.array of a list) asks pandas whether each input is a
pandas object, and so imports pandas (~0.6 s) on the first table a server draws; Streamlit's own conversion of a
list of rows goes through pandas outright. Arrays made with Array.from_buffers import nothing, so the first page
of a cold server does without pandas. Only the column types the dashboard's tables and charts hold are built here
(bool, int64, float64, string, each with nulls); anything else returns None and the caller falls back.
"""

from __future__ import annotations

import array
import sys
from collections.abc import Sequence
from itertools import accumulate
from typing import Any

INT64 = (-(1 << 63), 1 << 63)


def table(rows: Sequence[dict]) -> Any:
    """A pyarrow.Table of `rows` (same keys in every row), or None where a column is not one of the four types
    (or the rows' keys differ, or the machine is big-endian)."""
    import pyarrow as pa

    if not rows or sys.byteorder != "little" or any(r.keys() != rows[0].keys() for r in rows):
        return None
    columns = []
    for name in rows[0]:
        column = _column(pa, [r[name] for r in rows])
        if column is None:
            return None
        columns.append(column)
    return pa.Table.from_arrays(columns, names=[str(n) for n in rows[0]])


def _bitmap(pa, flags: list[bool]) -> Any:
    """Arrow's bit-packed booleans: element i is bit i % 8 of byte i // 8 (least significant first)."""
    out = bytearray((len(flags) + 7) // 8)
    for i, flag in enumerate(flags):
        if flag:
            out[i >> 3] |= 1 << (i & 7)
    return pa.py_buffer(bytes(out))


def _column(pa, values: list) -> Any:
    n = len(values)
    present = [v for v in values if v is not None]
    if not present:
        return pa.nulls(n)
    nulls = n - len(present)
    validity = _bitmap(pa, [v is not None for v in values]) if nulls else None
    if all(type(v) is bool for v in present):
        return pa.Array.from_buffers(pa.bool_(), n, [validity, _bitmap(pa, [bool(v) for v in values])], nulls)
    if all(type(v) is int and INT64[0] <= v < INT64[1] for v in present):
        data = array.array("q", [0 if v is None else v for v in values])
        return pa.Array.from_buffers(pa.int64(), n, [validity, pa.py_buffer(data.tobytes())], nulls)
    if all(type(v) in (int, float) for v in present):
        data = array.array("d", [0.0 if v is None else float(v) for v in values])
        return pa.Array.from_buffers(pa.float64(), n, [validity, pa.py_buffer(data.tobytes())], nulls)
    if all(type(v) is str for v in present):
        encoded = [b"" if v is None else v.encode() for v in values]
        if sum(len(b) for b in encoded) >= 1 << 31:  # 32-bit offsets
            return None
        offsets = array.array("i", [0, *accumulate(len(b) for b in encoded)])
        buffers = [validity, pa.py_buffer(offsets.tobytes()), pa.py_buffer(b"".join(encoded))]
        return pa.Array.from_buffers(pa.string(), n, buffers, nulls)
    return None
