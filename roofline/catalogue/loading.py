"""Read spec files (YAML or JSON) as data only, and turn every failure into one SpecError line."""

from __future__ import annotations

import json
import math
import os
import stat
from pathlib import Path
from typing import Any, TypeVar

import yaml
from pydantic import BaseModel, ValidationError

from roofline.catalogue.strict_yaml import StrictLoader
from roofline.errors import SpecError, describe_validation_error

T = TypeVar("T", bound=BaseModel)

# Spec files are small; anything larger is not a spec (and an app upload must not exhaust memory).
MAX_SPEC_BYTES = 1 << 20
# A spec nests a few levels (hardware.measured.bandwidth_curve[i]); aliases can make a small file a huge tree.
MAX_DEPTH = 32
MAX_NODES = 100_000


def parse_text(text: str, where: str) -> dict[str, Any]:
    """Parse YAML (a superset of JSON) with the strict loader (YAML 1.2 scalars, duplicate keys refused,
    data types only); the top level must be a mapping of plain data with finite numbers."""
    try:
        data = yaml.load(text, Loader=StrictLoader)  # noqa: S506 (StrictLoader is a SafeLoader)
    except yaml.YAMLError as err:
        mark = getattr(err, "problem_mark", None)
        at = f" at line {mark.line + 1}, column {mark.column + 1}" if mark is not None else ""
        problem = getattr(err, "problem", None) or "malformed YAML/JSON"
        raise SpecError(f"{where}: (root): not valid YAML/JSON{at}: {problem}") from None
    except (ValueError, RecursionError) as err:
        raise SpecError(f"{where}: (root): not valid YAML/JSON: {err}") from None
    if not isinstance(data, dict):
        raise SpecError(f"{where}: (root): expected a mapping of field names to values, got {_kind(data)}")
    check_plain_data(data, where)
    return data


def check_plain_data(data: Any, where: str, max_nodes: int = MAX_NODES) -> None:
    """Refuse what a spec never holds: non-finite numbers, non-string keys, other types, deep or huge trees
    (YAML aliases share nodes, so a small file can expand exponentially; the walk is bounded)."""
    stack: list[tuple[Any, str, int]] = [(data, "", 0)]
    nodes = 0
    while stack:
        value, loc, depth = stack.pop()
        nodes += 1
        name = loc or "(root)"
        if nodes > max_nodes:
            raise SpecError(f"{where}: (root): more than {max_nodes:,} values (aliases expanding?); not a spec")
        if depth > MAX_DEPTH:
            raise SpecError(f"{where}: {name}: nested deeper than {MAX_DEPTH} levels; not a spec")
        if isinstance(value, dict):
            for key, item in value.items():
                # YAML keys are strings, or integers where a spec maps a size to a figure (head dim -> FLOP/s)
                if not isinstance(key, str | int) or isinstance(key, bool):
                    raise SpecError(f"{where}: {name}: key {key!r} is not a string or an integer")
                label = str(key) if isinstance(key, int) or key.isprintable() else repr(key)  # one-line errors
                stack.append((item, f"{loc}.{label}" if loc else label, depth + 1))
        elif isinstance(value, list | tuple):
            stack.extend((item, f"{name}[{i}]", depth + 1) for i, item in enumerate(value))
        elif isinstance(value, float) and not math.isfinite(value):
            raise SpecError(f"{where}: {name}: {value} is not a finite number")
        elif not isinstance(value, str | int | float | bool | None):
            raise SpecError(f"{where}: {name}: {type(value).__name__} values are not allowed in a spec")


def read_text(path: Path, max_bytes: int = MAX_SPEC_BYTES) -> str:
    """Read a spec file: a regular file (never a FIFO, device or folder), at most `max_bytes` read
    before parsing, UTF-8; every refusal is one line."""
    try:
        if not stat.S_ISREG(os.stat(path).st_mode):
            raise SpecError(f"{_short(path)}: (file): not a regular file (a folder, FIFO or device is not a spec)")
        # O_NONBLOCK: should the path become a FIFO between the two checks, open() still returns at once
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_NOCTTY", 0))
        with os.fdopen(fd, "rb") as fh:
            if not stat.S_ISREG(os.fstat(fh.fileno()).st_mode):
                raise SpecError(f"{_short(path)}: (file): not a regular file (a folder, FIFO or device is not a spec)")
            data = fh.read(max_bytes + 1)
    except SpecError:
        raise
    except (OSError, ValueError) as err:
        reason = getattr(err, "strerror", None) or str(err)
        raise SpecError(f"{_short(path)}: (file): cannot read: {reason}") from None
    if len(data) > max_bytes:
        raise SpecError(f"{_short(path)}: (file): more than the {max_bytes:,}-byte limit for this file")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        raise SpecError(f"{_short(path)}: (file): not UTF-8 text") from None


def _short(path: Path) -> str:
    text = str(path)
    return text if len(text) <= 200 else text[:100] + "..." + text[-40:]


def validate(cls: type[T], data: Any, where: str) -> T:
    """Validate a mapping against a spec class strictly (pydantic's JSON mode: `true` is not 1, "5" and 5.0
    are not integers; ISO date strings and lists for tuples are accepted); errors become one line naming
    the field and rule."""
    check_plain_data(data, where)
    try:
        return cls.model_validate_json(json.dumps(data, allow_nan=False), strict=True)
    except ValidationError as err:
        raise SpecError(describe_validation_error(err, where)) from None
    except (ValueError, TypeError, RecursionError) as err:
        raise SpecError(f"{where}: (root): {err}") from None


def load_spec(cls: type[T], path: Path) -> T:
    """Load one spec file (YAML or JSON) as `cls`."""
    where = _short(path)
    return validate(cls, parse_text(read_text(path), where), where)


def parse_json_object(text: str, where: str, max_nodes: int = MAX_NODES,
                      constants_as_text: bool = False) -> dict[str, Any]:
    """Parse a JSON object (e.g. a Hugging Face config.json) strictly; failures are one SpecError line.
    `constants_as_text`: Infinity / -Infinity / NaN, which Python's json writes by default (transformers saves
    Mamba-2 hybrids' `time_step_limit` as [0.0, Infinity]), are kept as those words, so a Hugging Face config
    imports and any key roofline reads as a number still refuses them by name; a spec never holds them."""
    try:
        data = json.loads(text, parse_constant=str if constants_as_text else _refuse_constant)
    except json.JSONDecodeError as err:
        at = f"line {err.lineno}, column {err.colno}"
        raise SpecError(f"{where}: (root): not valid JSON at {at}: {err.msg}") from None
    except RecursionError:
        raise SpecError(f"{where}: (root): JSON nested too deeply") from None
    except ValueError as err:  # e.g. an integer literal past Python's digit limit
        raise SpecError(f"{where}: (root): not valid JSON: {err}") from None
    if not isinstance(data, dict):
        raise SpecError(f"{where}: (root): expected a JSON object, got {_kind(data)}")
    check_plain_data(data, where, max_nodes)
    return data


def load_json_object(path: Path, constants_as_text: bool = False) -> dict[str, Any]:
    """Read a JSON object file strictly (parse_json_object's `constants_as_text` for a Hugging Face config)."""
    return parse_json_object(read_text(path), _short(path), constants_as_text=constants_as_text)


def _kind(value: Any) -> str:
    return "nothing" if value is None else type(value).__name__


def _refuse_constant(name: str) -> float:
    raise ValueError(f"{name} is not JSON (no Infinity or NaN in a spec)")
