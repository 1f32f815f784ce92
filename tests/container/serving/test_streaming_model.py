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
