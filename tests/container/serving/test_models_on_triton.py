"""The assistant model on a real Triton server with a real vLLM engine, through tritonclient and HTTP."""

from __future__ import annotations

import json
import re
import threading
import time
import urllib.error
import urllib.request
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from local.client import StreamingClient, StreamResult
from local.triton_server import ServerError, TritonServer
from tests.container.conftest import (
    TEST_INSTANCE_TYPE,
    TEST_SLOW_FIRST_TOKEN_MS,
    emf_lines,
    read_metrics,
    wait_for,
)

pytestmark = [pytest.mark.serving, pytest.mark.vllm_version]

MODEL = 'model="assistant",replica="0"'
# min_tokens = max_tokens: a random-weight model may end early; these tests need a known number of tokens
# (ignore_eos is not client-settable on the assistant).
SHORT = {"max_tokens": 24, "min_tokens": 24, "temperature": 0.8}


def settled_metrics(triton: TritonServer) -> dict[str, float]:
    """Metrics once no request is in flight: a request's counters move just after its final response."""
    in_flight = f"llm_requests_in_flight{{{MODEL}}}"

    def settled() -> dict[str, float] | None:
        metrics = read_metrics(triton)
        return metrics if metrics.get(in_flight, 0.0) == 0 else None

    metrics = wait_for(settled)
    assert metrics is not None, "requests still in flight after 15 s"
    return metrics


def test_grpc_stream_arrives_token_by_token(triton: TritonServer) -> None:
    with StreamingClient(triton.grpc_url) as client:
        result = client.ask("waterproof hiking boots", sampling=SHORT)
    assert result.error is None
    assert len(result.chunks) >= 8, f"expected many streamed responses, got {result.chunks!r}"
    assert "".join(result.chunks) == result.text and result.text.strip()
    assert result.ttft_s is not None and result.ttft_s < result.total_s


def test_first_response_carries_product_cards(triton: TritonServer) -> None:
    with StreamingClient(triton.grpc_url) as client:
        result = client.ask("waterproof hiking boots", sampling=SHORT)
    assert result.responses_with_products == 1
    assert result.products, "a product search must return product cards"
    for card in result.products:
        assert set(card) == {"id", "title", "price", "currency", "rating", "review_count", "url", "image_url"}
        assert card["url"].startswith("https://")
    assert any("boot" in card["title"].lower() for card in result.products)


def test_off_topic_question_gets_no_products(triton: TritonServer) -> None:
    with StreamingClient(triton.grpc_url) as client:
        result = client.ask("who won the election for president", sampling=SHORT)
    assert result.error is None
    assert result.products == []


def test_non_streaming_request_gets_one_response_with_the_question_prepended(triton: TritonServer) -> None:
    with StreamingClient(triton.grpc_url) as client:
        result = client.ask("camping tent", sampling=SHORT, stream=False)
    assert result.error is None
    assert len(result.chunks) == 1
    assert result.text.startswith("camping tent")


def test_http_generate_stream(triton: TritonServer) -> None:
    body = json.dumps(
        {"text_input": "espresso machine", "stream": True, "sampling_parameters": json.dumps(SHORT)}
    ).encode()
    request = urllib.request.Request(
        f"http://{triton.http_url}/v2/models/assistant/generate_stream", data=body, method="POST"
    )
    with urllib.request.urlopen(request, timeout=60) as response:
        events = [
            json.loads(line[len("data:") :])
            for line in response.read().decode().splitlines()
            if line.startswith("data:")
        ]
    texts = [event["text_output"] for event in events if "text_output" in event]
    assert len(texts) >= 8
    assert json.loads(events[0]["products"]), "the first event carries the product cards"
    assert not any("error" in event for event in events)


def test_sixteen_concurrent_streams_all_complete(triton: TritonServer) -> None:
    questions = [f"{thing} for a weekend trip" for thing in ("tent", "boots", "jacket", "stove")] * 4
    all_connected = threading.Barrier(len(questions))

    def one_stream(question: str):
        with StreamingClient(triton.grpc_url) as client:
            all_connected.wait(timeout=30)
            started = time.monotonic()
            result = client.ask(question, sampling={"max_tokens": 48, "min_tokens": 48})
            return started, started + result.total_s, result

    with ThreadPoolExecutor(max_workers=len(questions)) as pool:
        outcomes = list(pool.map(one_stream, questions))
    results = [result for _, _, result in outcomes]
    assert [result.error for result in results] == [None] * 16
    assert all(len(result.chunks) >= 8 and result.text for result in results)
    # They really ran together: at some moment most of the 16 streams were open at once.
    peak = max(sum(start <= moment < end for start, end, _ in outcomes) for moment, _, _ in outcomes)
    assert peak >= 12, f"only {peak} streams overlapped"


