"""How long a dead engine's target keeps taking requests, from the deployed health check."""

from __future__ import annotations

import pytest

from gameday.dead_targets import (
    ENGINE_DEATH_SEEN_SECONDS,
    dead_target_seconds,
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
