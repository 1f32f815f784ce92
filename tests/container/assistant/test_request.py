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
    build_sampling_params,
    check_prompt_fits,
    parse_request,
    parse_sampling,
)
from assistant.sampling_platforms import (
    CPU,
    NEURON,
    SamplingPlatform,
    active_engine_platform,
    resolve_platform,
)

pytestmark = pytest.mark.vllm_version

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
        ({"sampling": '{"ignore_eos": true}'}, "sampling_parameters.ignore_eos: not settable on this model"),
        (
            {"sampling": '{"max_tokens": 8, "min_tokens": 9}'},
            "sampling_parameters.min_tokens: must not exceed max_tokens (8), got 9",
        ),
        (
            {"sampling": '{"min_tokens": 300}'},
            "sampling_parameters.min_tokens: must not exceed max_tokens (256), got 300",
        ),
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


# ---- what the engine's platform honours (vllm-neuron samples on the device: temperature, top_p, top_k) ----
@pytest.mark.parametrize(
    ("sampling", "message"),
    [
        ('{"min_p": 0.1}', "sampling_parameters.min_p: not supported on neuron"),
        ('{"presence_penalty": 0.5}', "sampling_parameters.presence_penalty: not supported on neuron"),
        ('{"frequency_penalty": 0.5}', "sampling_parameters.frequency_penalty: not supported on neuron"),
        ('{"repetition_penalty": 1.2}', "sampling_parameters.repetition_penalty: not supported on neuron"),
        ('{"seed": 7}', "sampling_parameters.seed: not supported on neuron"),
        ('{"min_tokens": 4}', "sampling_parameters.min_tokens: not supported on neuron"),
        ('{"top_k": 257}', "sampling_parameters.top_k: must be at most 256 on neuron"),
    ],
)
def test_keys_neuron_would_ignore_are_refused_there(sampling: str, message: str) -> None:
    with pytest.raises(RequestError, match=f"^{message}"):
        parse_sampling(sampling, LIMITS, NEURON)
    parse_sampling(sampling, LIMITS, CPU)  # vLLM's own sampler on the CPU honours every one


def test_neuron_takes_what_its_sampler_uses_and_neutral_values_of_the_rest() -> None:
    sampling = '{"temperature": 0.7, "top_p": 0.9, "top_k": 256, "max_tokens": 32, "stop": ["END"], '
    sampling += '"min_p": 0, "repetition_penalty": 1.0, "min_tokens": 0, "top_k": 256}'
    assert parse_sampling(sampling, LIMITS, NEURON).engine_kwargs() == {
        "max_tokens": 32,
        "temperature": 0.7,
        "top_p": 0.9,
        "top_k": 256,
        "stop": ["END"],
        "min_p": 0.0,
        "min_tokens": 0,
        "repetition_penalty": 1.0,
    }


@pytest.mark.parametrize(
    ("environ", "engine_platform", "expected"),
    [
        ({}, "vllm.platforms.cpu", CPU),
        ({}, "vllm_neuron.platform", NEURON),
        ({"NEURON_ON_DEVICE_SAMPLING_DISABLED": "1"}, "vllm_neuron.platform", CPU),
        # vllm-neuron reads bool(int(value)): any whole number but 0 samples on the CPU.
        ({"NEURON_ON_DEVICE_SAMPLING_DISABLED": "2"}, "vllm_neuron.platform", CPU),
        ({"NEURON_ON_DEVICE_SAMPLING_DISABLED": "0"}, "vllm_neuron.platform", NEURON),
        ({"SAMPLING_PLATFORM": "neuron"}, "vllm.platforms.cpu", NEURON),
    ],
)
def test_the_platform_comes_from_the_engine_unless_set(
    environ: dict, engine_platform: str, expected: SamplingPlatform
) -> None:
    assert resolve_platform(environ, engine_platform) is expected


@pytest.mark.parametrize("value", ["true", "yes", "on"])
def test_a_cpu_sampling_switch_vllm_neuron_cannot_read_is_refused(value: str) -> None:
    """vllm-neuron crashed at load on "true", which the kit had read as CPU sampling."""
    with pytest.raises(ValueError, match=f"NEURON_ON_DEVICE_SAMPLING_DISABLED: must be 1 .* got '{value}'"):
        resolve_platform({"NEURON_ON_DEVICE_SAMPLING_DISABLED": value}, "vllm_neuron.platform")


def test_an_unknown_platform_setting_names_the_variable() -> None:
    with pytest.raises(ValueError, match="SAMPLING_PLATFORM: must be one of cpu, neuron, got 'tpu'"):
        resolve_platform({"SAMPLING_PLATFORM": "tpu"}, "vllm.platforms.cpu")


