"""Where a day's judged losses come from (gameday/explain.py): the minutes the verdict judges, and only
those, each with every target's figures."""

from __future__ import annotations

from gameday.explain import judged_minutes, render
from gameday.loop import Minute, RegionMinute


def target(offered: float, capacity: float, shed: float, weight: int) -> RegionMinute:
    return RegionMinute(
        offered_rps=offered,
        served_rps=offered - shed,
        shed_rps=shed,
        overload_shed_rps=shed,
        capacity_rps=capacity,
        weight=weight,
        tasks=10,
    )


def minute(number: int, rows: dict[str, RegionMinute]) -> Minute:
    return Minute(number, dict(rows), [], dict(rows))


def test_a_target_shedding_while_another_has_room_is_listed_with_both():
    # a sheds 10 of 110 at a capacity of 100; b has 50 requests/s of room: every shed could have gone there.
    day = [minute(7, {"a": target(110, 100, 10, 55), "b": target(50, 100, 0, 45)})]
    [judged] = judged_minutes(day)
    assert judged.minute == 7
    assert judged.unavoidable == 0.0
    assert judged.judged_lost == 600.0  # 10 requests/s for a minute
    assert round(judged.targets["a"].judged_error_share, 4) == round(10 / 110, 4)
    assert judged.targets["b"].judged_error_share == 0.0
    [line] = render([judged], 0.01)
    assert "a 110/100 shed 10 w 55 tasks 10 judged 9.1%*" in line
    assert "b 50/100 shed 0 w 45 tasks 10 judged 0.0% " in line


def test_a_global_overload_and_a_quiet_minute_are_not_listed():
    # Both beyond their capacity: no target had room, the sheds are overload's answer.
    overload = minute(3, {"a": target(150, 100, 50, 50), "b": target(150, 100, 50, 50)})
    quiet = minute(4, {"a": target(50, 100, 0, 50), "b": target(50, 100, 0, 50)})
    assert judged_minutes([overload, quiet]) == []
