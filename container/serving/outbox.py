"""One thread that talks to Triton for the engine loop: response sends, cancellation checks, metric updates.

A response send (and `is_cancelled()`) waits for Triton's parent process, and a metric update or a log line
can wait on a pipe; none of that may hold up the engine's event loop, which serves every stream at once.
Triton's own vLLM backend moves its sends to a thread for the same reason. One thread also keeps the order of
one request's responses, and serializes the Python backend's metric calls (which corrupt its shared memory
when several threads make them at once).
"""

from __future__ import annotations

import logging
import queue
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

logger = logging.getLogger(__name__)

_STOP = object()


@dataclass(eq=False)
class LiveRequest:
    """A request between acceptance and its final response; shared by the engine loop and the outbox."""

    request_id: str
    sender: Any
    arrival: float
    stream: bool
    on_cancel: Callable[[], None] = lambda: None
    first_token: bool = False
    cancelled: bool = False  # the client went away (set by the outbox thread)
    final_queued: bool = False  # the engine loop has queued the last response
    final_sent: bool = False  # the outbox thread has sent it
    extra: dict[str, Any] = field(default_factory=dict)


class Outbox:
    """Runs jobs in order on its own thread, and polls the watched requests for cancellation between jobs."""

    def __init__(self, *, poll_interval_s: float = 0.1, name: str = "triton-outbox") -> None:
        self._jobs: queue.SimpleQueue = queue.SimpleQueue()
        self._watched: set[LiveRequest] = set()
        self._lock = threading.Lock()
        self._poll_interval_s = poll_interval_s
        self._thread = threading.Thread(target=self._run, name=name, daemon=True)
        self._thread.start()

    def put(self, job: Callable[[], None]) -> None:
        self._jobs.put(job)

    def watch(self, live: LiveRequest) -> None:
        with self._lock:
            self._watched.add(live)

    def send(self, live: LiveRequest, response: Any, flags: int, *, final: bool) -> None:
        """Queue one response of a request; the final one also ends the watch."""
        if final:
            live.final_queued = True
        self.put(lambda: self._send(live, response, flags, final))

    def _send(self, live: LiveRequest, response: Any, flags: int, final: bool) -> None:
        if live.final_sent:
            return
        try:
            if response is None:
                live.sender.send(flags=flags)
            else:
                live.sender.send(response, flags=flags)
            # As Triton's vLLM backend does: ask after each send, so a stream's cancel is seen at its next
            # token rather than at the next poll (which a busy engine thread can delay).
            if not final and not live.cancelled and live.sender.is_cancelled():
                live.cancelled = True
                live.on_cancel()
        except Exception as err:  # the client is gone or the stream closed: the request is over either way
            logger.info("request %s: response not delivered (%s)", live.request_id, err)
            if not final and not live.cancelled:
                live.cancelled = True
                live.on_cancel()
        finally:
            if final:
                live.final_sent = True
                with self._lock:
                    self._watched.discard(live)

    def _poll_cancellations(self) -> None:
        with self._lock:
            watched = [live for live in self._watched if not live.cancelled and not live.final_queued]
        for live in watched:
            try:
                cancelled = live.sender.is_cancelled()
            except Exception:  # a sender that cannot answer belongs to a request that is already over
                cancelled = True
            if cancelled:
                live.cancelled = True
                live.on_cancel()

    def _run(self) -> None:
        next_poll = time.monotonic() + self._poll_interval_s
        while True:
            timeout = max(0.0, next_poll - time.monotonic())
            try:
                job = self._jobs.get(timeout=timeout)
            except queue.Empty:
                job = None
            if job is _STOP:
                return
            if job is not None:
                try:
                    job()
                except Exception:
                    logger.exception("outbox job failed")
            if time.monotonic() >= next_poll:
                self._poll_cancellations()
                next_poll = time.monotonic() + self._poll_interval_s

    def stop(self, timeout_s: float = 10.0) -> None:
        """Run what is queued, then end the thread."""
        self._jobs.put(_STOP)
        self._thread.join(timeout=timeout_s)
