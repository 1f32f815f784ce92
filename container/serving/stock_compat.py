"""What clients of Triton's stock vLLM backend send and expect, for the `passthrough` model.

Taken from the backend's behaviour (triton-inference-server/vllm_backend, src/utils/request.py): sampling
options come from the `sampling_parameters` tensor or, without it, from the request's parameters; any vLLM
SamplingParams key is accepted, with values converted to the key's type (the backend's own examples send
"0.7" as a string); `exclude_input_in_output` false is refused while streaming, with the backend's message;
the optional `return_*` inputs add outputs. One difference on purpose: "false" as a string is false here
(the backend's bool("false") is true).
"""

from __future__ import annotations

import json
import typing
from collections.abc import Mapping
from typing import Any

from assistant.request import RequestError

ADDITIONAL_OUTPUTS = (
    "return_finish_reason",
    "return_cumulative_logprob",
    "return_logprobs",
    "return_num_input_tokens",
    "return_num_output_tokens",
)
STREAM_PREPEND_ERROR = (
    "Error generating stream: When streaming, `exclude_input_in_output` = False is not allowed."
)
_SCALARS = (int, float, bool, str)


def prepend_input(stream: bool, exclude_input_in_output: bool | None) -> bool:
    """Whether the prompt goes in front of the output, as the stock backend decides it."""
    prepend = (not exclude_input_in_output) if exclude_input_in_output is not None else not stream
    if prepend and stream:
        raise RequestError(STREAM_PREPEND_ERROR)
    return prepend


def _scalar_type(annotation: Any) -> type | None:
    if annotation in _SCALARS:
        return annotation
    arguments = [arg for arg in typing.get_args(annotation) if arg is not type(None)]
    if len(arguments) == 1 and arguments[0] in _SCALARS:
        return arguments[0]
    return None


def _convert(key: str, value: Any, kind: type) -> Any:
    if kind is bool and isinstance(value, str):
        lowered = value.strip().lower()
        if lowered not in {"true", "false", "1", "0"}:
            raise RequestError(f"sampling_parameters.{key}: must be true or false, got {value!r}")
        return lowered in {"true", "1"}
    try:
        return kind(value)
    except (TypeError, ValueError):
        raise RequestError(f"sampling_parameters.{key}: must be {kind.__name__}, got {value!r}") from None


def sampling_kwargs(raw: str | bytes | None) -> dict[str, Any]:
    """vllm.SamplingParams keyword arguments from the JSON the client sent (tensor or request parameters)."""
    from vllm import SamplingParams
    from vllm.sampling_params import StructuredOutputsParams

    if raw is None:
        return {}
    text = raw.decode("utf-8") if isinstance(raw, bytes) else raw
    if not text.strip():
        return {}
    try:
        params = json.loads(text)
    except json.JSONDecodeError as err:
        raise RequestError(f"sampling_parameters: not valid JSON: {err.msg}") from None
    if not isinstance(params, dict):
        raise RequestError("sampling_parameters: must be a JSON object")
    annotations = SamplingParams.__annotations__
    kwargs: dict[str, Any] = {}
    for key, value in params.items():
        if key.startswith("_") or key not in annotations:
            raise RequestError(f"sampling_parameters.{key}: unknown key; see vllm.SamplingParams")
        if key == "structured_outputs":
            spec = json.loads(value) if isinstance(value, str) else value
            kwargs[key] = StructuredOutputsParams(**spec)
            continue
        kind = _scalar_type(annotations[key])
        kwargs[key] = _convert(key, value, kind) if kind is not None and value is not None else value
    return kwargs


def flags(values: Mapping[str, Any]) -> frozenset[str]:
    """The return_* inputs that are set to true."""
    return frozenset(
        name for name in ADDITIONAL_OUTPUTS if values.get(name) is not None and bool(values[name])
    )


def logprobs_json(logprobs: list | None) -> bytes:
    if logprobs is None:
        return b"null"
    entries = [
        {
            token_id: {"logprob": entry.logprob, "rank": entry.rank, "decoded_token": entry.decoded_token}
            for token_id, entry in position.items()
        }
        for position in logprobs
    ]
    return json.dumps(entries).encode("utf-8")
