"""Is the engine alive? A thread of its own asks every second, whatever the engine loop is doing.

Dead is: vLLM says it errored; one of the engine's processes is gone (vLLM's own monitor does not always
wake a request waiting on a killed engine core); or requests are in flight and the engine has not finished
a step for ENGINE_STALL_SECONDS (a hung engine core, a stopped process, a blocked engine loop: each looks
like a host that accepts streams and never answers them). The watch runs on its own thread so that a blocked
engine loop cannot hide itself.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass

STALL_ENV = "ENGINE_STALL_SECONDS"  # engine_settings.NOT_ENGINE_ARGUMENTS keeps it out of vLLM's arguments
DEFAULT_STALL_S = 30.0
WATCH_INTERVAL_S = 1.0


@dataclass(frozen=True)
class EngineState:
    """What the watch sees at one instant (times from time.monotonic())."""

    now: float
    errored: bool
    gone_processes: tuple[int, ...]
    in_flight: int
    busy_since: float | None  # when the model last went from no request in flight to some
    last_step: float  # when the engine last reported a step


def dead_engine_reason(state: EngineState, stall_s: float) -> str | None:
    """Why the engine counts as dead, or None while it is alive."""
    if state.errored:
        return "the engine reported itself errored"
    if state.gone_processes:
        return f"engine processes {list(state.gone_processes)} are gone"
    if state.in_flight and state.busy_since is not None:
        # Quiet since the later of: its last step, and the moment it was given work after an idle spell.
        quiet_since = max(state.busy_since, state.last_step)
        quiet_s = state.now - quiet_since
        if quiet_s >= stall_s:
            return (
                f"no engine step for {quiet_s:.0f} s with {state.in_flight} requests in flight "
                f"({STALL_ENV}={stall_s:g})"
            )
    return None


class EngineWatch:
    """Calls on_dead(reason) once, from its own thread, when dead_engine_reason says so."""

    def __init__(
        self,
        observe: Callable[[], EngineState],
        on_dead: Callable[[str], None],
        *,
        stall_s: float,
        interval_s: float = WATCH_INTERVAL_S,
    ) -> None:
        self._observe = observe
        self._on_dead = on_dead
        self._stall_s = stall_s
        self._interval_s = interval_s
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="engine-watch", daemon=True)

    def start(self) -> EngineWatch:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        if self._thread.is_alive() and self._thread is not threading.current_thread():
            self._thread.join(timeout=5)

    def _run(self) -> None:
        while not self._stop.wait(self._interval_s):
            try:
                reason = dead_engine_reason(self._observe(), self._stall_s)
            except Exception as err:  # a watch that dies silently would be worse than none
                reason = f"the engine watch could not observe the engine: {type(err).__name__}: {err}"
            if reason is not None:
                self._on_dead(reason)
                return