def test_the_live_engine_platform_here_is_cpu() -> None:
    assert resolve_platform({}, active_engine_platform()) is CPU


# ---- vLLM's own checks and the prompt's length, before the engine ----
@pytest.mark.parametrize(
    ("kwargs", "fragment"),
    [
        ({"max_tokens": 4, "min_tokens": 5}, "min_tokens must be less than or equal to max_tokens=4"),
        ({"n": 0}, "n must be at least 1"),
        ({"stop": [""]}, "stop cannot contain an empty string"),
    ],
)
def test_vllm_refusals_are_request_errors(kwargs: dict, fragment: str) -> None:
    with pytest.raises(RequestError, match=f"^sampling_parameters: .*{fragment}"):
        build_sampling_params(kwargs)


def test_valid_keys_build_vllm_sampling_params() -> None:
    params = build_sampling_params({"max_tokens": 9, "temperature": 0.3, "stop": ["END"]})
    assert (params.max_tokens, params.temperature, params.stop) == (9, 0.3, ["END"])


def test_a_short_prompt_is_not_tokenized_again() -> None:
    def count(text: str) -> int:
        raise AssertionError("tokenized")

    assert check_prompt_fits("x" * 2_000, count, max_model_len=2_048) is None


@pytest.mark.parametrize(("tokens", "fits"), [(2_047, True), (2_048, False), (9_000, False)])
def test_a_prompt_must_leave_room_for_a_token(tokens: int, fits: bool) -> None:
    prompt = "word " * 2_000
    if fits:
        assert check_prompt_fits(prompt, lambda text: tokens, max_model_len=2_048) == tokens
    else:
        with pytest.raises(RequestError, match=f"^text_input: the prompt it makes is {tokens} tokens, at or"):
            check_prompt_fits(prompt, lambda text: tokens, max_model_len=2_048)


@given(st.text(max_size=300), st.integers(min_value=3, max_value=400))
def test_skipping_the_count_never_lets_a_long_prompt_through(prompt: str, max_model_len: int) -> None:
    """A byte-level tokenizer's worst case is a token per byte, plus BOS and EOS."""

    def worst_case(text: str) -> int:
        return len(text.encode("utf-8")) + 2

    try:
        counted = check_prompt_fits(prompt, worst_case, max_model_len)
    except RequestError:
        return
    assert (counted if counted is not None else worst_case(prompt)) < max_model_len


def test_a_prompt_too_big_for_any_tokenization_is_refused_without_tokenizing() -> None:
    def count(text: str) -> int:
        raise AssertionError("tokenized")

    with pytest.raises(RequestError, match=r"^text_input: the prompt is 20481 bytes, more than the model's"):
        check_prompt_fits("x" * 20_481, count, max_model_len=2_048, max_token_bytes=10, what="the prompt")
    assert (
        check_prompt_fits("x" * 20_480, lambda text: 2_000, max_model_len=2_048, max_token_bytes=10) == 2_000
    )


# ---- the question's size in tokens, as the model's tokenizer counts them ----
@pytest.fixture(scope="module")
def tiny_chat():
    """The tiny test model's own tokenizer (built once under build/test-assets)."""
    from assistant.chat import ChatFormat
    from local.demo_assets import REPO_DIR, ensure_demo_assets

    return ChatFormat.load(
        str(ensure_demo_assets(REPO_DIR / "build" / "test-assets", products=2_000).model_dir)
    )


def test_a_question_over_the_token_limit_is_refused_with_its_count() -> None:
    from assistant.request import check_question_tokens

    limits = RequestLimits(max_prompt_tokens=5)
    words = lambda text: len(text.split())  # noqa: E731 - a tokenizer stand-in: one token a word
    assert check_question_tokens("waterproof hiking boots", words, limits) == 3
    with pytest.raises(RequestError, match="text_input: must be at most 5 tokens, got 6"):
        check_question_tokens("a b c d e f", words, limits)


def test_the_token_limit_is_tuned_per_instance_type_from_the_environment() -> None:
    assert RequestLimits.from_env({"ASSISTANT_MAX_PROMPT_TOKENS": "256"}).max_prompt_tokens == 256
    assert RequestLimits().max_prompt_tokens == 1_024


def test_a_question_within_the_character_limit_can_exceed_the_token_limit_with_the_real_tokenizer(
    tiny_chat,
) -> None:
    """Characters say little about tokens: 4,000 characters of digits and symbols are far more tokens
    than 4,000 of words."""
    from assistant.request import check_question_tokens

    limits = RequestLimits()
    dense = "7#" * 1_999
    assert len(dense) <= limits.max_prompt_chars
    with pytest.raises(RequestError, match="tokens"):
        check_question_tokens(dense, tiny_chat.count_tokens, limits)
