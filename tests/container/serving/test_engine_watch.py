"""When the engine counts as dead (serving/engine_watch.py), decided from what the watch observes."""

from __future__ import annotations

import threading
import time

from hypothesis import given
from hypothesis import strategies as st

from serving.engine_watch import EngineState, EngineWatch, dead_engine_reason


def state(**changes) -> EngineState:
    values = dict(now=1000.0, errored=False, gone_processes=(), in_flight=0, busy_since=None, last_step=0.0)
    values.update(changes)
    return EngineState(**values)


def test_an_idle_engine_is_alive_however_long_it_has_not_stepped() -> None:
    assert dead_engine_reason(state(last_step=0.0, in_flight=0), stall_s=30) is None


def test_requests_in_flight_and_no_step_for_the_stall_time_is_a_dead_engine() -> None:
    reason = dead_engine_reason(state(in_flight=3, busy_since=900.0, last_step=969.0), stall_s=30)
    assert reason is not None and "no engine step for 31 s with 3 requests" in reason
    assert dead_engine_reason(state(in_flight=3, busy_since=900.0, last_step=971.0), stall_s=30) is None


def test_the_stall_clock_starts_when_work_arrives_after_an_idle_spell() -> None:
    """An engine idle for an hour is not dead the moment a request arrives."""
    assert dead_engine_reason(state(in_flight=1, busy_since=990.0, last_step=0.0), stall_s=30) is None
    assert dead_engine_reason(state(in_flight=1, busy_since=960.0, last_step=0.0), stall_s=30)


def test_errored_or_gone_processes_are_dead_at_once() -> None:
    assert "errored" in dead_engine_reason(state(errored=True), stall_s=30)
    assert "[42]" in dead_engine_reason(state(gone_processes=(42,)), stall_s=30)


@given(
    st.floats(min_value=0, max_value=1e6),
    st.floats(min_value=0, max_value=1e6),
    st.integers(min_value=0, max_value=64),
    st.floats(min_value=1, max_value=600),
)
def test_a_stall_verdict_needs_work_and_quiet_longer_than_the_stall_time(
    busy_since, last_step, in_flight, stall
):
    now = max(busy_since, last_step) + 1.0
    for offset in (0.0, stall / 2, stall, stall * 2):
        verdict = dead_engine_reason(
            state(now=now + offset, in_flight=in_flight, busy_since=busy_since, last_step=last_step), stall
        )
        quiet = now + offset - max(busy_since, last_step)
        assert (verdict is not None) == (in_flight > 0 and quiet >= stall)


def test_the_watch_calls_back_once_from_its_own_thread() -> None:
    calls: list[tuple[str, str]] = []
    done = threading.Event()

    def on_dead(reason: str) -> None:
        calls.append((reason, threading.current_thread().name))
        done.set()

    observed = iter([state(), state(), state(errored=True), state(errored=True)])
    watch = EngineWatch(lambda: next(observed, state(errored=True)), on_dead, stall_s=30, interval_s=0.01)
    watch.start()
    assert done.wait(5)
    time.sleep(0.1)
    watch.stop()
    assert len(calls) == 1 and calls[0][1] == "engine-watch"


def test_a_watch_that_cannot_observe_says_so_rather_than_going_quiet() -> None:
    reasons: list[str] = []
    done = threading.Event()

    def broken() -> EngineState:
        raise RuntimeError("boom")

    watch = EngineWatch(
        broken, lambda reason: (reasons.append(reason), done.set()), stall_s=30, interval_s=0.01
    )
    watch.start()
    assert done.wait(5)
    watch.stop()
    assert "could not observe the engine: RuntimeError: boom" in reasons[0]
