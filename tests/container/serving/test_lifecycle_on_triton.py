"""How a model ends, on servers of their own: engine death, a stop after a cancellation burst, replicas.

Each test starts its own Triton (the pass-through model, ~3 GB per engine) and checks that nothing it
started is left running afterwards.
"""

from __future__ import annotations

import os
import signal
import threading
import time
import urllib.error
import urllib.request
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from local.client import StreamingClient
from local.demo_assets import DemoAssets
from local.triton_server import TritonServer, free_ports
from tests.container.conftest import (
    SERVER_START_TIMEOUT_S,
    TEST_ENVIRONMENT,
    engine_processes,
    process_group_members,
    read_metrics,
    wait_for,
)

pytestmark = pytest.mark.serving


def own_server(demo_assets: DemoAssets, work_dir: Path, *, replicas: int = 1) -> TritonServer:
    return TritonServer(
        model_dir=demo_assets.model_dir,
        index_dir=demo_assets.index_dir,
        work_dir=work_dir,
        ports=free_ports(),
        models=("passthrough",),
        extra_environment=TEST_ENVIRONMENT,
        replicas=replicas,
    )


def model_ready(server: TritonServer, model: str = "passthrough") -> bool:
    try:
        with urllib.request.urlopen(
            f"http://{server.http_url}/v2/models/{model}/ready", timeout=5
        ) as response:
            return response.status == 200
    except (urllib.error.URLError, ConnectionError):
        return False


def test_a_dead_engine_takes_the_model_out_of_service(demo_assets: DemoAssets, tmp_path: Path) -> None:
    server = own_server(demo_assets, tmp_path)
    server.start(timeout_s=SERVER_START_TIMEOUT_S)
    try:
        assert model_ready(server)
        engines = engine_processes(server.process.pid)
        core = [pid for pid, command in engines.items() if "EngineCore" in command]
        assert core, f"no EngineCore among {engines}"
        os.kill(core[0], signal.SIGKILL)
        with StreamingClient(server.grpc_url) as client:
            failed = client.ask("hello", model="passthrough", sampling={"max_tokens": 4})
        assert failed.error is not None
        assert wait_for(lambda: not model_ready(server), timeout_s=30), (
            "the model stayed ready with a dead engine"
        )
        assert "the vLLM engine is dead" in server.log_path.read_text(errors="replace")
        assert wait_for(lambda: not engine_processes(server.process.pid), timeout_s=30), (
            "engine processes outlived it"
        )
    finally:
        server.stop()


def test_a_stop_after_a_cancellation_burst_is_graceful_and_leaves_nothing(
    demo_assets: DemoAssets, tmp_path: Path
) -> None:
    server = own_server(demo_assets, tmp_path)
    server.start(timeout_s=SERVER_START_TIMEOUT_S)
    try:
        stop_at = time.monotonic() + 20

        def stream(number: int) -> int:
            done = 0
            while time.monotonic() < stop_at:
                with StreamingClient(server.grpc_url) as client:
                    cancel = {"cancel_after_chunks": 3} if number % 3 == 0 else {}
                    result = client.ask(
                        f"question {number}",
                        model="passthrough",
                        sampling={"max_tokens": 48, "ignore_eos": True},
                        **cancel,
                    )
                    assert result.error is None, result.error
                    done += 1
            return done

        with ThreadPoolExecutor(max_workers=24) as pool:
            finished = sum(pool.map(stream, range(24)))
        assert finished >= 24
        # The burst's last cancellations may still be settling; the stop must not wait on them.
        group = server.process.pid
        started = time.monotonic()
        server.process.send_signal(signal.SIGTERM)
        server.process.wait(timeout=60)
        stop_s = time.monotonic() - started
        # Triton is gone; whatever is left in its process group outlived it (the guard gets 5 s to act).
        leftovers = wait_for(lambda: not process_group_members(group), timeout_s=5) or process_group_members(
            group
        )
    finally:
        server.stop()
    log = server.log_path.read_text(errors="replace")
    assert "Exit timeout expired" not in log and "Non-graceful termination" not in log
    # Within the server's exit timeout (20 s here), the engine shut down by finalize, not killed after it.
    assert stop_s < 20, f"the graceful stop took {stop_s:.1f} s"
    assert leftovers is True, f"processes outlived the server: {leftovers}"


def test_replicas_each_run_their_own_engine_on_their_own_cores(
    demo_assets: DemoAssets, tmp_path: Path
) -> None:
    server = own_server(demo_assets, tmp_path, replicas=2)
    server.start(timeout_s=SERVER_START_TIMEOUT_S)
    try:
        log = server.log_path.read_text(errors="replace")
        assert "passthrough: engine replica 1 of 2 on NeuronCores 0 " in log
        assert "passthrough: engine replica 2 of 2 on NeuronCores 1 " in log
        cores = set()
        for pid, command in engine_processes(server.process.pid).items():
            if "EngineCore" in command:
                environ = Path(f"/proc/{pid}/environ").read_bytes().split(b"\0")
                cores |= {
                    item.split(b"=", 1)[1] for item in environ if item.startswith(b"NEURON_RT_VISIBLE_CORES=")
                }
        assert cores == {b"0", b"1"}, "each engine process sees only its own cores"
        barrier = threading.Barrier(8)

        def one(number: int) -> None:
            with StreamingClient(server.grpc_url) as client:
                barrier.wait(timeout=30)
                result = client.ask(
                    f"hi {number}", model="passthrough", sampling={"max_tokens": 32, "ignore_eos": True}
                )
                assert result.error is None

        with ThreadPoolExecutor(max_workers=8) as pool:
            list(pool.map(one, range(8)))
        time.sleep(1.5)
        metrics = read_metrics(server)
        served = {
            replica: metrics.get(
                f'llm_requests_total{{model="passthrough",outcome="completed",replica="{replica}"}}', 0
            )
            for replica in ("0", "1")
        }
        assert sum(served.values()) == 8
        assert min(served.values()) >= 1, f"Triton sent every request to one replica: {served}"
        summed = wait_for(
            lambda: '"ServingSlots":32' in server.log_path.read_text(errors="replace"),
            timeout_s=15,
        )
        assert summed, "no host gauge line summing both replicas (2 x 16 slots)"
    finally:
        server.stop()
