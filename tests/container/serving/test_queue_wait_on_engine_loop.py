"""The queue-wait budget's edge: the model's request coroutine on an event loop, with an engine that keeps
vLLM's contract (closing or cancelling its generator aborts the request) and Triton's objects faked.

The real server's test (test_lifecycle_on_triton.py) shows the shed with vLLM; these show, fast, what it
cannot arrange: a queued request whose first output comes in time keeps streaming past the deadline, and
the admission count is released once whichever way the request ends."""

from __future__ import annotations

import asyncio
import threading
import time
from types import SimpleNamespace

import pytest

# The model's coroutine imports vLLM on its first request: here, so that no timing below holds the import.
import vllm.sampling_params  # noqa: F401

from assistant.prepare import PreparedRequest
from serving.outbox import LiveRequest
from serving.streaming_model import ServingRequest, StreamingModel

pytestmark = pytest.mark.vllm_version


class TritonError:
    UNAVAILABLE, CANCELLED, INVALID_ARG = "UNAVAILABLE", "CANCELLED", "INVALID_ARG"

    def __init__(self, message: str, code: str | None = None) -> None:
        self.message, self.code = message, code


FAKE_PB = SimpleNamespace(
    TRITONSERVER_RESPONSE_COMPLETE_FINAL=1,
    TritonError=TritonError,
    InferenceResponse=lambda output_tensors, error=None: SimpleNamespace(tensors=output_tensors, error=error),
    Tensor=lambda name, value: (name, value),
)


class Outbox:
    """Runs each job at once and keeps what was sent."""

    def __init__(self) -> None:
        self.sent: list[tuple[object, bool]] = []

    def put(self, job) -> None:
        job()

    def watch(self, live) -> None:
        pass

    def send(self, live, response, flags, *, final: bool) -> None:
        if final:
            live.final_queued = True
        self.sent.append((response, final))


class Engine:
    """Outputs like vLLM's: the first after `first_after_s`, then one every `gap_s`; aborted when its
    generator is cancelled or closed, as AsyncLLM.generate does."""

    def __init__(self, first_after_s: float, outputs: int = 3, gap_s: float = 0.0) -> None:
        self.first_after_s, self.outputs, self.gap_s = first_after_s, outputs, gap_s
        self.aborted: list[str] = []

    async def generate(self, prompt, params, request_id):
        try:
            await asyncio.sleep(self.first_after_s)
            for number in range(self.outputs):
                if number:
                    await asyncio.sleep(self.gap_s)
                choice = SimpleNamespace(text="x", token_ids=[number], index=0, finish_reason=None)
                yield SimpleNamespace(
                    outputs=[choice], prompt_token_ids=[1, 2, 3], finished=number == self.outputs - 1
                )
        except (asyncio.CancelledError, GeneratorExit):
            self.aborted.append(request_id)
            raise


class Model(StreamingModel):
    def __init__(self, engine: Engine, budget_ms: int | None) -> None:
        self.pb = FAKE_PB
        self.model_name = "passthrough"
        self.healthy = True
        self.live = {}
        self._busy_since = None
        self._last_output = 0.0
        self.outbox = Outbox()
        self.metrics = SimpleNamespace(live_counts=lambda in_flight, queued: None)
        self.engine_stats = SimpleNamespace(idle=lambda: None)
        self.engine = SimpleNamespace(engine=engine)
        self.queue_wait_budget_ms = budget_ms
        self._admission = threading.Lock()
        self._admitted = 1  # this request, admitted by execute()
        self.records: list[dict] = []

        async def prepare(text: str):
            return PreparedRequest(prompt=text), None

        self.prepare_worker = SimpleNamespace(prepare=prepare)

    def _record(self, request_id, outcome, ttft_ms, output_tokens, input_tokens, properties, waited_ms=None):
        self.records.append({"outcome": outcome, "output_tokens": output_tokens, **(properties or {})})


def serve(model: Model, deadline_after_s: float | None, *, stream: bool = True) -> float:
    """Run one request through the model's coroutine; the seconds it took."""
    parsed = ServingRequest(text="question", stream=stream, prepend_input=False, sampling={"max_tokens": 8})
    started = time.perf_counter()
    live = LiveRequest("request-1", sender=None, arrival=started, stream=stream)
    deadline = None if deadline_after_s is None else started + deadline_after_s
    asyncio.run(model._serve(live, parsed, deadline))
    return time.perf_counter() - started


@pytest.mark.parametrize("stream", [True, False])
def test_a_queued_request_past_its_budget_is_aborted_in_the_engine_and_shed(stream: bool) -> None:
    engine = Engine(first_after_s=5.0)
    model = Model(engine, budget_ms=100)
    took_s = serve(model, deadline_after_s=0.1, stream=stream)
    assert took_s < 2, "the request waited for the engine rather than its budget"
    assert engine.aborted == ["request-1"], "the engine request was not aborted"
    [(response, final)] = model.outbox.sent
    assert final and response.error.code == "UNAVAILABLE"
    assert response.error.message == (
        "passthrough is overloaded: no batch slot freed within 100 ms of arrival; "
        "retry (another host may have room)"
    )
    assert model.records == [
        {
            "outcome": "shed",
            "output_tokens": 0,
            "ShedCause": "queue-wait",
            "Intent": "none",
            "PrepareMs": None,
            "PrepareCpuMs": None,
            "PrepareRunQueueMs": None,
            "Stream": stream,
        }
    ]
    assert model._admitted == 0, "the admission count must be released exactly once"


@pytest.mark.parametrize("stream", [True, False])
def test_a_queued_request_whose_first_output_comes_in_time_streams_past_the_deadline(stream: bool) -> None:
    # First output at 50 ms of a 300 ms budget; the last two outputs come after the deadline.
    engine = Engine(first_after_s=0.05, outputs=3, gap_s=0.3)
    model = Model(engine, budget_ms=300)
    took_s = serve(model, deadline_after_s=0.3, stream=stream)
    assert took_s > 0.3 and engine.aborted == []
    assert [record["outcome"] for record in model.records] == ["completed"]
    assert all(response.error is None for response, _ in model.outbox.sent if response is not None)
    assert model._admitted == 0


def test_a_request_admitted_into_a_slot_has_no_deadline() -> None:
    engine = Engine(first_after_s=0.3)
    model = Model(engine, budget_ms=100)
    serve(model, deadline_after_s=None)
    assert engine.aborted == [] and [record["outcome"] for record in model.records] == ["completed"]
    assert model._admitted == 0
