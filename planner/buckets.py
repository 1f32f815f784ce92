"""The buckets the serving container compiles, read from its engine settings (model.json).

A Neuron engine encodes a prompt with the graph compiled for the smallest context bucket that holds it,
so a 600-token prompt costs a 1,024-token prefill; it decodes a batch with the token-generation graph of
the smallest bucket holding the batch's longest sequence (planner/simulate.py, Engine). The planner reads
the lists the container deploys rather than keeping a copy that could drift from them."""

from __future__ import annotations

import json
from pathlib import Path

from settings.loader import ConfigError

MODEL_JSON = (
    Path(__file__).resolve().parents[1] / "container" / "model_repository" / "assistant" / "1" / "model.json"
)
_NEURON = ("additional_config", "override_neuron_config")


def prefill_buckets(path: Path = MODEL_JSON) -> tuple[int, ...]:
    """Ascending context-encoding buckets, or () when the engine compiles without bucketing.

    Raises ConfigError naming the file and key when the list is unusable."""
    return _buckets(path, "context_encoding_buckets")


def decode_buckets(path: Path = MODEL_JSON) -> tuple[int, ...]:
    """Ascending token-generation buckets, or () when the engine compiles without bucketing."""
    return _buckets(path, "token_generation_buckets")


def _buckets(path: Path, key: str) -> tuple[int, ...]:
    try:
        settings = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise ConfigError(f"{path}: engine settings file not found") from None
    except json.JSONDecodeError as error:
        raise ConfigError(f"{path}:{error.lineno}: invalid JSON: {error.msg}") from None
    neuron = settings
    for part in _NEURON:
        neuron = neuron.get(part) if isinstance(neuron, dict) else None
    if not isinstance(neuron, dict) or not neuron.get("enable_bucketing", False):
        return ()
    buckets = neuron.get(key)
    where = f"{path}: {'.'.join(_NEURON)}.{key}"
    if buckets is None:
        return ()
    if not isinstance(buckets, list) or not all(isinstance(b, int) and b > 0 for b in buckets) or not buckets:
        raise ConfigError(f"{where}: expected a list of positive token counts, got {buckets!r}")
    return tuple(sorted(set(buckets)))
