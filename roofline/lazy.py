"""sympy and numpy, imported on first use.

`import sympy` costs ~0.6 s, more than everything else a warm `roofline plan` does: the compiled numeric
functions come from the content-keyed cache (roofline.codegen) and need no sympy. Modules take `sp` from here
(`from roofline.lazy import sp`) instead of `import sympy as sp`; its first attribute access imports sympy and
every later one is a plain attribute of this object. (importlib's LazyLoader does not help: `import sympy` reads
the module's `__spec__`, which loads it.) Nothing at module level may touch `sp`. numpy (~0.15 s) likewise as
`np`: only the vectorized paths (grids, vector-flavour compiled functions) need it.
Set ROOFLINE_TRACE_SYMPY=N to print N frames of the stack that first imports sympy (to keep it off a hot path).
"""

from __future__ import annotations

import importlib
import os
import sys
import traceback
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
        value = getattr(importlib.import_module(self._name), attr)
        setattr(self, attr, value)
        return value


sp: Any = _Module("sympy")
np: Any = _Module("numpy")
