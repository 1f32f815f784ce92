"""`--cpu-hog N`: busy processes for the session's length, and none left after it, even a killed one."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from tests.cpu_hog import hog_count

REPO_DIR = Path(__file__).resolve().parents[1]
WAIT_S = 60.0

# A session's test: the hog processes are this process's children, running and using CPU; their pids go to a
# file for the outer test, and with HOLD set the test then waits (for the outer test to kill the session).
INNER_TEST = """
import json, os, time
from pathlib import Path

def cpu_seconds(pid):
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")

def test_hogs_spin():
    me = os.getpid()
    hogs = [
        int(pid) for pid in os.listdir("/proc") if pid.isdigit()
        and Path(f"/proc/{pid}/stat").exists()
        and b"PR_SET_PDEATHSIG" in Path(f"/proc/{pid}/cmdline").read_bytes()
        and int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[1]) == me
    ]
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline and min((cpu_seconds(pid) for pid in hogs), default=0) < 0.2:
        time.sleep(0.1)
    Path(os.environ["HOG_PIDS"]).write_text(json.dumps({"pids": hogs, "cpu": [cpu_seconds(p) for p in hogs]}))
    if os.environ.get("HOLD"):
        time.sleep(120)
"""


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except FileNotFoundError:
        return False
    return state not in ("Z", "X")  # a zombie no longer runs


def _wait_gone(pids: list[int]) -> list[int]:
    deadline = time.monotonic() + WAIT_S
    while time.monotonic() < deadline and any(_alive(pid) for pid in pids):
        time.sleep(0.1)
    return [pid for pid in pids if _alive(pid)]


def _session(tmp_path: Path, *options: str, hold: bool = False) -> subprocess.Popen:
    test_file = tmp_path / "test_inner.py"
    test_file.write_text(textwrap.dedent(INNER_TEST))
    environment = {**os.environ, "HOG_PIDS": str(tmp_path / "pids.json"), "PYTHONPATH": str(REPO_DIR)}
    environment.pop("TEST_CPU_HOG", None)
    if hold:
        environment["HOLD"] = "1"
    command = [sys.executable, "-m", "pytest", "-p", "tests.conftest", "-p", "no:cacheprovider", "-q"]
    command += ["-c", os.devnull, "--rootdir", str(tmp_path), *options, str(test_file)]
    return subprocess.Popen(command, cwd=REPO_DIR, env=environment, stdout=subprocess.PIPE, text=True)


def _pids(tmp_path: Path, session: subprocess.Popen) -> dict:
    deadline = time.monotonic() + WAIT_S
    while not (tmp_path / "pids.json").exists():
        assert session.poll() is None, session.stdout.read()
        assert time.monotonic() < deadline, "the inner session wrote no hog pids"
        time.sleep(0.1)
    return json.loads((tmp_path / "pids.json").read_text())


def test_the_session_runs_its_hogs_and_ends_them(tmp_path: Path) -> None:
    session = _session(tmp_path, "--cpu-hog", "2")
    output, _ = session.communicate(timeout=WAIT_S * 2)
    assert session.returncode == 0, output
    seen = json.loads((tmp_path / "pids.json").read_text())
    assert len(seen["pids"]) == 2 and all(cpu >= 0.2 for cpu in seen["cpu"]), seen
    assert _wait_gone(seen["pids"]) == []


def test_no_hog_without_the_option(tmp_path: Path) -> None:
    session = _session(tmp_path)
    output, _ = session.communicate(timeout=WAIT_S * 2)
    assert session.returncode == 0, output
    assert json.loads((tmp_path / "pids.json").read_text())["pids"] == []


def test_a_killed_session_leaves_no_hog_behind(tmp_path: Path) -> None:
    session = _session(tmp_path, "--cpu-hog", "2", hold=True)
    try:
        pids = _pids(tmp_path, session)["pids"]
        assert len(pids) == 2
        session.send_signal(signal.SIGKILL)  # no unconfigure hook runs: the hogs must go by themselves
        session.wait(timeout=WAIT_S)
        assert _wait_gone(pids) == []
    finally:
        if session.poll() is None:
            session.kill()
        session.stdout.close()


@pytest.mark.parametrize(("raw", "count"), [(None, 0), ("", 0), (" 3 ", 3), ("0", 0)])
def test_hog_count(raw: str | None, count: int) -> None:
    assert hog_count(raw) == count


@pytest.mark.parametrize("raw", ["two", "-1", "1.5"])
def test_a_bad_hog_count_is_named(raw: str) -> None:
    with pytest.raises(ValueError, match=r"--cpu-hog / TEST_CPU_HOG: a whole number of processes"):
        hog_count(raw)
