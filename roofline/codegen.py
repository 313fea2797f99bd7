"""Numeric functions compiled from sympy expressions once, and kept by content: in memory (bounded LRU) and on
disk (generated Python source in the user's cache directory, bounded), so a new process skips both the
symbolic build and the printing for any (model, method, device, parallelism) it has met before.

Why generated source on disk: building the op graph (sympy) and printing it (lambdify) cost seconds per
method, evaluating the printed code costs microseconds. The key is a hash of the inputs' content (pydantic JSON)
and of roofline's own source files (all but roofline/report and roofline/cli, which present numbers and never
feed an expression), so an edit to the model invalidates every entry; nothing is keyed by `id()`. Numbers that
change more often than the expressions' shape (a device's ceilings) stay free symbols of the generated code and
are bound by name when an entry is loaded (`compiled(..., bind=...)`): one entry serves every device of a
structure.

Two flavours of the same expressions: `scalar` prints with Python's `math` (builtin max/min, `%`, `//` on
floats: ~10x faster per call than numpy on scalars) and `vector` with numpy (arrays of batch/context).
The cache folder is $ROOFLINE_CACHE_DIR, else $XDG_CACHE_HOME/roofline, else ~/.cache/roofline; set
ROOFLINE_CACHE_DIR=off to keep everything in memory. An unwritable folder is skipped silently.
"""

from __future__ import annotations

import builtins
import hashlib
import importlib
import importlib.util
import json
import math
import os
import tempfile
from collections import OrderedDict
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

MEMORY_ENTRIES = 512  # compiled function sets kept per process
DISK_ENTRIES = 4096  # files kept on disk; the oldest tenth goes when exceeded
_FORMAT = 1


class LRU(OrderedDict):
    """A dict bounded to `size` entries, least recently used dropped first."""

    def __init__(self, size: int) -> None:
        super().__init__()
        self.size = size

    def get_or(self, key: str, make: Callable[[], Any]) -> Any:
        if key in self:
            self.move_to_end(key)
            return self[key]
        value = make()
        self[key] = value
        while len(self) > self.size:
            self.popitem(last=False)
        return value


_MEMORY = LRU(MEMORY_ENTRIES)


# Floors of roofline that never feed a compiled expression (presentation and the command line): an edit there
# keeps the cache.
_NOT_HASHED = ("report", "cli")


@cache
def code_version() -> str:
    """Hash of roofline's Python sources (all but report/ and cli/, which only present numbers) and the sympy
    version: a change to either invalidates the cache."""
    # sympy's version file, found without importing sympy (and without importlib.metadata: ~30 ms of imports)
    spec = importlib.util.find_spec("sympy")
    release = Path(spec.origin).parent / "release.py" if spec and spec.origin else None
    digest = hashlib.sha256(release.read_bytes() if release and release.is_file() else b"sympy")
    root = Path(__file__).resolve().parent
    for path in sorted(root.rglob("*.py")):
        if path.relative_to(root).parts[0] in _NOT_HASHED:
            continue
        digest.update(str(path.relative_to(root)).encode())
        digest.update(path.read_bytes())
    return digest.hexdigest()[:16]


def content_key(kind: str, *parts: Any) -> str:
    """A stable key for `parts` (JSON-able, or pydantic models: their JSON), prefixed by `kind`."""
    def plain(part: Any) -> Any:
        if hasattr(part, "model_dump_json"):
            return [type(part).__name__, part.model_dump_json()]
        return part

    text = json.dumps([_FORMAT, code_version(), [plain(p) for p in parts]], sort_keys=True, default=str)
    return f"{kind}-{hashlib.sha256(text.encode()).hexdigest()[:32]}"


def cache_dir() -> Path | None:
    """The on-disk cache folder, or None when disabled."""
    env = os.environ.get("ROOFLINE_CACHE_DIR")
    if env is not None:
        return None if env.strip().lower() in ("", "off", "0", "none") else Path(env)
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "roofline"


def _disk_read(key: str) -> dict | None:
    folder = cache_dir()
    if folder is None:
        return None
    path = folder / f"{key}.json"
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) and data.get("format") == _FORMAT else None


