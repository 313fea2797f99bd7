"""Static charts (lines and points, horizontal bars) as SVG text, drawn on the server and shown with st.image (an
<img>: no script, no fetch).

The browser decodes an image in milliseconds; a Vega-Lite view (what the dashboard drew before) cost it the Vega
bundle (775 kB of JS, evaluated on the first chart of a session) and 0.3-0.8 s of compiling and drawing per embed on
the 2-core box, which kept the page of the session's first chart over its 1 s target. Each mark carries a <title>
with its exact values (a tooltip where the SVG is opened on its own; the CSV/JSON downloads hold the same numbers).
Every text is XML-escaped: a user's SPEC or model name is text, never markup.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from html import escape
from typing import NamedTuple

PALETTE = ("#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f", "#bcbd22",
           "#17becf")  # category10 (d3, Vega)
FONT = 'font-family="Source Sans Pro, sans-serif"'


class Point(NamedTuple):
    x: float
    y: float
    filled: bool  # hollow: the point is drawn but does not hold (e.g. the batch does not fit)
    tip: str
    shape: str = "circle"  # or "cross", "square", "triangle", "diamond"
    r: float = 3.0  # px
    label: str = ""  # drawn beside the mark (once per label and position when several points coincide)


class Series(NamedTuple):
    name: str
    points: Sequence[Point]
    joined: bool = True  # a line through the points in their order
    colour: str | None = None  # None: the next colour of the palette


class Line(NamedTuple):
    """A dashed line through (x, y) pairs, named in the legend."""
    points: Sequence[tuple[float, float]]
    colour: str
    label: str
    dash: str = "3 2"  # SVG stroke-dasharray; "none": solid


class Rule(NamedTuple):
    at: float
    colour: str
    label: str
    dash: str = "4 3"  # "none": solid


class Bar(NamedTuple):
    """One row of a bar chart: its label, the stacked segments (value, colour, tip) and a text right of it."""
    label: str
    segments: Sequence[tuple[float, str, str]]
    text: str = ""


def text(value: object) -> str:
    """XML-escaped text without control characters (XML 1.0 forbids them)."""
    return escape("".join(c for c in str(value) if c >= " " or c == "\t"), quote=True)


def si(v: float) -> str:
    """A tick label: SI prefix (k, M, G, T, P; m, µ below 1), at most 3 significant digits, no trailing zeros."""
    if v == 0:
        return "0"
    for factor, prefix in ((1e15, "P"), (1e12, "T"), (1e9, "G"), (1e6, "M"), (1e3, "k"), (1.0, ""), (1e-3, "m"),
                           (1e-6, "µ")):
        if abs(v) >= factor * 0.9995:
            return f"{v / factor:.3g}{prefix}"
    return f"{v:.3g}"


class Axis:
    """A linear or log10 axis from the data range to pixels [a, b] (b < a for y: up is larger)."""

    def __init__(self, values: Sequence[float], log: bool, a: float, b: float, zero: bool = True,
                 domain: tuple[float, float] | None = None) -> None:
        values = [v for v in values if math.isfinite(v) and (v > 0 or not log)] or [1.0]
        lo, hi = min(values), max(values)
        self.log, self.a, self.b = log, a, b
        if domain:  # fixed by the caller (e.g. over every context of a slider)
            self.lo, self.hi = domain
        elif log:  # the data's range and a margin: a decade of empty plot would squeeze the lines
            self.lo, self.hi = lo / 1.2, hi * 1.2
        else:
            pad = 0.0 if zero else 0.06 * ((hi - lo) or abs(hi) or 1.0)  # room for the marks at the ends
            lo, hi = (min(lo, 0.0), hi) if zero else (lo - pad, hi + pad)  # counts start at zero; a quality need not
            step = nice_step((hi - lo) / 5 if hi > lo else abs(hi) / 10 or 1.0)
            self.lo, self.hi = math.floor(lo / step) * step, math.ceil(hi / step) * step or step

    def px(self, v: float) -> float:
        """The pixel coordinate of `v`."""
        f = ((math.log10(v) - math.log10(self.lo)) / (math.log10(self.hi) - math.log10(self.lo)) if self.log
             else (v - self.lo) / (self.hi - self.lo))
        return self.a + f * (self.b - self.a)

    def ticks(self) -> list[float]:
        """Tick values inside the domain: 1, 2, 5 per decade (only 1 over more than five decades) on a log axis,
        nice steps (1, 2 or 5 times a power of ten) on a linear one."""
        if self.log:
            decades = range(math.floor(math.log10(self.lo)), math.ceil(math.log10(self.hi)) + 1)
            steps = (1, 2, 5) if len(decades) <= 5 else (1,)
            return [m * 10 ** d for d in decades for m in steps if self.lo <= m * 10 ** d <= self.hi]
        step = nice_step((self.hi - self.lo) / 5)
        return [self.lo + i * step for i in range(round((self.hi - self.lo) / step) + 1)]


def nice_step(raw: float) -> float:
    """1, 2 or 5 times a power of ten, at least `raw`."""
    base = 10 ** math.floor(math.log10(raw))
    return next(m * base for m in (1, 2, 5, 10) if m * base >= raw * 0.9999)


def line_chart(series: Sequence[Series], *, title: str, subtitle: str, x_title: str, y_title: str, x_log: bool,
               y_log: bool, vrules: Sequence[Rule] = (), hrules: Sequence[Rule] = (), lines: Sequence[Line] = (),
               width: int = 820, height: int = 420, y_zero: bool = True, notes: Sequence[str] = (),
               x_domain: tuple[float, float] | None = None, y_domain: tuple[float, float] | None = None,
               legend_width: int = 230) -> str:
    """One line (unless not joined) and its points per series (colours by order, legend on the right), dashed
    lines, vertical and horizontal rules with their labels in the legend, `notes` as legend text, tick labels with
    SI prefixes; axes from the data unless a domain is given; an SVG document as text."""
    left, right, top, bottom = 64, legend_width, 58, 46
    xs = [p.x for s in series for p in s.points] + [r.at for r in vrules] + [x for ln in lines for x, _ in ln.points]
    ys = [p.y for s in series for p in s.points] + [r.at for r in hrules] + [y for ln in lines for _, y in ln.points]
    x = Axis(xs, x_log, left, width - right, domain=x_domain)
    y = Axis(ys, y_log, height - bottom, top, zero=y_zero, domain=y_domain)
    clip = (f'<clipPath id="plot"><rect x="{left}" y="{top}" width="{width - right - left}" '
            f'height="{height - bottom - top}"/></clipPath>')
    out = _head(width, height, title, subtitle, left) + [clip]
    out += _x_grid(x, top, height - bottom)
    for t in y.ticks():
        py = y.px(t)
        out.append(f'<line x1="{left}" x2="{width - right}" y1="{py:.1f}" y2="{py:.1f}" stroke="#eee"/>'
                   f'<text x="{left - 6}" y="{py + 4:.1f}" text-anchor="end">{si(t)}</text>')
    out.append(f'<rect x="{left}" y="{top}" width="{width - right - left}" height="{height - bottom - top}" '
               f'fill="none" stroke="#888"/>')
    out.append(f'<text x="{(left + width - right) / 2:.0f}" y="{height - 8}" text-anchor="middle" font-size="12">'
               f'{text(x_title)}</text>')
    out.append(f'<text transform="translate(16 {(top + height - bottom) / 2:.0f}) rotate(-90)" text-anchor="middle" '
               f'font-size="12">{text(y_title)}</text>')
    legend: list[tuple[str, str, str]] = []  # (colour, dash, label)
    colour_of = {}
    for ln in lines:  # under the points
        path = " ".join(f"{x.px(a):.1f},{y.px(b):.1f}" for a, b in ln.points)
        out.append(f'<polyline points="{path}" fill="none" stroke="{ln.colour}" stroke-dasharray="{ln.dash}" '
                   f'stroke-width="1.5" clip-path="url(#plot)"/>')
    legend += [(ln.colour, ln.dash, ln.label) for ln in lines]
    labelled: set[tuple[str, int, int]] = set()
    for i, s in enumerate(series):
        colour = colour_of[s.name] = s.colour or PALETTE[i % len(PALETTE)]
        legend.append((colour, "" if s.joined else "dot", s.name))
        pts = [p for p in s.points if math.isfinite(p.x) and math.isfinite(p.y) and (p.y > 0 or not y_log)]
        if s.joined:
            path = " ".join(f"{x.px(p.x):.1f},{y.px(p.y):.1f}" for p in pts)
            out.append(f'<polyline points="{path}" fill="none" stroke="{colour}" stroke-width="2"/>')
        out += [_mark(x.px(p.x), y.px(p.y), p, colour) for p in pts]
        for p in pts:
            where = (p.label, round(x.px(p.x)), round(y.px(p.y)))
            if p.label and where not in labelled:
                labelled.add(where)
                out.append(f'<text x="{where[1] + p.r + 3}" y="{where[2] - p.r - 2}" font-size="9" fill="#333" '
                           f'clip-path="url(#plot)">{text(p.label)}</text>')
    for rule, vertical in [(r, True) for r in vrules] + [(r, False) for r in hrules]:
        colour = colour_of.get(rule.colour, rule.colour)
        if vertical:
            px = x.px(rule.at)
            ends = f'x1="{px:.1f}" x2="{px:.1f}" y1="{top}" y2="{height - bottom}"'
        else:
            py = y.px(rule.at)
            ends = f'x1="{left}" x2="{width - right}" y1="{py:.1f}" y2="{py:.1f}"'
        out.append(f'<line {ends} stroke="{colour}" stroke-dasharray="{rule.dash}" stroke-width="1.5">'
                   f'<title>{text(rule.label)}</title></line>')
        legend.append((colour, rule.dash, rule.label))
    legend += [("none", "", note) for note in notes]
    out += _legend(legend, width - right + 14, top, (right - 40) // 6)  # about 6 px per character at 11 px
    out.append("</svg>")
    return "\n".join(out)


def _x_grid(x, top: float, base: float) -> list[str]:
    """A vertical grid line from `top` to `base` and its tick label under `base` at each of `x`'s ticks."""
    return [f'<line x1="{x.px(t):.1f}" x2="{x.px(t):.1f}" y1="{top}" y2="{base}" stroke="#eee"/>'
            f'<text x="{x.px(t):.1f}" y="{base + 14}" text-anchor="middle">{si(t)}</text>' for t in x.ticks()]


