"""How the local server is started: environment and command (the running server is tested in serving/)."""

from __future__ import annotations

import json
import sys
import urllib.request
from pathlib import Path

import pytest

from entrypoint.triton_install import TritonInstall
from local.triton_server import (
    CPU_ENGINE_PROFILE,
    Ports,
    engine_overrides,
    server_command,
    server_environment,
)

pytestmark = pytest.mark.vllm_version


def test_environment_puts_this_python_first_and_the_wheel_libraries_on_the_loader_path(
    tmp_path: Path,
) -> None:
    install = TritonInstall.find()
    env = server_environment(
        {"PATH": "/usr/bin"}, install, model_dir=tmp_path / "m", index_dir=tmp_path / "i"
    )
    assert env["PATH"].split(":")[0] == str(Path(sys.executable).parent)
    assert str(install.libraries) in env["LD_LIBRARY_PATH"].split(":")
    assert env["HF_HUB_OFFLINE"] == "1" and env["ASSISTANT_INDEX_DIR"] == str(tmp_path / "i")
    assert env["ENGINE_MODEL"] == str(tmp_path / "m")


def test_cpu_profile_removes_neuron_only_settings(tmp_path: Path) -> None:
    overrides = engine_overrides(CPU_ENGINE_PROFILE, tmp_path)
    assert overrides["ENGINE_ADDITIONAL_CONFIG"] == "null"
    assert json.loads(overrides["ENGINE_TENSOR_PARALLEL_SIZE"]) == 1
    assert not any(name.startswith("ENGINE__") for name in overrides)


def test_command_binds_loopback_only_and_uses_its_own_shared_memory_prefix(tmp_path: Path) -> None:
    command = server_command(TritonInstall.find(), tmp_path, Ports(1, 2, 3), ["assistant"], "pfx_")
    assert "--http-address=127.0.0.1" in command and "--grpc-address=127.0.0.1" in command
    assert "--metrics-address=127.0.0.1" in command
    assert "--backend-config=python,shm-region-prefix-name=pfx_" in command
    assert {"--http-port=1", "--grpc-port=2", "--metrics-port=3", "--load-model=assistant"} <= set(command)


def test_backends_are_laid_out_as_triton_expects(tmp_path: Path) -> None:
    backends = TritonInstall.find().lay_out_backends(tmp_path / "backends")
    names = {path.name for path in (backends / "python").iterdir()}
    assert names == {"libtriton_python.so", "triton_python_backend_utils.py", "triton_python_backend_stub"}


def test_only_shared_memory_nobody_holds_is_removable(tmp_path: Path) -> None:
    from local.triton_server import _unused

    held, orphan = tmp_path / "psm_held", tmp_path / "psm_orphan"
    held.write_bytes(b"x")
    orphan.write_bytes(b"x")
    with held.open("rb"):
        assert _unused({held, orphan}) == [orphan]


@pytest.mark.serving
def test_a_port_taken_before_triton_binds_it_is_retried_on_new_ports(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """On a busy machine another program took a port between free_ports() choosing it and Triton binding it
    ("Socket ... already in use"), and 56 serving tests failed. The first choice here is a port this test
    holds; the start must see the conflict and come up on new ports."""
    import socket

    import local.triton_server as triton_server
    from local.demo_assets import REPO_DIR, ensure_demo_assets
    from local.triton_server import Ports, TritonServer

    assets = ensure_demo_assets(REPO_DIR / "build" / "test-assets", products=2_000)
    holder = socket.socket()
    holder.bind(("127.0.0.1", 0))
    holder.listen()
    taken = holder.getsockname()[1]
    real_free_ports = triton_server.free_ports
    choices: list[Ports] = []

    def first_one_taken() -> Ports:
        chosen = real_free_ports()
        if not choices:
            chosen = Ports(chosen.http, chosen.grpc, taken)  # the metrics port, as in the failed run
        choices.append(chosen)
        return chosen

    monkeypatch.setattr(triton_server, "free_ports", first_one_taken)
    server = TritonServer(
        model_dir=assets.model_dir,
        index_dir=assets.index_dir,
        work_dir=tmp_path,
        models=("passthrough",),
        pick_ports=True,
    )
    try:
        server.start(timeout_s=600)
        assert server.ports.metrics != taken and len(choices) == 2
        with urllib.request.urlopen(f"http://{server.http_url}/v2/health/ready", timeout=10) as response:
            assert response.status == 200
    finally:
        server.stop()
        holder.close()


def test_ready_is_not_up_until_the_metrics_port_answers_too(tmp_path: Path) -> None:
    """Triton starts its metrics service after the HTTP one, and exits when that bind fails: a CI run's
    server answered ready on its HTTP port while another socket held its metrics port, the start returned,
    and the process was gone a moment later. Here the HTTP port answers ready, the metrics port is held by a
    socket that never answers, and the process exits 3 s on with the bind error in its log: the wait must
    fail with that log, not return."""
    import http.server
    import socket
    import subprocess
    import threading

    from local.triton_server import ServerError, TritonServer

    class Ready(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            self.send_response(200)
            self.end_headers()

        def log_message(self, *args: object) -> None:
            pass

    http_server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Ready)
    threading.Thread(target=http_server.serve_forever, daemon=True).start()
    holder = socket.socket()
    holder.bind(("127.0.0.1", 0))
    holder.listen()
    server = TritonServer(model_dir=tmp_path, index_dir=tmp_path, work_dir=tmp_path)
    server.ports = Ports(http_server.server_address[1], 0, holder.getsockname()[1])
    server.log_path.write_text("failed to start Metrics service: Unavailable - Socket already in use\n")
    server.process = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(3)"])
    try:
        with pytest.raises(ServerError, match="already in use"):
            server.wait_ready(timeout_s=30)
    finally:
        server.process.kill()
        server.process.wait()
        http_server.shutdown()
        holder.close()