def _disk_write(key: str, data: dict) -> None:
    folder = cache_dir()
    if folder is None:
        return
    try:
        folder.mkdir(parents=True, exist_ok=True)
        with tempfile.NamedTemporaryFile("w", dir=folder, suffix=".tmp", delete=False) as tmp:
            json.dump({"format": _FORMAT, **data}, tmp)
        os.replace(tmp.name, folder / f"{key}.json")
        entries = list(folder.glob("*.json"))
        if len(entries) > DISK_ENTRIES:
            entries.sort(key=lambda p: p.stat().st_mtime)
            for old in entries[: len(entries) - DISK_ENTRIES * 9 // 10]:
                old.unlink(missing_ok=True)
    except OSError:
        return


def cached_json(key: str, compute: Callable[[], Any]) -> Any:
    """`compute()` (JSON-able) once per key: memory, then disk, then computed and stored."""
    def load() -> Any:
        hit = _disk_read(key)
        if hit is not None and "value" in hit:
            return hit["value"]
        value = compute()
        _disk_write(key, {"value": value})
        return value

    return _MEMORY.get_or(key, load)


@cache
def _unevaluated():
    """Max and Min that never evaluate (sympy's compare their arguments on every rebuild, which makes common-
    subexpression elimination slow), printed as Python's max/min or numpy's maximum/minimum; and Mod printed
    with its parentheses."""
    import sympy as sp

    def make(name: str, builtin: str, ufunc: str):
        def pycode(self, printer) -> str:
            return f"{builtin}({', '.join(printer.doprint(a) for a in self.args)})"

        def npcode(self, printer) -> str:
            text = printer.doprint(self.args[0])
            for arg in self.args[1:]:
                text = f"numpy.{ufunc}({text}, {printer.doprint(arg)})"
            return text

        return type(name, (sp.Function,), {"_pythoncode": pycode, "_lambdacode": pycode, "_numpycode": npcode})

    def mod_py(self, printer) -> str:
        # parenthesized: sympy's Python printer writes 3*Mod(x, 5) as `3*x % 5`, which Python reads as (3*x) % 5
        a, b = (printer.doprint(arg) for arg in self.args)
        return f"(({a}) % ({b}))"

    def mod_np(self, printer) -> str:
        a, b = (printer.doprint(arg) for arg in self.args)
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

    seen: dict = {}

    def walk(node):
        if not node.args:
            return node
        hit = seen.get(node)
        if hit is not None:
            return hit
        args = [walk(a) for a in node.args]
        if node.func in swaps:
            out = swaps[node.func](*args)
        else:
            out = node.func(*args) if any(a is not b for a, b in zip(args, node.args, strict=True)) else node
        seen[node] = out
        return out

    return walk(expr)


@cache
def _printer_class(flavour: str):
    """sympy's code printer for `flavour` (what lambdify uses for math / numpy), remembering the text of every
    subexpression it printed: a phase's rows and its total share most of their subtrees, printed once."""
    from sympy.printing.numpy import NumPyPrinter
    from sympy.printing.pycode import PythonCodePrinter

    base = PythonCodePrinter if flavour == "scalar" else NumPyPrinter

    class MemoPrinter(base):
        def __init__(self) -> None:
            super().__init__({"fully_qualified_modules": False, "inline": True, "allow_unknown_functions": True,
                              "user_functions": {}})
            self._memo: dict = {}

        def _print(self, expr, **kwargs):
            if kwargs:
                return super()._print(expr, **kwargs)
            try:
                return self._memo[expr]
            except KeyError:
                text = self._memo[expr] = super()._print(expr)
                return text
            except TypeError:  # lists and other unhashable containers
                return super()._print(expr)

    return MemoPrinter


@dataclass(frozen=True)
class Program:
    """A function body instead of one expression: `assign` [(local name, expression)] printed in order, then
    `body`, lines of Python over those names ending in a return (e.g. a classification by comparisons, which
    an expression cannot say). Locals start with an underscore so they never shadow a symbol or a bound name."""

    assign: tuple[tuple[str, Any], ...]
    body: tuple[str, ...]


def _repeated_calls(trees: list) -> list:
    """Function calls (min, max, mod, ceil-div, floor) that occur more than once in one of `trees`' groups
    (counted over the printed trees: a group is one generated function), inner calls first."""
    import sympy as sp

    order: dict = {}
    for group in trees:
        counts: dict = {}

        def walk(node, counts=counts) -> None:
            if not node.args:
                return
            call = isinstance(node, sp.Function)
            if call:
                counts[node] = counts.get(node, 0) + 1
                if counts[node] > 1:
                    order[node] = True
                    return
            for arg in node.args:
                walk(arg)
            if call:
                order.setdefault(node, False)  # post-order: inner calls before the calls that hold them

        for expr in group:
            walk(expr)
    return [node for node, repeated in order.items() if repeated]


def _holding(trees: list) -> set:
    """The nodes of `trees` that are one of the trees or hold one as a subtree."""
    targets = set(trees)
    memo: dict = {}

    def holds(node) -> bool:
        hit = memo.get(node)
        if hit is None:
            hit = memo[node] = node in targets or any([holds(arg) for arg in node.args])
        return hit

    for tree in trees:
        holds(tree)
    return {node for node, hit in memo.items() if hit}


def _flatten(exprs: Any):
    if isinstance(exprs, list | tuple):
        for e in exprs:
            yield from _flatten(e)
    else:
        yield exprs


def _sources(symbols: list, exprs: dict[str, Any], flavour: str) -> dict[str, str]:
    """Python source of `def name(*symbols)` for each of `exprs` (a sympy expression, nested lists of them, or a
    Program). A call repeated within a function is computed once into a local `_hN` (named across the whole set,
    so the shared printer's memo stays valid in every function; each function defines the ones it uses). The
    text is otherwise the printer's, argument order included, so the floats are the same: a cheap common-
    subexpression pass (one tree walk; sympy's cse costs more than the whole build)."""
    import re

    printer = _printer_class(flavour)()
    args = ", ".join(str(s) for s in symbols)
    plain = {name: _plain(list(e.assign[k][1] for k in range(len(e.assign))) if isinstance(e, Program) else e)
             for name, e in exprs.items()}
    hoisted = _repeated_calls([list(_flatten(tree)) for tree in plain.values()])
    definitions: dict[str, str] = {}
    names: dict = {}
    for k, node in enumerate(hoisted):
        definitions[f"_h{k}"] = printer.doprint(node)  # its inner hoisted calls print as their names
        printer._memo[node] = names[node] = f"_h{k}"
    out = {}
    shared = printer._memo
    # a Program prints from a copy of the memo without the trees that hold one of its locals, and each local
    # goes into it once printed: a later subexpression equal to an earlier local prints as its name (the shared
    # memo's text of a larger tree would hide it), and those names never reach another function
    for name, expr in exprs.items():
        if isinstance(expr, Program):
            held = _holding(plain[name])
            printer._memo = {node: text for node, text in shared.items() if node not in held}
            body = []
            for (local, _), e in zip(expr.assign, plain[name], strict=True):
                body.append(f"{local} = {printer.doprint(e)}")
                printer._memo[e] = local
            body += list(expr.body)
            printer._memo = shared
        else:
            body = [f"return {printer.doprint(plain[name])}"]
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


def _code(sources: dict[str, str]) -> dict[str, Any]:
    """The generated sources compiled to code objects (once per entry; binding them is cheap)."""
    return {name: compile(text, "<roofline-codegen>", "exec") for name, text in sources.items()}


def _exec(codes: dict[str, Any], flavour: str, numpy_used: bool, bind: dict[str, float] | None = None
          ) -> dict[str, Callable]:
    """The functions of `codes`, their free names resolved in a fresh namespace: the math (scalar) or numpy
    (vector) module's names bare (mod, floor, ...) and the module itself, as lambdify's namespaces, and `bind`'s
    names (a graph's ceilings) as globals: looked up per call like constants, no arguments to pass."""
    numpy = importlib.import_module("numpy") if flavour == "vector" or numpy_used else None
    module = math if flavour == "scalar" else numpy
    namespace = {**vars(module), "math": math, "numpy": numpy, "builtins": builtins, **(bind or {})}
    for code in codes.values():
        exec(code, namespace)  # noqa: S102  (our own generated code)
    return {name: namespace[name] for name in codes}


def compiled(key: str | None, build: Callable[[], tuple[Iterable, dict[str, Any], dict[str, Any]]],
             flavour: str = "scalar", bind: dict[str, float] | None = None
             ) -> tuple[dict[str, Callable], dict[str, Any]]:
    """(functions by name, metadata) for `key`; `build()` -> (symbols, {name: expression}, metadata) runs only on a
    miss (memory and disk). `flavour` 'scalar' (math) or 'vector' (numpy arrays). `key` None: built and
    compiled every call, nothing kept (expressions without a content key). `bind`: numbers for the expressions'
    other free symbols (by name; not arguments of the functions): the entry is one per key whatever the numbers,
    and binding it costs microseconds (a device's ceilings, roofline.costmodel.ceilings)."""
    if flavour not in ("scalar", "vector"):
        raise ValueError(f"flavour: {flavour!r} is not 'scalar' or 'vector'")

    def make() -> tuple[dict[str, str], dict[str, Any]]:
        symbols, exprs, meta = build()
        return _sources(list(symbols), exprs, flavour), meta

    def entry(sources: dict[str, str], meta: dict[str, Any]) -> tuple:
        codes, numpy_used = _code(sources), any("numpy" in t for t in sources.values())
        return codes, numpy_used, meta, (None if bind else _exec(codes, flavour, numpy_used))

    if key is None:
        codes, numpy_used, meta, _ = entry(*make())
        return _exec(codes, flavour, numpy_used, bind), meta
    full_key = f"{key}-{flavour}"

    def load() -> tuple:
        hit = _disk_read(full_key)
        if hit is not None and "sources" in hit:
            return entry(hit["sources"], hit.get("meta", {}))
        sources, meta = make()
        _disk_write(full_key, {"sources": sources, "meta": meta})
        return entry(sources, meta)

    codes, numpy_used, meta, unbound = _MEMORY.get_or(full_key, load)
    if bind:
        return _exec(codes, flavour, numpy_used, bind), meta
    if unbound is None:  # first met with a binding: bind nothing once and keep it
        unbound = _exec(codes, flavour, numpy_used)
        _MEMORY[full_key] = (codes, numpy_used, meta, unbound)
    return unbound, meta
