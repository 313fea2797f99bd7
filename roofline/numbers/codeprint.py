"""Python source printed from sympy expressions for roofline.numbers.codegen: Max/Min/Mod as Python's (or numpy's)
functions, a memo of printed subtrees shared by the functions of one compile, repeated calls computed once into
locals, and Programs (assignments then a body) for what one expression cannot say.

Both passes remember across compiles (process-wide, bounded): the unevaluated twin of every subtree (_plain) and
the text of every subtree that holds no local (_TEXTS). The functions of one model share most of their subtrees
(the phases, and every method's dense layers), so a new model or tp prints each of them once, not once per
function set. Text is the printer's either way, so the generated code is the same as without the memos.

Split from roofline.numbers.codegen (which keeps the cache: keys, memory, disk, binding) so each stays readable.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import cache
from typing import Any

MEMO_NODES = 50_000  # subtrees remembered by each process-wide memo below (cleared whole when exceeded; a new
# model or tp adds about 450 for the dashboard's five default methods, 1,600 for every preset)
_PLAINED: dict = {}  # subtree -> its twin with unevaluated Max/Min/Mod (_plain)
_TEXTS: dict[str, dict] = {"scalar": {}, "vector": {}}  # subtree -> its text, per flavour, when it holds no local
_PRECEDENCE: dict = {}  # subtree -> sympy's precedence of it (a function of the subtree alone)
_CALL_FREE: dict = {}  # subtree -> whether it holds no function call (_call_free)
_ORDERED: dict = {}  # (sum, order) -> its terms in the printer's order (Expr.as_ordered_terms: slow, pure)


def _remembered(memo: dict, key, compute):
    """memo[key], computed by compute() once (memo emptied whole past MEMO_NODES); unhashable keys not kept."""
    try:
        return memo[key]
    except KeyError:
        if len(memo) > MEMO_NODES:
            memo.clear()
        value = memo[key] = compute()
        return value
    except TypeError:
        return compute()


@cache
def _unevaluated():
    """Max and Min that never evaluate (sympy's compare their arguments on every rebuild, which makes common-
    subexpression elimination slow), printed as Python's max/min or numpy's maximum/minimum; and Mod printed
    with its parentheses."""
    import sympy as sp

    def make(name: str, builtin: str, ufunc: str):
        def pycode(self, printer) -> str:
            return f"{builtin}({', '.join(printer._print(a) for a in self.args)})"

        def npcode(self, printer) -> str:
            text = printer._print(self.args[0])
            for arg in self.args[1:]:
                text = f"numpy.{ufunc}({text}, {printer._print(arg)})"
            return text

        return type(name, (sp.Function,), {"_pythoncode": pycode, "_lambdacode": pycode, "_numpycode": npcode})

    def mod_py(self, printer) -> str:
        # parenthesized: sympy's Python printer writes 3*Mod(x, 5) as `3*x % 5`, which Python reads as (3*x) % 5
        a, b = (printer._print(arg) for arg in self.args)
        return f"(({a}) % ({b}))"

    def mod_np(self, printer) -> str:
        a, b = (printer._print(arg) for arg in self.args)
        return f"numpy.mod({a}, {b})"

    mod = type("ModU", (sp.Function,), {"_pythoncode": mod_py, "_lambdacode": mod_py, "_numpycode": mod_np})
    return {sp.Max: make("MaxU", "max", "maximum"), sp.Min: make("MinU", "min", "minimum"), sp.Mod: mod}


def _plain(expr: Any) -> Any:
    """`expr` (or nested lists of expressions) with Max/Min/Mod swapped for their unevaluated twins."""
    import sympy as sp

    if isinstance(expr, list | tuple):
        return [_plain(e) for e in expr]
    expr = sp.sympify(expr)
    swaps = _unevaluated()
    seen = _PLAINED
    if len(seen) > MEMO_NODES:
        seen.clear()

    def walk(node):
        if not node.args:
            return node
        hit = seen.get(node)
        if hit is not None:
            return hit
        args = [walk(a) for a in node.args]
        if node.func in swaps:
            out = swaps[node.func](*args)
        elif not any(a is not b for a, b in zip(args, node.args, strict=True)):
            out = node
        elif isinstance(node, (sp.Add, sp.Mul)):
            # a sum or product keeps its (canonical) order of arguments: evaluating it again (sympy's flatten) would
            # only sort them among the twins, and the printer orders terms and factors itself
            out = node.func._from_args(args)
        else:
            out = node.func(*args)
        seen[node] = out
        return out

    return walk(expr)


@cache
def _remember_precedence() -> None:
    """sympy's `precedence` as the str, code and Python printers call it (module globals: _print_Add per term,
    _print_Mul per product) through the process-wide memo, once per process. It is a pure function of the
    expression (Mul's asks could_extract_minus_sign: assumptions, slow on new expressions), so every printer's
    text stays the same; a subtree's precedence was asked about five times per printing of a new model."""
    import importlib

    from sympy import Basic
    from sympy.printing.precedence import precedence

    def remembered(item) -> int:
        if not isinstance(item, Basic):
            return precedence(item)
        return _remembered(_PRECEDENCE, (type(item), item), lambda: precedence(item))

    for name in ("str", "codeprinter", "pycode"):  # sympy.printing.str is also a function's name: by import
        module = importlib.import_module(f"sympy.printing.{name}")
        if module.precedence is precedence:
            module.precedence = remembered


@cache
def _printer_class(flavour: str):
    """sympy's code printer for `flavour` (what lambdify uses for math / numpy), remembering the text of every
    subexpression it printed: a phase's rows and its total share most of their subtrees, printed once."""
    from sympy.printing.numpy import NumPyPrinter
    from sympy.printing.precedence import precedence
    from sympy.printing.pycode import PythonCodePrinter

    base = PythonCodePrinter if flavour == "scalar" else NumPyPrinter
    _remember_precedence()

    class MemoPrinter(base):
        """`_memo`: this compile's texts (locals' names included); `_TEXTS[flavour]`: every compile's texts of
        subtrees outside `_local` (those holding a local below them: printed per compile)."""

        def __init__(self) -> None:
            super().__init__({"fully_qualified_modules": False, "inline": True, "allow_unknown_functions": True,
                              "user_functions": {}})
            self._memo: dict = {}
            self._local: set = set()
            self._texts = _TEXTS[flavour]
            if len(self._texts) > MEMO_NODES:
                self._texts.clear()

        def _print(self, expr, **kwargs):
            if kwargs:
                return super()._print(expr, **kwargs)
            try:
                return self._memo[expr]
            except KeyError:
                pass
            except TypeError:  # lists and other unhashable containers
                return super()._print(expr)
            if expr in self._local:
                text = self._memo[expr] = super()._print(expr)
                return text
            text = self._texts.get(expr)
            if text is None:
                text = self._texts[expr] = super()._print(expr)
            self._memo[expr] = text
            return text

        def parenthesize(self, item, level, strict=False) -> str:
            """StrPrinter.parenthesize with the item's precedence computed once per process."""
            prec = _remembered(_PRECEDENCE, (type(item), item), lambda: precedence(item))
            if prec < level or (not strict and prec <= level):
                return f"({self._print(item)})"
            return self._print(item)

        def _as_ordered_terms(self, expr, order=None):
            """Printer._as_ordered_terms, each sum's order computed once per process (ordered_terms: sympy's
            order, found faster for sums of real rational terms)."""
            def compute() -> tuple:
                if (order or self.order) is None:
                    terms = ordered_terms(expr)
                    if terms is not None:
                        return tuple(terms)
                return tuple(super(MemoPrinter, self)._as_ordered_terms(expr, order))

            return list(_remembered(_ORDERED, (expr, order), compute))

    return MemoPrinter


def ordered_terms(expr: Any) -> list | None:
    """`expr.as_ordered_terms()` (sympy's default order, the printers') for a sum whose terms are a real rational
    or float coefficient times commutative non-numeric factors; None for any other expression (then ask sympy).

    The same steps as sympy's Expr.as_ordered_terms and Expr.as_terms (sympy 1.14): the special case of a
    positive number plus a negative multiple, then terms sorted by their monomials over the sorted generators
    (descending, lexicographic), then by coefficient. One shortcut: the coefficient as float(c) where sympy takes
    complex(c), whose evalf and as_real_imag were most of the printing of a new model; both are c rounded to the
    nearest double (mpmath at 53 bits). tests/numbers/test_compiled_expressions.py compares the two on the graphs' own
    sums."""
    import sympy as sp
    from sympy.core.exprtools import decompose_power
    from sympy.polys.orderings import monomial_key

    if not isinstance(expr, sp.Add):
        return None
    numeric = (sp.Number, sp.NumberSymbol)
    args = sorted(expr.args, key=lambda x: not isinstance(x, numeric))
    if len(args) == 2 and isinstance(args[0], numeric) and isinstance(args[1], sp.Mul):
        factors = sorted(args[1].args, key=lambda x: not isinstance(x, numeric))
        if (len(factors) == 2 and isinstance(factors[0], sp.Number) and args[0].is_positive
                and factors[0].is_negative):
            return args
    gens, terms = set(), []
    for term in expr.args:
        if term.is_Order:
            return None
        coeff, rest = term.as_coeff_Mul()
        if not (coeff.is_Rational or coeff.is_Float):
            return None
        powers = {}
        if rest is not sp.S.One:
            for factor in sp.Mul.make_args(rest):
                if factor.is_number or not factor.is_commutative:
                    return None
                base, exp = decompose_power(factor)
                powers[base] = exp
                gens.add(base)
        terms.append((term, float(coeff), powers))
    index = {g: i for i, g in enumerate(sorted(gens, key=sp.default_sort_key))}
    order = monomial_key(None)
    keyed = []
    for term, coeff, powers in terms:
        monom = [0] * len(index)
        for base, exp in powers.items():
            monom[index[base]] = exp
        # sympy's key: (negated monomial key, non-commutative parts (none), ((imag != 0, imag), (real, imag)))
        keyed.append(((tuple(-m for m in order(tuple(monom))), (), ((False, 0.0), (coeff, 0.0))), term))
    return [term for _, term in sorted(keyed, key=lambda pair: pair[0])]


@dataclass(frozen=True)
class Program:
    """A function body instead of one expression: `assign` [(local name, expression)] printed in order, then
    `body`, lines of Python over those names ending in a return (e.g. a classification by comparisons, which
    an expression cannot say). Locals start with an underscore so they never shadow a symbol or a bound name."""

    assign: tuple[tuple[str, Any], ...]
    body: tuple[str, ...]


def _call_free(node, function: type) -> bool:
    """Whether `node` (not an atom) holds no function call, itself included (kept process-wide in _CALL_FREE):
    the walks below skip such subtrees, where they would find nothing."""
    hit = _CALL_FREE.get(node)
    if hit is None:
        if len(_CALL_FREE) > MEMO_NODES:
            _CALL_FREE.clear()
        hit = _CALL_FREE[node] = not isinstance(node, function) and all(
            [_call_free(arg, function) for arg in node.args if arg.args])
    return hit


def _repeated_calls(trees: list) -> list:
    """Function calls (min, max, mod, ceil-div, floor) that occur more than once in one of `trees`' groups
    (counted over the printed trees: a group is one generated function), inner calls first."""
    import sympy as sp

    function = sp.Function
    order: dict = {}
    for group in trees:
        counts: dict = {}

        def walk(node, counts=counts) -> None:
            call = isinstance(node, function)
            if call:
                counts[node] = counts.get(node, 0) + 1
                if counts[node] > 1:
                    order[node] = True
                    return
            for arg in node.args:
                if arg.args and not _call_free(arg, function):
                    walk(arg)
            if call:
                order.setdefault(node, False)  # post-order: inner calls before the calls that hold them

        for expr in group:
            if expr.args:
                walk(expr)
    return [node for node, repeated in order.items() if repeated]


def _above(trees: list, targets: set, calls: bool = False) -> set:
    """The nodes of `trees` that hold one of `targets` as a proper subtree. `calls`: every target is a function
    call (then subtrees without one are not walked)."""
    import sympy as sp

    function = sp.Function
    memo: dict = {}
    out: set = set()

    def within(node) -> bool:  # node (not an atom) is or holds a target
        hit = memo.get(node)
        if hit is None:
            hit = False
            for arg in node.args:  # every child is walked
                if arg.args:
                    if not (calls and _call_free(arg, function)) and within(arg):
                        hit = True
                elif arg in targets:
                    hit = True
            if hit:
                out.add(node)
            else:
                hit = node in targets
            memo[node] = hit
        return hit

    for tree in trees:
        if tree.args:
            within(tree)
    return out


def _flatten(exprs: Any):
    if isinstance(exprs, list | tuple):
        for e in exprs:
            yield from _flatten(e)
    else:
        yield exprs


def sources(symbols: list, exprs: dict[str, Any], flavour: str) -> dict[str, str]:
    """Python source of `def name(*symbols)` for each of `exprs` (a sympy expression, nested lists of them, or a
    Program). A call repeated within a function is computed once into a local `_hN` (named across the whole set,
    so the shared printer's memo stays valid in every function; each function defines the ones it uses). The
    text is otherwise the printer's, argument order included, so the floats are the same: a cheap common-
    subexpression pass (one tree walk; sympy's cse costs more than the whole build)."""
    printer = _printer_class(flavour)()
    args = ", ".join(str(s) for s in symbols)
    plain = {name: _plain(list(e.assign[k][1] for k in range(len(e.assign))) if isinstance(e, Program) else e)
             for name, e in exprs.items()}
    flat = [list(_flatten(tree)) for tree in plain.values()]
    hoisted = _repeated_calls(flat)
    # subtrees printed with a local's name inside (above a hoisted call; in a Program, above one of its
    # assignments too) are printed per compile, never taken from or put into _TEXTS
    above_hoisted = printer._local = (_above([e for group in flat for e in group], set(hoisted), calls=True)
                                      if hoisted else set())
    definitions: dict[str, str] = {}
    names: dict = {}
    for k, node in enumerate(hoisted):
        definitions[f"_h{k}"] = printer._print(node)  # its inner hoisted calls print as their names
        printer._memo[node] = names[node] = f"_h{k}"
    out = {}
    shared = printer._memo
    # a Program prints from a copy of the memo without the trees that hold one of its locals, and each local
    # goes into it once printed: a later subexpression equal to an earlier local prints as its name (the shared
    # memo's text of a larger tree would hide it), and those names never reach another function
    for name, expr in exprs.items():
        if isinstance(expr, Program):
            above_locals = _above(plain[name], set(plain[name]))
            held = above_locals.union(plain[name])  # a local, or holding one
            printer._memo = {node: text for node, text in shared.items() if node not in held}
            printer._local = above_hoisted | above_locals
            body = []
            for (local, _), e in zip(expr.assign, plain[name], strict=True):
                body.append(f"{local} = {printer._print(e)}")
                printer._memo[e] = local
            body += list(expr.body)
            printer._memo, printer._local = shared, above_hoisted
        else:
            body = [f"return {printer._print(plain[name])}"]
        used: set[str] = set()
        pending = re.findall(r"\b_h\d+\b", "\n".join(body))
        while pending:
            local = pending.pop()
            if local not in used:
                used.add(local)
                pending += re.findall(r"\b_h\d+\b", definitions[local])
        lines = [f"{local} = {definitions[local]}" for local in definitions if local in used] + body
        out[name] = f"def {name}({args}):\n" + "".join(f"    {line}\n" for line in lines)
    return out
