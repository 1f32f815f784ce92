"""The orchestrator's memory between runs survives a round trip, fits one standard SSM parameter and
never stops it when unreadable."""

from __future__ import annotations

from orchestrator.routing.policy import RegionMemory
from orchestrator.routing.state import KEEP_DECISIONS, MAX_BYTES, RunState, parse_state

EIGHT = [
    "us-east-1",
    "us-east-2",
    "us-west-1",
    "us-west-2",
    "eu-west-1",
    "eu-central-1",
    "ap-southeast-2",
    "ap-south-1",
]


def test_round_trip_keeps_streaks_targets_and_the_last_decisions():
    decisions = tuple({"time": str(i), "weights": {"us-east-1": i}, "reason": "r"} for i in range(9))
    state = RunState(
        {"us-east-1": RegionMemory(2, 0)}, "2027-07-08T12:00:00Z", {"us-east-1": 40}, {"x": 2}, decisions
    )
    parsed = parse_state(state.to_json())
    assert (parsed.memory, parsed.minute, parsed.targets, parsed.removed) == (
        state.memory,
        state.minute,
        state.targets,
        state.removed,
    )
    assert parsed.decisions == decisions[-KEEP_DECISIONS:]


def test_eight_regions_with_long_reasons_fit_a_standard_parameter():
    """Six or more regions overflowed 4 KB, and the write failed after the change."""
    weights = dict.fromkeys(EIGHT, 255)
    reason = "; ".join(
        f"{r} degraded: 255->130 (drain alarm in ALARM, slow first tokens 30.0%, errors 20.0%)" for r in EIGHT
    )
    decisions = tuple(
        {"time": f"2027-07-08T12:0{i}:00Z", "weights": weights, "reason": reason} for i in range(9)
    )
    state = RunState(
        dict.fromkeys(EIGHT, RegionMemory(12, 0)), "2027-07-08T12:08:00Z", weights, {}, decisions
    )
    text = state.to_json()
    assert len(text.encode()) <= MAX_BYTES
    parsed = parse_state(text)
    assert parsed.decisions and parsed.decisions[-1]["time"] == "2027-07-08T12:08:00Z"  # the newest kept
    assert parsed.targets == weights and parsed.memory == state.memory


def test_absent_or_garbled_state_starts_afresh():
    assert parse_state(None) == RunState()
    assert parse_state("{not json") == RunState()
    assert parse_state('{"memory": {"us-east-1": 5}}') == RunState()
