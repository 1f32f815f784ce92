"""The twin's serving model where parts meet: the load balancer's share for failing targets, the front
door, endpoint health checks."""

from __future__ import annotations

import pytest

from gameday import alarms
from gameday.loop import FAIL_FAST_SECONDS, failing_share
from gameday.templates import HealthCheck


def test_least_outstanding_requests_feeds_fast_failing_targets_more_than_their_share():
    # 10% of the targets dead, live ones holding a request 8 s: the dead take nearly everything.
    share = failing_share(live=90, dead=10, hold_seconds=8.0)
    assert share > 0.9
    assert share == pytest.approx((10 / FAIL_FAST_SECONDS) / (10 / FAIL_FAST_SECONDS + 90 / 8.0))
    assert failing_share(live=90, dead=0, hold_seconds=8.0) == 0.0
    # Were the dead as slow as the live, they would take their even share.
    assert failing_share(live=90, dead=10, hold_seconds=FAIL_FAST_SECONDS) == pytest.approx(0.1)


def test_an_endpoint_check_sees_a_front_door_nobody_reaches_and_a_metric_check_does_not():
    checks = {
        "Alarm": HealthCheck("Alarm", "CLOUDWATCH_METRIC", alarm="errors", insufficient_data="Healthy"),
        "Door": HealthCheck("Door", "HTTPS"),
        "Region": HealthCheck("Region", "CALCULATED", children=("Alarm", "Door"), threshold=2),
    }
    status = alarms.health(checks, {"errors": alarms.INSUFFICIENT}, {}, reachable=False)
    assert status == {"Alarm": True, "Door": False, "Region": False}
    assert alarms.health(checks, {"errors": alarms.OK}, {}, reachable=True)["Region"]


def test_a_target_down_or_unreachable_offers_no_planned_room(tmp_path):
    """The verdict excuses sheds only beyond the larger of a target's capacity and its plan, and measures
    the room left elsewhere the same way: a region down, or behind a front door nobody reaches, has none
    to offer, whatever its plan says; the others keep theirs (the orchestrator is off: the twin alone)."""
    from pathlib import Path

    from gameday.loop import Twin
    from gameday.scenario import load_scenario
    from gameday.templates import read_deployment, synthesize
    from settings import load_settings

    repo = Path(__file__).resolve().parents[2]
    path = tmp_path / "short.yaml"
    path.write_text(
        (repo / "scenarios" / "gameday" / "front-door-down.yaml")
        .read_text()
        .replace("../../config", str(repo / "config"))
        .replace("minutes: 180", "minutes: 3")
        .replace(
            "  - {kind: front_door_down, region: us-west-2, at: 45, until: 105}",
            "  - {kind: front_door_down, region: us-west-2, at: 1}\n"
            "  - {kind: region_down, region: us-east-2, at: 1}",
        )
    )
    scenario, _, config = load_scenario(path)
    minutes = Twin(scenario, load_settings(config), read_deployment(synthesize(config)), False).run()
    for region in ("us-west-2", "us-east-2"):
        assert minutes[0].regions[region].planned_capacity_rps > 0
        assert minutes[2].regions[region].planned_capacity_rps == 0  # unreachable, down
    assert minutes[2].regions["us-east-1"].planned_capacity_rps > 0
