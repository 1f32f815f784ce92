"""Request validation: Triton input tensors in, a checked AssistantRequest out, or one clear RequestError.

Every client mistake is found here, before the engine sees the request, so it is answered INVALID_ARG and
counted as rejected rather than as a server failure: the bounds and combinations of the sampling keys, the
keys the engine's platform would ignore, vLLM's own SamplingParams checks, and a prompt that does not fit
the engine's max_model_len.

Tensor names and defaults follow Triton's vLLM backend so its clients work unchanged: `stream` defaults to
false; `exclude_input_in_output` defaults to true when streaming and false otherwise, and false is refused
while streaming; `sampling_parameters` is a JSON object whose values may be JSON strings ("0.7"), as that
backend's own examples send them.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel, ConfigDict, ValidationError, ValidationInfo, field_validator

from assistant.sampling_platforms import CPU, SamplingPlatform
from assistant.validation import first_error

SAMPLING = "sampling_parameters"


class RequestError(ValueError):
    """A bad request; the message names the input (and key) and what is wrong, e.g.
    "sampling_parameters.max_tokens: must be between 1 and 2048, got 0"."""


@dataclass(frozen=True)
class RequestLimits:
    """Bounds that protect the engine and the batch: a host serves many streams at once."""

    max_prompt_chars: int = 4_000
    # The question's tokens, as the model's tokenizer counts them: on Neuron each long prefill pauses the
    # replica's other streams, and characters say little about tokens (a token is 1 to 4+ characters).
    max_prompt_tokens: int = 1_024
    max_tokens_limit: int = 2_048
    # vLLM's own default (16 tokens) cuts shopping answers short; clients that care send max_tokens.
    default_max_tokens: int = 256
    max_stop_sequences: int = 4
    max_stop_chars: int = 64
    max_sampling_json_bytes: int = 8_192

    def __post_init__(self) -> None:
        for name, value in vars(self).items():
            if not isinstance(value, int) or isinstance(value, bool) or value < 1:
                raise ValueError(f"RequestLimits.{name}: must be a whole number of at least 1, got {value!r}")
        if self.default_max_tokens > self.max_tokens_limit:
            raise ValueError(
                f"RequestLimits.default_max_tokens: must not exceed max_tokens_limit "
                f"({self.max_tokens_limit}), got {self.default_max_tokens}"
            )

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None) -> RequestLimits:
        """Limits with overrides from ASSISTANT_MAX_PROMPT_CHARS, ASSISTANT_MAX_TOKENS_LIMIT and
        ASSISTANT_DEFAULT_MAX_TOKENS, so one image can be tuned per instance type."""
        environ = os.environ if environ is None else environ
        overrides: dict[str, int] = {}
        for field_name, variable in (
            ("max_prompt_chars", "ASSISTANT_MAX_PROMPT_CHARS"),
            ("max_prompt_tokens", "ASSISTANT_MAX_PROMPT_TOKENS"),
            ("max_tokens_limit", "ASSISTANT_MAX_TOKENS_LIMIT"),
            ("default_max_tokens", "ASSISTANT_DEFAULT_MAX_TOKENS"),
        ):
            raw = environ.get(variable)
            if raw is None or not raw.strip():
                continue
            try:
                overrides[field_name] = int(raw)
            except ValueError:
                raise ValueError(f"{variable}: must be a whole number, got {raw!r}") from None
        try:
            return cls(**overrides)
        except ValueError as exc:
            raise ValueError(f"{exc} (from environment)") from None


def _between(value: float, low: float, high: float) -> float:
    if not low <= value <= high:
        raise ValueError(f"must be between {low} and {high}, got {value}")
    return value


class SamplingSettings(BaseModel):
    """The vLLM SamplingParams a client may set. None means "the engine's default"."""

    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False)

    max_tokens: int | None = None
    min_tokens: int | None = None
    temperature: float | None = None
    top_p: float | None = None
    top_k: int | None = None
    min_p: float | None = None
    presence_penalty: float | None = None
    frequency_penalty: float | None = None
    repetition_penalty: float | None = None
    stop: tuple[str, ...] | None = None
    seed: int | None = None

    @field_validator(
        "max_tokens",
        "min_tokens",
        "temperature",
        "top_p",
        "top_k",
        "min_p",
        "presence_penalty",
        "frequency_penalty",
        "repetition_penalty",
        "seed",
        mode="before",
    )
    @classmethod
    def _not_boolean(cls, value: Any) -> Any:
        # pydantic's lax mode reads true as 1; a boolean where a number belongs is a client bug.
        if isinstance(value, bool):
            raise ValueError(f"must be a number, got {str(value).lower()}")
        return value

    @staticmethod
    def _limits(info: ValidationInfo) -> RequestLimits:
        context = info.context or {}
        return context.get("limits") or RequestLimits()

    @field_validator("max_tokens", "min_tokens")
    @classmethod
    def _token_count(cls, value: int | None, info: ValidationInfo) -> int | None:
        if value is None:
            return None
        low = 1 if info.field_name == "max_tokens" else 0
        value = int(_between(value, low, cls._limits(info).max_tokens_limit))
        # max_tokens is declared first, so it is already checked when min_tokens is.
        max_tokens = info.data.get("max_tokens")
        if info.field_name == "min_tokens" and max_tokens is not None and value > max_tokens:
            raise ValueError(f"must not exceed max_tokens ({max_tokens}), got {value}")
        return value

    @field_validator("temperature")
    @classmethod
    def _temperature(cls, value: float | None) -> float | None:
        return None if value is None else _between(value, 0.0, 2.0)

    @field_validator("top_p")
    @classmethod
    def _top_p(cls, value: float | None) -> float | None:
        if value is not None and not 0.0 < value <= 1.0:
            raise ValueError(f"must be greater than 0 and at most 1, got {value}")
        return value

    @field_validator("min_p")
    @classmethod
    def _min_p(cls, value: float | None) -> float | None:
        return None if value is None else _between(value, 0.0, 1.0)

    @field_validator("top_k")
    @classmethod
    def _top_k(cls, value: int | None) -> int | None:
        if value is None or value in (-1, 0):
            # Both spellings of "disabled" across vLLM versions; leaving it unset works on all of them.
            return None
        if not 1 <= value <= 1_000:
            raise ValueError(f"must be -1 or 0 (disabled) or between 1 and 1000, got {value}")
        return value

    @field_validator("presence_penalty", "frequency_penalty")
    @classmethod
    def _penalty(cls, value: float | None) -> float | None:
        return None if value is None else _between(value, -2.0, 2.0)

    @field_validator("repetition_penalty")
    @classmethod
    def _repetition_penalty(cls, value: float | None) -> float | None:
        if value is not None and not 0.0 < value <= 2.0:
            raise ValueError(f"must be greater than 0 and at most 2, got {value}")
        return value

    @field_validator("seed")
    @classmethod
    def _seed(cls, value: int | None) -> int | None:
        return None if value is None else int(_between(value, 0, 2**63 - 1))

    @field_validator("stop", mode="before")
    @classmethod
    def _stop(cls, value: Any, info: ValidationInfo) -> Any:
        if value is None:
            return None
        stops = [value] if isinstance(value, str) else value
        if not isinstance(stops, list) or not all(isinstance(stop, str) for stop in stops):
            raise ValueError(f"must be a string or a list of strings, got {value!r}")
        limits = cls._limits(info)
        if len(stops) > limits.max_stop_sequences:
            raise ValueError(f"must hold at most {limits.max_stop_sequences} sequences, got {len(stops)}")
        for stop in stops:
            if not stop or len(stop) > limits.max_stop_chars:
                raise ValueError(
                    f"each sequence must be 1 to {limits.max_stop_chars} characters, got {stop!r}"
                )
        return tuple(stops)

    def engine_kwargs(self) -> dict[str, Any]:
        """Keyword arguments for vllm.SamplingParams: only what the client set, with max_tokens filled in."""
        kwargs = self.model_dump(exclude_none=True)
        if "stop" in kwargs:
            kwargs["stop"] = list(kwargs["stop"])
        return kwargs


@dataclass(frozen=True)
class AssistantRequest:
    text: str
    stream: bool
    exclude_input_in_output: bool
    sampling: SamplingSettings


def _decode(name: str, value: bytes | bytearray | memoryview | str) -> str:
    if isinstance(value, str):
        return value
    try:
        return bytes(value).decode("utf-8")
    except UnicodeDecodeError as exc:
        raise RequestError(f"{name}: not valid UTF-8 at byte {exc.start}") from None


def _flag(name: str, value: object) -> bool | None:
    if value is None:
        return None
    if hasattr(value, "item"):  # a numpy scalar such as numpy.bool_ from a Triton BOOL tensor
        value = value.item()
    if isinstance(value, bool):
        return value
    if isinstance(value, int) and value in (0, 1):
        return bool(value)
    raise RequestError(f"{name}: must be true or false, got {value!r}")


def parse_text(text_input: object, limits: RequestLimits, *, strip: bool = True) -> str:
    if text_input is None:
        raise RequestError("text_input: is required")
    if not isinstance(text_input, str | bytes | bytearray | memoryview):
        raise RequestError(f"text_input: must be a string, got {type(text_input).__name__}")
    text = _decode("text_input", text_input)
    if strip:
        text = text.strip()
    if not text.strip():
        raise RequestError("text_input: must not be empty")
    if "\x00" in text:
        # A NUL in a prompt is never a real question and breaks C-string handling downstream.
        raise RequestError(f"text_input: contains a NUL character at position {text.index(chr(0))}")
    if len(text) > limits.max_prompt_chars:
        limit = limits.max_prompt_chars
        raise RequestError(f"text_input: must be at most {limit} characters, got {len(text)}")
    return text


# Keys of vLLM's SamplingParams that a shopper's front end must not set on this model, and why.
NOT_CLIENT_SETTABLE = {
    "ignore_eos": "not settable on this model (an answer ends where the model ends its turn)",
}


def parse_sampling(
    sampling_parameters: object, limits: RequestLimits, platform: SamplingPlatform = CPU
) -> SamplingSettings:
    """The sampling settings from the JSON object string; max_tokens defaults to limits.default_max_tokens.
    A key the engine's platform would ignore is refused."""
    settings: dict[str, Any] = {}
    if sampling_parameters is not None:
        if not isinstance(sampling_parameters, str | bytes | bytearray | memoryview):
            kind = type(sampling_parameters).__name__
            raise RequestError(f"{SAMPLING}: must be a JSON object string, got {kind}")
        raw_bytes = (
            sampling_parameters.encode() if isinstance(sampling_parameters, str) else sampling_parameters
        )
        if len(raw_bytes) > limits.max_sampling_json_bytes:
            limit = limits.max_sampling_json_bytes
            raise RequestError(f"{SAMPLING}: must be at most {limit} bytes, got {len(raw_bytes)}")
        raw = _decode(SAMPLING, sampling_parameters)
        if raw.strip():
            try:
                parsed = json.loads(raw)
            except json.JSONDecodeError as exc:
                raise RequestError(
                    f"{SAMPLING}: not valid JSON: {exc.msg} (line {exc.lineno} column {exc.colno})"
                ) from None
            except RecursionError:
                raise RequestError(f"{SAMPLING}: not valid JSON: nested too deeply") from None
            if not isinstance(parsed, dict):
                raise RequestError(f"{SAMPLING}: must be a JSON object, got {_json_kind(parsed)}")
            # The vLLM backend treats null as "use the default"; so do we.
            settings = {key: value for key, value in parsed.items() if value is not None}
    refused = sorted(set(settings) & set(NOT_CLIENT_SETTABLE))
    if refused:
        raise RequestError(f"{SAMPLING}.{refused[0]}: {NOT_CLIENT_SETTABLE[refused[0]]}")
    unknown = sorted(set(settings) - set(SamplingSettings.model_fields))
    if unknown:
        allowed = ", ".join(SamplingSettings.model_fields)
        raise RequestError(f"{SAMPLING}.{unknown[0]}: unknown key; allowed keys are {allowed}")
    settings.setdefault("max_tokens", limits.default_max_tokens)
    try:
        checked = SamplingSettings.model_validate(settings, context={"limits": limits})
    except ValidationError as exc:
        field, message = first_error(exc)
        raise RequestError(f"{SAMPLING}.{field}: {message}") from None
    refusal = platform.refusal(checked.engine_kwargs())
    if refusal is not None:
        raise RequestError(f"{SAMPLING}.{refusal[0]}: {refusal[1]}")
    return checked


