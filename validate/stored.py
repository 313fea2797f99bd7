"""The lab's results files, read by the names they were written under, however they are committed.

A results file too large to carry uncompressed is committed gzip-compressed beside its name, NAME.gz (`gzip -9 -n`, so
its bytes are the same on every machine): each call to the GPU machine copies the tracked tree, 64 MiB at most with
its payload. A reader asks for NAME; the file itself is read where it is stored, else NAME.gz, decompressed.
"""

from __future__ import annotations

import gzip
from pathlib import Path

SUFFIX = ".gz"


def stored(path: str | Path) -> Path:
    """Where `path`'s bytes are: the file itself, else NAME.gz beside it, else `path` (a reader then fails on the
    name it asked for)."""
    path = Path(path)
    packed = path.with_name(path.name + SUFFIX)
    return packed if not path.is_file() and packed.is_file() else path


def exists(path: str | Path) -> bool:
    """Whether `path` is committed, as itself or as NAME.gz (Path.is_file of either)."""
    return stored(path).is_file()


def read_text(path: str | Path, errors: str | None = None, newline: str | None = None) -> str:
    """`path`'s text as open(path).read() reads it (the same encoding, `errors` and `newline` rules), from the file
    itself or, decompressed, from its NAME.gz (or from NAME.gz asked for by that name)."""
    where = stored(path)
    with (gzip.open if where.name.endswith(SUFFIX) else open)(where, "rt", errors=errors, newline=newline) as f:
        return f.read()
