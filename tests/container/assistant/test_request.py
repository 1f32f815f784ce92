from __future__ import annotations

import json

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from assistant.request import (
    AssistantRequest,
    RequestError,
    RequestLimits,
    SamplingSettings,
    parse_request,
    parse_sampling,
)

LIMITS = RequestLimits()


def _parse(
    text: object = "waterproof boots",
    stream: object = None,
    sampling: object = None,
    exclude: object = None,
    limits: RequestLimits = LIMITS,
) -> AssistantRequest:
    return parse_request(text, stream, sampling, exclude, limits=limits)  # type: ignore[arg-type]


def test_defaults_follow_the_triton_vllm_backend() -> None:
    request = _parse()
    assert (request.stream, request.exclude_input_in_output) == (False, False)
    assert request.sampling.engine_kwargs() == {"max_tokens": LIMITS.default_max_tokens}
    streaming = _parse(stream=True)
    assert (streaming.stream, streaming.exclude_input_in_output) == (True, True)


def test_text_is_decoded_and_trimmed() -> None:
    assert _parse("  café boots \n".encode()).text == "café boots"


def test_numpy_scalars_from_triton_tensors_are_accepted() -> None:
    request = _parse(np.bytes_(b"tent"), np.bool_(True), np.bytes_(b'{"max_tokens": 8}'), np.bool_(True))
    assert (request.text, request.stream, request.sampling.max_tokens) == ("tent", True, 8)


def test_string_valued_numbers_are_accepted_like_the_vllm_backend_examples() -> None:
    sampling = _parse(sampling='{"temperature": "0.1", "top_p": "0.95", "max_tokens": "16"}').sampling
    assert sampling.engine_kwargs() == {"max_tokens": 16, "temperature": 0.1, "top_p": 0.95}


def test_every_supported_key_reaches_the_engine() -> None:
    settings = {
        "max_tokens": 64,
        "min_tokens": 2,
        "temperature": 0.7,
        "top_p": 0.9,
        "top_k": 40,
        "min_p": 0.05,
        "presence_penalty": 0.5,
        "frequency_penalty": -0.5,
        "repetition_penalty": 1.1,
        "stop": ["\n\n", "END"],
        "seed": 42,
        "ignore_eos": True,
    }
    assert _parse(sampling=json.dumps(settings)).sampling.engine_kwargs() == settings
    assert set(settings) == set(SamplingSettings.model_fields)


@pytest.mark.parametrize(
    ("sampling", "expected"),
    [
        ('{"top_k": 0}', {"max_tokens": 256}),
        ('{"top_k": -1}', {"max_tokens": 256}),
        ('{"temperature": null, "max_tokens": null}', {"max_tokens": 256}),
        ('{"stop": "###"}', {"max_tokens": 256, "stop": ["###"]}),
        ("", {"max_tokens": 256}),
        ("  ", {"max_tokens": 256}),
        ("{}", {"max_tokens": 256}),
    ],
)
def test_defaults_and_disabled_values_are_left_to_the_engine(sampling: str, expected: dict) -> None:
    assert _parse(sampling=sampling).sampling.engine_kwargs() == expected


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"text": None}, "text_input: is required"),
        ({"text": ""}, "text_input: must not be empty"),
        ({"text": " \n\t "}, "text_input: must not be empty"),
        ({"text": b"ab\xffc"}, "text_input: not valid UTF-8 at byte 2"),
        ({"text": 42}, "text_input: must be a string, got int"),
        ({"text": "a\x00b"}, "text_input: contains a NUL character at position 1"),
        ({"text": "x" * 4_001}, "text_input: must be at most 4000 characters, got 4001"),
        ({"stream": "yes"}, "stream: must be true or false, got 'yes'"),
        ({"stream": True, "exclude": False}, "exclude_input_in_output: must be true when stream is true"),
        (
            {"sampling": '{"max_tokens": 0}'},
            "sampling_parameters.max_tokens: must be between 1 and 2048, got 0",
        ),
        (
            {"sampling": '{"max_tokens": 5000}'},
            "sampling_parameters.max_tokens: must be between 1 and 2048, got 5000",
        ),
        (
            {"sampling": '{"max_tokens": 1.5}'},
            "sampling_parameters.max_tokens: must be a whole number, got 1.5",
        ),
        ({"sampling": '{"max_tokens": true}'}, "sampling_parameters.max_tokens: must be a number, got true"),
        (
            {"sampling": '{"temperature": "hot"}'},
            "sampling_parameters.temperature: must be a number, got 'hot'",
        ),
        (
            {"sampling": '{"temperature": -1}'},
            "sampling_parameters.temperature: must be between 0.0 and 2.0, got -1.0",
        ),
        ({"sampling": '{"temperature": NaN}'}, "sampling_parameters.temperature: must be a finite number"),
        (
            {"sampling": '{"top_p": 0}'},
            "sampling_parameters.top_p: must be greater than 0 and at most 1, got 0.0",
        ),
        (
            {"sampling": '{"top_k": -5}'},
            "sampling_parameters.top_k: must be -1 or 0 (disabled) or between 1 and",
        ),
        (
            {"sampling": '{"repetition_penalty": 0}'},
            "sampling_parameters.repetition_penalty: must be greater than 0",
        ),
        ({"sampling": '{"seed": -3}'}, "sampling_parameters.seed: must be between 0 and"),
        (
            {"sampling": '{"stop": [1]}'},
            "sampling_parameters.stop: must be a string or a list of strings, got [1]",
        ),
        (
            {"sampling": '{"stop": ["a", "b", "c", "d", "e"]}'},
            "sampling_parameters.stop: must hold at most 4",
        ),
        ({"sampling": '{"stop": ""}'}, "sampling_parameters.stop: each sequence must be 1 to 64 characters"),
        ({"sampling": '{"ignore_eos": "maybe"}'}, "sampling_parameters.ignore_eos: must be true or false"),
        (
            {"sampling": '{"n": 2}'},
            "sampling_parameters.n: unknown key; allowed keys are max_tokens, min_tokens",
        ),
        (
            {"sampling": '{"max_tokens": 8'},
            "sampling_parameters: not valid JSON: Expecting ',' delimiter (line 1 ",
        ),
        ({"sampling": "[1, 2]"}, "sampling_parameters: must be a JSON object, got an array"),
        ({"sampling": '"x"'}, "sampling_parameters: must be a JSON object, got a string"),
        ({"sampling": b"\xfe{}"}, "sampling_parameters: not valid UTF-8 at byte 0"),
        ({"sampling": 5}, "sampling_parameters: must be a JSON object string, got int"),
        ({"sampling": "[" * 9_000}, "sampling_parameters: must be at most 8192 bytes, got 9000"),
    ],
)
def test_bad_input_gets_one_clear_line(kwargs: dict, message: str) -> None:
    with pytest.raises(RequestError) as caught:
        _parse(**kwargs)
    assert str(caught.value).startswith(message)
    assert "\n" not in str(caught.value)


