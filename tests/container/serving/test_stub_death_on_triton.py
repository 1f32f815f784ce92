"""A killed model process (the Python backend's stub) takes the server out of service, idle or mid-stream.

Triton 2.51 never restarts a decoupled model's stub: without the orphan guard telling Triton, readiness stays
green and every request to the replica fails for ever, with no EMF line.
"""

from __future__ import annotations

import os
import signal
import threading
import time
from pathlib import Path

import pytest

from local.client import StreamingClient, StreamResult
from local.demo_assets import DemoAssets
from serving.orphan_guard import descendants
from tests.container.conftest import SERVER_START_TIMEOUT_S, emf_lines, wait_for
from tests.container.serving.test_lifecycle_on_triton import (
    exits_leaving_nothing,
    out_of_rotation_within,
    own_server,
    stays_out_until_exit,
)

pytestmark = [pytest.mark.serving, pytest.mark.vllm_version]


def model_stub(server_pid: int) -> int:
    stubs = [
        pid
        for pid in descendants(server_pid)
        if b"triton_python_backend_stub" in Path(f"/proc/{pid}/cmdline").read_bytes()
    ]
    assert len(stubs) == 1, f"expected one model process, found {stubs}"
    return stubs[0]


@pytest.mark.parametrize("moment", ["idle", "in-flight"])
def test_a_killed_model_process_takes_the_server_out_and_ends_it(
    demo_assets: DemoAssets, tmp_path: Path, moment: str
) -> None:
    server = own_server(demo_assets, tmp_path)
    server.start(timeout_s=SERVER_START_TIMEOUT_S)
    streaming: list[StreamResult] = []
    first_chunk = threading.Event()
    try:
        stub = model_stub(server.process.pid)
        if moment == "in-flight":
            client = StreamingClient(server.grpc_url)

            def ask() -> None:
                streaming.append(
                    client.ask(
                        "waterproof hiking boots",
                        model="passthrough",
                        sampling={"max_tokens": 2000, "ignore_eos": True},
                        on_chunk=lambda _: first_chunk.set(),
                        timeout_s=60,
                    )
                )

            asking = threading.Thread(target=ask, daemon=True)
            asking.start()
            assert first_chunk.wait(60), "the stream did not start"
        killed_at = time.monotonic()
        os.kill(stub, signal.SIGKILL)
        http_s, grpc_s = out_of_rotation_within(server, 30)
        assert http_s is not None and grpc_s is not None, "readiness stayed green with the model process dead"
        assert stays_out_until_exit(server, timeout_s=30), "the server did not exit within 30 s"
        exited_s = time.monotonic() - killed_at
        leftovers = exits_leaving_nothing(server)
        if moment == "in-flight":
            asking.join(timeout=60)
            client.close()
    finally:
        server.stop()
    assert exited_s < 30, f"the server took {exited_s:.0f} s to exit after its model process died"
    assert leftovers is True, f"processes outlived the server: {leftovers}"
    failed = wait_for(
        lambda: [r for r in emf_lines(server) if "died without a clean shutdown" in r.get("Reason", "")], 5
    )
    assert failed and failed[0]["RequestFailed"] == 1 and failed[0]["Model"] == "passthrough"
    if moment == "in-flight":
        (result,) = streaming
        assert result.error is not None, "the stream on the dead model process ended as if it had succeeded"
