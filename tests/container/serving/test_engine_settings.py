"""Engine settings: model.json, then ENGINE_* overrides per instance type."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from serving.engine_settings import (
    EngineSettingsError,
    apply_env_overrides,
    check_known_keys,
    engine_settings,
)

pytestmark = pytest.mark.vllm_version

BASE = {"model": "/opt/models/weights", "tensor_parallel_size": 24, "additional_config": {"a": 1}}


def test_environment_overrides_per_instance_type() -> None:
    merged = apply_env_overrides(BASE, {"ENGINE_TENSOR_PARALLEL_SIZE": "32", "ENGINE_DTYPE": "bfloat16"})
    assert merged["tensor_parallel_size"] == 32
    assert merged["dtype"] == "bfloat16"
    assert BASE["tensor_parallel_size"] == 24  # the input is not modified


def test_values_are_json_when_they_parse() -> None:
    merged = apply_env_overrides(
        BASE, {"ENGINE_ENFORCE_EAGER": "true", "ENGINE_ADDITIONAL_CONFIG": '{"b": 2}'}
    )
    assert merged["enforce_eager"] is True
    assert merged["additional_config"] == {"b": 2}


def test_null_removes_a_key_and_unrelated_variables_are_ignored() -> None:
    merged = apply_env_overrides(BASE, {"ENGINE_ADDITIONAL_CONFIG": "null", "PATH": "/bin", "ENGINE_": "x"})
    assert "additional_config" not in merged and "path" not in merged and "" not in merged


def test_unknown_keys_are_named() -> None:
    with pytest.raises(EngineSettingsError, match=r"unknown engine argument.*max_num_seq\b"):
        check_known_keys({"max_num_seq": 3, "model": "m"}, {"model", "max_num_seqs"}, "model.json")


@pytest.mark.parametrize(
    ("text", "message"),
    [("{", "invalid JSON at line 1"), ("[1, 2]", "expected a JSON object"), ("{}", "no 'model' set")],
)
def test_bad_model_json_is_named(tmp_path: Path, text: str, message: str) -> None:
    path = tmp_path / "model.json"
    path.write_text(text)
    with pytest.raises(EngineSettingsError, match=message) as caught:
        engine_settings(path, {})
    assert str(path) in str(caught.value)


def test_missing_model_json(tmp_path: Path) -> None:
    with pytest.raises(EngineSettingsError, match="engine settings file not found"):
        engine_settings(tmp_path / "model.json", {})


def test_the_shipped_model_json_holds_valid_engine_arguments() -> None:
    from dataclasses import fields

    from vllm.engine.arg_utils import AsyncEngineArgs

    shipped = Path(__file__).resolve().parents[3] / "container/model_repository/assistant/1/model.json"
    settings = engine_settings(shipped, {})
    check_known_keys(settings, {field.name for field in fields(AsyncEngineArgs)}, str(shipped))
    assert settings["tensor_parallel_size"] == 8  # the default config runs TP 8 on every fleet
    assert "speculative_config" in settings  # present and off: one variable turns EAGLE on
    assert not any(key.startswith("_") for key in settings)


def test_underscore_keys_are_notes_that_never_reach_the_engine(tmp_path: Path) -> None:
    model_json = tmp_path / "model.json"
    model_json.write_text(json.dumps({"_notes": ["why"], "model": "/m", "max_num_seqs": 8}))
    assert engine_settings(model_json, {}) == {"model": "/m", "max_num_seqs": 8}


def test_the_stall_time_is_not_an_engine_argument(tmp_path) -> None:
    """ENGINE_STALL_SECONDS configures the engine watch; passed to vLLM it would fail the model's load."""
    from serving.engine_settings import engine_settings
    from serving.engine_watch import STALL_ENV

    model_json = tmp_path / "model.json"
    model_json.write_text('{"model": "/m"}')
    settings = engine_settings(model_json, {STALL_ENV: "5", "ENGINE_MAX_NUM_SEQS": "4"})
    assert settings == {"model": "/m", "max_num_seqs": 4}
