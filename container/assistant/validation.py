"""Turns a pydantic ValidationError into one line a person can act on: the field path and what is wrong."""

from __future__ import annotations

from pydantic import ValidationError
from pydantic_core import ErrorDetails

_MAX_SHOWN_INPUT = 60
# pydantic's wording for the common type errors, shortened to the house style "must be ..., got ...".
_PLAIN_MESSAGES = {
    "int_type": "must be a whole number",
    "int_parsing": "must be a whole number",
    "int_from_float": "must be a whole number",
    "float_type": "must be a number",
    "float_parsing": "must be a number",
    "finite_number": "must be a finite number",
    "bool_type": "must be true or false",
    "bool_parsing": "must be true or false",
    "string_type": "must be a string",
    "string_too_short": "must not be empty",
}


def _shown_input(value: object) -> str:
    text = repr(value)
    return text if len(text) <= _MAX_SHOWN_INPUT else text[: _MAX_SHOWN_INPUT - 3] + "..."


def describe_error(error: ErrorDetails) -> tuple[str, str]:
    """(dotted field path, message) for one pydantic error; the path is empty for whole-object errors."""
    path = ".".join(str(part) for part in error["loc"])
    kind = error["type"]
    ctx = error.get("ctx") or {}
    if kind == "value_error" and "error" in ctx:
        # Our own validators raise ValueError with a finished sentence; pydantic would prefix "Value error, ".
        return path, str(ctx["error"])
    if kind == "missing":
        return path, "is required"
    if kind == "extra_forbidden":
        return path, "unknown key"
    if kind in _PLAIN_MESSAGES:
        return path, f"{_PLAIN_MESSAGES[kind]}, got {_shown_input(error['input'])}"
    message = error["msg"]
    message = message[:1].lower() + message[1:]
    if kind not in {"json_invalid", "model_type", "model_attributes_type"}:
        message = f"{message} (got {_shown_input(error['input'])})"
    return path, message


def first_error(exc: ValidationError) -> tuple[str, str]:
    """The first error only: one clear line beats a wall of follow-on errors."""
    return describe_error(exc.errors(include_url=False)[0])
