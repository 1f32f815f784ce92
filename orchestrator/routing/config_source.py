"""Where the orchestrator's config comes from: an SSM parameter the global stack writes, read once per cold
start and checked against the digest the stack put in the function's environment.

Lambda allows 4 KB for all of a function's environment variables together (Lambda developer guide,
"Working with Lambda environment variables"); the config of 5 regions of 2 cells is about that already. So
the environment holds only the parameter's name and the config's SHA-256, both of which change with the
config: a deploy that changes the config updates the function, whose next cold start reads the new value,
and a function left on an older deploy refuses a parameter whose digest is not its own instead of running a
config its code was not deployed with.

The value is the config's JSON, zlib-compressed and base64-encoded: 8 regions of 3 cells are 9 KB of JSON,
above even an advanced parameter's 8 KB, and about 1 KB compressed (targets repeat the same names).
`ORCHESTRATOR_CONFIG` (plain JSON) still overrides, for local runs and the game day.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import zlib
from collections.abc import Callable, Mapping
from typing import Any

from .config import ENVIRONMENT_VARIABLE, OrchestratorConfig, parse_config

PARAMETER_VARIABLE = "ORCHESTRATOR_CONFIG_PARAMETER"
DIGEST_VARIABLE = "ORCHESTRATOR_CONFIG_SHA256"


class ConfigSourceError(RuntimeError):
    """The config cannot be read or is not the deployed one; the message names the parameter."""


def digest(config_json: str) -> str:
    return hashlib.sha256(config_json.encode("utf-8")).hexdigest()


def encode(config_json: str) -> str:
    """The parameter's value for a config's JSON."""
    return base64.b64encode(zlib.compress(config_json.encode("utf-8"), 9)).decode("ascii")


def decode(value: str, expected_sha256: str, where: str) -> OrchestratorConfig:
    """The config a parameter value holds, if it is the one the function was deployed with."""
    try:
        text = zlib.decompress(base64.b64decode(value, validate=True)).decode("utf-8")
    except (binascii.Error, zlib.error, UnicodeDecodeError, ValueError) as error:
        raise ConfigSourceError(f"{where}: not a compressed orchestrator config ({error})") from None
    if digest(text) != expected_sha256:
        raise ConfigSourceError(
            f"{where}: holds config sha256 {digest(text)[:12]}, this function was deployed with "
            f"{expected_sha256[:12]}: a deploy of the global stack is under way or failed half-way"
        )
    return _parsed(text, where)


def _parsed(text: str, where: str) -> OrchestratorConfig:
    try:
        config = parse_config(text)
    except (ValueError, KeyError, TypeError) as error:
        raise ConfigSourceError(
            f"{where}: not an orchestrator config ({type(error).__name__}: {error})"
        ) from None
    if not config.regions:
        raise ConfigSourceError(f"{where}: the config names no region")
    return config


def load(environ: Mapping[str, str], ssm: Callable[[], Any]) -> OrchestratorConfig:
    """The config for this environment: inline ORCHESTRATOR_CONFIG where set, else the parameter."""
    inline = environ.get(ENVIRONMENT_VARIABLE)
    if inline:
        return _parsed(inline, ENVIRONMENT_VARIABLE)
    name = environ.get(PARAMETER_VARIABLE)
    expected = environ.get(DIGEST_VARIABLE)
    if not name or not expected:
        raise ConfigSourceError(
            f"environment: {PARAMETER_VARIABLE} and {DIGEST_VARIABLE} must be set "
            "(the global stack sets them)"
        )
    client = ssm()
    try:
        value = client.get_parameter(Name=name)["Parameter"]["Value"]
    except client.exceptions.ParameterNotFound:
        raise ConfigSourceError(f"SSM parameter {name}: not found (the global stack writes it)") from None
    return decode(value, expected, f"SSM parameter {name}")


class ConfigCache:
    """Read once per cold start: the first successful load is kept for the warm container's later runs,
    for as long as the environment names the same config (it cannot change under a running Lambda; tests and
    the game day change it between runs). A failed load is not kept, so the next run tries again."""

    def __init__(self) -> None:
        self._key: tuple[str | None, ...] | None = None
        self._config: OrchestratorConfig | None = None

    def get(self, environ: Mapping[str, str], ssm: Callable[[], Any]) -> OrchestratorConfig:
        key = tuple(environ.get(name) for name in (ENVIRONMENT_VARIABLE, PARAMETER_VARIABLE, DIGEST_VARIABLE))
        if self._config is None or key != self._key:
            self._config = load(environ, ssm)
            self._key = key
        return self._config

    def clear(self) -> None:
        self._key, self._config = None, None
