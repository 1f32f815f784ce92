"""Sampling defaults: the model's generation_config.json, under the config's overrides, under the request."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from assistant.sampling_defaults import (
    DEFAULTS_ENV,
    SamplingDefaultsError,
    apply,
    from_generation_config,
    merge,
    overrides_from_env,
    read_generation_config,
)

pytestmark = pytest.mark.vllm_version

# Llama 3.1 8B Instruct's generation_config.json, as published with the model.
LLAMA_31_GENERATION_CONFIG = {
    "bos_token_id": 128000,
    "do_sample": True,
    "eos_token_id": [128001, 128008, 128009],
    "temperature": 0.6,
    "top_p": 0.9,
    "transformers_version": "4.42.3",
}


def test_the_files_sampling_keys_become_defaults_and_the_rest_is_left() -> None:
    assert from_generation_config(LLAMA_31_GENERATION_CONFIG) == {"temperature": 0.6, "top_p": 0.9}


def test_max_new_tokens_is_not_a_default_the_assistants_own_is() -> None:
    # The file's max_new_tokens is sized for a chat: the assistant's ASSISTANT_DEFAULT_MAX_TOKENS holds.
    assert from_generation_config({"max_new_tokens": 4096, "repetition_penalty": 1.1}) == {
        "repetition_penalty": 1.1
    }


def test_the_config_overrides_the_file_and_the_request_overrides_both() -> None:
    defaults = merge({"temperature": 0.6, "top_p": 0.9}, {"temperature": 0.2, "top_k": 40})
    assert defaults == {"temperature": 0.2, "top_p": 0.9, "top_k": 40}
    sent = {"max_tokens": 64, "top_p": 0.5}
    assert apply(defaults, sent) == {"temperature": 0.2, "top_p": 0.5, "top_k": 40, "max_tokens": 64}
    # No defaults: the request as it is; no request keys: the defaults as they are.
    assert apply({}, sent) == sent
    assert apply(defaults, {}) == defaults


def _model_folder(folder: Path) -> Path:
    # A model folder has its config.json, which vLLM falls back on where there is no generation config.
    (folder / "config.json").write_text(json.dumps({"model_type": "llama", "bos_token_id": 1}))
    return folder


def test_the_generation_config_is_read_the_way_vllm_reads_it(tmp_path: Path) -> None:
    _model_folder(tmp_path)
    (tmp_path / "generation_config.json").write_text(json.dumps(LLAMA_31_GENERATION_CONFIG))
    assert from_generation_config(read_generation_config(tmp_path)) == {"temperature": 0.6, "top_p": 0.9}
    # A file with token ids only (the tiny model's before) sets no sampling default.
    (tmp_path / "generation_config.json").write_text(json.dumps({"bos_token_id": 1, "eos_token_id": 2}))
    assert from_generation_config(read_generation_config(tmp_path)) == {}


def test_a_model_folder_without_a_generation_config_gives_no_defaults(tmp_path: Path) -> None:
    assert from_generation_config(read_generation_config(_model_folder(tmp_path))) == {}


def test_overrides_come_from_the_environment_as_a_json_object() -> None:
    assert overrides_from_env({}) == {}
    assert overrides_from_env({DEFAULTS_ENV: '{"temperature": 0.3, "top_k": null}'}) == {"temperature": 0.3}


@pytest.mark.parametrize(
    ("raw", "message"),
    [
        ("{temperature", "not valid JSON"),
        ("[0.3]", "must be a JSON object"),
        ('{"max_tokens": 10}', f"{DEFAULTS_ENV}.max_tokens: not a sampling default"),
    ],
)
def test_bad_overrides_name_the_variable_and_key(raw: str, message: str) -> None:
    with pytest.raises(SamplingDefaultsError, match=message.replace(".", r"\.")):
        overrides_from_env({DEFAULTS_ENV: raw})
