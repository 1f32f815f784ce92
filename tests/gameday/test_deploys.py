"""One fleet's ECS rolling deployment in the twin (gameday/deploys.py): batches bounded by the maximum
percent and the hosts the group may add, a cold start per new task, the circuit breaker's threshold, the
deployment alarms, the rollback."""

from __future__ import annotations

from gameday.deploys import (
    BOOT_MINUTES,
    COLD_START_MINUTES,
    COMPLETED,
    CRASH_MINUTES,
    FAILED,
    Rollout,
    failure_threshold,
)
from gameday.templates import RolloutControl

KIT = RolloutControl(100, 200, True, True, 3, ("HwAlarm",), True)


def run(rollout: Rollout, desired: int, room: int, minutes: int, alarm_from: int | None = None):
    """Step until the deployment ends; the minutes and the old tasks serving each minute."""
    serving = []
    for minute in range(rollout.started, rollout.started + minutes):
        alarm = "HwAlarm" if alarm_from is not None and minute >= alarm_from else None
        rollout.step(minute, desired, max(room - rollout.hosts, 0), alarm)
        serving.append(rollout.old_serving + rollout.new_serving)
        if rollout.done:
            break
    return serving


def test_batches_are_the_surge_the_group_allows_each_a_boot_and_a_cold_start_long():
    # 10 tasks, room for 4 more hosts: 3 batches (4, 4, then 2 on freed hosts).
    rollout = Rollout(KIT, "v2", "v1", 10, old_serving=10, started=0)
    serving = run(rollout, 10, room=4, minutes=200)
    assert rollout.state == COMPLETED and rollout.new_serving == 10 and rollout.old_serving == 0
    batch = BOOT_MINUTES + COLD_START_MINUTES
    # First batch on new hosts (a boot, then a cold start), then each freed host takes a new task at once.
    assert rollout.ended == batch + 2 * COLD_START_MINUTES
    assert min(serving) >= 10  # 100% minimum healthy: never fewer than desired serve


def test_the_maximum_percent_bounds_a_batch_when_the_group_has_more_room():
    rollout = Rollout(RolloutControl(100, 150, True, True, 3), "v2", "v1", 4, old_serving=4, started=0)
    rollout.step(0, 4, host_room=100)
    assert rollout.booting[0].count == 2  # 150% of 4 is 6: two new tasks at once


def test_crashing_tasks_trip_the_circuit_breaker_at_its_count_and_roll_back():
    rollout = Rollout(KIT, "v2", "v1", 10, old_serving=10, started=0, crashes=True)
    serving = run(rollout, 10, room=4, minutes=60)
    assert rollout.state == FAILED and rollout.reason.startswith("circuit breaker")
    assert rollout.ended == BOOT_MINUTES + CRASH_MINUTES and rollout.failed == 4
    assert serving[-1] == 10 and rollout.old_serving == 10  # no old task ever stopped
    back = rollout.rollback(rollout.ended)
    assert back is not None and back.revision == "v1" and back.new_serving == 10
    back.step(rollout.ended + 1, 10, 0)
    assert back.state == COMPLETED


def test_ecs_default_threshold_is_half_the_desired_count_between_3_and_200():
    default = RolloutControl(100, 200, True, True)
    assert [failure_threshold(default, d) for d in (2, 10, 264, 1000)] == [3, 5, 132, 200]
    assert failure_threshold(KIT, 264) == 3


def test_without_the_breaker_a_crashing_revision_never_fails_its_deployment():
    control = RolloutControl(100, 200, False, False)
    rollout = Rollout(control, "v2", "v1", 10, old_serving=10, started=0, crashes=True)
    run(rollout, 10, room=4, minutes=120)
    assert rollout.state != FAILED and rollout.failed > 20 and rollout.old_serving == 10


def test_a_deployment_alarm_in_alarm_fails_it_and_the_rollback_restarts_old_tasks():
    rollout = Rollout(KIT, "v2", "v1", 10, old_serving=10, started=0)
    batch = BOOT_MINUTES + COLD_START_MINUTES
    run(rollout, 10, room=4, minutes=200, alarm_from=batch + 3)
    assert rollout.state == FAILED and "HwAlarm" in rollout.reason
    assert rollout.new_serving == 4 and rollout.old_serving == 6
    back = rollout.rollback(rollout.ended)
    assert back is not None and back.old_serving == 4 and back.new_serving == 6
    serving = run(back, 10, room=4, minutes=200)
    assert back.state == COMPLETED and back.new_serving == 10 and min(serving) >= 10
    # The 4 old tasks come back on the hosts the failed deployment held: one cold start.
    assert back.ended == rollout.ended + COLD_START_MINUTES


def test_alarms_without_rollback_leave_the_failed_revision_serving():
    control = RolloutControl(100, 200, True, False, 3, ("HwAlarm",), False)
    rollout = Rollout(control, "v2", "v1", 10, old_serving=10, started=0)
    run(rollout, 10, room=4, minutes=200, alarm_from=30)
    assert rollout.state == FAILED and rollout.rollback(rollout.ended) is None


def test_an_alarm_not_named_by_the_deployment_is_not_watched():
    control = RolloutControl(100, 200, True, True)
    rollout = Rollout(control, "v2", "v1", 10, old_serving=10, started=0)
    run(rollout, 10, room=4, minutes=200, alarm_from=1)
    assert rollout.state == COMPLETED


def test_with_deployment_alarms_the_deployment_bakes_before_it_completes_and_the_alarm_can_still_fail_it():
    control = RolloutControl(100, 200, True, True, 3, ("HwAlarm",), True, alarm_bake_minutes=5)
    quiet = Rollout(control, "v2", "v1", 4, old_serving=4, started=0)
    run(quiet, 4, room=4, minutes=100)
    replaced = BOOT_MINUTES + COLD_START_MINUTES
    assert quiet.state == COMPLETED and quiet.ended == replaced + 5
    late = Rollout(control, "v2", "v1", 4, old_serving=4, started=0)
    run(late, 4, room=4, minutes=100, alarm_from=replaced + 2)
    assert late.state == FAILED  # in its bake, after every task was replaced


def test_a_rollback_is_not_failed_by_the_alarm_that_started_it():
    rollout = Rollout(KIT, "v2", "v1", 4, old_serving=4, started=0)
    run(rollout, 4, room=4, minutes=100, alarm_from=BOOT_MINUTES + 1)  # its tasks are starting
    back = rollout.rollback(rollout.ended)
    assert back is not None
    run(back, 4, room=4, minutes=100, alarm_from=0)  # the alarm's data is still the failed revision's
    assert back.state == COMPLETED


def test_a_percent_threshold_is_that_share_of_the_desired_count_within_ecss_bounds_or_without():
    """The kit's BOUNDED_PERCENT (12% of the desired count, 3 to 200); UNBOUNDED_PERCENT has no bounds (ECS
    API reference, ThresholdConfiguration). On main the twin read any percent as ECS's default, 50%."""
    bounded = RolloutControl(100, 200, True, True, None, failed_tasks_percent=12)
    assert [failure_threshold(bounded, d) for d in (2, 145, 264, 5000)] == [3, 18, 32, 200]
    unbounded = RolloutControl(
        100, 200, True, True, None, failed_tasks_percent=12, failed_tasks_bounded=False
    )
    assert [failure_threshold(unbounded, d) for d in (2, 5000)] == [1, 600]
