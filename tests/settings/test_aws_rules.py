"""The checks of settings/aws_rules.py catch what they are for: each rule's breach is reported."""

from __future__ import annotations

import copy

import pytest

from settings.aws_rules import describe_alarms_sees_composites, health_check_problems, stale_health_checks

READ_ON_STAR = {"Effect": "Allow", "Action": "cloudwatch:DescribeAlarms", "Resource": "*"}


@pytest.mark.parametrize(
    ("statements", "sees"),
    [
        ([READ_ON_STAR], True),
        ([{**READ_ON_STAR, "Action": ["cloudwatch:Describe*"], "Resource": ["*"]}], True),
        ([{**READ_ON_STAR, "Resource": ["arn:aws:cloudwatch:*:123456789012:alarm:kit-*"]}], False),
        ([{**READ_ON_STAR, "Action": "cloudwatch:GetMetricData"}], False),
        ([{**READ_ON_STAR, "Condition": {"StringEquals": {"aws:RequestedRegion": "us-east-1"}}}], False),
        ([READ_ON_STAR, {**READ_ON_STAR, "Effect": "Deny"}], False),
    ],
)
def test_describe_alarms_sees_composites_only_when_allowed_on_star(statements, sees):
    assert describe_alarms_sees_composites({"Version": "2012-10-17", "Statement": statements}) is sees


ALARM = {
    "Type": "AWS::CloudWatch::Alarm",
    "Properties": {
        "AlarmName": "kit-us-east-1-routing-errors-0a1b2c3d",
        "MetricName": "ServingError",
        "Namespace": "LLMServing",
        "Statistic": "Average",
        "Period": 60,
        "EvaluationPeriods": 5,
        "Threshold": 0.02,
        "ComparisonOperator": "GreaterThanThreshold",
    },
}
CHECK = {
    "Type": "AWS::Route53::HealthCheck",
    "Properties": {
        "HealthCheckConfig": {
            "Type": "CLOUDWATCH_METRIC",
            "AlarmIdentifier": {"Name": {"Ref": "Alarm"}, "Region": "us-east-1"},
            "InsufficientDataHealthStatus": "Healthy",
        }
    },
}


def _template(alarm_properties=None, alarm_type="AWS::CloudWatch::Alarm", check=None) -> dict:
    alarm = copy.deepcopy(ALARM)
    alarm["Type"] = alarm_type
    if alarm_properties is not None:
        alarm["Properties"] = alarm_properties
    return {"Resources": {"Alarm": alarm, "Check": check or copy.deepcopy(CHECK)}}


def test_an_alarm_route53_supports_passes():
    assert health_check_problems(_template()) == []


@pytest.mark.parametrize(
    ("change", "fragment"),
    [
        ({"ExtendedStatistic": "p99", "Statistic": None}, "extended statistic p99"),
        ({"Statistic": "p99"}, "statistic 'p99'"),
        ({"Metrics": [{"Id": "share", "Expression": "errors / requests"}]}, "metric math"),
        ({"Period": 10}, "standard-resolution"),
        ({"AlarmName": {"Fn::Join": ["", ["x", {"Ref": "AWS::Region"}]]}}, "not fixed at synth"),
    ],
)
def test_an_alarm_route53_cannot_follow_is_reported(change, fragment):
    properties = {k: v for k, v in {**ALARM["Properties"], **change}.items() if v is not None}
    (problem,) = health_check_problems(_template(properties))
    assert fragment in problem and problem.startswith("Check -> Alarm")


def test_a_composite_alarm_or_one_outside_the_template_is_reported():
    (composite,) = health_check_problems(_template({"AlarmName": "x"}, "AWS::CloudWatch::CompositeAlarm"))
    assert "CompositeAlarm has no single metric" in composite
    check = copy.deepcopy(CHECK)
    check["Properties"]["HealthCheckConfig"]["AlarmIdentifier"]["Name"] = "another-stacks-alarm"
    (elsewhere,) = health_check_problems(_template(check=check))
    assert "does not create" in elsewhere


def test_a_check_that_leaves_missing_data_undecided_is_reported():
    check = copy.deepcopy(CHECK)
    del check["Properties"]["HealthCheckConfig"]["InsufficientDataHealthStatus"]
    (problem,) = health_check_problems(_template(check=check))
    assert "InsufficientDataHealthStatus" in problem


def test_a_setting_changed_under_the_same_alarm_name_leaves_the_check_stale():
    before = _template()
    after = _template({**ALARM["Properties"], "Threshold": 0.05})
    assert stale_health_checks(before, after) == ["Check: Alarm's Threshold changed under the same AlarmName"]
    renamed = _template({**ALARM["Properties"], "Threshold": 0.05, "AlarmName": "kit-errors-9f8e7d6c"})
    assert stale_health_checks(before, renamed) == []
    # Not a copied setting: Route 53 never saw it, so nothing goes stale.
    assert stale_health_checks(before, _template({**ALARM["Properties"], "DatapointsToAlarm": 3})) == []
