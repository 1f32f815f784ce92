"""A tritonclient gRPC streaming client for the assistant's tensor contract (ask, tests and benchmarks)."""

from __future__ import annotations

import json
import queue
import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import tritonclient.grpc as grpcclient
from tritonclient.utils import InferenceServerException


@dataclass
class StreamResult:
    text: str = ""
    chunks: list[str] = field(default_factory=list)
    products: list[dict[str, Any]] = field(default_factory=list)
    responses_with_products: int = 0
    ttft_s: float | None = None
    total_s: float = 0.0
    error: str | None = None
    status: str | None = None  # the error's gRPC status, e.g. "StatusCode.UNAVAILABLE"
    # The sampling keys the request ran with, when asked for (`return_sampling_parameters`).
    sampling_used: dict[str, Any] | None = None

    @property
    def tokens_per_s(self) -> float:
        generating = self.total_s - (self.ttft_s or 0.0)
        return len(self.chunks) / generating if generating > 0 else 0.0


def request_inputs(
    question: str | bytes, *, stream: bool = True, sampling: dict[str, Any] | str | None = None
) -> list[grpcclient.InferInput]:
    raw = question if isinstance(question, bytes) else question.encode("utf-8")
    text = grpcclient.InferInput("text_input", [1], "BYTES")
    text.set_data_from_numpy(np.array([raw], dtype=np.object_))
    stream_flag = grpcclient.InferInput("stream", [1], "BOOL")
    stream_flag.set_data_from_numpy(np.array([stream], dtype=bool))
    inputs = [text, stream_flag]
    if sampling is not None:
        encoded = sampling if isinstance(sampling, str) else json.dumps(sampling)
        params = grpcclient.InferInput("sampling_parameters", [1], "BYTES")
        params.set_data_from_numpy(np.array([encoded.encode("utf-8")], dtype=np.object_))
        inputs.append(params)
    return inputs


def tensor_inputs(values: dict[str, Any]) -> list[grpcclient.InferInput]:
    """Inputs from plain values: bool -> BOOL, str/bytes -> BYTES (one element each), as clients send them."""
    inputs = []
    for name, value in values.items():
        if isinstance(value, bool):
            tensor = grpcclient.InferInput(name, [1], "BOOL")
            tensor.set_data_from_numpy(np.array([value], dtype=bool))
        else:
            raw = value if isinstance(value, bytes) else str(value).encode("utf-8")
            tensor = grpcclient.InferInput(name, [1], "BYTES")
            tensor.set_data_from_numpy(np.array([raw], dtype=np.object_))
        inputs.append(tensor)
    return inputs


@dataclass
class RawResponse:
    outputs: dict[str, Any]
    final: bool


@dataclass
class RawResult:
    responses: list[RawResponse] = field(default_factory=list)
    error: str | None = None


def raw_request(
    url: str,
    model: str,
    values: dict[str, Any],
    *,
    parameters: dict[str, Any] | None = None,
    output_names: tuple[str, ...] = (),
    timeout_s: float = 120.0,
) -> RawResult:
    """One request on its own gRPC stream, every response's named outputs as numpy arrays (a client of
    Triton's stock vLLM backend, for the compatibility tests)."""
    responses: queue.Queue = queue.Queue()
    client = grpcclient.InferenceServerClient(url=url)
    result = RawResult()
    try:
        client.start_stream(callback=lambda result, error: responses.put((result, error)))
        client.async_stream_infer(
            model,
            tensor_inputs(values),
            request_id=uuid.uuid4().hex,
            parameters=parameters,
            enable_empty_final_response=True,
        )
        while True:
            response, error = responses.get(timeout=timeout_s)
            if error is not None:
                result.error = error.message() if isinstance(error, InferenceServerException) else str(error)
                break
            outputs = {name: response.as_numpy(name) for name in ("text_output", *output_names)}
            result.responses.append(RawResponse(outputs, _is_final(response)))
            if _is_final(response):
                break
    finally:
        client.stop_stream()
        client.close()
    return result


