"""Read spec files (YAML or JSON) as data only, and turn every failure into one SpecError line."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, TypeVar

import yaml
from pydantic import BaseModel, ValidationError

from roofline.errors import SpecError, describe_validation_error

T = TypeVar("T", bound=BaseModel)

# Spec files are small; anything larger is not a spec (and an app upload must not exhaust memory).
MAX_SPEC_BYTES = 1 << 20


def parse_text(text: str, where: str) -> dict[str, Any]:
    """Parse YAML (a superset of JSON) with the safe loader; the top level must be a mapping."""
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as err:
        mark = getattr(err, "problem_mark", None)
        at = f" at line {mark.line + 1}, column {mark.column + 1}" if mark is not None else ""
        problem = getattr(err, "problem", None) or "malformed YAML/JSON"
        raise SpecError(f"{where}: (root): not valid YAML/JSON{at}: {problem}") from None
    except (ValueError, RecursionError) as err:
        raise SpecError(f"{where}: (root): not valid YAML/JSON: {err}") from None
    if not isinstance(data, dict):
        raise SpecError(f"{where}: (root): expected a mapping of field names to values, got {_kind(data)}")
    return data


def read_text(path: Path) -> str:
    """Read a spec file, refusing missing, oversized or undecodable files with one line."""
    try:
        size = path.stat().st_size
    except OSError as err:
        raise SpecError(f"{path}: (file): cannot read: {err.strerror or err}") from None
    if size > MAX_SPEC_BYTES:
        raise SpecError(f"{path}: (file): {size} bytes exceeds the {MAX_SPEC_BYTES}-byte limit for a spec")
    try:
        return path.read_text(encoding="utf-8")
    except UnicodeDecodeError:
        raise SpecError(f"{path}: (file): not UTF-8 text") from None
    except OSError as err:
        raise SpecError(f"{path}: (file): cannot read: {err.strerror or err}") from None


def validate(cls: type[T], data: Any, where: str) -> T:
    """Validate a mapping against a spec class; errors become one line naming the field and rule."""
    try:
        return cls.model_validate(data)
    except ValidationError as err:
        raise SpecError(describe_validation_error(err, where)) from None
    except (ValueError, TypeError, RecursionError) as err:
        raise SpecError(f"{where}: (root): {err}") from None


def load_spec(cls: type[T], path: Path) -> T:
    """Load one spec file (YAML or JSON) as `cls`."""
    return validate(cls, parse_text(read_text(path), str(path)), str(path))


def parse_json_object(text: str, where: str) -> dict[str, Any]:
    """Parse a JSON object (e.g. a Hugging Face config.json) strictly; failures are one SpecError line."""
    try:
        data = json.loads(text)
    except json.JSONDecodeError as err:
        at = f"line {err.lineno}, column {err.colno}"
        raise SpecError(f"{where}: (root): not valid JSON at {at}: {err.msg}") from None
    except RecursionError:
        raise SpecError(f"{where}: (root): JSON nested too deeply") from None
    if not isinstance(data, dict):
        raise SpecError(f"{where}: (root): expected a JSON object, got {_kind(data)}")
    return data


def load_json_object(path: Path) -> dict[str, Any]:
    """Read a JSON object file strictly."""
    return parse_json_object(read_text(path), str(path))


def _kind(value: Any) -> str:
    return "nothing" if value is None else type(value).__name__