def _cancel_after_three_chunks(triton: TritonServer, max_tokens: int) -> tuple[dict, dict | None]:
    before = settled_metrics(triton)
    client = StreamingClient(triton.grpc_url)
    try:
        result = client.ask(
            "hiking boots",
            sampling={"max_tokens": max_tokens, "min_tokens": max_tokens},
            cancel_after_chunks=3,
        )
    finally:
        client.close()
    assert len(result.chunks) == 3
    cancelled_key = 'llm_requests_total{model="assistant",outcome="cancelled",replica="0"}'

    def slot_freed() -> dict[str, float] | None:
        now = read_metrics(triton)
        return now if now[cancelled_key] > before.get(cancelled_key, 0.0) else None

    return before, wait_for(slot_freed, timeout_s=20.0)


def test_cancellation_aborts_the_engine_request_and_frees_the_slot(triton: TritonServer) -> None:
    max_tokens = 2_000  # the container's limit is 2,048

    def generated_after_cancel() -> float | None:
        """Tokens the engine made from the stream's start to the recorded cancel; None: no cancel seen."""
        before, after = _cancel_after_three_chunks(triton, max_tokens)
        if after is None:
            return None
        assert after[f"llm_requests_in_flight{{{MODEL}}}"] == 0
        return after[f"llm_output_tokens_total{{{MODEL}}}"] - before[f"llm_output_tokens_total{{{MODEL}}}"]

    # With both cores saturated, Triton 2.51's gRPC frontend was measured holding a stream's responses
    # until its last one, and the edge in front of it (container/edge) relays what it gets, so the client's
    # cancel can come after the request has ended or nearly so. One more try tells that from a model that
    # ignores cancellation, which fails both. The engine also runs on while the client's side waits for the
    # cores: a fresh-clone CI run beside two game-day runs saw 456 and then 235 tokens before the cancel
    # took, so the bar is half the answer. A model that ignored it makes every one of the 2,000 (and
    # records the request as completed, not cancelled: no cancel seen).
    tries = [generated_after_cancel()]
    if tries[0] is None or tries[0] >= max_tokens / 2:
        tries.append(generated_after_cancel())
    assert tries[-1] is not None, "the server never saw the cancellation"
    assert tries[-1] < max_tokens / 2, f"the engine kept generating after the cancel ({tries} tokens)"


BAD_INPUTS = [
    pytest.param("", None, "text_input: must not be empty", id="empty-text"),
    pytest.param("x " * 2_500, None, "text_input: must be at most", id="oversize-text"),
    pytest.param("boots", '{"max_tokens": 8,', "sampling_parameters: not valid JSON", id="invalid-json"),
    pytest.param("boots", '{"max_tokens": 0}', "sampling_parameters.max_tokens", id="max-tokens-zero"),
    pytest.param("boots", '{"max_tokens": 100000}', "sampling_parameters.max_tokens", id="max-tokens-huge"),
    pytest.param(b"boots \xff\xfe", None, "text_input: not valid UTF-8", id="non-utf8"),
    pytest.param(
        "boots", '{"temprature": 0.5}', "sampling_parameters.temprature: unknown key", id="unknown-key"
    ),
]


@pytest.mark.parametrize(("text", "sampling", "message"), BAD_INPUTS)
def test_bad_input_gets_an_error_for_that_request_only(
    triton: TritonServer, text: str | bytes, sampling: str | None, message: str
) -> None:
    long_stream: dict = {}

    def stream_alongside() -> None:
        with StreamingClient(triton.grpc_url) as client:
            long_stream["result"] = client.ask(
                "trail running shoes", sampling={"max_tokens": 64, "min_tokens": 64}
            )

    neighbour = threading.Thread(target=stream_alongside)
    neighbour.start()
    with StreamingClient(triton.grpc_url) as client:
        bad = client.ask(text, sampling=sampling)
        assert bad.error is not None and message in bad.error, bad.error
        good = client.ask("waterproof hiking boots", sampling=SHORT)
    neighbour.join(timeout=60)
    assert good.error is None and good.chunks
    assert long_stream["result"].error is None and len(long_stream["result"].chunks) >= 8


