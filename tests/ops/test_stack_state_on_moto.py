"""ops/stack_state.py's alarm read against moto: the alarms CloudFormation named after the stack."""

from __future__ import annotations

import boto3
from moto import mock_aws

from ops.stack_state import stack_alarms


def test_stack_alarms_are_those_named_after_the_stack_on_every_page(monkeypatch):
    for name, value in {"AWS_ACCESS_KEY_ID": "x", "AWS_SECRET_ACCESS_KEY": "x"}.items():
        monkeypatch.setenv(name, value)
    with mock_aws():
        cloudwatch = boto3.client("cloudwatch", region_name="us-east-1")
        names = [
            f"kit-global-Orchestrator{i:03d}-ABC" for i in range(120)
        ]  # more than one page can hold (MaxRecords <= 100)
        for name in [*names, "kit-globalother-X", "kit-us-east-1-region-degraded"]:
            cloudwatch.put_metric_alarm(
                AlarmName=name,
                MetricName="Errors",
                Namespace="AWS/Lambda",
                Statistic="Sum",
                Period=60,
                EvaluationPeriods=1,
                Threshold=1,
                ComparisonOperator="GreaterThanOrEqualToThreshold",
            )
        found = stack_alarms(cloudwatch, "kit-global")
    assert found == tuple(sorted(names))
