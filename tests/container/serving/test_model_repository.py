"""The model repository's contract: tensor names of Triton's vLLM backend, decoupled, one engine config."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

REPOSITORY = Path(__file__).resolve().parents[3] / "container" / "model_repository"
VLLM_BACKEND_INPUTS = {
    "text_input",
    "stream",
    "sampling_parameters",
    "exclude_input_in_output",
    "return_finish_reason",
    "return_cumulative_logprob",
    "return_logprobs",
    "return_num_input_tokens",
    "return_num_output_tokens",
}
VLLM_BACKEND_OUTPUTS = {
    "text_output",
    "finish_reason",
    "cumulative_logprob",
    "logprobs",
    "num_input_tokens",
    "num_output_tokens",
}


def tensor_names(config: str, section: str) -> set[str]:
    block = re.search(rf"^{section} \[(.*?)^\]", config, re.S | re.M)
    assert block, f"no {section} block"
    return set(re.findall(r'name: "([a-z_]+)"', block.group(1)))


@pytest.mark.parametrize("model", ["assistant", "passthrough"])
def test_models_keep_the_vllm_backend_contract(model: str) -> None:
    config = (REPOSITORY / model / "config.pbtxt").read_text()
    assert f'name: "{model}"' in config
    assert 'backend: "python"' in config
    assert "decoupled: true" in config
    # The assistant's own additions: product cards, and the sampling a request ran with when asked for.
    own_inputs = {"return_sampling_parameters"} if model == "assistant" else set()
    own_outputs = {"sampling_parameters_used"} if model == "assistant" else set()
    assert tensor_names(config, "input") == VLLM_BACKEND_INPUTS | own_inputs
    assert tensor_names(config, "output") == VLLM_BACKEND_OUTPUTS | {"products"} | own_outputs


def test_passthrough_runs_the_same_engine_settings() -> None:
    assistant = REPOSITORY / "assistant" / "1" / "model.json"
    passthrough = REPOSITORY / "passthrough" / "1" / "model.json"
    assert passthrough.resolve() == assistant.resolve()
