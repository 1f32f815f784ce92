"""The twin's minute, put into moto's CloudWatch, reads back through the orchestrator's own signal reader
as the same shares, hosts, slots and requests in flight."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta

import boto3
import pytest
from moto import mock_aws

from gameday.metrics import datapoints
from orchestrator.routing.config import OrchestratorConfig, RegionTarget
from orchestrator.routing.policy import PolicyParams
from orchestrator.routing.signals import read_signals

MINUTE = datetime(2027, 7, 8, 19, 0, tzinfo=UTC)


@pytest.fixture
def cloudwatch(monkeypatch):
    for key in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY"):
        monkeypatch.setenv(key, "testing")
    with mock_aws():
        yield boto3.client("cloudwatch", region_name="us-east-1")


def config() -> tuple[OrchestratorConfig, RegionTarget]:
    region = RegionTarget("us-east-1", 50, 2, "/e", "/h", "degraded")
    return OrchestratorConfig(
        "a.example.com", "Z", "LLMServing", "assistant", "/s", "/o", PolicyParams(), (region,)
    ), region


def test_a_minute_reads_back_as_the_orchestrator_sees_it(cloudwatch):
    raw = {
        "requests": 120_000.0,
        "served_requests": 118_800.0,
        "slow_share": 0.02,
        "error_share": 0.03,  # all lost requests: 1% failed on the server, 2% shed
        "serving_error_share": 0.01,
        "shed_share": 0.02,
        "reporting_hosts": 260.0,
        "in_flight": 11_000.0,
        "slots": 260 * 96.0,
    }
    cloudwatch.put_metric_data(Namespace="LLMServing", MetricData=datapoints(raw, MINUTE, "assistant"))
    cloudwatch.put_metric_alarm(
        AlarmName="degraded", MetricName="x", Namespace="y", Statistic="Maximum", Period=60,
        EvaluationPeriods=1, Threshold=1, ComparisonOperator="GreaterThanThreshold",
    )  # fmt: skip
    orchestrator, region = config()
    signals = read_signals(cloudwatch, orchestrator, region, MINUTE + timedelta(minutes=2))
    assert signals.slow_first_token_share == pytest.approx(0.02)
    assert signals.error_share == pytest.approx(0.01)  # sheds are not errors
    assert signals.shed_share == pytest.approx(0.02)
    assert signals.healthy_hosts == 260
    assert signals.requests_in_flight == pytest.approx(11_000)
    assert signals.serving_slots == pytest.approx(260 * 96)


def test_a_minute_with_no_host_reporting_puts_no_gauges():
    data = datapoints({"requests": 500.0, "error_share": 1.0}, MINUTE, "assistant")
    assert [d["MetricName"] for d in data] == ["RequestFailed", "ServingError", "Shed"]
    assert json.dumps(data, default=str)


def test_gauges_carry_one_sample_per_interval_of_the_deployed_config():
    raw = {
        "requests": 600.0,
        "served_requests": 600.0,
        "reporting_hosts": 10.0,
        "in_flight": 50.0,
        "slots": 960.0,
    }
    by_name = {d["MetricName"]: d for d in datapoints(raw, MINUTE, "assistant", gauge_samples=4)}
    assert by_name["RequestsInFlight"]["StatisticValues"]["SampleCount"] == 40
    assert by_name["ServingSlots"]["StatisticValues"]["Sum"] == 960.0 * 4
