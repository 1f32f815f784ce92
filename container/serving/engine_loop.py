"""vLLM's AsyncLLM on its own asyncio event loop in a daemon thread.

Triton calls execute() on its own thread; the model hands each request to this loop with submit() and
returns at once, so many streams share one engine and continuous batching does the rest.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import inspect
import logging
import threading
import time
from collections.abc import Coroutine, Mapping
from dataclasses import fields
from typing import Any

from serving.engine_settings import EngineSettingsError, check_known_keys

logger = logging.getLogger(__name__)

CANCEL_TIMEOUT_S = 2.0  # the live requests' tasks queue their final responses in one pass of the loop


def _report_failure(future: concurrent.futures.Future) -> None:
    # Nobody awaits these futures: an escaped exception would otherwise vanish with its request.
    if not future.cancelled() and future.exception() is not None:
        logger.error("request task failed", exc_info=future.exception())


def shutdown_engine(engine: Any, timeout_s: float) -> None:
    """Shut the engine and its processes down, on any vLLM the image may run.

    Newer vLLM's AsyncLLM.shutdown(timeout=) waits up to that long for the engine core to exit. vLLM 0.13 (the
    Neuron SDK 2.28 image's) has shutdown() without arguments: it sends the engine processes SIGTERM and kills
    what is left after 5 s (vllm/v1/utils.py, shutdown(); tag v0.13.0). Asked by signature, not by version.
    """
    if "timeout" in inspect.signature(engine.shutdown).parameters:
        engine.shutdown(timeout=timeout_s)
    else:
        engine.shutdown()


class EngineLoop:
    def __init__(
        self, settings: Mapping[str, Any], source: str, *, stat_loggers: list[Any] | None = None
    ) -> None:
        from vllm.engine.arg_utils import AsyncEngineArgs
        from vllm.v1.engine.async_llm import AsyncLLM

        check_known_keys(settings, {field.name for field in fields(AsyncEngineArgs)}, source)
        self.loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self.loop.run_forever, name="vllm-engine-loop", daemon=True)
        self._thread.start()

        async def start() -> AsyncLLM:
            return AsyncLLM.from_engine_args(AsyncEngineArgs(**settings), stat_loggers=stat_loggers)

        try:
            self.engine = self.run(start())
        except (TypeError, ValueError) as err:
            self.stop()
            raise EngineSettingsError(f"{source}: engine arguments rejected: {err}") from err

    def run(self, coroutine: Coroutine[Any, Any, Any], timeout_s: float | None = None) -> Any:
        """Run a coroutine on the engine loop and wait for its result (for start-up and shutdown), at most
        timeout_s: a blocked loop raises concurrent.futures.TimeoutError instead of holding the caller."""
        future = asyncio.run_coroutine_threadsafe(coroutine, self.loop)
        try:
            return future.result(timeout=timeout_s)
        except concurrent.futures.TimeoutError:
            future.cancel()
            raise

    def submit(self, coroutine: Coroutine[Any, Any, Any]) -> concurrent.futures.Future:
        future = asyncio.run_coroutine_threadsafe(coroutine, self.loop)
        future.add_done_callback(_report_failure)
        return future

    def unfinished_requests(self) -> int:
        return self.engine.get_num_unfinished_requests()

    async def _cancel_tasks(self) -> None:
        tasks = [task for task in asyncio.all_tasks() if task is not asyncio.current_task()]
        for task in tasks:
            task.cancel()
        # Each cancelled request queues its final response; give them one pass of the loop to do it.
        await asyncio.gather(*tasks, return_exceptions=True)

    def stop(self, timeout_s: float = 20.0) -> None:
        """Cancel what still runs on the loop, shut the engine down (its processes exit), stop the loop; all
        within timeout_s. An engine still shutting down then is left to the caller, which kills its
        processes (vLLM 0.13's shutdown() takes no timeout; a newer one's can be spent on a stuck worker)."""
        deadline = time.monotonic() + timeout_s
        if self._thread.is_alive():
            with contextlib.suppress(Exception):
                asyncio.run_coroutine_threadsafe(self._cancel_tasks(), self.loop).result(
                    timeout=min(CANCEL_TIMEOUT_S, timeout_s)
                )
        engine = getattr(self, "engine", None)
        if engine is not None:
            remaining = max(0.5, deadline - time.monotonic())

            def shut_down() -> None:
                try:
                    shutdown_engine(engine, remaining)
                except Exception:
                    logger.exception("engine shutdown failed; its processes are killed instead")

            shutting_down = threading.Thread(target=shut_down, name="vllm-engine-shutdown", daemon=True)
            shutting_down.start()
            shutting_down.join(timeout=remaining)
            if shutting_down.is_alive():
                logger.warning("engine shutdown still running after %.1f s; killing its processes", remaining)
        self.loop.call_soon_threadsafe(self.loop.stop)
        self._thread.join(timeout=max(0.5, deadline - time.monotonic()))
