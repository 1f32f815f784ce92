"""`make serve` (local/serve.py) on a real server: a graceful stop after a soak leaves no process behind.

The report this reproduces: after a 48-stream soak (a third cancelled, bad inputs mixed in) and a graceful
stop of `make serve`, the assistant's Python backend stub was still running 50 minutes later, its parent
Triton gone. Here the launcher is stopped the way a terminal or a supervisor does: Ctrl-C, then, while the
server is still stopping, a SIGTERM.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from local.client import StreamingClient
from local.demo_assets import REPO_DIR
from local.triton_server import free_ports
from serving.orphan_guard import descendants
from tests.container.conftest import SERVER_START_TIMEOUT_S, TEST_ENVIRONMENT, wait_for

pytestmark = [pytest.mark.serving, pytest.mark.vllm_version]

STREAMS = 48
SOAK_S = 15.0


def command_line(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
    except OSError:
        return ""


def alive(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def soak(grpc_url: str) -> dict[str, int]:
    """STREAMS clients asking in turn for SOAK_S: every third cancels after a few chunks, every fifth asks
    with bad sampling parameters (its own INVALID_ARG, nothing else)."""
    stop_at = time.monotonic() + SOAK_S

    def client(number: int) -> dict[str, int]:
        counts = {"completed": 0, "cancelled": 0, "rejected": 0}
        turn = 0
        while time.monotonic() < stop_at:
            turn += 1
            with StreamingClient(grpc_url) as stream:
                if (number + turn) % 5 == 0:
                    result = stream.ask("boots", sampling='{"max_tokens": "many"', timeout_s=120)
                    assert result.error is not None
                    counts["rejected"] += 1
                elif number % 3 == 0:
                    stream.ask("hiking boots", sampling={"max_tokens": 64}, cancel_after_chunks=2)
                    counts["cancelled"] += 1
                else:
                    result = stream.ask("rain jacket", sampling={"max_tokens": 16}, timeout_s=120)
                    counts["completed"] += result.error is None
        return counts

    with ThreadPoolExecutor(max_workers=STREAMS) as pool:
        totals: dict[str, int] = {}
        for counts in pool.map(client, range(STREAMS)):
            for key, value in counts.items():
                totals[key] = totals.get(key, 0) + value
    return totals


def test_a_graceful_stop_of_make_serve_after_a_soak_leaves_nothing(tmp_path: Path) -> None:
    ports = free_ports()
    log_path = tmp_path / "serve.log"
    with log_path.open("wb") as log:
        launcher = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "local.serve",
                "--models",
                "assistant",
                "--ports",
                str(ports.http),
                str(ports.grpc),
                str(ports.metrics),
            ],
            cwd=REPO_DIR / "container",
            env={**os.environ, **TEST_ENVIRONMENT},
            stdout=log,
            stderr=subprocess.STDOUT,
        )
    started: dict[int, str] = {}
    try:
        ready = wait_for(
            lambda: "ready: HTTP" in log_path.read_text(errors="replace") or launcher.poll() is not None,
            timeout_s=SERVER_START_TIMEOUT_S,
            interval_s=1.0,
        )
        assert ready and launcher.poll() is None, log_path.read_text(errors="replace")[-3000:]
        totals = soak(f"127.0.0.1:{ports.grpc}")
        assert totals["completed"] and totals["cancelled"] and totals["rejected"], totals
        # Everything the launcher started, noted before the stop (Triton, stubs, guards, engines).
        started = {pid: command_line(pid) for pid in descendants(launcher.pid)}
        assert any("triton_python_backend_stub" in command for command in started.values()), started
        launcher.send_signal(signal.SIGINT)  # Ctrl-C
        time.sleep(1.0)
        launcher.send_signal(signal.SIGTERM)  # and the supervisor's stop while the server still stops
        launcher.wait(timeout=120)
        leftovers = wait_for(lambda: not [pid for pid in started if alive(pid)], timeout_s=15) or {
            pid: started[pid] for pid in started if alive(pid)
        }
    finally:
        if launcher.poll() is None:
            launcher.kill()
            launcher.wait()
        for pid, command in started.items():
            if alive(pid) and command_line(pid) == command:
                os.kill(pid, signal.SIGKILL)
    assert leftovers is True, f"processes outlived `make serve`: {leftovers}"
