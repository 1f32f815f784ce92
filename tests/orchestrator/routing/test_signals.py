"""CloudWatch results -> one region's signals: standard statistics only, gauges counted per host."""

from __future__ import annotations

from datetime import UTC, datetime

from orchestrator.routing.signals import metric_queries, newest_values, parse_endpoint, region_signals

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


def test_the_newest_datapoint_wins():
    results = [{"Id": "slow", "Timestamps": [T0, T1], "Values": [0.5, 0.01]}, {"Id": "failed", "Values": []}]
    assert newest_values(results) == {"slow": 0.01}


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
    signals = region_signals({"inflight_samples": 6}, min_hosts=1, degraded=False, gauge_interval_seconds=10)
    assert (signals.slow_first_token_share, signals.error_share) == (0.0, 0.0)


def test_silent_hosts_are_missing_metrics_unless_an_alarm_says_why():
    assert region_signals({}, min_hosts=1, degraded=False, gauge_interval_seconds=10) is None
    degraded = region_signals({}, min_hosts=1, degraded=True, gauge_interval_seconds=10)
    assert degraded is not None and degraded.degraded and degraded.healthy_hosts == 0


def test_an_unpublished_or_garbled_endpoint_is_none():
    assert parse_endpoint(None, "hc") is None
    assert parse_endpoint("{}", "hc") is None
    endpoint = parse_endpoint('{"alb_dns_name": "a.elb", "alb_canonical_hosted_zone_id": "Z1"}', "")
    assert endpoint is not None and endpoint.health_check_id is None