def build_sampling_params(kwargs: Mapping[str, Any]):
    """vLLM's SamplingParams from the client's keys, with vLLM's own checks (ranges, combinations) run now.

    vLLM raises ValueError up to 0.1x and VLLMValidationError (not a ValueError) in 0.3x; whichever it is,
    values the client chose made it, so it is the client's error."""
    from vllm import SamplingParams

    try:
        return SamplingParams(**kwargs)
    except Exception as err:  # any refusal of client values is a bad request
        raise RequestError(f"{SAMPLING}: {err}") from None


def check_question_tokens(text: str, count_tokens: Callable[[str], int], limits: RequestLimits) -> int:
    """RequestError when the question is more tokens than limits.max_prompt_tokens; else its count. The
    character limit has bounded the text already, so counting costs at most a few milliseconds."""
    tokens = count_tokens(text)
    if tokens > limits.max_prompt_tokens:
        raise RequestError(f"text_input: must be at most {limits.max_prompt_tokens} tokens, got {tokens}")
    return tokens


def check_prompt_fits(
    prompt: str,
    count_tokens: Callable[[str], int],
    max_model_len: int,
    *,
    max_token_bytes: int | None = None,
    what: str = "the prompt it makes",
) -> int | None:
    """RequestError unless the prompt leaves the engine room for one token; returns the prompt's tokens,
    or None where it was not counted.

    A token covers at least one byte, so a prompt of fewer bytes than max_model_len (less two for the BOS
    and EOS a tokenizer may add) fits without tokenizing it here a second time; and where no token covers
    more than max_token_bytes, a prompt of more bytes than max_model_len times that is too long without
    tokenizing it at all (a 10 MB prompt must not stall the engine loop)."""
    size = len(prompt.encode("utf-8"))
    if size < max_model_len - 2:
        return None
    if max_token_bytes is not None and size > max_model_len * max_token_bytes:
        raise RequestError(
            f"text_input: {what} is {size} bytes, more than the model's limit of {max_model_len} tokens "
            "(max_model_len) can hold"
        )
    tokens = count_tokens(prompt)
    if tokens >= max_model_len:
        raise RequestError(
            f"text_input: {what} is {tokens} tokens, at or above the model's limit of "
            f"{max_model_len} (max_model_len); send a shorter one"
        )
    return tokens


def _json_kind(value: object) -> str:
    kinds = {list: "an array", str: "a string", bool: "a boolean", int: "a number", float: "a number"}
    return kinds.get(type(value), "null")


def parse_request(
    text_input: bytes | str | None,
    stream: bool | None,
    sampling_parameters: bytes | str | None,
    exclude_input_in_output: bool | None,
    *,
    limits: RequestLimits,
    platform: SamplingPlatform = CPU,
) -> AssistantRequest:
    """Validates one request's inputs (None = tensor absent). Raises RequestError with a one-line message."""
    text = parse_text(text_input, limits)
    streaming = bool(_flag("stream", stream))
    exclude = _flag("exclude_input_in_output", exclude_input_in_output)
    if exclude is None:
        exclude = streaming
    elif streaming and not exclude:
        raise RequestError(
            "exclude_input_in_output: must be true when stream is true (as in Triton's vLLM backend)"
        )
    sampling = parse_sampling(sampling_parameters, limits, platform)
    return AssistantRequest(text=text, stream=streaming, exclude_input_in_output=exclude, sampling=sampling)
