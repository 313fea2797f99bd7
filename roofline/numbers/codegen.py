"""Numeric functions compiled from sympy expressions once, and kept by content: in memory (bounded LRU) and on
disk (generated Python source in the user's cache directory, bounded, with its code objects marshalled as a .pyc
holds them, for this Python's bytecode only), so a new process skips the symbolic build, the printing and the
compile for any (model, method, device, parallelism) it has met before. The printing is roofline.numbers.codeprint.

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

import base64
import builtins
import hashlib
import importlib
import importlib.util
import json
import marshal
import math
import os
import tempfile
from collections import OrderedDict
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from functools import cache
from pathlib import Path
from typing import Any

from roofline.lazy import gc_paused
from roofline.numbers.codeprint import Program, sources

__all__ = ["LRU", "Program", "cache_dir", "cached_json", "code_version", "compiled", "content_key", "gc_paused"]

MEMORY_ENTRIES = 512  # compiled function sets kept per process
DISK_ENTRIES = 16384  # files kept on disk (~30 KB each); the least recently read tenth goes when exceeded
_COUNT_EVERY = 64  # writes between two counts of the folder (listing it costs tens of ms on a busy machine)
_FORMAT = 1
_MAGIC = importlib.util.MAGIC_NUMBER.hex()  # this Python's bytecode version (stored code objects)


class LRU(OrderedDict):
    """A dict bounded to `size` entries, least recently used dropped first."""

    def __init__(self, size: int) -> None:
        super().__init__()
        self.size = size

    def get_or(self, key: str, make: Callable[[], Any]) -> Any:
        """The value for `key`, made by `make()` and kept when absent (then the oldest beyond `size` go)."""
        try:
            self.move_to_end(key)
            return self[key]
        except KeyError:
            pass
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
    root = Path(__file__).resolve().parent.parent  # the roofline package (this file is numbers/codegen.py)
    for path in sorted(root.rglob("*.py")):
        if path.relative_to(root).parts[0] in _NOT_HASHED:
            continue
        digest.update(str(path.relative_to(root)).encode())
        digest.update(path.read_bytes())
    return digest.hexdigest()[:16]


_KEY_CONTEXT: ContextVar[tuple] = ContextVar("key_context", default=())


@contextmanager
def keyed(*parts: str) -> Iterator[None]:
    """Within the block, every content_key also carries `parts`: a setting outside the keyed inputs that changes
    the expressions they build (roofline.catalogue.kernel_profiles.use)."""
    token = _KEY_CONTEXT.set(_KEY_CONTEXT.get() + parts)
    try:
        yield
    finally:
        _KEY_CONTEXT.reset(token)


def content_key(kind: str, *parts: Any) -> str:
    """A stable key for `parts` (JSON-able, or pydantic models: their JSON) and the key context (`keyed`: e.g. a
    kernel profile other than the default), prefixed by `kind`."""
    def plain(part: Any) -> Any:
        if hasattr(part, "model_dump_json"):
            return [type(part).__name__, part.model_dump_json()]
        return part

    text = json.dumps([_FORMAT, code_version(), *_KEY_CONTEXT.get(), [plain(p) for p in parts]],
                      sort_keys=True, default=str)
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
    if not (isinstance(data, dict) and data.get("format") == _FORMAT):
        return None
    try:
        os.utime(path)  # read now: eviction goes by modification time, so least recently read goes first
    except OSError:
        pass
    return data


_WRITES = [0]  # disk writes by this process (the folder is counted every _COUNT_EVERY of them)


def _disk_write(key: str, data: dict) -> None:
    folder = cache_dir()
    if folder is None:
        return
    try:
        folder.mkdir(parents=True, exist_ok=True)
        with tempfile.NamedTemporaryFile("w", dir=folder, suffix=".tmp", delete=False) as tmp:
            # dumps, then one write: json.dump encodes through its pure-Python iterator (chunk by chunk), 3x slower
            tmp.write(json.dumps({"format": _FORMAT, **data}))
        os.replace(tmp.name, folder / f"{key}.json")
        _WRITES[0] += 1
        if _WRITES[0] % _COUNT_EVERY:
            return
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


def _code(sources: dict[str, str], stored: dict | None = None) -> dict[str, Any]:
    """The generated sources compiled to code objects (once per entry; binding them is cheap). `stored`: the
    entry's code objects as written to disk (_stored_code), used when they were written by this Python's
    bytecode (its magic number, as a .pyc): compiling the text is most of a warm load."""
    if stored and stored.get("magic") == _MAGIC and set(stored.get("code", {})) == set(sources):
        try:
            return {name: marshal.loads(base64.b64decode(blob)) for name, blob in stored["code"].items()}
        except (ValueError, TypeError, EOFError):
            pass
    return {name: compile(text, "<roofline-codegen>", "exec") for name, text in sources.items()}


def _stored_code(codes: dict[str, Any]) -> dict:
    """Code objects for the disk entry: marshal (the .pyc format) of each, with this Python's magic number."""
    return {"magic": _MAGIC, "code": {name: base64.b64encode(marshal.dumps(c)).decode() for name, c in codes.items()}}


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
    and binding it costs microseconds (a device's ceilings, roofline.costmodel.device_ceilings)."""
    if flavour not in ("scalar", "vector"):
        raise ValueError(f"flavour: {flavour!r} is not 'scalar' or 'vector'")

    def make() -> tuple[dict[str, str], dict[str, Any]]:
        with gc_paused():
            symbols, exprs, meta = build()
            return sources(list(symbols), exprs, flavour), meta

    def entry(sources: dict[str, str], meta: dict[str, Any], stored: dict | None = None) -> tuple:
        codes, numpy_used = _code(sources, stored), any("numpy" in t for t in sources.values())
        return codes, numpy_used, meta, (None if bind else _exec(codes, flavour, numpy_used))

    if key is None:
        codes, numpy_used, meta, _ = entry(*make())
        return _exec(codes, flavour, numpy_used, bind), meta
    full_key = f"{key}-{flavour}"

    def load() -> tuple:
        hit = _disk_read(full_key)
        if hit is not None and "sources" in hit:
            return entry(hit["sources"], hit.get("meta", {}), hit.get("compiled"))
        sources, meta = make()
        made = entry(sources, meta)
        _disk_write(full_key, {"sources": sources, "meta": meta, "compiled": _stored_code(made[0])})
        return made

    codes, numpy_used, meta, unbound = _MEMORY.get_or(full_key, load)
    if bind:
        return _exec(codes, flavour, numpy_used, bind), meta
    if unbound is None:  # first met with a binding: bind nothing once and keep it
        unbound = _exec(codes, flavour, numpy_used)
        _MEMORY[full_key] = (codes, numpy_used, meta, unbound)
    return unbound, meta
