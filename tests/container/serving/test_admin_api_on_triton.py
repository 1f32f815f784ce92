"""Triton's admin APIs on the real server: refused without the start's key, over HTTP and gRPC, while
serving goes on. The key's own test (the same call with it succeeds) shows the refusal is the restriction,
not a broken endpoint."""

from __future__ import annotations

import json
import urllib.error
import urllib.request

import pytest
import tritonclient.grpc as grpcclient
from tritonclient.utils import InferenceServerException

from entrypoint.admin_api import GRPC_HEADER, HTTP_HEADER
from local.client import StreamingClient
from local.triton_server import TritonServer

pytestmark = [pytest.mark.serving, pytest.mark.vllm_version]

VICTIM = "passthrough"
SHORT = {"max_tokens": 8, "min_tokens": 8}  # ignore_eos is not client-settable on the assistant


def http_call(server: TritonServer, method: str, path: str, body: dict | None = None, headers=None):
    """(status, body text) of one HTTP call to the server."""
    data = None if body is None else json.dumps(body).encode()
    request = urllib.request.Request(
        f"http://{server.http_url}{path}", data=data, method=method, headers=headers or {}
    )
    try:
        with urllib.request.urlopen(request, timeout=30) as response:
            return response.status, response.read().decode(errors="replace")
    except urllib.error.HTTPError as err:
        return err.code, err.read().decode(errors="replace")


def model_ready(server: TritonServer, model: str = VICTIM) -> bool:
    return http_call(server, "GET", f"/v2/models/{model}/ready")[0] == 200


# Each an admin call an internet client must not make: (method, path, body).
HTTP_ADMIN_CALLS = [
    ("POST", f"/v2/repository/models/{VICTIM}/unload", {}),
    # A load with a file override is how a caller would run their own model.py.
    (
        "POST",
        "/v2/repository/models/intruder/load",
        {"parameters": {"config": "{}", "file:1/model.py": "aW1wb3J0IG9z"}},
    ),
    ("POST", "/v2/repository/index", {}),
    (
        "POST",
        "/v2/systemsharedmemory/region/intruder/register",
        {"key": "/intruder", "offset": 0, "byte_size": 64},
    ),
    ("GET", "/v2/systemsharedmemory/status", None),
    ("GET", f"/v2/models/{VICTIM}/config", None),
    ("GET", f"/v2/models/{VICTIM}/stats", None),
    ("GET", "/v2/logging", None),
    ("POST", "/v2/logging", {"log_verbose_level": 1}),
    ("GET", "/v2/trace/setting", None),
]


@pytest.mark.parametrize(("method", "path", "body"), HTTP_ADMIN_CALLS, ids=[c[1] for c in HTTP_ADMIN_CALLS])
def test_http_admin_calls_without_the_key_are_refused(triton: TritonServer, method, path, body) -> None:
    status, text = http_call(triton, method, path, body)
    assert status == 403, (status, text)
    status, _ = http_call(triton, method, path, body, headers={HTTP_HEADER: "a guess"})
    assert status == 403
    assert model_ready(triton), "the refused call still changed the served model"


def test_http_admin_calls_work_with_the_starts_key(triton: TritonServer) -> None:
    status, text = http_call(
        triton, "POST", "/v2/repository/index", {}, headers={HTTP_HEADER: triton.admin_key}
    )
    assert status == 200, text
    assert {entry["name"] for entry in json.loads(text)} >= {"assistant", VICTIM}


def test_grpc_admin_calls_without_the_key_are_refused(triton: TritonServer) -> None:
    client = grpcclient.InferenceServerClient(triton.grpc_url)
    try:
        calls = {
            "RepositoryModelUnload": lambda headers: client.unload_model(VICTIM, headers=headers),
            "RepositoryModelLoad": lambda headers: client.load_model(
                "intruder", headers=headers, files={"file:1/model.py": b"import os"}, config="{}"
            ),
            "RepositoryIndex": lambda headers: client.get_model_repository_index(headers=headers),
            "SystemSharedMemoryRegister": lambda headers: client.register_system_shared_memory(
                "intruder", "/intruder", 64, headers=headers
            ),
            "ModelConfig": lambda headers: client.get_model_config(VICTIM, headers=headers),
            "ModelStatistics": lambda headers: client.get_inference_statistics(VICTIM, headers=headers),
            "LogSettings": lambda headers: client.get_log_settings(headers=headers),
            "TraceSetting": lambda headers: client.get_trace_settings(headers=headers),
        }
        for name, call in calls.items():
            for headers in (None, {GRPC_HEADER: "a guess"}):
                with pytest.raises(InferenceServerException) as refused:
                    call(headers)
                assert (
                    refused.value.status() == "StatusCode.UNAVAILABLE"
                    or "unavailable" in str(refused.value).lower()
                    or "permission" in str(refused.value).lower()
                ), (name, refused.value)
        index = client.get_model_repository_index(headers={GRPC_HEADER: triton.admin_key})
        assert VICTIM in {model.name for model in index.models}
        assert client.is_server_ready() and client.is_model_ready(VICTIM)
        assert client.get_model_metadata(VICTIM).name == VICTIM
    finally:
        client.close()
    assert model_ready(triton)


def test_serving_still_works_after_the_refusals(triton: TritonServer) -> None:
    status, _ = http_call(triton, "POST", f"/v2/repository/models/{VICTIM}/unload", {})
    assert status == 403
    with StreamingClient(triton.grpc_url) as client:
        for model in ("assistant", VICTIM):
            result = client.ask("waterproof hiking boots", model=model, sampling=SHORT)
            assert result.error is None and result.chunks, (model, result.error)
    status, text = http_call(
        triton,
        "POST",
        f"/v2/models/{VICTIM}/generate",
        {"text_input": "hello", "parameters": {"max_tokens": 4, "ignore_eos": True}},
    )
    assert status == 200, text
    assert http_call(triton, "GET", "/v2/health/ready")[0] == 200
