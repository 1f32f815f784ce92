"""EMF lines leave the token path: a writer thread of their own, a bounded queue, drops counted."""

from __future__ import annotations

import io
import threading
import time

from serving.log_writer import LineWriter


class SlowStream(io.StringIO):
    """A stream whose writes wait until released, as a pipe to a blocked log driver does."""

    def __init__(self) -> None:
        super().__init__()
        self.release = threading.Event()

    def write(self, text: str) -> int:
        self.release.wait()
        return super().write(text)


def test_a_blocked_log_stream_never_blocks_the_writer_and_drops_are_counted_and_reported() -> None:
    stream = SlowStream()
    writer = LineWriter(stream, capacity=10, report_drops=lambda count: f"dropped {count}")
    started = time.monotonic()
    results = [writer.write(f"line {number}") for number in range(100)]
    assert time.monotonic() - started < 1.0, "a write waited for the blocked stream"
    # One line is with the writer thread, ten wait in the queue: the rest are dropped and counted.
    assert results.count(True) in (10, 11) and writer.dropped == 100 - results.count(True)
    stream.release.set()
    writer.stop()
    lines = stream.getvalue().splitlines()
    assert lines[0] == "line 0"
    assert f"dropped {writer.dropped}" in lines
    assert len(lines) == results.count(True) + 1


def test_lines_keep_their_order_and_all_are_written_when_the_stream_keeps_up() -> None:
    stream = io.StringIO()
    writer = LineWriter(stream, capacity=1_000)
    for number in range(500):
        assert writer.write(f"line {number}")
    writer.stop()
    assert stream.getvalue().splitlines() == [f"line {number}" for number in range(500)]
    assert writer.dropped == 0
