"""The guard that kills a model's engine processes once the model's own process is gone."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from serving.orphan_guard import descendants, kill_recorded

CONTAINER_DIR = Path(__file__).resolve().parents[3] / "container"


def alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


def test_descendants_include_grandchildren() -> None:
    parent = subprocess.Popen(
        [sys.executable, "-c", "import subprocess,sys,time; subprocess.Popen(['sleep','30']); time.sleep(30)"]
    )
    try:
        found = {}
        deadline = time.monotonic() + 5
        while len(found) < 1 and time.monotonic() < deadline:
            found = descendants(parent.pid)
            time.sleep(0.1)
        assert found, "the grandchild was not found"
        assert os.getpid() not in found
    finally:
        kill_recorded(descendants(parent.pid))
        parent.kill()
        parent.wait()


def test_a_killed_parent_leaves_no_engine_behind(tmp_path: Path) -> None:
    """A stand-in for the Triton stub: it starts a long-lived child (the engine) and the guard, then dies
    by SIGKILL, as a stub does when Triton's exit timeout runs out."""
    pid_file = tmp_path / "engine.pid"
    stub = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import os, subprocess, sys, time\n"
            f"engine = subprocess.Popen(['sleep', '60'])\n"
            f"open({str(pid_file)!r}, 'w').write(str(engine.pid))\n"
            "subprocess.Popen([sys.executable, '-m', 'serving.orphan_guard', str(os.getpid())])\n"
            "time.sleep(60)\n",
        ],
        cwd=CONTAINER_DIR,
    )
    deadline = time.monotonic() + 10
    while not pid_file.exists() and time.monotonic() < deadline:
        time.sleep(0.1)
    engine = int(pid_file.read_text())
    time.sleep(1.5)  # the guard has noted the engine
    stub.kill()
    stub.wait()
    deadline = time.monotonic() + 5
    while alive(engine) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not alive(engine), "the engine outlived its stub"


def test_a_stub_that_outlives_triton_is_killed_with_its_engine(tmp_path: Path) -> None:
    """Stand-ins (named as such): a 'Triton' process starts a 'stub' that ignores SIGTERM and hangs, as the
    reported stub did after a graceful stop; the stub starts its 'engine' and the guard. Triton exits; the
    guard must end the stub and its engine within seconds, with nobody else's help."""
    pids = tmp_path / "pids"
    stub_code = (
        "import os, signal, subprocess, sys, time\n"
        "signal.signal(signal.SIGTERM, signal.SIG_IGN)\n"
        "engine = subprocess.Popen(['sleep', '120'])\n"
        "subprocess.Popen([sys.executable, '-m', 'serving.orphan_guard', str(os.getpid())])\n"
        f"open({str(pids)!r}, 'w').write(f'{{os.getpid()}} {{engine.pid}}')\n"
        "time.sleep(120)\n"
    )
    triton = subprocess.Popen(
        [
            sys.executable,
            "-c",
            f"import subprocess, sys, time\nsubprocess.Popen([sys.executable, '-c', {stub_code!r}])\n"
            "time.sleep(120)\n",
        ],
        cwd=CONTAINER_DIR,
    )
    deadline = time.monotonic() + 10
    while not (pids.exists() and pids.read_text()) and time.monotonic() < deadline:
        time.sleep(0.1)
    stub, engine = (int(pid) for pid in pids.read_text().split())
    time.sleep(1.5)  # the guard has noted the engine
    triton.kill()
    triton.wait()
    deadline = time.monotonic() + 10
    while (alive(stub) or alive(engine)) and time.monotonic() < deadline:
        time.sleep(0.1)
    leftovers = [pid for pid in (stub, engine) if alive(pid)]
    kill_recorded({pid: Path(f"/proc/{pid}/stat").read_text().split()[21] for pid in leftovers})
    assert not leftovers, "the stub (or its engine) outlived Triton"