def test_metrics_port_serves_request_metrics_in_base_units(triton: TritonServer) -> None:
    before = settled_metrics(triton)
    with StreamingClient(triton.grpc_url) as client:
        result = client.ask("headphones", sampling=SHORT)
    assert result.error is None

    def grown() -> dict[str, float] | None:
        now = settled_metrics(triton)
        key = f"llm_time_to_first_token_seconds_count{{{MODEL}}}"
        return now if now.get(key, 0) > before.get(key, 0) else None

    metrics = wait_for(grown)
    assert metrics is not None, "the request never reached the TTFT histogram"
    ttft_s = metrics[f"llm_time_to_first_token_seconds_sum{{{MODEL}}}"] - before.get(
        f"llm_time_to_first_token_seconds_sum{{{MODEL}}}", 0.0
    )
    assert 0 < ttft_s < result.total_s, "TTFT is recorded in seconds"
    assert not any("_ms" in key for key in metrics), "metric names use base units"
    assert (
        metrics[f"llm_output_tokens_total{{{MODEL}}}"] - before.get(f"llm_output_tokens_total{{{MODEL}}}", 0)
        == SHORT["max_tokens"]
    )
    assert metrics[f"llm_input_tokens_total{{{MODEL}}}"] > before.get(f"llm_input_tokens_total{{{MODEL}}}", 0)
    assert metrics[f"llm_serving_slots{{{MODEL}}}"] == 16


def test_engine_statistics_reach_the_metrics_endpoint(triton: TritonServer) -> None:
    """vLLM's own counters are forwarded as Triton's vLLM backend does (every gauge interval, here 1 s)."""
    before = read_metrics(triton)
    with StreamingClient(triton.grpc_url) as client:
        assert client.ask("rain jacket", sampling=SHORT).error is None

    def forwarded() -> dict[str, float] | None:
        now = read_metrics(triton)
        key = f"vllm:generation_tokens_total{{{MODEL}}}"
        return now if now.get(key, 0) - before.get(key, 0) >= SHORT["max_tokens"] else None

    metrics = wait_for(forwarded, timeout_s=10)
    assert metrics is not None, "the engine's generation counter never grew by the request's tokens"
    assert metrics[f"vllm:prompt_tokens_total{{{MODEL}}}"] > before.get(
        f"vllm:prompt_tokens_total{{{MODEL}}}", 0
    )
    for gauge in ("vllm:num_requests_running", "vllm:num_requests_waiting", "vllm:kv_cache_usage_perc"):
        assert f"{gauge}{{{MODEL}}}" in metrics


def request_lines(triton: TritonServer, **match) -> list[dict]:
    return [
        record
        for record in emf_lines(triton)
        if "Outcome" in record and all(record.get(key) == value for key, value in match.items())
    ]


def metric_names(record: dict) -> list[str]:
    return [metric["Name"] for metric in record["_aws"]["CloudWatchMetrics"][0]["Metrics"]]


def test_each_request_logs_an_emf_line(triton: TritonServer) -> None:
    seen = len(request_lines(triton))
    with StreamingClient(triton.grpc_url) as client:
        assert client.ask("laptop for travel", sampling=SHORT).error is None
    records = wait_for(lambda: request_lines(triton)[seen:])
    assert records, "no EMF line in the server log"
    record = records[-1]
    directive = record["_aws"]["CloudWatchMetrics"][0]
    assert directive["Namespace"] == "LLMServing"
    assert directive["Dimensions"] == [["Model"], ["Model", "InstanceType"]]
    assert (record["Model"], record["InstanceType"]) == ("assistant", TEST_INSTANCE_TYPE)
    assert metric_names(record) == [
        "TimeToFirstToken",
        "SlowFirstToken",
        "OutputTokens",
        "InputTokens",
        "RequestFailed",
        "Shed",
        "ServingError",
    ]
    assert record["Shed"] == 0 and record["ServingError"] == 0
    assert record["TimeToFirstToken"] > 0 and record["OutputTokens"] == SHORT["max_tokens"]
    assert record["SlowFirstToken"] == int(record["TimeToFirstToken"] > TEST_SLOW_FIRST_TOKEN_MS)
    assert record["RequestFailed"] == 0 and record["Outcome"] == "completed"
    assert 50 < record["InputTokens"] < 400, "the prompt's token count, retrieved products included"
    assert record["Intent"] == "product_search"
    assert 0 < record["PrepareMs"] < record["TimeToFirstToken"]
    # Of its wall time, the wait for a core, where the kernel counts it (serving/prepare_worker.py).
    if Path("/proc/thread-self/schedstat").exists():
        assert 0 <= record["PrepareRunQueueMs"] <= record["PrepareMs"]


