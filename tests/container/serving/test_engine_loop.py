"""The engine loop's calls from other threads are bounded: a blocked loop cannot hold a shutdown for ever."""

from __future__ import annotations

import asyncio
import concurrent.futures
import threading
import time

import pytest

from serving.engine_loop import EngineLoop


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
