"""Human units at display time only (SI base units everywhere else), and plain-text tables."""

from __future__ import annotations

from collections.abc import Sequence

GIB = 1 << 30


def gib(n_bytes: float) -> str:
    return f"{n_bytes / GIB:,.2f} GiB"


def gb(n_bytes: float) -> str:
    return f"{n_bytes / 1e9:,.2f} GB"


def tb_per_s(bytes_per_s: float) -> str:
    return f"{bytes_per_s / 1e12:,.2f} TB/s"


def tflops(flops_per_s: float) -> str:
    return f"{flops_per_s / 1e12:,.1f} TFLOP/s"


def seconds(s: float) -> str:
    if s >= 1:
        return f"{s:,.3f} s"
    if s >= 1e-3:
        return f"{s * 1e3:,.3f} ms"
    return f"{s * 1e6:,.1f} us"


def tokens(n: float) -> str:
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
