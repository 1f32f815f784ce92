"""Log lines (the EMF metric lines) written by a thread of their own, off the thread that sends tokens.

stdout is a pipe to the container's log driver. In blocking mode a slow CloudWatch Logs makes a write wait,
and the outbox thread that wrote the line also sends every stream's tokens: all streams would stall behind
one log line. Here a line goes into a bounded queue and a writer thread prints it; when the queue is full the
line is dropped and counted, and the writer reports the count in a line of its own once it can write again
(the EMF line `report_drops` builds), so a gap in the metrics is never silent.
"""

from __future__ import annotations

import queue
import sys
import threading
import time
from collections.abc import Callable
from typing import TextIO

# Lines held while the stream is slow: at a few hundred bytes each, a few MB; minutes of a busy replica.
DEFAULT_CAPACITY = 10_000
_STOP = object()


class LineWriter:
    def __init__(
        self,
        stream: TextIO | None = None,
        *,
        capacity: int = DEFAULT_CAPACITY,
        report_drops: Callable[[int], str] | None = None,
    ) -> None:
        self._stream = stream
        self._queue: queue.Queue = queue.Queue(maxsize=capacity)
        self._report_drops = report_drops
        self._lock = threading.Lock()
        self.dropped = 0  # all lines dropped since the start
        self._unreported = 0
        self._thread = threading.Thread(target=self._run, name="log-writer", daemon=True)
        self._thread.start()

    def write(self, line: str) -> bool:
        """Queue a line; never waits. False (and counted) when the queue is full."""
        try:
            self._queue.put_nowait(line)
            return True
        except queue.Full:
            with self._lock:
                self.dropped += 1
                self._unreported += 1
            return False

    def _output(self, line: str) -> None:
        stream = self._stream or sys.stdout
        stream.write(line + "\n")
        stream.flush()

    def _run(self) -> None:
        while True:
            line = self._queue.get()
            if line is _STOP:
                return
            try:
                self._output(line)
                with self._lock:
                    unreported, self._unreported = self._unreported, 0
                if unreported and self._report_drops is not None:
                    self._output(self._report_drops(unreported))
            except Exception:  # a broken stream must not end the writer: later lines may get through
                with self._lock:
                    self.dropped += 1
                    self._unreported += 1

    def stop(self, timeout_s: float = 5.0) -> None:
        """Write what is queued, then end the thread: within timeout_s in all (the finalize's budget counts on
        it), whatever is left unwritten then goes with the daemon thread."""
        deadline = time.monotonic() + timeout_s
        try:
            self._queue.put(_STOP, timeout=timeout_s)
        except queue.Full:
            return
        self._thread.join(timeout=max(0.0, deadline - time.monotonic()))
