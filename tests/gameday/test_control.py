"""One fleet's control loop: bounds, target tracking, managed scaling, warm pools and dead engines."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime, timedelta

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gameday.control import BOOT_MINUTES, COLD_START_MINUTES, WARM_START_MINUTES, FleetState
from gameday.templates import Bounds, FleetControl, TargetTracking, WarmPool

START = datetime(2027, 7, 8, tzinfo=UTC)


def fleet(warm_pool: WarmPool | None = None, schedule: tuple[Bounds, ...] = ()) -> FleetControl:
    return FleetControl(
        instance_type="inf2.48xlarge",
        service_id="Service",
        asg_min=2,
        asg_max=40,
        asg_schedule=(),
        service_min=2,
        service_max=30,
        service_schedule=schedule,
        tracking=TargetTracking("RequestsInFlight", "Average", {}, 72.0, 120, 1800),
        warmup_seconds=300,
        target_capacity=100,
        warm_pool=warm_pool,
        grace_seconds=2400,
        dead_target_seconds=163.0,  # 36 s x 5: out in the third minute
    )


def run(state: FleetState, metric: float, minutes: int, first: int = 0) -> list[str]:
    events: list[str] = []
    for minute in range(first, first + minutes):
        now = START + timedelta(minutes=minute)
        state.schedule(minute, now - timedelta(minutes=1), now, events)
        state.track(minute, metric, events)
        state.step(minute, False, events)
    return events


def test_a_scale_out_serves_after_boot_and_cold_start():
    state = FleetState.steady(fleet(), START, 10)
    run(state, 72 * 1.5, 3)  # the third datapoint above the target scales out: 10 x 1.5
    assert state.desired == 15 and state.serving == 10
    run(state, 72, BOOT_MINUTES + COLD_START_MINUTES - 1, first=3)
    assert state.serving == 10
    run(state, 72, 1, first=2 + BOOT_MINUTES + COLD_START_MINUTES)
    assert state.serving == 15


def test_a_warm_pool_host_starts_sooner():
    cold = FleetState.steady(fleet(), START, 10)
    warm = FleetState.steady(fleet(WarmPool(min_size=5, max_prepared=None)), START, 10)
    for state in (cold, warm):
        run(state, 72 * 1.5, 3)
        run(state, 72, WARM_START_MINUTES + COLD_START_MINUTES, first=3)
    assert warm.serving == 15 and cold.serving == 10


def test_a_lower_maximum_stops_tasks_at_once():
    restore = (Bounds(START + timedelta(minutes=5), 2, 8, "restore"),)
    state = FleetState.steady(fleet(schedule=restore), START, 20)
    events = run(state, 60, 6)
    assert state.serving == 8 and any("desired 20 -> 8" in event for event in events)


def test_dead_engines_stay_targets_until_the_health_check_then_are_replaced():
    state = FleetState.steady(fleet(), START, 20)  # 163 s to see them: out in the third minute
    state.kill(4, 0)
    assert state.dead_in_rotation(0) == (4, 1.0)
    run(state, 60, 3)
    assert state.dead_targets == 4 and state.serving == 16
    count, share = state.dead_in_rotation(2)
    assert count == 4 and share == pytest.approx(43 / 60)
    run(state, 60, 1, first=3)
    assert state.dead_targets == 0 and state.dead_in_rotation(3) == (0, 0.0)
    assert sum(c.count for c in state.starting) == 4


def test_at_the_albs_floor_dead_engines_take_requests_for_seconds_of_their_minute():
    state = FleetState.steady(replace(fleet(), dead_target_seconds=8.0), START, 20)
    state.kill(4, 0)
    count, share = state.dead_in_rotation(0)
    assert count == 4 and share == pytest.approx(8 / 60)
    run(state, 60, 2)  # replaced from the next minute
    assert state.dead_targets == 0 and sum(c.count for c in state.starting) == 4


@settings(max_examples=50, deadline=None)
@given(st.lists(st.floats(0, 300), min_size=1, max_size=120), st.integers(2, 30))
def test_tasks_never_outnumber_hosts_and_desired_stays_in_bounds(metrics, start):
    state = FleetState.steady(fleet(), START, start)
    for minute, metric in enumerate(metrics):
        events: list[str] = []
        state.track(minute, metric, events)
        state.step(minute, minute % 7 == 0, events)
        assert state.tasks <= state.hosts
        assert state.service_min <= state.desired <= state.service_max
        assert state.all_hosts <= state.asg_max


def test_a_capacity_shortage_fails_launches_until_it_ends():
    state = FleetState.steady(fleet(), START, 10)
    events: list[str] = []
    for minute in range(10):
        state.track(minute, 72 * 1.5, events)
        state.step(minute, True, events)
    assert state.all_hosts == 10 and state.desired > 10
    assert any("launch of" in event and "failed" in event for event in events)
    state.step(10, False, events)
    assert state.all_hosts == state.desired


def test_scale_in_is_gradual_and_waits_for_its_cooldown():
    state = FleetState.steady(fleet(), START, 30)
    events = run(state, 10, 15 + 30)  # far below the target: proportionally 30 -> 5
    scale_ins = [event for event in events if "scale in" in event]
    # The 15th datapoint below: one step of 10%; the next only after the 30-minute cooldown.
    assert scale_ins == ["inf2.48xlarge: scale in 30 -> 27", "inf2.48xlarge: scale in 27 -> 25"]


def test_a_grace_shorter_than_the_cold_start_keeps_restarting_new_tasks():
    """ECS replaces a task still unhealthy when its health-check grace ends: with 5 minutes of grace and a
    12-minute cold start no new task ever serves; with the template's 40 minutes they do."""
    from dataclasses import replace

    for grace, serves in ((300, False), (2400, True)):
        state = FleetState.steady(replace(fleet(), grace_seconds=grace), START, 10)
        run(state, 72 * 1.5, 3)
        events = run(state, 72, BOOT_MINUTES + COLD_START_MINUTES + 10, first=3)
        assert (state.serving == 15) is serves, grace
        assert any("stopped by the health check in their cold start" in e for e in events) is not serves


def test_a_recurring_scheduled_action_fires_at_each_match():
    from gameday.cron import parse

    weekdays = (Bounds(START, 12, 30, "weekday-morning", parse("cron(0 9 ? * MON-FRI *)")),)
    state = FleetState.steady(fleet(schedule=weekdays), START, 4)  # 2027-07-08 is a Thursday
    assert state.service_min == 2  # not fired yet that day (it starts at midnight UTC)
    events = run(state, 60, 9 * 60 + 1)
    assert state.service_min == 12 and state.desired >= 12
    assert sum("weekday-morning" in e for e in events) == 1
    # Started on Saturday the 10th, it fired last on Friday: in force from the start.
    saturday = START + timedelta(days=2)
    assert fleet(schedule=weekdays).bounds_at(saturday)[2] == 12
