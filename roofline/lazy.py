"""sympy and numpy, imported on first use.

`import sympy` costs ~0.6 s, more than everything else a warm `roofline plan` does: the compiled numeric
functions come from the content-keyed cache (roofline.numbers.codegen) and need no sympy. Modules take `sp` from here
(`from roofline.lazy import sp`) instead of `import sympy as sp`; its first attribute access imports sympy and
every later one is a plain attribute of this object. (importlib's LazyLoader does not help: `import sympy` reads
the module's `__spec__`, which loads it.) Nothing at module level may touch `sp`. numpy (~0.15 s) likewise as
`np`: only the vectorized paths (grids, vector-flavour compiled functions) need it.
Set ROOFLINE_TRACE_SYMPY=N to print N frames of the stack that first imports sympy (to keep it off a hot path).

Once sympy is loaded here, Min and Max are built through sympy's own cache (`_cache_min_max`), as sympy already
builds Add, Mul, Pow and applied functions.

The garbage collector: sympy's import and every symbolic build (roofline.numbers.codegen.compiled) run with it paused
(`gc_paused`), and the objects alive once sympy is imported (modules, classes, sympy's tables) are frozen
(gc.freeze: never scanned again), so a full collection scans what the plans made, not the ~70,000 objects of
the imports: ~5 ms instead of ~45 ms on the 2-core machine.
"""

from __future__ import annotations

import functools
import gc
import importlib
import os
import sys
import traceback
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any


class _Module:
    """Stands for a module; its attributes resolve (and stay) on first access."""

    def __init__(self, name: str) -> None:
        self._name = name

    def __getattr__(self, attr: str) -> Any:
        if attr.startswith("__"):
            raise AttributeError(attr)
        if self._name == "sympy" and "sympy" not in sys.modules and os.environ.get("ROOFLINE_TRACE_SYMPY"):
            traceback.print_stack(limit=int(os.environ["ROOFLINE_TRACE_SYMPY"]), file=sys.stderr)
        if self._name in sys.modules:  # import_module, not sys.modules: it waits for another thread's import
            module = importlib.import_module(self._name)
        else:
            with gc_paused():
                module = importlib.import_module(self._name)
            gc.freeze()  # the import's objects (and everything older) live as long as the process
        if self._name == "sympy":
            _cache_min_max(module)
        value = getattr(module, attr)
        setattr(self, attr, value)
        return value


@contextmanager
def gc_paused() -> Iterator[None]:
    """The cyclic garbage collector off while the block runs (then on again, unless it was off already).

    A symbolic build allocates hundreds of thousands of small objects (sympy nodes, their cache entries, printer
    memos), most of them kept: the collector's allocation counter sets off young collections over and over, and
    every tenth of those a full collection over every live object (sympy's caches, the memos: ~45 ms each on the
    2-core machine, one or two per cold plan of the dashboard's methods). Paused, the block's survivors are
    counted once, by the first collection after it. sympy's expressions hold no reference cycles, so nothing the
    block frees waits for the collector. Another thread's pause ending first turns it back on early: harmless."""
    if not gc.isenabled():
        yield
        return
    gc.disable()
    try:
        yield
    finally:
        gc.enable()


MIN_MAX_CACHE = 20_000  # Min/Max nodes kept (a cold plan of every preset makes ~300 distinct ones)


def _cache_min_max(sympy: Any) -> None:
    """Build Min and Max through a memo of their arguments (an LRU registered with sympy's cache, so
    sympy.core.cache.clear_cache and sympy's `evaluate` switch empty it too), once per process.

    sympy caches the constructors of Add, Mul, Pow and applied functions (`cacheit`) but not MinMaxBase's, whose
    argument reduction (`_find_localzeros`: a pairwise `>=`/`<=` over assumptions, then `factor_terms` of each
    difference) was a third of a cold plan's symbolic build, mostly for arguments met before: the same windows and
    sinks (`Min(L, 128)`, `Max(L - 4, 0)`) in every method and model, and every `subs`/`xreplace` of an expression
    rebuilding each of its Min/Max nodes. The memo returns the node that the same arguments built before (a pure
    function of them: sympy's expressions are immutable), so nothing built changes."""
    from sympy.core.cache import CACHE
    from sympy.functions.elementary.miscellaneous import MinMaxBase

    if getattr(MinMaxBase, "_roofline_cached", False):
        return
    build = MinMaxBase.__new__
    memo = functools.lru_cache(MIN_MAX_CACHE, typed=True)(build)

    @functools.wraps(build)
    def new(cls, *args, **assumptions):
        try:
            return memo(cls, *args, **assumptions)
        except TypeError as err:  # an unhashable argument (as sympy's cacheit): built without the memo
            if not err.args or not str(err.args[0]).startswith("unhashable type:"):
                raise
            return build(cls, *args, **assumptions)

    new.cache_info, new.cache_clear = memo.cache_info, memo.cache_clear
    CACHE.append(new)
    MinMaxBase.__new__ = staticmethod(new)
    MinMaxBase._roofline_cached = True


sp: Any = _Module("sympy")
np: Any = _Module("numpy")
