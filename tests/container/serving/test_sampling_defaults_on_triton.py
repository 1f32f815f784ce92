"""Sampling defaults on the real server: the tiny model's generation_config.json (Llama 3.1's temperature 0.6
and top_p 0.9) is what a request without sampling keys runs with, a request's own key wins, and `make ask`
prints them. The load step that finds them is tested directly too (config overrides, Neuron's keys)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from assistant.sampling_defaults import DEFAULTS_ENV
from assistant.sampling_platforms import CPU, NEURON
from local.client import StreamingClient
from local.demo_assets import REPO_DIR
from local.tiny_model import TINY_SAMPLING_DEFAULTS
from local.triton_server import TritonServer
from serving.models import ModelLoadError, _sampling_defaults

pytestmark = pytest.mark.vllm_version

ASK_SAMPLING = {"return_sampling_parameters": True}


def used_sampling(triton: TritonServer, sampling: dict) -> dict:
    with StreamingClient(triton.grpc_url) as client:
        result = client.ask("hiking boots", sampling=sampling, extra_inputs=ASK_SAMPLING)
    assert result.error is None, result.error
    return result.sampling_used


def test_a_request_without_sampling_keys_runs_at_the_models_own_defaults(triton: TritonServer) -> None:
    assert TINY_SAMPLING_DEFAULTS == {"temperature": 0.6, "top_p": 0.9}
    assert used_sampling(triton, {"max_tokens": 4}) == {"max_tokens": 4, **TINY_SAMPLING_DEFAULTS}


def test_the_requests_own_keys_win_over_the_defaults(triton: TritonServer) -> None:
    used = used_sampling(triton, {"max_tokens": 4, "temperature": 0.2, "top_k": 5})
    assert used == {"max_tokens": 4, "temperature": 0.2, "top_k": 5, "top_p": 0.9}


def test_the_sampling_is_sent_only_when_asked_for(triton: TritonServer) -> None:
    with StreamingClient(triton.grpc_url) as client:
        result = client.ask("hiking boots", sampling={"max_tokens": 4})
    assert result.error is None and result.sampling_used is None


def test_make_ask_prints_the_defaults_it_ran_with(triton: TritonServer) -> None:
    shown = subprocess.run(
        [sys.executable, "-m", "local.ask", "hiking boots", "--url", triton.grpc_url, "--max-tokens", "4"],
        cwd=REPO_DIR / "container",
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert shown.returncode == 0, shown.stderr
    assert "sampling: max_tokens 4 (asked), temperature 0.6 (default), top_p 0.9 (default)" in shown.stdout


def _model(folder: Path, generation: dict) -> Path:
    (folder / "config.json").write_text(json.dumps({"model_type": "llama"}))
    (folder / "generation_config.json").write_text(json.dumps(generation))
    return folder


def test_the_config_overrides_the_models_file_at_load(tmp_path: Path, monkeypatch) -> None:
    model = _model(tmp_path, {"temperature": 0.6, "top_p": 0.9, "repetition_penalty": 1.1})
    monkeypatch.setenv(DEFAULTS_ENV, '{"temperature": 0.3}')
    defaults = _sampling_defaults(str(model), CPU)
    assert defaults == {"temperature": 0.3, "top_p": 0.9, "repetition_penalty": 1.1}


def test_keys_neurons_on_device_sampler_ignores_are_left_out(tmp_path: Path, monkeypatch, capsys) -> None:
    monkeypatch.delenv(DEFAULTS_ENV, raising=False)
    model = _model(tmp_path, {"temperature": 0.6, "repetition_penalty": 1.1})
    assert _sampling_defaults(str(model), NEURON) == {"temperature": 0.6}
    logged = capsys.readouterr().out
    assert "sampling default repetition_penalty=1.1 left out: not supported on neuron" in logged


@pytest.mark.parametrize(
    ("generation", "override", "message"),
    [
        ({"temperature": 5.0}, None, "sampling default temperature from {model}/generation_config.json"),
        ({}, '{"top_p": 0}', f"sampling default top_p from {DEFAULTS_ENV}"),
        ({}, '{"max_tokens": 9}', f"{DEFAULTS_ENV}.max_tokens: not a sampling default"),
    ],
)
def test_a_bad_default_fails_the_load_naming_where_it_came_from(
    tmp_path: Path, monkeypatch, generation: dict, override: str | None, message: str
) -> None:
    model = _model(tmp_path, generation)
    if override is None:
        monkeypatch.delenv(DEFAULTS_ENV, raising=False)
    else:
        monkeypatch.setenv(DEFAULTS_ENV, override)
    with pytest.raises(ModelLoadError, match="^" + message.format(model=model).replace(".", r"\.")):
        _sampling_defaults(str(model), CPU)
