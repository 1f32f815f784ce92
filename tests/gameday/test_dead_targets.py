"""How long a dead engine's target keeps taking requests, from the deployed health check and the task's own
leaving."""

from __future__ import annotations

import pytest

from gameday.dead_targets import (
    ALB_ACTS_SECONDS,
    DEREGISTER_CALL_SECONDS,
    DEREGISTER_TARGETS_ACTION,
    ENGINE_DEATH_SEEN_SECONDS,
    TARGET_GROUP_ENV_PREFIX,
    dead_target_seconds,
    dead_target_seconds_deployed,
    self_deregistration_seconds,
    share_of_minute_in_rotation,
)


def test_at_the_albs_floor_a_dead_target_takes_requests_for_seconds():
    # 5 s x 2: the first failed check 2.5 s after readiness fails on average, the second 5 s later.
    assert dead_target_seconds(5, 2) == pytest.approx(ENGINE_DEATH_SEEN_SECONDS + 2.5 + 5)
    # 10 s x 5 (what the kit had): 45.5 s; 36 s x 5 (before that): nearly 3 minutes.
    assert dead_target_seconds(10, 5) == pytest.approx(45.5)
    assert 120 < dead_target_seconds(36, 5) < 180


def test_a_dead_target_takes_requests_for_part_of_its_minute_or_for_several():
    assert share_of_minute_in_rotation(20, 8.0, 20) == pytest.approx(8 / 60)
    assert share_of_minute_in_rotation(20, 8.0, 21) == 0.0
    shares = [share_of_minute_in_rotation(20, 163.0, minute) for minute in (20, 21, 22, 23)]
    assert shares[:2] == [1.0, 1.0] and shares[2] == pytest.approx(43 / 60) and shares[3] == 0.0


def test_a_task_that_leaves_its_groups_itself_is_out_in_seconds_whichever_check_it_has():
    # 0.5 s the watch + 1 s the call + 3 s the ALB's allowance, under the 8 s of the ALB's floor.
    assert self_deregistration_seconds() == pytest.approx(
        ENGINE_DEATH_SEEN_SECONDS + DEREGISTER_CALL_SECONDS + ALB_ACTS_SECONDS
    )
    assert self_deregistration_seconds() < dead_target_seconds(5, 2)
    assert dead_target_seconds_deployed(5, 2, True) == self_deregistration_seconds()
    assert dead_target_seconds_deployed(36, 5, True) == self_deregistration_seconds()
    # Without the grant or the variables, the health check alone.
    assert dead_target_seconds_deployed(5, 2, False) == dead_target_seconds(5, 2)


def test_the_twins_names_are_the_containers_and_the_stacks():
    from cdk_constructs.fleet.service import TARGET_GROUP_ENV_PREFIX as STACK_PREFIX
    from cdk_constructs.load_balancer import DEREGISTER_TARGETS_ACTION as STACK_ACTION
    from serving.leave_target_groups import TARGET_GROUP_ENV_PREFIX as CONTAINER_PREFIX

    assert TARGET_GROUP_ENV_PREFIX == STACK_PREFIX == CONTAINER_PREFIX
    assert DEREGISTER_TARGETS_ACTION == STACK_ACTION
