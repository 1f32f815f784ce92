"""What the pass-through takes from clients of the stock vLLM backend, without a server."""

from __future__ import annotations

import json

import pytest

from assistant.request import RequestError
from serving.stock_compat import STREAM_PREPEND_ERROR, flags, prepend_input, sampling_kwargs

pytestmark = pytest.mark.vllm_version


@pytest.mark.parametrize(
    ("stream", "exclude", "prepend"),
    [
        (False, None, True),
        (False, False, True),
        (False, True, False),
        (True, None, False),
        (True, True, False),
    ],
)
def test_the_input_is_prepended_as_the_stock_backend_decides(stream, exclude, prepend) -> None:
    assert prepend_input(stream, exclude) is prepend


def test_streaming_with_the_input_prepended_is_refused_with_the_stock_message() -> None:
    with pytest.raises(RequestError) as raised:
        prepend_input(True, False)
    assert str(raised.value) == STREAM_PREPEND_ERROR


def test_values_are_converted_to_each_keys_type() -> None:
    raw = json.dumps({"max_tokens": "8", "temperature": "0.5", "ignore_eos": "false", "n": 2, "seed": "7"})
    assert sampling_kwargs(raw) == {
        "max_tokens": 8,
        "temperature": 0.5,
        "ignore_eos": False,
        "n": 2,
        "seed": 7,
    }


def test_any_vllm_sampling_key_is_accepted() -> None:
    raw = json.dumps({"skip_special_tokens": False, "include_stop_str_in_output": True, "logprobs": 2})
    assert sampling_kwargs(raw) == {
        "skip_special_tokens": False,
        "include_stop_str_in_output": True,
        "logprobs": 2,
    }


@pytest.mark.parametrize(
    ("raw", "message"),
    [
        ('{"temprature": 1}', "sampling_parameters.temprature: unknown key"),
        ('{"_eos_token_id": 1}', "unknown key"),
        ('{"max_tokens": "many"}', "sampling_parameters.max_tokens: must be int"),
        ('{"ignore_eos": "perhaps"}', "must be true or false"),
        ("[1]", "must be a JSON object"),
        ("{", "not valid JSON"),
    ],
)
def test_bad_sampling_is_named(raw: str, message: str) -> None:
    with pytest.raises(RequestError, match=message):
        sampling_kwargs(raw)


def test_nothing_sent_is_the_engine_defaults() -> None:
    assert sampling_kwargs(None) == sampling_kwargs("") == sampling_kwargs(b"  ") == {}


def test_only_switches_set_to_true_ask_for_outputs() -> None:
    assert flags(
        {"return_finish_reason": True, "return_logprobs": False, "return_num_input_tokens": None}
    ) == {"return_finish_reason"}