def test_a_non_streaming_request_records_no_time_to_first_token(triton: TritonServer) -> None:
    seen = len(request_lines(triton, Stream=False))
    with StreamingClient(triton.grpc_url) as client:
        assert client.ask("camping stove", sampling=SHORT, stream=False).error is None
    records = wait_for(lambda: request_lines(triton, Stream=False)[seen:])
    assert records, "no EMF line for the non-streaming request"
    assert "TimeToFirstToken" not in metric_names(records[-1]) and "SlowFirstToken" not in records[-1]
    assert records[-1]["OutputTokens"] == SHORT["max_tokens"] and records[-1]["RequestFailed"] == 0


def test_a_bad_request_is_counted_but_not_as_a_failure(triton: TritonServer) -> None:
    seen = len(request_lines(triton, Outcome="rejected"))
    with StreamingClient(triton.grpc_url) as client:
        assert client.ask("", sampling=SHORT).error is not None
    records = wait_for(lambda: request_lines(triton, Outcome="rejected")[seen:])
    # Outside the error share's denominator: RequestRejected, and no RequestFailed datapoint at all.
    assert records and records[-1]["RequestRejected"] == 1 and "RequestFailed" not in records[-1]
    assert "InputTokens" not in records[-1], "it never reached the engine"


def test_the_host_gauge_is_written_with_no_request_finishing(triton: TritonServer) -> None:
    settled_metrics(triton)
    started_ms = int(time.time() * 1000)

    def gauge_lines() -> list[dict]:
        return [
            record
            for record in emf_lines(triton)
            if record.get("Kind") == "host-gauge"
            and record.get("Model") == "assistant"
            and record["_aws"]["Timestamp"] > started_ms
        ]

    lines = wait_for(lambda: len(gauge_lines()) >= 2 and gauge_lines(), timeout_s=10)
    assert lines, "no host gauge line while the server was idle"
    finished_meanwhile = [r for r in request_lines(triton) if r["_aws"]["Timestamp"] > started_ms]
    assert finished_meanwhile == [], "the gauge must flow with no request finishing"
    record = lines[-1]
    assert metric_names(record) == ["RequestsInFlight", "QueueDepth", "KvCacheUsage", "ServingSlots"]
    assert (record["RequestsInFlight"], record["QueueDepth"], record["ServingSlots"]) == (0, 0, 16)
    assert 0.0 <= record["KvCacheUsage"] <= 1.0
    assert record["_aws"]["CloudWatchMetrics"][0]["Dimensions"] == [["Model"], ["Model", "InstanceType"]]


def _four_streams_and_the_gauge(triton: TritonServer) -> tuple[list[StreamResult], list[dict], float]:
    """Four 12 s streams at once: their results, the assistant's gauge lines that counted all four, and the
    most requests the model itself held at once (its Prometheus gauge, sampled every half second)."""
    started_ms = int(time.time() * 1000)
    in_flight_key = f"llm_requests_in_flight{{{MODEL}}}"

    def stream() -> StreamResult:
        with StreamingClient(triton.grpc_url) as client:
            sampling = {"max_tokens": 2_000, "min_tokens": 2_000}
            return client.ask("tent", sampling=sampling, cancel_after_s=12.0)

    def busy_lines() -> list[dict]:
        return [
            record
            for record in emf_lines(triton)
            if record.get("Kind") == "host-gauge"
            and record.get("Model") == "assistant"
            and record["_aws"]["Timestamp"] > started_ms
            and record["RequestsInFlight"] == 4
        ]

    held = 0.0
    with ThreadPoolExecutor(max_workers=4) as pool:
        futures = [pool.submit(stream) for _ in range(4)]
        while not all(future.done() for future in futures):
            held = max(held, read_metrics(triton).get(in_flight_key, 0.0))
            time.sleep(0.5)
        results = [future.result() for future in futures]
    # The gauge writes every second: one more interval for a line taken while all four were open.
    return results, wait_for(busy_lines, timeout_s=1.5), held


