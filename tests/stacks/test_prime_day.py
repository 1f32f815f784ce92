"""The Prime Day overlay (an event that raises each fleet's bounds ahead of its start) keeps what the default
does: surge hosts above the raised maxima, the short-of-tasks alarm against the cold start rather than the
raised minimum, and deployment rollback."""

from __future__ import annotations

import pytest

from settings import load_settings
from stacks.serving_app import build_app
from tests.stacks.conftest import REPO, lowered_together, resources


@pytest.fixture(scope="module")
def prime_day(tmp_path_factory):
    settings = load_settings(REPO / "config" / "prime-day.yaml")
    assembly = build_app(settings, outdir=str(tmp_path_factory.mktemp("prime-day")), nag=False).synth()
    return {stack.environment.region: stack.template for stack in assembly.stacks}


def test_raised_maxima_keep_their_surge_hosts(prime_day):
    template = prime_day["us-east-1"]
    groups = resources(template, "AWS::AutoScaling::AutoScalingGroup").values()
    assert sorted(int(g["Properties"]["MaxSize"]) for g in groups) == [13, 25]  # 10 + 3, 20 + 5
    raised = sorted(
        (a["Properties"]["MinSize"], a["Properties"]["MaxSize"])
        for a in resources(template, "AWS::AutoScaling::ScheduledAction").values()
        if a["Properties"]["MinSize"] > 2
    )
    assert raised == [(87, 131 + 33), (173, 260 + 65)]  # the event's maxima + 25%


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
