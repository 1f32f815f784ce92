"""Start a real Triton server (the tritonserver binary from PyPI's nvidia-pytriton wheel) on loopback.

What it needs, found the hard way: the Python backend folder laid out as Triton expects, LD_LIBRARY_PATH
with this Python's lib folder (else the stub loads another libpython) and the wheel's bundled libraries
(else it hangs looking for a CUDA runtime), this environment's bin first on PATH (the stub runs the first
python3 there), and shared-memory files removed after the server stops.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from entrypoint.admin_api import new_admin_key, restricted_api_flags
from entrypoint.triton_install import TritonInstall, TritonInstallError

CONTAINER_DIR = Path(__file__).resolve().parents[1]
MODEL_REPOSITORY = CONTAINER_DIR / "model_repository"
CPU_ENGINE_PROFILE = Path(__file__).with_name("engine-cpu.json")
SHM_DIR = Path("/dev/shm")
LOCAL_EXIT_TIMEOUT_S = 20  # short, so a test of a dead model process sees the host go in seconds
DEFAULT_PORTS = (8000, 8001, 8002)


# Triton ("Socket '127.0.0.1:8002' already in use", "Failed to listen on"), the edge ("address already in
# use", gRPC's "Failed to bind"): a port someone else took between free_ports() and the bind.
_PORT_TAKEN = re.compile(r"already in use|Failed to bind|Failed to listen", re.IGNORECASE)
BIND_ATTEMPTS = 3


class ServerError(RuntimeError):
    """The server did not come up; the message says why and where its log is."""


@dataclass(frozen=True)
class Ports:
    http: int
    grpc: int
    metrics: int


def free_ports(count: int = 3) -> Ports:
    sockets = []
    try:
        for _ in range(count):
            sock = socket.socket()
            sock.bind(("127.0.0.1", 0))
            sockets.append(sock)
        return Ports(*(sock.getsockname()[1] for sock in sockets))
    finally:
        for sock in sockets:
            sock.close()


def engine_overrides(profile: Path, model_dir: Path) -> dict[str, str]:
    """ENGINE_* variables for a local engine profile file, pointing the engine at model_dir."""
    values = {key: value for key, value in json.loads(profile.read_text()).items() if not key.startswith("_")}
    values["model"] = values["tokenizer"] = str(model_dir)
    return {
        f"ENGINE_{key.upper()}": value if isinstance(value, str) else json.dumps(value)
        for key, value in values.items()
    }


def server_environment(
    base: Mapping[str, str], install: TritonInstall, *, model_dir: Path, index_dir: Path
) -> dict[str, str]:
    env = dict(base)
    env["LD_LIBRARY_PATH"] = install.loader_path(base.get("LD_LIBRARY_PATH", ""))
    env["PATH"] = os.pathsep.join([str(Path(sys.executable).parent), base.get("PATH", "")])
    env.update(
        HF_HUB_OFFLINE="1",
        TRANSFORMERS_OFFLINE="1",
        VLLM_NO_USAGE_STATS="1",
        DO_NOT_TRACK="1",
        VLLM_CPU_KVCACHE_SPACE=base.get("VLLM_CPU_KVCACHE_SPACE", "1"),
        LC_ALL="C.UTF-8",
        ASSISTANT_INDEX_DIR=str(index_dir),
    )
    env.update(engine_overrides(CPU_ENGINE_PROFILE, model_dir))
    return env


def model_repository(work_dir: Path, models: Sequence[str], replicas: int) -> Path:
    """The repository Triton loads: the source one, or with several replicas a copy of each model's
    config.pbtxt with its instance count set and links to the model code (which finds its package there)."""
    if replicas == 1:
        return MODEL_REPOSITORY
    from serving.replicas import with_instance_count

    repository = work_dir / "model_repository"
    for name in models:
        target = repository / name
        target.mkdir(parents=True, exist_ok=True)
        config = (MODEL_REPOSITORY / name / "config.pbtxt").read_text()
        (target / "config.pbtxt").write_text(with_instance_count(config, replicas))
        version = target / "1"
        if not version.exists():
            version.symlink_to(MODEL_REPOSITORY / name / "1", target_is_directory=True)
    return repository


def server_command(
    install: TritonInstall,
    backends_dir: Path,
    ports: Ports,
    models: Sequence[str],
    shm_prefix: str,
    repository: Path = MODEL_REPOSITORY,
    admin_key: str | None = None,
) -> list[str]:
    command = [
        str(install.binary),
        f"--model-repository={repository}",
        f"--backend-directory={backends_dir}",
        f"--backend-config=python,shm-region-prefix-name={shm_prefix}",
        "--model-control-mode=explicit",
        *(f"--load-model={name}" for name in models),
        "--exit-on-error=true",
        "--strict-readiness=true",
        "--http-address=127.0.0.1",
        f"--http-port={ports.http}",
        "--grpc-address=127.0.0.1",
        f"--grpc-port={ports.grpc}",
        "--allow-metrics=true",
        "--allow-cpu-metrics=false",
        "--allow-gpu-metrics=false",
        "--metrics-address=127.0.0.1",
        f"--metrics-port={ports.metrics}",
        # finalize() keeps within this less 5 s (serving/streaming_model.py, shutdown_budget); the stub's own
        # exit after it returns was measured at 6-9 s on a 2-core machine at a load average of 14-17.
        f"--exit-timeout-secs={LOCAL_EXIT_TIMEOUT_S}",
        "--log-verbose=0",
        # As in production (entrypoint/start.py): the admin APIs answer only to this start's key.
        *restricted_api_flags(admin_key or new_admin_key()),
    ]
    return command


def edge_command(public: Ports, triton: Ports, triton_command: Sequence[str]) -> list[str]:
    """The edge on the public ports with Triton's command line after it (edge/run.py)."""
    return [
        sys.executable,
        "-m",
        "edge.run",
        f"--http=127.0.0.1:{public.http}",
        f"--grpc=127.0.0.1:{public.grpc}",
        f"--triton-http=127.0.0.1:{triton.http}",
        f"--triton-grpc=127.0.0.1:{triton.grpc}",
        "--",
        *triton_command,
    ]