def test_the_host_gauge_sees_streams_in_flight(triton: TritonServer) -> None:
    results, busy, held = _four_streams_and_the_gauge(triton)
    if not busy and held < 4:
        # Once in a full run on 2 cores the model never held the four at once: two reached it only when the
        # first two had ended (each arrived at the model 11 s after its client sent it). That says nothing
        # of the gauge, which can only count what the model holds; one more try tells it from a gauge that
        # misses streams, which fails both.
        results, busy, held = _four_streams_and_the_gauge(triton)
    assert [result.error for result in results] == [None] * 4 and all(result.chunks for result in results)
    assert busy, f"the gauge never showed the four open streams (the model held at most {held:g})"
    assert busy[-1]["KvCacheUsage"] > 0


def test_model_load_fails_clearly_on_a_missing_index(demo_assets, tmp_path) -> None:
    server = TritonServer(
        model_dir=demo_assets.model_dir,
        index_dir=tmp_path / "no-index-here",
        work_dir=tmp_path / "triton",
        pick_ports=True,  # chosen at start, chosen again if taken before Triton binds
        models=("assistant",),
    )
    with pytest.raises(ServerError):
        server.start(timeout_s=120)
    assert "cannot open the catalog index" in server.log_path.read_text(errors="replace")
    assert server.process is not None and server.process.poll() is not None


def test_each_model_process_shares_its_gil_in_short_slices(triton: TritonServer) -> None:
    """The engine loop, the outbox and the prepare worker hand the GIL over every 1 ms, not CPython's 5 ms
    (serving/gil_switch.py): the preparation's wall time was several times its CPU time at 5 ms."""
    from serving.gil_switch import DEFAULT_SWITCH_INTERVAL_MS

    log = triton.log_path.read_text(errors="replace")
    for model in ("assistant", "passthrough"):
        assert f"{model}: engine replica 1 of 1" in log
        assert re.search(
            rf"{model}: engine replica 1 of 1 .*; GIL switch interval {DEFAULT_SWITCH_INTERVAL_MS:g} ms", log
        ), f"{model} did not report its GIL switch interval"


def test_each_model_process_freezes_its_start_up_heap(triton: TritonServer) -> None:
    """vLLM, torch and the tokenizer leave some 600,000 objects that a full garbage collection would walk with
    the GIL held, stalling every stream (serving/gc_heap.py): once loaded, each model freezes them."""
    log = triton.log_path.read_text(errors="replace")
    for model in ("assistant", "passthrough"):
        found = re.search(
            rf"{model}: start-up heap frozen for the garbage collector \(([\d,]+) objects\)", log
        )
        assert found is not None, f"{model} did not freeze its start-up heap"
        assert int(found.group(1).replace(",", "")) > 100_000  # the engine's and tokenizer's objects


def test_server_health_endpoints(triton: TritonServer) -> None:
    with urllib.request.urlopen(f"http://{triton.http_url}/v2/models/assistant/ready", timeout=5) as response:
        assert response.status == 200
    with pytest.raises(urllib.error.HTTPError):
        urllib.request.urlopen(f"http://{triton.http_url}/v2/models/no-such-model/ready", timeout=5)


def test_a_non_streaming_request_is_cancelled_when_its_client_goes(triton: TritonServer) -> None:
    before = settled_metrics(triton)
    client = StreamingClient(triton.grpc_url)
    try:
        result = client.ask(
            "hiking boots",
            sampling={"max_tokens": 1_500, "min_tokens": 1_500},
            stream=False,
            cancel_after_s=1.0,
        )
    finally:
        client.close()
    assert result.chunks == []
    cancelled_key = 'llm_requests_total{model="assistant",outcome="cancelled",replica="0"}'
    after = wait_for(lambda: (m := settled_metrics(triton))[cancelled_key] > before[cancelled_key] and m, 5.0)
    assert after, "the server never saw the cancellation"
    generated = after[f"llm_output_tokens_total{{{MODEL}}}"] - before[f"llm_output_tokens_total{{{MODEL}}}"]
    assert generated < 500, f"the engine kept generating after the client left ({generated} tokens)"


