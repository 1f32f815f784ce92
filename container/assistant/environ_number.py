"""A number a process reads from its environment: blank gives the default, anything else must parse.

The serving processes take several tunables this way (the first-token objective, the GIL switch interval,
the model's drain and stall timeouts). Each keeps its own range check; this is the part they share, so a bad
value is named the same way everywhere: the variable, the unit and what was given."""

from __future__ import annotations

from collections.abc import Mapping


def number_from_environ(
    environ: Mapping[str, str], name: str, default: float, unit: str
) -> tuple[float, str]:
    """(the value, the raw text as given); ValueError naming `name` and `unit` when it is not a number."""
    raw = environ.get(name, "").strip()
    if not raw:
        return default, raw
    try:
        return float(raw), raw
    except ValueError:
        raise ValueError(f"{name}: must be a number of {unit}, got {raw!r}") from None


def whole_number_from_environ(environ: Mapping[str, str], name: str, default: int, unit: str) -> int:
    """A count of `unit` (0 or more): blank gives the default; ValueError naming `name` and `unit` when the
    text is not digits alone."""
    raw = environ.get(name, "").strip()
    if not raw:
        return default
    if not raw.isdigit():
        raise ValueError(f"{name}: must be a whole number of {unit}, got {raw!r}")
    return int(raw)
