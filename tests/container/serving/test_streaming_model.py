"""The model's shutdown fits inside Triton's exit timeout, whatever the drain and the engine take."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from serving.streaming_model import (
    ENGINE_SHUTDOWN_MIN_S,
    FINALIZE_RESERVE_S,
    shutdown_budget,
)

pytestmark = pytest.mark.vllm_version


def test_a_short_exit_timeout_leaves_the_engine_what_the_drain_does_not_use() -> None:
    # Triton stopped with --exit-timeout-secs=20 and a 10 s drain: 10 s drain, 15 s in all.
    budget = shutdown_budget(20, 10)
    assert budget.total_s == pytest.approx(20 - FINALIZE_RESERVE_S)
    assert budget.drain_s == 10


def test_a_drain_longer_than_the_timeout_allows_is_cut_for_the_engines_share() -> None:
    budget = shutdown_budget(20, 30)
    assert budget.drain_s == pytest.approx(20 - FINALIZE_RESERVE_S - ENGINE_SHUTDOWN_MIN_S)


def test_production_timeout_keeps_the_configured_drain() -> None:
    assert shutdown_budget(110, 30).drain_s == 30


@given(
    exit_timeout=st.floats(min_value=0, max_value=600, allow_nan=False),
    drain=st.floats(min_value=0, max_value=600, allow_nan=False),
)
def test_the_drain_and_the_engine_always_fit_the_budget(exit_timeout: float, drain: float) -> None:
    budget = shutdown_budget(exit_timeout, drain)
    assert 0 <= budget.drain_s <= drain
    assert budget.total_s - budget.drain_s >= ENGINE_SHUTDOWN_MIN_S
    if exit_timeout >= FINALIZE_RESERVE_S + ENGINE_SHUTDOWN_MIN_S:
        assert budget.total_s <= exit_timeout - FINALIZE_RESERVE_S


class FakeClock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_the_threads_stop_within_what_the_budget_has_left_each_taking_its_share() -> None:
    """The outbox, the log writer and the target-group leave each get an equal share of what is left,
    recomputed as each ends: one that takes its whole share cannot take the others', and the three end by
    the deadline. Before, the outbox and the log writer had fixed timeouts (10 s, and 5 s twice) after the
    drain and the engine had used the budget, so a stop could pass Triton's exit timeout."""
    from serving.streaming_model import stop_in_turn

    clock = FakeClock()
    given: list[float] = []

    def takes_all(timeout_s: float) -> None:
        given.append(timeout_s)
        clock.now += timeout_s

    def ends_at_once(timeout_s: float) -> None:
        given.append(timeout_s)

    stop_in_turn(109.0, [takes_all, ends_at_once, takes_all], clock=clock)
    assert given == pytest.approx([3.0, 3.0, 6.0])
    assert clock.now == pytest.approx(109.0)


def test_a_spent_budget_still_gives_each_thread_a_moment() -> None:
    from serving.streaming_model import STOP_MIN_S, stop_in_turn

    clock = FakeClock()
    given: list[float] = []
    stop_in_turn(90.0, [given.append, given.append], clock=clock)
    assert given == [STOP_MIN_S, STOP_MIN_S]
