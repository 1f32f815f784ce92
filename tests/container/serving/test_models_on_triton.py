"""The assistant model on a real Triton server with a real vLLM engine, through tritonclient and HTTP."""

from __future__ import annotations

import json
import threading
import time
import urllib.error
import urllib.request
from concurrent.futures import ThreadPoolExecutor

import pytest

from local.client import StreamingClient
from local.triton_server import ServerError, TritonServer, free_ports
from tests.container.conftest import TEST_INSTANCE_TYPE, emf_lines, read_metrics

pytestmark = pytest.mark.serving

MODEL = 'model="assistant"'
# ignore_eos: a random-weight model may end early; these tests need a known number of tokens.
SHORT = {"max_tokens": 24, "ignore_eos": True, "temperature": 0.8}


def wait_for(condition, timeout_s: float = 15.0, interval_s: float = 0.2):
    deadline = time.monotonic() + timeout_s
    while True:
        value = condition()
        if value or time.monotonic() > deadline:
            return value
        time.sleep(interval_s)


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
        assert set(card) == {"id", "title", "price", "url", "image_url"}
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
            result = client.ask(question, sampling={"max_tokens": 48, "ignore_eos": True})
            return started, started + result.total_s, result

    with ThreadPoolExecutor(max_workers=len(questions)) as pool:
        outcomes = list(pool.map(one_stream, questions))
    results = [result for _, _, result in outcomes]
    assert [result.error for result in results] == [None] * 16
    assert all(len(result.chunks) >= 8 and result.text for result in results)
    # They really ran together: at some moment most of the 16 streams were open at once.
    peak = max(sum(start <= moment < end for start, end, _ in outcomes) for moment, _, _ in outcomes)
    assert peak >= 12, f"only {peak} streams overlapped"


def test_cancellation_aborts_the_engine_request_and_frees_the_slot(triton: TritonServer) -> None:
    before = settled_metrics(triton)
    max_tokens = 1_500
    client = StreamingClient(triton.grpc_url)
    try:
        result = client.ask(
            "hiking boots", sampling={"max_tokens": max_tokens, "ignore_eos": True}, cancel_after_chunks=3
        )
    finally:
        client.close()
    assert len(result.chunks) == 3

    def slot_freed() -> dict[str, float] | None:
        now = read_metrics(triton)
        cancelled = now[f'llm_requests_total{{{MODEL},outcome="cancelled"}}']
        if cancelled > before.get(f'llm_requests_total{{{MODEL},outcome="cancelled"}}', 0.0):
            return now
        return None

    after = wait_for(slot_freed, timeout_s=5.0)
    assert after is not None, "the server never saw the cancellation"
    assert after[f"llm_requests_in_flight{{{MODEL}}}"] == 0
    assert after[f"llm_engine_unfinished_requests{{{MODEL}}}"] == 0
    generated = after[f"llm_output_tokens_total{{{MODEL}}}"] - before[f"llm_output_tokens_total{{{MODEL}}}"]
    assert generated < max_tokens / 10, f"the engine kept generating after the cancel ({generated} tokens)"


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
                "trail running shoes", sampling={"max_tokens": 64, "ignore_eos": True}
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


def test_metrics_port_serves_request_metrics(triton: TritonServer) -> None:
    with StreamingClient(triton.grpc_url) as client:
        assert client.ask("headphones", sampling=SHORT).error is None
    metrics = settled_metrics(triton)
    assert metrics[f"llm_time_to_first_token_ms_count{{{MODEL}}}"] >= 1
    assert metrics[f"llm_time_to_first_token_ms_sum{{{MODEL}}}"] > 0
    assert metrics[f"llm_output_tokens_total{{{MODEL}}}"] >= SHORT["max_tokens"]
    assert metrics[f"llm_requests_in_flight{{{MODEL}}}"] == 0
    assert metrics[f"llm_queue_depth{{{MODEL}}}"] == 0
    assert metrics[f'llm_requests_total{{{MODEL},outcome="completed"}}'] >= 1


def test_each_request_logs_an_emf_line(triton: TritonServer) -> None:
    with StreamingClient(triton.grpc_url) as client:
        assert client.ask("laptop for travel", sampling=SHORT).error is None
    records = wait_for(lambda: [r for r in emf_lines(triton) if r.get("Outcome") == "completed"])
    assert records, "no EMF line in the server log"
    record = records[-1]
    directive = record["_aws"]["CloudWatchMetrics"][0]
    assert directive["Namespace"] == "LLMServing"
    assert directive["Dimensions"] == [["Model"], ["Model", "InstanceType"]]
    assert (record["Model"], record["InstanceType"]) == ("assistant", TEST_INSTANCE_TYPE)
    assert {m["Name"] for m in directive["Metrics"]} >= {
        "TimeToFirstToken",
        "OutputTokens",
        "RequestsInFlight",
    }
    assert record["TimeToFirstToken"] > 0 and record["OutputTokens"] == SHORT["max_tokens"]
    assert record["Intent"] == "product_search"
    assert 0 < record["PrepareMs"] < record["TimeToFirstToken"]


def test_model_load_fails_clearly_on_a_missing_index(demo_assets, tmp_path) -> None:
    server = TritonServer(
        model_dir=demo_assets.model_dir,
        index_dir=tmp_path / "no-index-here",
        work_dir=tmp_path / "triton",
        ports=free_ports(),
        models=("assistant",),
    )
    with pytest.raises(ServerError):
        server.start(timeout_s=120)
    assert "cannot open the catalog index" in server.log_path.read_text(errors="replace")
    assert server.process is not None and server.process.poll() is not None


def test_server_health_endpoints(triton: TritonServer) -> None:
    with urllib.request.urlopen(f"http://{triton.http_url}/v2/models/assistant/ready", timeout=5) as response:
        assert response.status == 200
    with pytest.raises(urllib.error.HTTPError):
        urllib.request.urlopen(f"http://{triton.http_url}/v2/models/passthrough/ready", timeout=5)
