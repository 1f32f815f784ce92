"""The guard that kills a model's engine processes once the model's own process is gone."""

from __future__ import annotations

import os
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
