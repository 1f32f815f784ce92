"""The Prime Day overlay (an event that raises each fleet's bounds ahead of its start) keeps what the default
does: surge hosts above the raised maxima, the short-of-tasks alarm against the cold start rather than the
raised minimum, and deployment rollback."""

from __future__ import annotations

import math

import pytest

from settings import load_settings
from stacks.serving_app import build_app
from tests.stacks.conftest import REPO, cell_templates, lowered_together, resources


@pytest.fixture(scope="module")
def prime_day(tmp_path_factory):
    """Cell name -> its serving template (us-east-1 and us-west-2 run two cells at Prime Day)."""
    settings = load_settings(REPO / "config" / "prime-day.yaml")
    assembly = build_app(settings, outdir=str(tmp_path_factory.mktemp("prime-day")), nag=False).synth()
    return cell_templates(settings, assembly)


def test_raised_maxima_keep_their_surge_hosts(prime_day):
    # us-east-2: a region of one cell (us-east-1 and us-west-2 order more than a cell's hosts).
    template = prime_day["us-east-2"]
    groups = resources(template, "AWS::AutoScaling::AutoScalingGroup").values()
    assert sorted(int(g["Properties"]["MaxSize"]) for g in groups) == [18, 35]  # 14 + 4, 28 + 7
    raised = sorted(
        (a["Properties"]["MinSize"], a["Properties"]["MaxSize"])
        for a in resources(template, "AWS::AutoScaling::ScheduledAction").values()
        if a["Properties"]["MinSize"] > 3  # not the restore to the fleets' own minima (3 and 2)
    )
    # The event's minima and its maxima + 25%, as `make plan` last wrote them into the overlay.
    event = load_settings(REPO / "config" / "prime-day.yaml").events[0].regions["us-east-2"]
    assert raised == sorted((b.min, math.ceil(b.max * 1.25)) for b in event.values())


def test_a_region_of_two_cells_splits_every_bound_between_them(prime_day):
    """us-east-1's fleets (inf2 3-28, trn1 2-14) and its Prime Day bounds, halved per cell, the first cell
    taking an odd host: each cell's groups and scheduled actions hold its share, surge included."""
    settings = load_settings(REPO / "config" / "prime-day.yaml")
    event = settings.events[0].regions["us-east-1"]
    for index, name in enumerate(("us-east-1/1", "us-east-1/2")):
        groups = resources(prime_day[name], "AWS::AutoScaling::AutoScalingGroup").values()
        assert sorted(int(g["Properties"]["MaxSize"]) for g in groups) == [9, 18]  # 7 + 2, 14 + 4
        raised = sorted(
            (a["Properties"]["MinSize"], a["Properties"]["MaxSize"])
            for a in resources(prime_day[name], "AWS::AutoScaling::ScheduledAction").values()
            if a["Properties"]["MinSize"] > 3  # not the restore to the fleets' own minima (3 and 2)
        )
        halves = [
            ((b.min + 1 - index) // 2, math.ceil(((b.max + 1 - index) // 2) * 1.25)) for b in event.values()
        ]
        assert raised == sorted(halves), name


def test_short_of_tasks_alarm_ignores_the_raised_minimum_and_services_roll_back_on_alarms(prime_day):
    for region, template in prime_day.items():
        alarms = resources(template, "AWS::CloudWatch::Alarm").values()
        short = [
            a["Properties"]
            for a in alarms
            if any(q.get("Expression") == "desired - running" for q in a["Properties"].get("Metrics", []))
        ]
        assert len(short) == 2, region
        assert all(a["Threshold"] == 1 and a["EvaluationPeriods"] == 31 for a in short), region
        assert not any(a["Properties"].get("MetricName") == "RunningTaskCount" for a in alarms), region
        for service in resources(template, "AWS::ECS::Service").values():
            assert service["Properties"]["DeploymentConfiguration"]["Alarms"]["Rollback"] is True


def test_the_events_end_never_lowers_a_maximum_with_a_minimum(prime_day):
    """Prime Day's end restores every fleet's minimum; its maximums (260 inf2 hosts in us-east-1 against 20
    of its own) come down two hours later, so target tracking scales in meanwhile."""
    for region, template in prime_day.items():
        assert lowered_together(template) == [], region
        restores = [
            a["Properties"]
            for a in resources(template, "AWS::AutoScaling::ScheduledAction").values()
            if a["Properties"]["StartTime"] == "2027-07-10T07:00:00Z"
        ]
        assert restores and all(r["MaxSize"] > 25 for r in restores), region
