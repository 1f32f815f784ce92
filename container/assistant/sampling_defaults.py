"""Sampling defaults: the model's own `generation_config.json`, then the kit's config, then the request.

A request without sampling keys ran at vLLM's neutral values (temperature 1.0, top_p 1.0) while Llama 3.1
Instruct's generation_config.json says 0.6 and 0.9. vLLM's OpenAI server applies the file's values itself;
the engine (`AsyncLLM.generate`) does not, so the kit applies them here, reading the file as vLLM does:
`ModelConfig.get_diff_sampling_param` (vllm/config/model.py, `generation_config="auto"`) takes
`try_get_generation_config(model).to_diff_dict()` (vllm/transformers_utils/config.py: transformers'
`GenerationConfig.from_pretrained`, only the values that differ from transformers' own defaults) and keeps
repetition_penalty, presence_penalty, frequency_penalty, temperature, top_k, top_p, min_p and max_new_tokens
(as max_tokens). vLLM 0.13 keeps the same list without the two additive penalties; the longer list is used
here, which the file only ever narrows.

max_tokens is not a default taken from the file: the assistant's own default (ASSISTANT_DEFAULT_MAX_TOKENS)
fits an answer, and the file's max_new_tokens is sized for a chat, not a shopping answer.

Overrides come from config (`model.sampling_defaults`), which the task definition passes as the JSON object
ASSISTANT_SAMPLING_DEFAULTS. Precedence: request > config > file.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

DEFAULTS_ENV = "ASSISTANT_SAMPLING_DEFAULTS"
# The generation_config.json keys vLLM turns into SamplingParams defaults (get_diff_sampling_param).
GENERATION_CONFIG_KEYS = (
    "repetition_penalty",
    "presence_penalty",
    "frequency_penalty",
    "temperature",
    "top_k",
    "top_p",
    "min_p",
)


class SamplingDefaultsError(ValueError):
    """A default that cannot be used; the message names where it came from and the key."""


def from_generation_config(diff: Mapping[str, Any]) -> dict[str, Any]:
    """The sampling defaults a generation config's non-default values give (vLLM's key list, no max)."""
    return {key: diff[key] for key in GENERATION_CONFIG_KEYS if diff.get(key) is not None}


def merge(file_defaults: Mapping[str, Any], overrides: Mapping[str, Any]) -> dict[str, Any]:
    """The defaults in force: the config's overrides over the model file's."""
    return {**file_defaults, **overrides}


def apply(defaults: Mapping[str, Any], request: Mapping[str, Any]) -> dict[str, Any]:
    """The request's sampling keys over the defaults: what the client sent always wins."""
    return {**defaults, **request}


def read_generation_config(model_dir: str | Path) -> dict[str, Any]:
    """The model folder's generation config, non-default values only, read by vLLM's own helper (the same
    function its OpenAI server uses); {} where the folder has none."""
    from vllm.transformers_utils.config import try_get_generation_config

    config = try_get_generation_config(str(model_dir), trust_remote_code=False)
    return {} if config is None else config.to_diff_dict()


def overrides_from_env(environ: Mapping[str, str]) -> dict[str, Any]:
    """The config's overrides (ASSISTANT_SAMPLING_DEFAULTS, a JSON object of sampling keys); {} if unset."""
    raw = environ.get(DEFAULTS_ENV, "").strip()
    if not raw:
        return {}
    try:
        parsed = json.loads(raw)
    except json.JSONDecodeError as err:
        raise SamplingDefaultsError(f"{DEFAULTS_ENV}: not valid JSON: {err.msg}") from None
    if not isinstance(parsed, dict):
        raise SamplingDefaultsError(f"{DEFAULTS_ENV}: must be a JSON object of sampling keys")
    unknown = sorted(set(parsed) - set(GENERATION_CONFIG_KEYS))
    if unknown:
        raise SamplingDefaultsError(
            f"{DEFAULTS_ENV}.{unknown[0]}: not a sampling default; allowed keys are "
            f"{', '.join(GENERATION_CONFIG_KEYS)}"
        )
    return {key: value for key, value in parsed.items() if value is not None}


def describe(defaults: Mapping[str, Any]) -> str:
    if not defaults:
        return "sampling defaults: vLLM's (none from the model or config)"
    return "sampling defaults: " + ", ".join(f"{key} {value}" for key, value in sorted(defaults.items()))
