"""Engine settings: the model's model.json, then per-instance-type overrides from the environment.

One image serves inf2 (TP 24) and trn1 (TP 32): the task definition sets e.g. ENGINE_TENSOR_PARALLEL_SIZE=32.
Values are parsed as JSON when they can be (numbers, booleans, objects), else kept as strings; the value
`null` removes a key (e.g. Neuron-only options when the engine runs on a CPU). Keys of model.json that start
with an underscore are notes for people (JSON has no comments) and never reach the engine.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

ENV_PREFIX = "ENGINE_"
# Variables with the prefix that configure the serving code around the engine, not the engine itself.
NOT_ENGINE_ARGUMENTS = frozenset({"ENGINE_STALL_SECONDS"})


class EngineSettingsError(ValueError):
    """model.json or an ENGINE_* variable is unusable; the message names the file or variable."""


def read_model_json(path: Path) -> dict[str, Any]:
    try:
        settings = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError as err:
        raise EngineSettingsError(f"engine settings file not found: {path}") from err
    except json.JSONDecodeError as err:
        raise EngineSettingsError(f"{path}: invalid JSON at line {err.lineno}: {err.msg}") from err
    if not isinstance(settings, dict):
        raise EngineSettingsError(f"{path}: expected a JSON object of engine arguments")
    return {key: value for key, value in settings.items() if not key.startswith("_")}


def apply_env_overrides(settings: Mapping[str, Any], environ: Mapping[str, str]) -> dict[str, Any]:
    """Return settings with every ENGINE_<NAME> variable applied as key <name> (lower case)."""
    merged = dict(settings)
    for variable in sorted(environ):
        if not variable.startswith(ENV_PREFIX) or variable == ENV_PREFIX or variable in NOT_ENGINE_ARGUMENTS:
            continue
        key = variable[len(ENV_PREFIX) :].lower()
        value = _parse_value(environ[variable])
        if value is None:
            merged.pop(key, None)
        else:
            merged[key] = value
    return merged


def _parse_value(raw: str) -> Any:
    try:
        return json.loads(raw)
    except json.JSONDecodeError:
        return raw


def check_known_keys(settings: Mapping[str, Any], known: set[str], source: str) -> None:
    unknown = sorted(set(settings) - known)
    if unknown:
        raise EngineSettingsError(
            f"{source}: unknown engine argument(s) {', '.join(unknown)} "
            f"(set in model.json or as {ENV_PREFIX}<NAME> variables)"
        )


def engine_settings(model_json: Path, environ: Mapping[str, str]) -> dict[str, Any]:
    settings = apply_env_overrides(read_model_json(model_json), environ)
    if not settings.get("model"):
        raise EngineSettingsError(f"{model_json}: no 'model' set (model.json or {ENV_PREFIX}MODEL)")
    return settings
