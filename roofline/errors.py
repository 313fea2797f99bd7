"""Errors that reach users as one line: what was wrong, where, and which rule it broke."""

from __future__ import annotations

from pydantic import ValidationError


class RooflineError(Exception):
    """Any error the CLI reports as one line with exit status 2."""


class SpecError(RooflineError, ValueError):
    """A spec (file, dict or flag) failed validation; the message names the field and the rule."""


class PlausibilityWarning(UserWarning):
    """A figure inside its hard range but outside the usual one (the CLI prints it as one stderr line)."""


def one_line(text: str) -> str:
    """Collapse control characters (a key or value may hold newlines) so a message stays on one line."""
    return "".join(ch if ch.isprintable() else repr(ch)[1:-1] for ch in text)


def _part(part: object) -> str:
    text = str(part)
    return text if text.isprintable() else repr(text)


def describe_validation_error(err: ValidationError, where: str = "") -> str:
    """One line for a pydantic ValidationError: `where: field.path: rule (+N more)`."""
    errors = err.errors(include_url=False)
    first = errors[0]
    loc = ".".join(_part(part) for part in first.get("loc", ()))
    msg = first.get("msg", "invalid").replace("\n", " ")
    # pydantic prefixes custom validator messages with "Value error, "; the rule reads better without it
    for prefix in ("Value error, ", "Assertion failed, "):
        if msg.startswith(prefix):
            msg = msg[len(prefix):]
    more = f" (+{len(errors) - 1} more)" if len(errors) > 1 else ""
    head = f"{where}: " if where else ""
    # model-level validators already start their message with the field they are about
    body = f"{loc}: {msg}" if loc else msg
    return one_line(f"{head}{body}{more}")