def _head(width: int, height: int, title: str, subtitle: str, left: int) -> list[str]:
    """An SVG document's opening: the canvas, a white background, the title and the subtitle."""
    return [f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
            f'viewBox="0 0 {width} {height}" {FONT} font-size="11">',
            f'<rect width="{width}" height="{height}" fill="white"/>',
            f'<text x="{left}" y="20" font-size="15" font-weight="bold">{text(title)}</text>',
            f'<text x="{left}" y="38" font-size="12" fill="#555">{text(subtitle)}</text>']


def _legend(entries: Sequence[tuple[str, str, str]], lx: float, top: int, chars: int) -> list[str]:
    """Legend rows from (colour, dash, label): a dot ("dot"), a line (solid "" or "none", else dashed) or nothing
    (colour "none") before each label, cut to `chars` characters."""
    out = []
    for i, (colour, dash, label) in enumerate(entries):
        label = label if len(label) <= chars else label[:chars - 1] + "…"
        ly = top + 8 + 17 * i
        key = (f'<circle cx="{lx + 9}" cy="{ly}" r="4" fill="{colour}"/>' if dash == "dot" else
               f'<line x1="{lx}" x2="{lx + 18}" y1="{ly}" y2="{ly}" stroke="{colour}" stroke-width="2" '
               f'stroke-dasharray="{dash or "none"}"/>')
        out.append(f'{key}<text x="{lx + 24}" y="{ly + 4}">{text(label)}</text>')
    return out


