"""Busy processes beside a test session, as on a shared machine or a CI runner with neighbours.

`pytest --cpu-hog N` (or `make test CPU_HOG=N`) keeps N processes spinning at normal priority from the
session's start to its end: tests that hold only on an idle machine (a port chosen and bound later, a sleep
standing in for a condition, a timeout with no margin) fail under it here rather than on a busy CI.

Nothing outlives the session: the session kills them at its end, and each asks the kernel to kill it when
its parent goes (PR_SET_PDEATHSIG) and checks its parent itself as well, so a session killed with SIGKILL
leaves no spinning process behind.
"""

from __future__ import annotations

import os
import subprocess
import sys

# The hog's own code: spin, and stop as soon as the process that started it is gone.
_SPIN = """
import ctypes, os, signal, sys
parent = int(sys.argv[1])
try:
    ctypes.CDLL(None, use_errno=True).prctl(1, int(signal.SIGKILL))  # PR_SET_PDEATHSIG (Linux)
except (AttributeError, OSError):
    pass
while os.getppid() == parent:  # also after a parent that died before prctl took effect
    for _ in range(200_000):
        pass
"""
ENVIRONMENT_VARIABLE = "TEST_CPU_HOG"


def hog_count(raw: str | None) -> int:
    """The number of hog processes asked for; a clear message for anything but a whole number."""
    text = (raw or "").strip()
    if not text:
        return 0
    if not text.isdigit():
        raise ValueError(f"--cpu-hog / {ENVIRONMENT_VARIABLE}: a whole number of processes, got {raw!r}")
    return int(text)


class CpuHog:
    def __init__(self, processes: int) -> None:
        self.processes = processes
        self._children: list[subprocess.Popen] = []

    @property
    def pids(self) -> list[int]:
        return [child.pid for child in self._children]

    def start(self) -> CpuHog:
        for _ in range(self.processes):
            self._children.append(
                subprocess.Popen(
                    [sys.executable, "-c", _SPIN, str(os.getpid())],
                    stdin=subprocess.DEVNULL,
                    stdout=subprocess.DEVNULL,
                    stderr=subprocess.DEVNULL,
                )
            )
        return self

    def stop(self) -> None:
        for child in self._children:
            if child.poll() is None:
                child.kill()
        for child in self._children:
            child.wait(timeout=10)
        self._children.clear()
