from __future__ import annotations

from datetime import UTC, datetime

import pytest

from orchestrator.routing import handler as lambda_handler
from tests.orchestrator.routing.clock import Clock, ClockDatetime


@pytest.fixture(autouse=True)
def simulated_clock(monkeypatch):
    """Every handler run here sees the clock its event implies (tests/orchestrator/routing/clock.py)."""
    monkeypatch.setattr(Clock, "now_at", datetime(2027, 7, 8, 12, 0, 5, tzinfo=UTC))
    monkeypatch.setattr(lambda_handler, "datetime", ClockDatetime)