@dataclass
class TritonServer:
    """One tritonserver process. Use as a context manager; stop() always cleans up its shared memory."""

    model_dir: Path
    index_dir: Path
    work_dir: Path
    ports: Ports = field(default_factory=lambda: Ports(*DEFAULT_PORTS))
    models: Sequence[str] = ("assistant",)
    log_to_console: bool = False
    # Set on top of the computed environment, as a task definition would (e.g. INSTANCE_TYPE).
    extra_environment: Mapping[str, str] = field(default_factory=dict)
    # Engine replicas per model, each its own model instance and vLLM engine (~3 GB each on this CPU).
    replicas: int = 1
    # As in production (entrypoint/start.py): the edge (container/edge) holds the HTTP and gRPC ports and caps
    # request bodies; Triton's own listen on other loopback ports behind it.
    edge: bool = False
    # Choose free loopback ports at start (ignoring `ports`) and retry with new ones on a bind conflict.
    pick_ports: bool = False
    # How long `with server:` waits for readiness (start()'s own timeout_s otherwise).
    start_timeout_s: float = 600.0
    process: subprocess.Popen | None = None

    def __post_init__(self) -> None:
        self.shm_prefix = f"assistant_{uuid.uuid4().hex[:12]}_"
        # The admin APIs' key for this server (tests use it to show the APIs work with it, fail without).
        self.admin_key = new_admin_key()
        self.log_path = self.work_dir / "tritonserver.log"
        self._shm_before: set[Path] | None = None

    def start(self, timeout_s: float = 600.0) -> TritonServer:
        """Start and wait until ready. With pick_ports, free ports are chosen here, and chosen again when a
        port was taken between the choice and Triton's bind (another program on a busy machine)."""
        attempts = BIND_ATTEMPTS if self.pick_ports else 1
        for attempt in range(1, attempts + 1):
            if self.pick_ports:
                self.ports = free_ports()
            try:
                return self._start_once(timeout_s)
            except ServerError:
                if attempt == attempts or not _PORT_TAKEN.search(self.log_tail(80)):
                    raise
                print(f"tritonserver: a port was taken before it bound ({self.ports}); new ports")
        raise AssertionError("unreachable")

    def _start_once(self, timeout_s: float) -> TritonServer:
        try:
            install = TritonInstall.find()
        except TritonInstallError as err:
            raise ServerError(f"{err}; run `make serve-env`") from None
        backends = install.lay_out_backends(self.work_dir / "backends")
        repository = model_repository(self.work_dir, self.models, self.replicas)
        triton_ports = self.ports
        if self.edge:
            inner = free_ports()
            triton_ports = Ports(inner.http, inner.grpc, self.ports.metrics)
        command = server_command(
            install, backends, triton_ports, self.models, self.shm_prefix, repository, self.admin_key
        )
        # Triton's own ports: behind the edge, what a benchmark compares the edge against.
        self.triton_ports = triton_ports
        if self.edge:
            command = edge_command(self.ports, triton_ports, command)
        env = server_environment(os.environ, install, model_dir=self.model_dir, index_dir=self.index_dir)
        env["REPLICAS_PER_HOST"] = str(self.replicas)
        if self.edge:
            env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(CONTAINER_DIR), env.get("PYTHONPATH")]))
        env.update(self.extra_environment)
        self.work_dir.mkdir(parents=True, exist_ok=True)
        log = None if self.log_to_console else self.log_path.open("wb")
        self._shm_before = set(SHM_DIR.glob("psm_*"))
        self.process = subprocess.Popen(
            command, env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True
        )
        if log is not None:
            log.close()
        try:
            self.wait_ready(timeout_s)
        except BaseException:
            self.stop()
            raise
        return self

    @property
    def http_url(self) -> str:
        return f"127.0.0.1:{self.ports.http}"

    @property
    def grpc_url(self) -> str:
        return f"127.0.0.1:{self.ports.grpc}"

    @property
    def metrics_url(self) -> str:
        return f"http://127.0.0.1:{self.ports.metrics}/metrics"

    def wait_ready(self, timeout_s: float) -> None:
        deadline = time.monotonic() + timeout_s
        ready_url = f"http://{self.http_url}/v2/health/ready"
        while time.monotonic() < deadline:
            assert self.process is not None
            if self.process.poll() is not None:
                raise ServerError(
                    f"tritonserver exited with code {self.process.returncode} before it was ready; "
                    f"see {self.log_path}:\n{self.log_tail()}"
                )
            try:
                with urllib.request.urlopen(ready_url, timeout=2) as response:
                    ready = response.status == 200
                # Ready is not up: Triton starts its metrics service after the HTTP one, and logs "Started
                # Metrics Service" before the bind fails ("failed to start Metrics service: ... already in
                # use") and it exits. Only a metrics port that answers is its own.
                if ready:
                    with urllib.request.urlopen(self.metrics_url, timeout=2) as response:
                        if response.status == 200:
                            return
            except (urllib.error.URLError, ConnectionError, TimeoutError):
                pass
            time.sleep(1.0)
        raise ServerError(f"tritonserver not ready after {timeout_s:.0f} s; see {self.log_path}")

    def log_tail(self, lines: int = 30) -> str:
        if not self.log_path.exists():
            return ""
        return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-lines:])

    def stop(self, timeout_s: float = LOCAL_EXIT_TIMEOUT_S + 15) -> None:
        process = self.process
        if process is not None and process.poll() is None:
            # Triton first, alone: it unloads the models, whose finalize() shuts the engine down cleanly
            # (killing the engine processes directly would leak their shared memory).
            process.send_signal(signal.SIGTERM)
            try:
                process.wait(timeout=timeout_s)
            except subprocess.TimeoutExpired:
                _signal_group(process.pid, signal.SIGKILL)
                process.wait(timeout=10)
        if process is not None:
            _signal_group(process.pid, signal.SIGKILL)  # stragglers (stubs, engine workers) left in the group
        for leftover in SHM_DIR.glob(f"{self.shm_prefix}*"):
            leftover.unlink(missing_ok=True)
        # vLLM's engine segments (psm_*) outlive an engine that was killed before its shutdown finished.
        if self._shm_before is not None:
            for leftover in _unused(set(SHM_DIR.glob("psm_*")) - self._shm_before):
                leftover.unlink(missing_ok=True)

    def __enter__(self) -> TritonServer:
        return self.start(timeout_s=self.start_timeout_s)

    def __exit__(self, *exc_info: object) -> None:
        self.stop()


def _unused(paths: set[Path]) -> list[Path]:
    """The paths no running process has open or mapped (so removing them cannot hurt anyone)."""
    if not paths:
        return []
    in_use: set[str] = set()
    for proc in Path("/proc").glob("[0-9]*"):
        with contextlib.suppress(OSError):
            in_use.update(
                line.split()[-1] for line in (proc / "maps").read_text().splitlines() if "/dev/shm/" in line
            )
            for fd in (proc / "fd").iterdir():
                with contextlib.suppress(OSError):
                    in_use.add(os.readlink(fd))
    return [path for path in paths if str(path) not in in_use]


def _signal_group(pid: int, sig: signal.Signals) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pid, sig)
