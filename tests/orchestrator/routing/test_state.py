"""The orchestrator's memory between runs survives a round trip and never stops it when unreadable."""

from __future__ import annotations

from orchestrator.routing.policy import RegionMemory
from orchestrator.routing.state import KEEP_DECISIONS, RunState, parse_state


def test_round_trip_keeps_streaks_and_the_last_decisions():
    decisions = tuple({"time": str(i), "weights": {"us-east-1": i}, "reason": "r"} for i in range(9))
    state = RunState({"us-east-1": RegionMemory(2, 0)}, "2027-07-08T12:00:00Z", decisions)
    parsed = parse_state(state.to_json())
    assert parsed.memory == state.memory and parsed.last_event_time == state.last_event_time
    assert parsed.decisions == decisions[-KEEP_DECISIONS:]
    assert len(state.to_json()) < 4096  # an SSM standard parameter


def test_absent_or_garbled_state_starts_afresh():
    assert parse_state(None) == RunState()
    assert parse_state("{not json") == RunState()
    assert parse_state('{"memory": {"us-east-1": 5}}') == RunState()
