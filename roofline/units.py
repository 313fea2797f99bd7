"""The shared symbols of the cost model, defined once, and exact integer helpers.

Methods never create their own symbols (STYLE 5): they take these, or numbers.
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import cache, lru_cache

from roofline.lazy import np, sp

GIB = 1 << 30  # bytes in a GiB: memory capacities are shown in GiB (say so), bandwidths in decimal units

# The shared symbols, made on first use (sympy loads lazily: roofline.lazy):
#   B       batch: concurrent sequences
#   L       context: tokens in the cache at a decode step
#   P       prompt tokens prefilled at once
#   BITS    a swept bit-width (methods substitute it for their own)
#   CHUNKS  prefill passes (chunked prefill re-reads weights)
_SYMBOLS = {"B": ("B", True), "L": ("L", True), "P": ("P", True), "BITS": ("bits", False), "CHUNKS": ("chunks", True)}


def __getattr__(name: str):
    """The symbols above and CeilDiv, built on first access (PEP 562)."""
    if name in _SYMBOLS:
        text, integer = _SYMBOLS[name]
        value = sp.Symbol(text, positive=True, integer=True) if integer else sp.Symbol(text, positive=True)
    elif name == "CeilDiv":
        value = _ceildiv_class()
    else:
        raise AttributeError(f"module 'roofline.units' has no attribute {name!r}")
    globals()[name] = value
    return value


@cache
def _ceildiv_class():
    """CeilDiv, a sympy Function (defined on first use: sympy loads lazily)."""

    class CeilDiv(sp.Function):
        """ceil(a / b) for positive integers, exact: evaluates to an Integer on integer arguments and
        prints as floor division of negatives (`-((-a) // b)`) for numpy and Python, never a float ceil."""

        is_integer = True
        is_nonnegative = True

        @classmethod
        def eval(cls, a, b):
            """ceil(a / b) as an Integer when both are integers, `a` when b is 1, else None (stays symbolic).
            Raises ValueError if an integer divisor is not positive."""
            if a.is_Integer and b.is_Integer:
                if b <= 0:
                    raise ValueError(f"CeilDiv: divisor must be positive, got {b}")
                return sp.Integer(-((-int(a)) // int(b)))
            if b == 1:
                return a
            return None

        def _numpycode(self, printer):
            a, b = (printer.doprint(arg) for arg in self.args)
            return f"(-((-({a})) // ({b})))"

        _pythoncode = _numpycode
        _lambdacode = _numpycode

        def _eval_rewrite_as_ceiling(self, a, b, **kwargs):
            return sp.ceiling(a / b)

    return CeilDiv


def ceildiv(a, b):
    """Exact ceil-div of sympy expressions or Python ints."""
    if isinstance(a, int) and isinstance(b, int):
        return -((-a) // b)
    return _ceildiv_class()(sp.sympify(a), sp.sympify(b))


@lru_cache(maxsize=8192, typed=True)
def nsimplified(value, rational: bool | None = None):
    """sympy.nsimplify(value, rational=rational), once per (value, rational) in a process: config floats (bits,
    fractions) and exact ratios recur in every method and model, and nsimplify of a float costs ~2 ms. A pure
    function of its (immutable) argument, so the memo changes nothing built."""
    return sp.nsimplify(value, rational=rational)


def window_occupancy(expr, how: str):
    """Rewrite the residual-window sawtooth `Mod(x, R)` (tokens waiting for a block flush).

    'exact': unchanged; 'peak': Min(x, R - 1), the most the window ever holds, so bytes never decrease
    with the context (what capacity planning must reserve); 'mean': Min(x, (R - 1)/2), its average over
    a block (what a decode step reads on average, and what integrates in closed form), and ceil-divs at
    their mean too.
    """
    if how == "exact":
        return expr
    if how not in ("peak", "mean"):
        raise ValueError(f"occupancy: {how!r} is not 'exact', 'peak' or 'mean'")
    top = (lambda b: b - 1) if how == "peak" else (lambda b: (b - 1) / sp.Integer(2))
    expr = sp.sympify(expr).replace(sp.Mod, lambda a, b: sp.Min(a, top(b)))
    if how == "mean":
        # ceil(a/b) averages a/b + (b - 1)/(2b) over a: keeps the mean integrable in closed form
        expr = expr.replace(_ceildiv_class(), lambda a, b: a / b + (b - 1) / (2 * b))
    return expr


def _first_seen(expr, kinds: tuple) -> list:
    """The distinct subexpressions of `expr` of the classes `kinds`, in the order a depth-first walk meets them
    (sympy keeps every node's arguments in a canonical order, so the list is the same in every process, unlike
    the set `atoms` returns; and it needs no sort by sympy's sort keys, slow on new expressions)."""
    found: dict = {}
    visited: set = set()

    def walk(node) -> None:
        if isinstance(node, kinds) and node not in found:
            found[node] = None
        for arg in node.args:
            if arg.args and arg not in visited:
                visited.add(arg)
                walk(arg)

    walk(expr)
    return list(found)


def _kink_pairs(expr, symbol) -> list:
    """Differences of the argument pairs of every Min/Max node that are affine in `symbol` (other symbols
    may remain, to be fixed later)."""
    pairs = []
    nonaffine = (sp.Min, sp.Max, sp.Mod, sp.Piecewise, _ceildiv_class())
    for node in _first_seen(expr, (sp.Min, sp.Max)):
        args = node.args
        for i in range(len(args)):
            for j in range(i + 1, len(args)):
                diff = args[i] - args[j]
                if symbol not in diff.free_symbols:
                    continue
                if diff.atoms(*nonaffine):  # not affine (expanding would re-evaluate every Min/Max: slow)
                    continue
                pairs.append(sp.expand(diff))
    return pairs


_INTEGRAL_CACHE: dict[int, tuple] = {}


def piecewise_linear_integral(expr, symbol: sp.Symbol, lo: float, hi: float, fixed: dict | None = None) -> float:
    """Exact integral over [lo, hi] of an expression that is affine in `symbol` between kinks made by its
    Min/Max nodes (roofline step times: affine compute and memory terms under Max, windows under Min);
    `fixed` gives numbers for its other symbols.

    The kinks are where two arguments of one Min/Max are equal (linear roots); between consecutive kinks the
    expression is affine, so the trapezoid rule on those pieces is exact. A piece that is still not affine
    (a kink this search missed) is split further until its midpoint agrees. The kink pairs and the compiled
    expression are cached per expression object.
    """
    expr = sp.sympify(expr)
    fixed = fixed or {}
    if symbol not in expr.free_symbols:
        return float(expr.xreplace({k: sp.sympify(v) for k, v in fixed.items()})) * (hi - lo)
    others = tuple(sorted(fixed, key=str))
    cached = _INTEGRAL_CACHE.get(id(expr))
    if cached is None or cached[0] is not expr or cached[1] != others:
        cached = (expr, others, _kink_pairs(expr, symbol), sp.lambdify([symbol, *others], expr, modules="numpy"))
        _INTEGRAL_CACHE[id(expr)] = cached
    _, _, pairs, fn = cached
    values = [float(fixed[k]) for k in others]
    f = lambda x: float(fn(x, *values))  # noqa: E731
    points = {float(lo), float(hi)}
    subs = {k: sp.sympify(v) for k, v in fixed.items()}
    for diff in pairs:
        d = diff.xreplace(subs)
        if d.free_symbols != {symbol} or not d.is_polynomial(symbol):
            continue
        poly = sp.Poly(d, symbol)
        if poly.degree() != 1:
            continue
        slope, intercept = (float(c) for c in poly.all_coeffs())
        root = -intercept / slope
        if lo < root < hi:
            points.add(root)

    return integrate_pieces(f, points)


def integrate_pieces(f, points) -> float:
    """Integral of a numeric function that is affine between consecutive `points` (its kinks and the two ends):
    the trapezoid rule per piece, exact there; a piece whose midpoint disagrees (a kink the caller missed) is
    split until it agrees (at most 30 halvings)."""
    def piece(a: float, b: float, fa: float, fb: float, depth: int) -> float:
        mid = (a + b) / 2
        fm = f(mid)
        if depth == 0 or abs(fm - (fa + fb) / 2) <= 1e-12 * max(abs(fm), 1e-30):
            return (fa + fb) / 2 * (b - a)
        return piece(a, mid, fa, fm, depth - 1) + piece(mid, b, fm, fb, depth - 1)

    xs = sorted(points)
    if len(xs) == 2:  # one piece (the usual case): piece() inlined
        a, b = xs
        fa, fb = f(a), f(b)
        fm = f((a + b) / 2)
        if abs(fm - (fa + fb) / 2) <= 1e-12 * max(abs(fm), 1e-30):
            return (fa + fb) / 2 * (b - a)
        return piece(a, (a + b) / 2, fa, fm, 29) + piece((a + b) / 2, b, fm, fb, 29)
    ys = [f(x) for x in xs]
    return sum(piece(xs[k], xs[k + 1], ys[k], ys[k + 1], 30) for k in range(len(xs) - 1))


def round_up(a, multiple):
    """Smallest multiple of `multiple` that is >= a."""
    return ceildiv(a, multiple) * multiple


def lambdify(symbols: Sequence[sp.Symbol], exprs, *, cse: bool = True):
    """Compile expressions to one numpy function of `symbols` (common subexpressions shared)."""
    return sp.lambdify(list(symbols), exprs, modules="numpy", cse=cse)


def evaluate(expr, values: dict[sp.Symbol, object]) -> float:
    """Evaluate one expression at scalar values exactly where possible (for reporting, not sweeps)."""
    result = sp.sympify(expr).subs(values)
    if result.free_symbols:
        missing = ", ".join(sorted(str(s) for s in result.free_symbols))
        raise ValueError(f"evaluate: no value for symbol(s) {missing}")
    return float(result) if not result.is_Integer else int(result)


def as_int_array(x) -> np.ndarray:
    """`x` as a numpy int64 array (exact integer sweeps)."""
    return np.asarray(x, dtype=np.int64)


# Vector FLOPs per element of the elementwise ops, shared by the op graph and the methods.
# RMSNorm: square, sum, scale, weight (4). RoPE: x*cos + rot(x)*sin (3). SiLU-gated product: x*sigmoid(x)
# (~4) times up (1). Online softmax per score: max, subtract, exp, sum, rescale (5). Residual add (1).
NORM_FLOPS = 4
ROPE_FLOPS = 3
GATED_ACT_FLOPS = 5
SOFTMAX_FLOPS = 5
ADD_FLOPS = 1