def _mark(cx: float, cy: float, p: Point, colour: str) -> str:
    """A point's mark (a circle, hollow unless filled, or an x cross) with its <title>."""
    tip = f"<title>{text(p.tip)}</title>"
    fill = colour if p.filled else "white"
    if p.shape in ("square", "triangle", "diamond"):
        d = p.r
        corners = {"square": ((-d, -d), (d, -d), (d, d), (-d, d)), "triangle": ((0, -d * 1.2), (d, d * 0.8),
                                                                               (-d, d * 0.8)),
                   "diamond": ((0, -d * 1.3), (d, 0), (0, d * 1.3), (-d, 0))}[p.shape]
        pts = " ".join(f"{cx + a:.1f},{cy + b:.1f}" for a, b in corners)
        return f'<polygon points="{pts}" stroke="{colour}" stroke-width="1.5" fill="{fill}">{tip}</polygon>'
    if p.shape == "cross":
        d = p.r * 0.8
        return (f'<path d="M{cx - d:.1f},{cy - d:.1f}L{cx + d:.1f},{cy + d:.1f}M{cx - d:.1f},{cy + d:.1f}'
                f'L{cx + d:.1f},{cy - d:.1f}" stroke="{colour}" stroke-width="2.5">{tip}</path>')
    return (f'<circle cx="{cx:.1f}" cy="{cy:.1f}" r="{p.r:g}" stroke="{colour}" stroke-width="1.5" '
            f'fill="{fill}">{tip}</circle>')