def start_stub_under(
    parent_name: str, tmp_path: Path, *, on_sigterm: str = "sys.exit(0)", arguments: tuple[str, ...] = ()
) -> tuple[subprocess.Popen, int, Path, Path]:
    """Stand-ins (named as such): a parent process with the given /proc comm name (what the guard checks for
    Triton) starts a 'stub', which starts the guard for the model 'assistant'. Returns the parent, the stub's
    pid, the file the parent writes on SIGTERM and the guard's stdout."""
    stopped = tmp_path / "parent-got-sigterm"
    pids = tmp_path / "stub.pid"
    guard_log = tmp_path / "guard.out"
    stub_code = (
        "import os, subprocess, sys, time\n"
        f"subprocess.Popen([sys.executable, '-m', 'serving.orphan_guard', str(os.getpid()), 'assistant'],"
        f" stdout=open({str(guard_log)!r}, 'w'))\n"
        f"open({str(pids)!r}, 'w').write(str(os.getpid()))\n"
        "time.sleep(120)\n"
    )
    parent = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import signal, subprocess, sys, time\n"
            f"open('/proc/self/comm', 'w').write({parent_name!r})\n"
            f"signal.signal(signal.SIGTERM, lambda *_: (open({str(stopped)!r}, 'w').close(), {on_sigterm}))\n"
            f"subprocess.Popen([sys.executable, '-c', {stub_code!r}])\n"
            "time.sleep(120)\n",
            *arguments,
        ],
        cwd=CONTAINER_DIR,
    )
    deadline = time.monotonic() + 10
    while not (pids.exists() and pids.read_text()) and time.monotonic() < deadline:
        time.sleep(0.1)
    time.sleep(1.0)  # the guard runs
    return parent, int(pids.read_text()), stopped, guard_log


def test_a_stub_killed_while_triton_runs_stops_triton_and_writes_a_failed_line(tmp_path: Path) -> None:
    """Triton 2.51 would keep the model's readiness green for ever: the guard sends it SIGTERM and writes
    RequestFailed=1 with the reason."""
    triton, stub, stopped, guard_log = start_stub_under("tritonserver", tmp_path)
    try:
        os.kill(stub, signal.SIGKILL)
        triton.wait(timeout=10)
        assert stopped.exists(), "Triton was not told to stop"
        deadline = time.monotonic() + 5
        while "RequestFailed" not in guard_log.read_text() and time.monotonic() < deadline:
            time.sleep(0.1)
        (line,) = [json.loads(text) for text in guard_log.read_text().splitlines() if text.startswith("{")]
        assert line["RequestFailed"] == 1 and line["Model"] == "assistant" and line["Outcome"] == "failed"
        assert "died without a clean shutdown" in line["Reason"]
    finally:
        if triton.poll() is None:
            triton.kill()
            triton.wait()


def test_a_stub_killed_under_another_parent_does_not_signal_it(tmp_path: Path) -> None:
    """Only a Triton parent is stopped: a stub started by anything else (a launcher, a test) is left alone."""
    launcher, stub, stopped, _ = start_stub_under("launcher", tmp_path)
    try:
        os.kill(stub, signal.SIGKILL)
        with contextlib.suppress(subprocess.TimeoutExpired):
            launcher.wait(timeout=3)  # six of the guard's polls
        assert not stopped.exists() and launcher.poll() is None
    finally:
        launcher.kill()
        launcher.wait()


def test_a_triton_that_hangs_after_its_exit_timeout_is_killed(tmp_path: Path) -> None:
    """Triton 2.51 with a request held by a dead stub logged "Exiting immediately" and hung: past its exit
    timeout (read from its command line) and a margin, the guard kills it."""
    triton, stub, stopped, _ = start_stub_under(
        "tritonserver", tmp_path, on_sigterm="None", arguments=("--exit-timeout-secs=1",)
    )
    try:
        os.kill(stub, signal.SIGKILL)
        assert triton.wait(timeout=15) == -signal.SIGKILL
        assert stopped.exists(), "Triton was asked to stop first"
    finally:
        if triton.poll() is None:
            triton.kill()
            triton.wait()
