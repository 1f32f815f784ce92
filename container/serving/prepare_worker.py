"""A request's own work (plan, retrieve, build the prompt) on a worker thread, off the engine's event loop.

The engine loop serves every stream's tokens: a request prepared on it held all of them for the time it
took (at 16 streams the assistant lost 270 ms of TTFT p50 and 14% of its tokens/s against the same prompt
fed straight through). On one worker, the loop only hands the text over and picks the result up. The
worker shares the GIL with the loop, but Python hands the GIL to a waiting thread every switch interval
(serving/gil_switch.py), so a preparation holds the loop for at most that at a time, where it held it for
all its length.

One worker keeps the arrival order: requests are prepared, and reach the engine, in the order they came.
The queue in front of it is bounded by admission (a replica admits its batch slots and queue, no more).
A request cancelled while it waits for the worker is never prepared; one cancelled while it is being
prepared never reaches the engine (its coroutine is cancelled at the await).
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import ctypes
import os
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Generic, TypeVar

Prepared = TypeVar("Prepared")


# The kernel's per-thread scheduler statistics: time on a CPU, time runnable but waiting for one, and
# timeslices, in ns (Documentation/scheduler/sched-stats.rst, "/proc/<pid>/task/<tid>/schedstat"). Absent
# on kernels built without schedstats; then the wait for a core is not known.
_SCHEDSTAT = Path("/proc/thread-self/schedstat")


def _run_queue_ns() -> int | None:
    return _SchedStat.for_this_thread().run_queue_ns()


class _SchedStat:
    """This thread's scheduler statistics, read without giving up the GIL.

    Python's own file reads (open, read, close; os.pread) release the GIL around each system call, and a
    thread that released it waits for it again behind every busy thread: at least one switch interval
    each time the engine loop or the outbox wants it. Read twice per preparation, that was several waits
    inside the very wall time being measured. A file descriptor opened once per thread and a pread
    through ctypes.PyDLL (which, unlike ctypes.CDLL, keeps the GIL across the call) cost a system call
    of about 2 us and no hand-over."""

    _local = threading.local()
    _BUFFER_BYTES = 256

    def __init__(self) -> None:
        self._fd: int | None = None
        self._pread = None
        try:
            # /proc/thread-self resolves at open: the descriptor stays this thread's.
            self._fd = os.open(_SCHEDSTAT, os.O_RDONLY | os.O_CLOEXEC)
            pread = ctypes.PyDLL(None).pread
        except (OSError, AttributeError):
            return
        pread.argtypes = [ctypes.c_int, ctypes.c_void_p, ctypes.c_size_t, ctypes.c_long]
        pread.restype = ctypes.c_ssize_t
        self._pread = pread
        self._buffer = ctypes.create_string_buffer(self._BUFFER_BYTES)

    def __del__(self) -> None:  # the thread ended (its thread-local goes): its descriptor with it
        if self._fd is not None:
            with contextlib.suppress(OSError):
                os.close(self._fd)

    @classmethod
    def for_this_thread(cls) -> _SchedStat:
        stat = getattr(cls._local, "stat", None)
        if stat is None:
            stat = cls._local.stat = cls()
        return stat

    def run_queue_ns(self) -> int | None:
        if self._pread is None:
            return None
        size = self._pread(self._fd, self._buffer, self._BUFFER_BYTES, 0)
        try:
            return int(self._buffer.raw[:size].split()[1]) if size > 0 else None
        except (IndexError, ValueError):
            return None


@dataclass(frozen=True)
class PrepareTime:
    """A preparation's time: wall (what the request waited) and the worker's CPU. On a busy machine the two
    part: the wall time also holds the time the worker waited for a core (run_queue_ms, from the kernel's
    scheduler statistics; None where it keeps none) or for the GIL (about the rest)."""

    wall_ms: float
    cpu_ms: float
    run_queue_ms: float | None = None

    @property
    def other_wait_ms(self) -> float | None:
        """Wall time neither on a CPU nor waiting for one: mostly waiting for the GIL."""
        if self.run_queue_ms is None:
            return None
        return max(0.0, self.wall_ms - self.cpu_ms - self.run_queue_ms)


class PrepareWorker(Generic[Prepared]):
    def __init__(self, prepare: Callable[[str], Prepared], *, name: str = "prepare") -> None:
        self._prepare = prepare
        self._pool = concurrent.futures.ThreadPoolExecutor(max_workers=1, thread_name_prefix=name)

    def _timed(self, text: str) -> tuple[Prepared, PrepareTime]:
        # The run-queue reads sit inside the wall time's interval: a wait for a core between them is in
        # the wall time too, so the split never counts more waiting than the request saw.
        started, cpu_started = time.perf_counter(), time.thread_time()
        queued_before = _run_queue_ns()
        prepared = self._prepare(text)
        queued_after = _run_queue_ns()
        cpu_ms = (time.thread_time() - cpu_started) * 1000.0
        wall_ms = (time.perf_counter() - started) * 1000.0
        run_queue_ms = (
            None if queued_before is None or queued_after is None else (queued_after - queued_before) / 1e6
        )
        return prepared, PrepareTime(wall_ms=wall_ms, cpu_ms=cpu_ms, run_queue_ms=run_queue_ms)

    async def prepare(self, text: str) -> tuple[Prepared, PrepareTime]:
        """The prepared request and how long its preparation took on the worker (queue wait apart).

        Raises what the preparation raised (a RequestError is the client's), or CancelledError if the
        calling task is cancelled meanwhile; a preparation not yet started then never runs."""
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(self._pool, self._timed, text)

    def stop(self) -> None:
        """Preparations not started are dropped; the one running finishes on its own (it holds no lock)."""
        self._pool.shutdown(wait=False, cancel_futures=True)
