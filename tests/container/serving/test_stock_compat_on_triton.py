"""`passthrough` against the running server, used as a client of Triton's stock vLLM backend uses it."""

from __future__ import annotations

import json
import time

import pytest

from local.client import StreamingClient, raw_request
from local.triton_server import TritonServer
from serving.stock_compat import STREAM_PREPEND_ERROR
from tests.container.conftest import emf_lines

pytestmark = [pytest.mark.serving, pytest.mark.vllm_version]

MODEL = "passthrough"


def text_of(result) -> list[str]:
    """The concatenated text per choice (text_output holds one entry per choice)."""
    choices: list[str] = []
    for response in result.responses:
        values = response.outputs["text_output"]
        if values is None:
            continue
        for index, value in enumerate(values.reshape(-1)):
            if index == len(choices):
                choices.append("")
            choices[index] += value.decode("utf-8")
    return choices


def test_sampling_options_may_come_as_request_parameters(triton: TritonServer) -> None:
    result = raw_request(
        triton.grpc_url,
        MODEL,
        {"text_input": "hello", "stream": False, "return_num_output_tokens": True},
        parameters={"max_tokens": 5, "ignore_eos": True, "temperature": 0.5},
        output_names=("num_output_tokens",),
    )
    assert result.error is None
    assert result.responses[-1].outputs["num_output_tokens"].tolist() == [5]


def test_vllm_sampling_keys_the_assistant_refuses_are_accepted(triton: TritonServer) -> None:
    sampling = {"n": 2, "max_tokens": 4, "ignore_eos": True, "skip_special_tokens": True, "seed": 3}
    sampling["include_stop_str_in_output"] = False
    result = raw_request(
        triton.grpc_url,
        MODEL,
        {"text_input": "hello", "stream": False, "sampling_parameters": json.dumps(sampling)},
    )
    assert result.error is None
    assert len(text_of(result)) == 2, "n=2 answers with two choices"


def test_string_values_are_converted_as_the_stock_backend_does(triton: TritonServer) -> None:
    result = raw_request(
        triton.grpc_url,
        MODEL,
        {
            "text_input": "hello",
            "sampling_parameters": json.dumps(
                {"max_tokens": "3", "temperature": "0.7", "ignore_eos": "true"}
            ),
            "return_num_output_tokens": True,
        },
        output_names=("num_output_tokens",),
    )
    assert result.error is None and result.responses[-1].outputs["num_output_tokens"].tolist() == [3]


def test_an_unknown_sampling_key_is_an_error_that_names_it(triton: TritonServer) -> None:
    result = raw_request(
        triton.grpc_url, MODEL, {"text_input": "hello", "sampling_parameters": json.dumps({"temprature": 1})}
    )
    assert result.error is not None and "temprature" in result.error


def test_streaming_with_the_input_prepended_gets_the_stock_message(triton: TritonServer) -> None:
    result = raw_request(
        triton.grpc_url, MODEL, {"text_input": "hello", "stream": True, "exclude_input_in_output": False}
    )
    assert result.error == STREAM_PREPEND_ERROR


def test_non_streaming_prepends_the_input_by_default(triton: TritonServer) -> None:
    result = raw_request(
        triton.grpc_url,
        MODEL,
        {
            "text_input": "hello there",
            "sampling_parameters": json.dumps({"max_tokens": 3, "ignore_eos": True}),
        },
    )
    assert result.error is None and text_of(result)[0].startswith("hello there")


def test_return_outputs_follow_the_stock_backend(triton: TritonServer) -> None:
    names = ("finish_reason", "cumulative_logprob", "logprobs", "num_input_tokens", "num_output_tokens")
    result = raw_request(
        triton.grpc_url,
        MODEL,
        {
            "text_input": "hello there",
            "stream": True,
            "sampling_parameters": json.dumps({"max_tokens": 4, "ignore_eos": True, "logprobs": 1}),
            **{f"return_{name}": True for name in names},
        },
        output_names=names,
    )
    assert result.error is None
    streamed = [response for response in result.responses if response.outputs["text_output"] is not None]
    assert sum(int(r.outputs["num_output_tokens"][0]) for r in streamed) == 4
    last = streamed[-1].outputs
    assert last["finish_reason"].tolist() == [b"length"]
    assert int(last["num_input_tokens"].reshape(-1)[0]) >= 2
    assert last["cumulative_logprob"].dtype.name == "float32" and float(last["cumulative_logprob"][0]) < 0
    positions = json.loads(last["logprobs"][0])
    # One position per token the response carries: usually one, but when the stream's reader falls behind the
    # engine (a busy machine) vLLM's output collector merges the deltas waiting for it into one response.
    tokens = int(last["num_output_tokens"].reshape(-1)[0])
    assert tokens >= 1 and len(positions) == tokens, (tokens, positions)
    assert all("logprob" in entry for position in positions for entry in position.values())


def _outcomes(triton: TritonServer) -> list[dict]:
    return [r for r in emf_lines(triton) if r.get("Model") == MODEL and "Outcome" in r]


def _cancel_after_two_chunks(triton: TritonServer, max_tokens: int) -> dict | None:
    """The server's record of a stream the client cancels after two chunks (None if none came in 30 s).

    Its record is the new one that is cancelled or ran to max_tokens: an earlier test's request may still
    be recorded after this one starts (records are written after the last response is sent)."""
    seen = len(_outcomes(triton))
    with StreamingClient(triton.grpc_url) as client:
        sampling = {"max_tokens": max_tokens, "ignore_eos": True}
        result = client.ask("hello", model=MODEL, sampling=sampling, cancel_after_chunks=2)
    assert len(result.chunks) == 2
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        for record in _outcomes(triton)[seen:]:
            if record["Outcome"] == "cancelled" or record["OutputTokens"] == max_tokens:
                return record
        time.sleep(0.2)
    return None


def test_a_cancelled_request_ends_with_a_cancelled_outcome(triton: TritonServer) -> None:
    max_tokens = 2_000
    record = _cancel_after_two_chunks(triton, max_tokens)
    if record is not None and record["Outcome"] == "completed" and record["OutputTokens"] == max_tokens:
        # With both cores saturated, Triton 2.51's gRPC frontend was measured holding a stream's responses
        # until its last one: the model sent the first token at 25 ms, the client got it at 4.9 s together
        # with the final response, so its cancel came after the end. One more try tells that from a model
        # that ignores cancellation, which fails both.
        record = _cancel_after_two_chunks(triton, max_tokens)
    assert record is not None, "the server never recorded the request"
    assert record["Outcome"] == "cancelled", record
    assert record["RequestFailed"] == 0
    assert record["OutputTokens"] < max_tokens
