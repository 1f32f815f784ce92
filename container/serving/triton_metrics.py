"""Per-request metrics as Triton custom metrics (Prometheus, served on the metrics port).

Triton's Python backend (r24.10) corrupts its shared memory when several threads update metrics at once,
so every update goes through one lock.
"""

from __future__ import annotations

import threading

# TTFT buckets in milliseconds: the fleet goal is P99 < 1 s, so resolve well below and around it.
TTFT_BUCKETS_MS = [5.0, 10.0, 25.0, 50.0, 100.0, 250.0, 500.0, 750.0, 1000.0, 2000.0, 5000.0]


class ServingMetrics:
    """Counts requests in flight and waiting for their first token; records TTFT and output tokens."""

    def __init__(self, pb_utils, model_name: str) -> None:
        family = pb_utils.MetricFamily
        labels = {"model": model_name}
        self._lock = threading.Lock()
        self._in_flight = 0
        self._queued = 0
        # A Metric stops working once its MetricFamily is garbage-collected: keep the families alive.
        self._families = {
            "ttft": family(
                name="llm_time_to_first_token_ms",
                description="Time from request arrival to the first streamed token, in milliseconds",
                kind=family.HISTOGRAM,
            ),
            "tokens": family(
                name="llm_output_tokens_total", description="Tokens generated", kind=family.COUNTER
            ),
            "requests": family(
                name="llm_requests_total", description="Requests finished, by outcome", kind=family.COUNTER
            ),
            "in_flight": family(
                name="llm_requests_in_flight",
                description="Requests accepted and not yet finished",
                kind=family.GAUGE,
            ),
            "queue": family(
                name="llm_queue_depth",
                description="Requests accepted that have not yet produced their first token",
                kind=family.GAUGE,
            ),
            "engine": family(
                name="llm_engine_unfinished_requests",
                description="Requests the vLLM engine holds (running or waiting); cancelled ones leave it",
                kind=family.GAUGE,
            ),
        }
        self._ttft = self._families["ttft"].Metric(labels=labels, buckets=TTFT_BUCKETS_MS)
        self._output_tokens = self._families["tokens"].Metric(labels=labels)
        self._outcomes = {
            outcome: self._families["requests"].Metric(labels={**labels, "outcome": outcome})
            for outcome in ("completed", "cancelled", "rejected", "failed")
        }
        self._in_flight_gauge = self._families["in_flight"].Metric(labels=labels)
        self._queue_gauge = self._families["queue"].Metric(labels=labels)
        self._engine_gauge = self._families["engine"].Metric(labels=labels)

    def started(self) -> tuple[int, int]:
        """Count a new request; return (in flight, queue depth) after it."""
        with self._lock:
            self._in_flight += 1
            self._queued += 1
            self._in_flight_gauge.set(self._in_flight)
            self._queue_gauge.set(self._queued)
            return self._in_flight, self._queued

    def first_token(self, ttft_ms: float) -> None:
        with self._lock:
            self._queued -= 1
            self._queue_gauge.set(self._queued)
            self._ttft.observe(ttft_ms)

    def finished(
        self, *, outcome: str, output_tokens: int, got_first_token: bool, engine_unfinished: int
    ) -> int:
        """Count a finished request; return the in-flight count after it."""
        with self._lock:
            self._in_flight -= 1
            if not got_first_token:
                self._queued -= 1
            self._in_flight_gauge.set(self._in_flight)
            self._queue_gauge.set(self._queued)
            self._engine_gauge.set(engine_unfinished)
            if output_tokens:
                self._output_tokens.increment(output_tokens)
            self._outcomes[outcome].increment(1)
            return self._in_flight

    def rejected(self) -> None:
        with self._lock:
            self._outcomes["rejected"].increment(1)
