"""CloudWatch results -> one region's signals: standard statistics only, gauges counted per host."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import boto3
from botocore.stub import Stubber

from orchestrator.routing.config import OrchestratorConfig, RegionTarget
from orchestrator.routing.policy import PolicyParams
from orchestrator.routing.signals import (
    fetch_results,
    metric_queries,
    minute_to_read,
    newest_complete,
    parse_endpoint,
    read_newest,
    region_signals,
    values_at,
    values_by_minute,
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
        "Shed",
        "ServingError",
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
        results, incomplete = fetch_results(cloudwatch, queries, T0)
    assert values_at(results, T0) == {"slow": 0.03} and incomplete == set()


def test_a_query_still_partial_after_the_last_page_is_left_out_alone():
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
        results, incomplete = fetch_results(cloudwatch, metric_queries("LLMServing", "assistant"), T0)
    assert incomplete == {"inflight_samples"}
    assert values_by_minute(results, incomplete) == {}


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


def test_the_request_rate_is_every_request_counted_sheds_included():
    """RequestFailed's SampleCount counts every request, shed or not (each writes it, 0 or 1): the rate
    the policy divides weights by. Absent when no request ended in the minute."""
    assert any(
        q["Id"] == "requests" and q["MetricStat"]["Stat"] == "SampleCount"
        for q in metric_queries("LLMServing", "assistant")
    )
    gauges = {"inflight_samples": 6, "slots_sum": 6 * 96, "inflight_sum": 6 * 40}
    signals = region_signals(
        {**gauges, "requests": 600.0}, min_hosts=1, degraded=False, gauge_interval_seconds=10
    )
    assert signals.requests_per_second == 10.0
    quiet = region_signals(gauges, min_hosts=1, degraded=False, gauge_interval_seconds=10)
    assert quiet.requests_per_second is None


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


def _gauged(hosts: int, samples_per_host: int = 6) -> dict[str, float]:
    return {"inflight_samples": hosts * samples_per_host, "slots_sum": 32.0 * hosts * samples_per_host}


def test_the_newest_complete_minute_is_read_whatever_its_age():
    """On main a run read the minute 2 back and no other: with metrics readable 2 minutes late it never saw
    a minute, and a region it drained on its alarm never came back."""
    run = datetime(2027, 7, 8, 12, 10, tzinfo=UTC)
    minute = [run - timedelta(minutes=k) for k in range(6)]
    two_late = {minute[5]: _gauged(12), minute[4]: _gauged(12), minute[3]: _gauged(12)}
    assert newest_complete(two_late) == minute[3]
    # The newest minute with half its hosts' samples is still aggregating: the one before it is read.
    aggregating = {**two_late, minute[2]: _gauged(6)}
    assert newest_complete(aggregating) == minute[3]
    # A region that grew counts as complete: more samples than before is never a partial minute.
    assert newest_complete({**two_late, minute[2]: _gauged(20)}) == minute[2]
    # Never the minute read last run again: a bad minute read twice would be two bad runs.
    assert newest_complete(two_late, after=minute[3]) is None


def test_sheds_are_not_errors():
    values = {**_gauged(2), "failed": 0.3, "shed": 0.3}
    signals = region_signals(values, min_hosts=1, degraded=False, gauge_interval_seconds=10)
    assert signals is not None and signals.error_share == 0.0 and signals.shed_share == 0.3
    values = {**values, "serving_error": 0.02}  # containers that publish it: read as such
    signals = region_signals(values, min_hosts=1, degraded=False, gauge_interval_seconds=10)
    assert signals is not None and signals.error_share == 0.02


def test_partial_data_on_one_metric_does_not_hide_the_regions_drain_alarm():
    """On main a query answering PartialData failed the whole read before the alarm was looked at: the
    region was missing (held) while its drain alarm was in ALARM."""
    cloudwatch = boto3.client(
        "cloudwatch", region_name="us-east-1", aws_access_key_id="x", aws_secret_access_key="x"
    )
    region = RegionTarget("us-east-1", 50, 4, "/e", "/h", "kit-us-east-1-unfit")
    config = OrchestratorConfig(
        "a.example.com", "Z", "LLMServing", "assistant", "/s", "/o", PolicyParams(), (region,)
    )
    with Stubber(cloudwatch) as stub:
        stub.add_response(
            "describe_alarms",
            {
                "CompositeAlarms": [{"AlarmName": "kit-us-east-1-unfit", "StateValue": "ALARM"}],
                "MetricAlarms": [],
            },
        )
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
        signals, _ = read_newest(cloudwatch, config, region, T1 + timedelta(minutes=1))
    assert signals is not None and signals.degraded
    assert signals.problems(PolicyParams())
