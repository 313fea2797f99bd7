"""Human units at display time only (SI base units everywhere else), plain-text tables, and strict JSON."""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from typing import Any

from roofline.units import GIB


def gib(n_bytes: float) -> str:
    """Bytes as GiB (2^30), two decimals: '1,234.57 GiB'."""
    return f"{n_bytes / GIB:,.2f} GiB"


def gb(n_bytes: float) -> str:
    """Bytes as GB (1e9), two decimals: '1.50 GB'."""
    return f"{n_bytes / 1e9:,.2f} GB"


def tb_per_s(bytes_per_s: float) -> str:
    """Bytes/s as TB/s (1e12), two decimals."""
    return f"{bytes_per_s / 1e12:,.2f} TB/s"


def tflops(flops_per_s: float) -> str:
    """FLOP/s as TFLOP/s (1e12), one decimal."""
    return f"{flops_per_s / 1e12:,.1f} TFLOP/s"


def seconds(s: float) -> str:
    """Seconds as 's' from 1 s, 'ms' from 1 ms (three decimals), else 'us' (one decimal)."""
    if s >= 1:
        return f"{s:,.3f} s"
    if s >= 1e-3:
        return f"{s * 1e3:,.3f} ms"
    return f"{s * 1e6:,.1f} us"


def tokens(n: float) -> str:
    """A token count with thousands separators, prefixed '<n>Mi' or '<n>Ki' when an exact multiple of 2^20 or 1024."""
    n = int(n)
    if n >= 1 << 20 and n % (1 << 20) == 0:
        return f"{n >> 20}Mi ({n:,})"
    if n >= 1024 and n % 1024 == 0:
        return f"{n >> 10}Ki ({n:,})"
    return f"{n:,}"


def ms(s: float) -> str:
    """A duration in milliseconds with thousands separators ("1,234.57 ms"); "-" for None."""
    return "-" if s is None else f"{s * 1e3:,.2f} ms"


def count(n: float | None) -> str:
    """An integer count with thousands separators; "unbounded" for infinity, "-" for None."""
    if n is None:
        return "-"
    return "unbounded" if n == float("inf") else f"{int(n):,}"


def rate(per_s: float | None, unit: str = "tok/s") -> str:
    """A rate with thousands separators and its unit ("12,345 tok/s")."""
    return "-" if per_s is None else f"{per_s:,.0f} {unit}"


def percent(fraction: float | None, digits: int = 1) -> str:
    """A fraction as a signed-less percentage ("12.3 %"); "-" for None."""
    return "-" if fraction is None else f"{fraction * 100:,.{digits}f} %"


def signed_percent(fraction: float | None) -> str:
    """A relative change as "+12.3 %" / "-4.0 %"; "-" for None."""
    return "-" if fraction is None else f"{fraction * 100:+,.1f} %"


def flop_per_byte(x: float) -> str:
    return f"{x:,.1f} FLOP/B"


def number(x: float | None, digits: int = 3) -> str:
    """A plain number with thousands separators and at most `digits` decimals, trailing zeros dropped."""
    if x is None:
        return "-"
    text = f"{x:,.{digits}f}"
    return text.rstrip("0").rstrip(".") if "." in text else text


def md_escape(text: str) -> str:
    """`text` with every ASCII punctuation character backslash-escaped (CommonMark), so that a user-supplied string
    shown through a Markdown renderer stays literal: no link, image, emphasis or HTML."""
    return "".join("\\" + c if c in _MD_PUNCTUATION else c for c in str(text))


_MD_PUNCTUATION = set("!\"#$%&'()*+,-./:;<=>?@[\\]^_`{|}~")


def table(headers: Sequence[str], rows: Sequence[Sequence[object]], align: str | None = None) -> str:
    """A plain-text table; `align` has one 'l' or 'r' per column (default: first left, rest right)."""
    cells = [[str(h) for h in headers]] + [[str(c) for c in row] for row in rows]
    widths = [max(len(row[i]) for row in cells) for i in range(len(headers))]
    align = align or "l" + "r" * (len(headers) - 1)

    def fmt(row: Sequence[str]) -> str:
        parts = [c.ljust(w) if a == "l" else c.rjust(w) for c, w, a in zip(row, widths, align, strict=True)]
        return "  ".join(parts).rstrip()

    rule = "  ".join("-" * w for w in widths)
    return "\n".join([fmt(cells[0]), rule, *(fmt(r) for r in cells[1:])])


def finite(data: Any) -> Any:
    """`data` with every non-finite float replaced by None; a key `k` that held one gains `k_reason`
    (unless present): +inf 'unbounded', NaN 'undefined'. JSON output never holds Infinity or NaN."""
    if isinstance(data, dict):
        out = {}
        for key, value in data.items():
            out[key] = finite(value)
            if isinstance(value, float) and not math.isfinite(value) and f"{key}_reason" not in data:
                out[f"{key}_reason"] = "undefined" if value != value else "unbounded" if value > 0 else "-inf"
        return out
    if isinstance(data, list | tuple):
        return [finite(v) for v in data]
    if isinstance(data, float) and not math.isfinite(data):
        return None
    return data


def to_json(data: Any) -> str:
    """Strict JSON (allow_nan=False after `finite`)."""
    return json.dumps(finite(data), indent=2, default=str, allow_nan=False)
