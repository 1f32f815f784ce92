"""Oversize bodies against the real server behind the edge: refused, and the server stays ready.

An 8 MB JSON body in one-byte HTTP chunks made Triton 2.51 exit on SIGSEGV (its frontend put one iovec per
chunk on the stack: CVE-2025-23310); without the edge this test's server dies on the first request.
"""

from __future__ import annotations

import json
import socket
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Iterable, Iterator

import pytest
import tritonclient.grpc as grpcclient
from tritonclient.utils import InferenceServerException

from local.client import StreamingClient, request_inputs
from local.triton_server import TritonServer

pytestmark = [pytest.mark.serving, pytest.mark.vllm_version]

MB = 1024 * 1024
PATH = "/v2/models/assistant/generate"


def json_body(size: int) -> bytes:
    return b'{"text_input": "' + b"x" * size + b'", "stream": false}'


def one_byte_chunks(body: bytes) -> Iterator[bytes]:
    """The chunked framing that crashed Triton: "1\\r\\nx\\r\\n" per byte, sent in batches."""
    batch = 64 * 1024
    for start in range(0, len(body), batch):
        yield b"".join(b"1\r\n%c\r\n" % byte for byte in body[start : start + batch])
    yield b"0\r\n\r\n"


def large_chunks(body: bytes, size: int = 64 * 1024) -> Iterator[bytes]:
    for start in range(0, len(body), size):
        piece = body[start : start + size]
        yield b"%x\r\n%s\r\n" % (len(piece), piece)
    yield b"0\r\n\r\n"


def post_raw(port: int, head: bytes, frames: Iterable[bytes]) -> tuple[bytes, float]:
    """The status line and headers of the answer, and the seconds it took; the body is sent from a thread,
    which stops at the first error (the edge may close the connection once it has answered)."""
    sock = socket.create_connection(("127.0.0.1", port), timeout=60)
    started = time.monotonic()

    def send() -> None:
        try:
            sock.sendall(head)
            for frame in frames:
                sock.sendall(frame)
        except OSError:
            pass

    sender = threading.Thread(target=send, daemon=True)
    sender.start()
    reply = b""
    try:
        while b"\r\n\r\n" not in reply:
            data = sock.recv(65536)
            if not data:
                break
            reply += data
    except OSError as err:
        reply += f"<{type(err).__name__}>".encode()
    elapsed = time.monotonic() - started
    sock.close()
    sender.join(timeout=60)
    return reply, elapsed


def head(extra: str) -> bytes:
    return f"POST {PATH} HTTP/1.1\r\nHost: edge\r\nContent-Type: application/json\r\n{extra}\r\n".encode()


def assert_still_serving(server: TritonServer) -> None:
    assert server.process.poll() is None, f"the server exited with {server.process.returncode}"
    with urllib.request.urlopen(f"http://{server.http_url}/v2/health/ready", timeout=10) as response:
        assert response.status == 200
    client = grpcclient.InferenceServerClient(server.grpc_url)
    try:
        assert client.is_server_ready(client_timeout=10)
    finally:
        client.close()
    with StreamingClient(server.grpc_url) as streaming:
        answer = streaming.ask("waterproof hiking boots", sampling={"max_tokens": 4})
    assert answer.error is None and answer.chunks


@pytest.mark.parametrize("megabytes", [8, 64])
def test_an_oversize_http_body_is_refused_on_its_length_and_the_server_stays_ready(triton, megabytes):
    body = json_body(megabytes * MB)
    reply, seconds = post_raw(triton.ports.http, head(f"Content-Length: {len(body)}\r\n"), [body])
    assert reply.startswith(b"HTTP/1.1 413"), reply[:200]
    print(f"HTTP {megabytes} MB with Content-Length: 413 in {seconds * 1000:.0f} ms")
    assert_still_serving(triton)


@pytest.mark.parametrize(
    ("megabytes", "framing"), [(8, one_byte_chunks), (64, large_chunks)], ids=["8MB-1-byte-chunks", "64MB"]
)
def test_an_oversize_chunked_http_body_is_refused_and_the_server_stays_ready(triton, megabytes, framing):
    reply, seconds = post_raw(
        triton.ports.http, head("Transfer-Encoding: chunked\r\n"), framing(json_body(megabytes * MB))
    )
    assert reply.startswith(b"HTTP/1.1 413"), reply[:200]
    print(f"HTTP {megabytes} MB chunked: 413 in {seconds * 1000:.0f} ms")
    assert_still_serving(triton)


def test_an_oversize_body_announced_with_expect_continue_is_refused_before_it_is_sent(triton):
    reply, _ = post_raw(triton.ports.http, head(f"Content-Length: {8 * MB}\r\nExpect: 100-continue\r\n"), [])
    assert reply.startswith(b"HTTP/1.1 413"), reply[:200]


def test_a_compressed_body_is_refused_because_triton_would_inflate_it_past_the_cap(triton):
    body = b"\x1f\x8b" + b"\0" * 100
    reply, _ = post_raw(
        triton.ports.http, head(f"Content-Length: {len(body)}\r\nContent-Encoding: gzip\r\n"), [body]
    )
    assert reply.startswith(b"HTTP/1.1 415"), reply[:200]


def test_a_valid_request_still_goes_through_the_edge_with_its_error_answer(triton):
    """The edge passes what fits: the model's own validation answers (400 for a question too long)."""
    body = json.dumps({"text_input": "x" * 5_000, "stream": False}).encode()
    request = urllib.request.Request(f"http://{triton.http_url}{PATH}", data=body, method="POST")
    with pytest.raises(urllib.error.HTTPError) as refused:
        urllib.request.urlopen(request, timeout=30)
    assert refused.value.code == 400
    assert "text_input: must be at most" in refused.value.read().decode()


@pytest.mark.parametrize("megabytes", [8, 64])
def test_an_oversize_grpc_message_is_refused_and_the_server_stays_ready(triton, megabytes):
    client = grpcclient.InferenceServerClient(triton.grpc_url)
    started = time.monotonic()
    try:
        with pytest.raises(InferenceServerException) as refused:
            client.infer("assistant", request_inputs("x" * (megabytes * MB), stream=False), client_timeout=60)
    finally:
        client.close()
    assert refused.value.status() == "StatusCode.RESOURCE_EXHAUSTED", refused.value
    print(f"gRPC unary {megabytes} MB: {refused.value.status()} in {time.monotonic() - started:.2f} s")
    assert_still_serving(triton)


@pytest.mark.parametrize("megabytes", [8, 64])
def test_an_oversize_message_on_a_grpc_stream_is_refused_and_the_server_stays_ready(triton, megabytes):
    """ModelStreamInfer, the call the assistant's clients stream on."""
    started = time.monotonic()
    with StreamingClient(triton.grpc_url) as streaming:
        answer = streaming.ask("x" * (megabytes * MB), timeout_s=60)
    assert answer.status == "StatusCode.RESOURCE_EXHAUSTED", answer
    print(f"gRPC stream {megabytes} MB: {answer.status} in {time.monotonic() - started:.2f} s")
    assert_still_serving(triton)
