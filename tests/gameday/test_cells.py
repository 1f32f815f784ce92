"""A region of several cells as the twin adds it up, and as the verdict judges it."""

from __future__ import annotations

from datetime import UTC, datetime

from gameday.loop import Minute, RegionMinute, region_row
from gameday.scenario import Scenario
from gameday.verdict import Rules, judge

SCENARIO = Scenario(
    config="config/prime-day.yaml",
    start=datetime(2027, 7, 8, 19, tzinfo=UTC),
    minutes=2,
    traffic={"us-east-1": [(0, 1000.0)]},
)


def cell(**figures) -> RegionMinute:
    base = dict(offered_rps=500.0, served_rps=500.0, weight=25, hosts=11, tasks=11, targets=11, fleets=2)
    base.update(figures)
    return RegionMinute(**base, waiting={"inf2.48xlarge": 0, "trn1.32xlarge": 0})


def test_a_regions_row_is_its_cells_added_up():
    one = cell(
        ttft_p99_ms=400.0, served_rps=450.0, shed_rps=50.0, healthy=False, down=True, serving_before=11
    )
    two = cell(ttft_p99_ms=900.0, stopped=2, serving_before=11)
    region = region_row([one, two])
    assert (region.offered_rps, region.served_rps, region.shed_rps) == (1000.0, 950.0, 50.0)
    assert (region.weight, region.hosts, region.tasks, region.fleets) == (50, 22, 22, 4)
    assert region.error_share == 0.05
    assert region.ttft_p99_ms == 900.0  # the highest of the cells that served
    assert region.healthy and not region.down  # one cell's check still passes, one cell still up
    assert region.stopped_share == 2 / 22
    assert region_row([one]) is one  # a one-cell region is its cell


def minutes(stopped: tuple[int, int], weights: tuple[int, int] = (25, 25)) -> list[Minute]:
    first = {"us-east-1/1": cell(), "us-east-1/2": cell()}
    second = {
        name: cell(stopped=count, serving_before=11, tasks=11 - count, weight=weight)
        for name, count, weight in zip(first, stopped, weights, strict=True)
    }
    return [
        Minute(minute, {"us-east-1": region_row(list(cells.values()))}, [], cells)
        for minute, cells in enumerate((first, second))
    ]


def verdict(run: list[Minute]):
    rules = Rules(1000, 0.01, 20, 5, {"us-east-1/1": 25, "us-east-1/2": 25})
    return judge(SCENARIO, run, rules)


def test_each_cells_fleets_may_step_one_task_a_minute():
    assert verdict(minutes((2, 2))).verdict == "pass"  # 4 of 22 tasks: one a fleet of each cell
    assert "stopped" in verdict(minutes((3, 2))).violations[0]


def test_a_cell_drained_while_it_serves_fails_even_when_its_region_is_not():
    run = minutes((0, 0), weights=(45, 5))
    summary = verdict(run)
    assert summary.verdict == "fail"
    assert summary.violations == ("us-east-1/2: drained in minute 1 while 100% of its targets served",)