def _decode(result, name: str) -> str | None:
    array = result.as_numpy(name)
    if array is None or array.size == 0:
        return None
    value = array.reshape(-1)[0]
    return value.decode("utf-8") if isinstance(value, bytes) else str(value)


def _is_final(result) -> bool:
    parameters = result.get_response().parameters
    return "triton_final_response" in parameters and parameters["triton_final_response"].bool_param


class StreamingClient:
    """One gRPC stream; requests on it are answered in turn. Use as a context manager."""

    def __init__(self, url: str) -> None:
        self.client = grpcclient.InferenceServerClient(url=url)
        self._responses: queue.Queue = queue.Queue()
        self.client.start_stream(callback=lambda result, error: self._responses.put((result, error)))

    def ask(
        self,
        question: str | bytes,
        *,
        model: str = "assistant",
        sampling: dict[str, Any] | str | None = None,
        stream: bool = True,
        on_chunk: Callable[[str], None] | None = None,
        cancel_after_chunks: int | None = None,
        cancel_after_s: float | None = None,
        cancel_when: threading.Event | None = None,
        timeout_s: float = 120.0,
        extra_inputs: dict[str, Any] | None = None,
    ) -> StreamResult:
        """One request on this stream. `cancel_after_s` cancels it at a moment after sending; `cancel_when`
        cancels it when another thread sets the event (a request held open until a test is done with it,
        however long the machine takes to bring the others up)."""
        result = StreamResult()
        started = time.perf_counter()
        self.client.async_stream_infer(
            model,
            request_inputs(question, stream=stream, sampling=sampling) + tensor_inputs(extra_inputs or {}),
            request_id=uuid.uuid4().hex,
            enable_empty_final_response=True,
        )
        while True:
            if cancel_when is not None:
                response, error = self._next_unless(cancel_when, started + timeout_s)
                if response is None and error is None:
                    self.client.stop_stream(cancel_requests=True)
                    if not cancel_when.is_set():
                        result.error = f"no response within {timeout_s:g} s"
                    break
            elif cancel_after_s is not None:
                # Cancel at a moment, whatever has arrived by then (a queued or non-streaming request).
                try:
                    response, error = self._responses.get(
                        timeout=max(0.0, started + cancel_after_s - time.perf_counter())
                    )
                except queue.Empty:
                    self.client.stop_stream(cancel_requests=True)
                    break
            else:
                try:
                    response, error = self._responses.get(timeout=timeout_s)
                except queue.Empty:
                    # Cancel what the server still holds: closing a stream otherwise waits for its end,
                    # which a hung server never sends.
                    self.client.stop_stream(cancel_requests=True)
                    result.error = f"no response within {timeout_s:g} s"
                    break
            if error is not None:
                result.error = error.message() if isinstance(error, InferenceServerException) else str(error)
                result.status = error.status() if isinstance(error, InferenceServerException) else None
                break
            text = _decode(response, "text_output")
            if text is not None:
                if result.ttft_s is None:
                    result.ttft_s = time.perf_counter() - started
                result.chunks.append(text)
                result.text += text
                if on_chunk is not None:
                    on_chunk(text)
            products = _decode(response, "products")
            if products is not None:
                result.products = json.loads(products)
                result.responses_with_products += 1
            used = _decode(response, "sampling_parameters_used")
            if used is not None:
                result.sampling_used = json.loads(used)
            if _is_final(response):
                break
            if cancel_after_chunks is not None and len(result.chunks) >= cancel_after_chunks:
                self.client.stop_stream(cancel_requests=True)
                break
        result.total_s = time.perf_counter() - started
        return result

    def _next_unless(self, cancel: threading.Event, deadline: float) -> tuple[Any, Any]:
        """The next response, or (None, None) once `cancel` is set or the deadline has passed."""
        while not cancel.is_set() and time.perf_counter() < deadline:
            try:
                return self._responses.get(timeout=0.05)
            except queue.Empty:
                continue
        return None, None

    def close(self) -> None:
        self.client.stop_stream()
        self.client.close()

    def __enter__(self) -> StreamingClient:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()
