"""CloudWatch results -> one region's signals: standard statistics only, gauges counted per host."""

from __future__ import annotations

from datetime import UTC, datetime

import boto3
import pytest
from botocore.stub import Stubber

from orchestrator.routing.signals import (
    SignalReadError,
    fetch_results,
    metric_queries,
    minute_to_read,
    parse_endpoint,
    region_signals,
    values_at,
)

T0, T1 = datetime(2027, 7, 8, 12, 0, tzinfo=UTC), datetime(2027, 7, 8, 12, 1, tzinfo=UTC)


def test_queries_use_only_statistics_route53_health_checks_can_follow_too():
    queries = metric_queries("LLMServing", "assistant")
    assert {q["MetricStat"]["Stat"] for q in queries} <= {
        "Average",
        "Sum",
        "SampleCount",
        "Minimum",
        "Maximum",
    }
    assert {q["MetricStat"]["Metric"]["MetricName"] for q in queries} == {
        "SlowFirstToken",
        "RequestFailed",
        "RequestsInFlight",
        "ServingSlots",
    }


def test_a_run_reads_the_minute_before_the_one_that_just_ended():
    assert minute_to_read(datetime(2027, 7, 8, 12, 5, 40, tzinfo=UTC)) == datetime(
        2027, 7, 8, 12, 3, tzinfo=UTC
    )


def test_only_the_minute_read_counts_never_an_older_one():
    """A minute without data is missing: the newest older point (a bad minute) is not read again."""
    results = [
        {"Id": "slow", "Timestamps": [T0], "Values": [0.5]},
        {"Id": "failed", "Timestamps": [T1], "Values": [0.0]},
    ]
    assert values_at(results, T1) == {"failed": 0.0}
    assert (
        region_signals(values_at(results, T1), min_hosts=1, degraded=False, gauge_interval_seconds=10) is None
    )


def _page(results, token=None):
    page = {"MetricDataResults": results, "Messages": []}
    if token:
        page["NextToken"] = token
    return page


def test_every_page_is_read_and_merged():
    """moto answers GetMetricData in one page, so botocore's Stubber plays CloudWatch's paginated replies."""
    cloudwatch = boto3.client(
        "cloudwatch", region_name="us-east-1", aws_access_key_id="x", aws_secret_access_key="x"
    )
    queries = metric_queries("LLMServing", "assistant")
    with Stubber(cloudwatch) as stub:
        stub.add_response(
            "get_metric_data",
            _page(
                [{"Id": "slow", "Label": "s", "Timestamps": [], "Values": [], "StatusCode": "PartialData"}],
                "more",
            ),
        )
        stub.add_response(
            "get_metric_data",
            _page(
                [{"Id": "slow", "Label": "s", "Timestamps": [T0], "Values": [0.03], "StatusCode": "Complete"}]
            ),
        )
        results = fetch_results(cloudwatch, queries, T0)
    assert values_at(results, T0) == {"slow": 0.03}


def test_a_minute_still_partial_after_the_last_page_is_not_read():
    cloudwatch = boto3.client(
        "cloudwatch", region_name="us-east-1", aws_access_key_id="x", aws_secret_access_key="x"
    )
    with Stubber(cloudwatch) as stub:
        stub.add_response(
            "get_metric_data",
            _page(
                [
                    {
                        "Id": "inflight_samples",
                        "Label": "i",
                        "Timestamps": [T0],
                        "Values": [6.0],
                        "StatusCode": "PartialData",
                    }
                ]
            ),
        )
        with pytest.raises(SignalReadError, match="inflight_samples"):
            fetch_results(cloudwatch, metric_queries("LLMServing", "assistant"), T0)


def test_gauges_count_hosts_and_sum_their_values():
    # 3 hosts, each sampled 6 times a minute (every 10 s): 96 slots and 40 in flight each.
    values = {
        "slow": 0.02,
        "failed": 0.0,
        "inflight_samples": 18,
        "inflight_sum": 18 * 40,
        "slots_sum": 18 * 96,
    }
    signals = region_signals(values, min_hosts=2, degraded=False, gauge_interval_seconds=10)
    assert (signals.healthy_hosts, signals.serving_slots, signals.requests_in_flight) == (3, 288, 120)
    assert signals.slow_first_token_share == 0.02 and signals.spare_slots == 168


def test_no_finished_request_means_nothing_was_slow_or_failed():
    signals = region_signals(
        {"inflight_samples": 6, "slots_sum": 6}, min_hosts=1, degraded=False, gauge_interval_seconds=10
    )
    assert (signals.slow_first_token_share, signals.error_share) == (0.0, 0.0)


def test_silent_hosts_are_missing_metrics_unless_an_alarm_says_why():
    assert region_signals({}, min_hosts=1, degraded=False, gauge_interval_seconds=10) is None
    degraded = region_signals({}, min_hosts=1, degraded=True, gauge_interval_seconds=10)
    assert degraded is not None and degraded.degraded and degraded.healthy_hosts == 0


def test_an_unpublished_or_garbled_endpoint_or_health_check_is_none():
    assert parse_endpoint(None, "hc") is None
    assert parse_endpoint("{}", "hc") is None
    assert parse_endpoint('{"alb_dns_name": "a.elb", "alb_canonical_hosted_zone_id": "Z1"}', "") is None
    endpoint = parse_endpoint('{"alb_dns_name": "a.elb", "alb_canonical_hosted_zone_id": "Z1"}', "hc")
    assert endpoint is not None and endpoint.health_check_id == "hc"
