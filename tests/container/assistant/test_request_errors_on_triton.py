"""Client mistakes on the real server: an INVALID_ARG error for that request, counted as rejected, never as a
failure of the server. The engine is the real vLLM (CPU) with the tiny model, max_model_len 2048."""

from __future__ import annotations

import json
import urllib.error
import urllib.request

import pytest

from local.client import StreamingClient
from local.triton_server import TritonServer
from tests.container.conftest import emf_lines, read_metrics, wait_for

pytestmark = [pytest.mark.serving, pytest.mark.vllm_version]


# Symbols the tiny tokenizer has no merges for: about a token a character, so 3,990 of them (within the
# 4,000-character limit) make a prompt far over max_model_len (2,048 tokens).
OVER_LONG_QUESTION = "@#" * 1_995


def _generate(triton: TritonServer, text: str, sampling: dict, model: str = "assistant") -> tuple[int, dict]:
    """Triton's HTTP generate endpoint: its status code is the error's code (INVALID_ARG is 400)."""
    body = json.dumps({"text_input": text, "sampling_parameters": json.dumps(sampling)}).encode()
    request = urllib.request.Request(
        f"http://{triton.http_url}/v2/models/{model}/generate", data=body, method="POST"
    )
    try:
        with urllib.request.urlopen(request, timeout=120) as response:
            return response.status, json.loads(response.read())
    except urllib.error.HTTPError as err:
        return err.code, json.loads(err.read())


def _counts(triton: TritonServer, model: str = "assistant") -> tuple[float, float]:
    metrics = read_metrics(triton)
    key = 'llm_requests_total{{model="{}",outcome="{}",replica="0"}}'
    return metrics.get(key.format(model, "rejected"), 0.0), metrics.get(key.format(model, "failed"), 0.0)


@pytest.mark.parametrize(
    ("text", "sampling", "message"),
    [
        pytest.param(
            "hiking boots",
            {"max_tokens": 8, "min_tokens": 9},
            "sampling_parameters.min_tokens: must not exceed max_tokens (8), got 9",
            id="min-over-max",
        ),
        pytest.param(
            "hiking boots",
            {"ignore_eos": True},
            "sampling_parameters.ignore_eos: not settable on this model",
            id="ignore-eos",
        ),
        # Within the character limit, over the token limit (1,024): refused before any prompt is built, so
        # the prompt's own max_model_len check (tests/container/assistant/test_request.py) stays a backstop.
        pytest.param(
            OVER_LONG_QUESTION,
            {"max_tokens": 8},
            "text_input: must be at most 1024 tokens, got",
            id="question-over-the-token-limit",
        ),
    ],
)
def test_a_client_mistake_is_invalid_arg_and_rejected_not_failed(
    triton: TritonServer, text: str, sampling: dict, message: str
) -> None:
    _assert_rejected(triton, "assistant", text, sampling, message)


@pytest.mark.parametrize(
    ("text", "message"),
    [
        pytest.param("@#" * 3_000, "text_input: the prompt is", id="counted"),
        pytest.param("@" * 100_000, "text_input: the prompt is 100000 bytes", id="too-big-to-count"),
    ],
)
def test_a_passthrough_prompt_over_max_model_len_is_the_clients_mistake(
    triton: TritonServer, text: str, message: str
) -> None:
    _assert_rejected(triton, "passthrough", text, {"max_tokens": 4}, message)


def _assert_rejected(triton: TritonServer, model: str, text: str, sampling: dict, message: str) -> None:
    def rejected_lines() -> list[dict]:
        return [r for r in emf_lines(triton) if r.get("Outcome") == "rejected" and r.get("Model") == model]

    rejected_before, failed_before = _counts(triton, model)
    seen = len(rejected_lines())
    status, body = _generate(triton, text, sampling, model)
    assert status == 400, body
    assert body["error"].startswith(message), body
    counted = wait_for(lambda: _counts(triton, model)[0] > rejected_before and _counts(triton, model))
    assert counted, "the request was never counted as rejected"
    assert counted[1] == failed_before, "a client's mistake was counted as a server failure"
    records = wait_for(lambda: rejected_lines()[seen:])
    assert records and records[-1]["RequestRejected"] == 1 and "RequestFailed" not in records[-1]


def test_the_server_still_answers_after_the_mistakes(triton: TritonServer) -> None:
    with StreamingClient(triton.grpc_url) as client:
        bad = client.ask("boots", sampling={"max_tokens": 4, "min_tokens": 5})
        good = client.ask("waterproof hiking boots", sampling={"max_tokens": 8, "min_tokens": 8})
    assert bad.error is not None and "min_tokens" in bad.error
    assert good.error is None and good.chunks
