"""The engine loop's calls from other threads are bounded: a blocked loop cannot hold a shutdown for ever."""

from __future__ import annotations

import asyncio
import concurrent.futures
import threading
import time

import pytest

from serving.engine_loop import EngineLoop

pytestmark = pytest.mark.vllm_version


def bare_loop() -> EngineLoop:
    """An EngineLoop's thread and event loop without a vLLM engine (named as such: the engine plays no part
    in how run() waits)."""
    engine_loop = EngineLoop.__new__(EngineLoop)
    engine_loop.loop = asyncio.new_event_loop()
    engine_loop._thread = threading.Thread(target=engine_loop.loop.run_forever, daemon=True)
    engine_loop._thread.start()
    return engine_loop


async def _answer() -> int:
    return 7


async def _block(seconds: float) -> None:
    time.sleep(seconds)  # a blocking call on the loop, as a stuck step or a slow catalog row would be


def test_run_waits_at_most_its_timeout_on_a_blocked_loop() -> None:
    engine_loop = bare_loop()
    try:
        assert engine_loop.run(_answer(), timeout_s=5) == 7
        engine_loop.submit(_block(3))
        started = time.monotonic()
        with pytest.raises(concurrent.futures.TimeoutError):
            engine_loop.run(_answer(), timeout_s=0.5)
        assert time.monotonic() - started < 2
    finally:
        engine_loop.loop.call_soon_threadsafe(engine_loop.loop.stop)
        engine_loop._thread.join(timeout=10)


class HangingShutdownEngine:
    """Stands in for AsyncLLM's shutdown only (named as such): vLLM's shutdown waiting on a worker that
    ignores the engine core's SIGTERM, which a real engine did after a burst of cancelled streams."""

    def __init__(self) -> None:
        self.release = threading.Event()
        self.called_with: list[float] = []

    def shutdown(self, timeout: float) -> None:
        self.called_with.append(timeout)
        self.release.wait(60)


def test_stop_returns_within_its_timeout_when_the_engine_shutdown_hangs() -> None:
    engine_loop = bare_loop()
    engine = HangingShutdownEngine()
    engine_loop.engine = engine
    try:
        started = time.monotonic()
        engine_loop.stop(timeout_s=2.0)
        took = time.monotonic() - started
        assert took < 3.5, f"stop took {took:.1f} s with a 2 s budget"
        assert engine.called_with and engine.called_with[0] <= 2.0
        assert not engine_loop._thread.is_alive()
    finally:
        engine.release.set()


def test_stop_cancels_what_runs_on_the_loop_within_its_timeout() -> None:
    engine_loop = bare_loop()
    cancelled = threading.Event()

    async def stream() -> None:
        try:
            await asyncio.sleep(60)
        except asyncio.CancelledError:
            cancelled.set()
            raise

    engine_loop.submit(stream())
    engine_loop.engine = None
    engine_loop.stop(timeout_s=5.0)
    assert cancelled.is_set()
    assert not engine_loop._thread.is_alive()