def test_max_tokens_bounds_come_from_the_limits() -> None:
    limits = RequestLimits(max_tokens_limit=100, default_max_tokens=50)
    assert _parse(limits=limits).sampling.max_tokens == 50
    with pytest.raises(RequestError, match="max_tokens: must be between 1 and 100, got 101"):
        _parse(sampling='{"max_tokens": 101}', limits=limits)


def test_prompt_limit_comes_from_the_limits() -> None:
    with pytest.raises(RequestError, match="at most 10 characters, got 11"):
        _parse("x" * 11, limits=RequestLimits(max_prompt_chars=10))


def test_deeply_nested_json_is_a_request_error() -> None:
    limits = RequestLimits(max_sampling_json_bytes=10_000_000)
    with pytest.raises(RequestError, match="sampling_parameters: not valid JSON"):
        parse_sampling('{"a": ' + "[" * 200_000 + "]" * 200_000 + "}", limits)


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        (
            {"max_tokens_limit": 0},
            "RequestLimits.max_tokens_limit: must be a whole number of at least 1, got 0",
        ),
        (
            {"default_max_tokens": 4096},
            "RequestLimits.default_max_tokens: must not exceed max_tokens_limit (2048)",
        ),
    ],
)
def test_limits_reject_inconsistent_values(kwargs: dict, message: str) -> None:
    with pytest.raises(ValueError) as caught:
        RequestLimits(**kwargs)
    assert str(caught.value).startswith(message)


def test_limits_from_environment() -> None:
    limits = RequestLimits.from_env(
        {"ASSISTANT_MAX_PROMPT_CHARS": "900", "ASSISTANT_MAX_TOKENS_LIMIT": "512"}
    )
    assert (limits.max_prompt_chars, limits.max_tokens_limit, limits.default_max_tokens) == (900, 512, 256)
    assert RequestLimits.from_env({}) == RequestLimits()
    with pytest.raises(ValueError, match="ASSISTANT_MAX_TOKENS_LIMIT: must be a whole number, got 'lots'"):
        RequestLimits.from_env({"ASSISTANT_MAX_TOKENS_LIMIT": "lots"})
    with pytest.raises(ValueError, match=r"must not exceed max_tokens_limit \(100\).*\(from environment\)"):
        RequestLimits.from_env({"ASSISTANT_MAX_TOKENS_LIMIT": "100"})


@given(st.binary(max_size=64), st.binary(max_size=200), st.one_of(st.none(), st.booleans()))
def test_arbitrary_bytes_give_a_request_or_a_request_error(
    text: bytes, sampling: bytes, stream: bool | None
) -> None:
    try:
        request = _parse(text, stream, sampling)
    except RequestError as exc:
        assert ": " in str(exc)
    else:
        assert request.text and request.sampling.max_tokens is not None


_JSON_VALUES = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=8),
    lambda children: (
        st.lists(children, max_size=3) | st.dictionaries(st.text(max_size=5), children, max_size=3)
    ),
    max_leaves=6,
)


@given(
    st.dictionaries(
        st.sampled_from([*SamplingSettings.model_fields, "n", "best_of"]), _JSON_VALUES, max_size=5
    )
)
def test_arbitrary_sampling_objects_never_escape_as_other_errors(settings: dict) -> None:
    try:
        sampling = parse_sampling(json.dumps(settings), LIMITS)
    except RequestError as exc:
        assert str(exc).startswith("sampling_parameters")
    else:
        kwargs = sampling.engine_kwargs()
        assert 1 <= kwargs["max_tokens"] <= LIMITS.max_tokens_limit
        assert set(kwargs) <= set(SamplingSettings.model_fields)