def bar_chart(bars: Sequence[Bar], *, title: str, subtitle: str, x_title: str, rules: Sequence[Rule] = (),
              legend: Sequence[tuple[str, str]] = (), width: int = 420, label_width: int = 110, room: float = 1.0,
              legend_width: int = 0) -> str:
    """Horizontal bars, one row per Bar (segments stacked from zero, its text right of it), vertical rules, a legend
    of (colour, label) squares on the right; the linear axis reaches `room` times the largest bar or rule (room for
    the texts); an SVG document as text."""
    top, bottom, row = 58, 46, 26
    left, right = label_width, width - 16 - legend_width
    height = top + bottom + row * max(len(bars), 1)
    ends = [sum(v for v, _, _ in b.segments) for b in bars] + [r.at for r in rules]
    x = Axis([0.0, max(ends or [1.0]) * room], False, left, right)
    out = _head(width, height, title, subtitle, 8)
    out += _x_grid(x, top, height - bottom)
    out.append(f'<text x="{(left + right) / 2:.0f}" y="{height - 8}" text-anchor="middle" font-size="12">'
               f'{text(x_title)}</text>')
    for i, b in enumerate(bars):
        y0, at = top + row * i + 4, 0.0
        label = b.label if len(b.label) <= left // 6 else b.label[:left // 6 - 1] + "…"
        out.append(f'<text x="{left - 6}" y="{y0 + row / 2:.0f}" text-anchor="end">{text(label)}</text>')
        for value, colour, tip in b.segments:
            a, z = x.px(at), x.px(at + value)
            out.append(f'<rect x="{a:.1f}" y="{y0}" width="{max(z - a, 0):.1f}" height="{row - 8}" fill="{colour}">'
                       f'<title>{text(tip)}</title></rect>')
            at += value
        if b.text:
            out.append(f'<text x="{x.px(at) + 4:.1f}" y="{y0 + row / 2:.0f}">{text(b.text)}</text>')
    for r in rules:
        px = x.px(r.at)
        out.append(f'<line x1="{px:.1f}" x2="{px:.1f}" y1="{top - 4}" y2="{height - bottom}" stroke="{r.colour}" '
                   f'stroke-dasharray="{r.dash}" stroke-width="1.5"><title>{text(r.label)}</title></line>')
    out.append(f'<line x1="{left}" x2="{left}" y1="{top}" y2="{height - bottom}" stroke="#888"/>')
    for i, (colour, label) in enumerate(legend):
        ly = top + 8 + 17 * i
        out.append(f'<rect x="{right + 16}" y="{ly - 6}" width="12" height="12" fill="{colour}"/>'
                   f'<text x="{right + 34}" y="{ly + 4}">{text(label)}</text>')
    out.append("</svg>")
    return "\n".join(out)