def test_cancel_while_queued_frees_the_slot_without_a_prefill(triton: TritonServer) -> None:
    """16 long streams fill every batch slot (max_num_seqs 16); a 17th waits, and its client leaves."""
    slots = 16
    in_flight = f"llm_requests_in_flight{{{MODEL}}}"
    # The blockers hold their slots until the test lets them go. A timer of their own (12 s) once ran out in
    # CI before the 17th was sent: on a busy machine a request can reach the model seconds after its client
    # sent it. Their 2,048 tokens (the container's max_tokens limit: about 25 s at the tiny model's 16-stream
    # steps, and slower steps on a busy machine slow the test's own waits too) outlast the test several times.
    release = threading.Event()
    hold = {"max_tokens": 2_048, "min_tokens": 2_048}

    def blocker(number: int) -> StreamResult:
        with StreamingClient(triton.grpc_url) as client:
            return client.ask(f"tent {number}", sampling=hold, cancel_when=release, timeout_s=300.0)

    with ThreadPoolExecutor(max_workers=slots) as pool:
        blockers = [pool.submit(blocker, number) for number in range(slots)]
        try:
            _a_queued_request_leaves(triton, slots, blockers)
        finally:
            release.set()
        results = [future.result() for future in blockers]
    assert [result.error for result in results] == [None] * slots
    assert settled_metrics(triton)[in_flight] == 0


def _a_queued_request_leaves(triton: TritonServer, slots: int, blockers: list) -> None:
    """With every slot held, a 17th request is sent and its client leaves after 1 s, unanswered: the queue
    gives its place back and the engine never prefills its prompt."""
    key = f"vllm:prompt_tokens_total{{{MODEL}}}"
    in_flight, queue_depth = f"llm_requests_in_flight{{{MODEL}}}", f"llm_queue_depth{{{MODEL}}}"
    running = f"vllm:num_requests_running{{{MODEL}}}"
    full = wait_for(lambda: (m := read_metrics(triton))[in_flight] == slots and m[queue_depth] == 0, 60.0)
    assert full, f"the 16 blockers were not all generating: {read_metrics(triton)}"
    time.sleep(1.5)  # one more gauge interval: the prompt counter holds every blocker's prefill
    engine_full = wait_for(lambda: read_metrics(triton)[running] == slots, 10.0)
    assert engine_full, f"the engine runs {read_metrics(triton)[running]} of the 16 blockers"
    prompt_tokens_before = read_metrics(triton)[key]
    with StreamingClient(triton.grpc_url) as waiting:
        queued = waiting.ask("espresso machines that are easy to clean", sampling=SHORT, cancel_after_s=1.0)
    assert not any(future.done() for future in blockers), "a blocker ended: the test held no slot for it"
    assert queued.chunks == [], "the 17th request should have waited for a slot"
    back_to_full = wait_for(
        lambda: (m := read_metrics(triton))[in_flight] == slots and m[queue_depth] == 0, 3.0
    )
    assert back_to_full, "the cancelled request still holds its place in the queue"
    time.sleep(1.5)  # one more gauge interval, for a prefill the counter would show
    assert read_metrics(triton)[key] == prompt_tokens_before, "the cancelled request was prefilled"


@pytest.mark.parametrize(
    ("question", "product_id"),
    [
        ("all-weather tires", "SHOP-1"),
        ("star wars lego set", "SHOP-2"),
        ("war and peace hardcover", "SHOP-3"),
        ("movie projector", "SHOP-4"),
        ("code reader for my car", "SHOP-5"),
    ],
)
def test_the_shops_own_catalog_answers(triton: TritonServer, question: str, product_id: str) -> None:
    """The session server serves the index built from the shop's CSV (bad rows skipped)."""
    with StreamingClient(triton.grpc_url) as client:
        result = client.ask(question, sampling=SHORT)
    assert result.error is None
    assert product_id in [card["id"] for card in result.products], result.products
