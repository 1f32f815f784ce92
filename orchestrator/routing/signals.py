"""One region's last minute from CloudWatch, and what its regional stack published in SSM.

Every figure is a standard statistic of what the serving containers publish (no percentiles, which
Route 53 health checks cannot follow either): SlowFirstToken and RequestFailed are 0/1 per request, so
their one-minute Average is the slow and the failed share; RequestsInFlight and ServingSlots are
per-host gauges every `gauge_interval_seconds`, so a minute's SampleCount counts hosts and its Sum adds
up the hosts' values that many times.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from .config import OrchestratorConfig, RegionTarget
from .policy import RegionSignals

PERIOD_SECONDS = 60
# The newest complete minute may not be aggregated yet; look a few back and take the newest there is.
LOOKBACK_MINUTES = 4


@dataclass(frozen=True)
class Endpoint:
    alb_dns_name: str
    alb_canonical_hosted_zone_id: str
    health_check_id: str | None


def metric_queries(namespace: str, model_name: str) -> list[dict[str, Any]]:
    def query(id: str, metric: str, stat: str) -> dict[str, Any]:
        return {
            "Id": id,
            "MetricStat": {
                "Metric": {
                    "Namespace": namespace,
                    "MetricName": metric,
                    "Dimensions": [{"Name": "Model", "Value": model_name}],
                },
                "Period": PERIOD_SECONDS,
                "Stat": stat,
            },
            "ReturnData": True,
        }

    return [
        query("slow", "SlowFirstToken", "Average"),
        query("failed", "RequestFailed", "Average"),
        query("inflight_sum", "RequestsInFlight", "Sum"),
        query("inflight_samples", "RequestsInFlight", "SampleCount"),
        query("slots_sum", "ServingSlots", "Sum"),
    ]


def newest_values(results: list[dict[str, Any]]) -> dict[str, float]:
    """Query id -> its newest datapoint, for the queries that returned one."""
    newest: dict[str, float] = {}
    for result in results:
        pairs = sorted(zip(result.get("Timestamps", []), result.get("Values", []), strict=False))
        if pairs:
            newest[result["Id"]] = float(pairs[-1][1])
    return newest


def region_signals(
    values: dict[str, float], *, min_hosts: int, degraded: bool, gauge_interval_seconds: int
) -> RegionSignals | None:
    """None when the region's hosts report nothing and no alarm says why: its weight then holds."""
    samples_per_host = PERIOD_SECONDS / gauge_interval_seconds
    if "inflight_samples" not in values:
        if not degraded:
            return None
        return RegionSignals(0.0, 0.0, 0, min_hosts, 0.0, 0.0, degraded=True)
    return RegionSignals(
        # No streaming request finished in the minute: nothing was slow or failed.
        slow_first_token_share=values.get("slow", 0.0),
        error_share=values.get("failed", 0.0),
        healthy_hosts=round(values["inflight_samples"] / samples_per_host),
        min_hosts=min_hosts,
        serving_slots=values.get("slots_sum", 0.0) / samples_per_host,
        requests_in_flight=values.get("inflight_sum", 0.0) / samples_per_host,
        degraded=degraded,
    )


def alarm_in_alarm(cloudwatch: Any, name: str) -> bool:
    found = cloudwatch.describe_alarms(AlarmNames=[name], AlarmTypes=["CompositeAlarm", "MetricAlarm"])
    alarms = [*found.get("CompositeAlarms", []), *found.get("MetricAlarms", [])]
    return any(alarm["StateValue"] == "ALARM" for alarm in alarms)


def read_signals(
    cloudwatch: Any, config: OrchestratorConfig, region: RegionTarget, now: datetime
) -> RegionSignals | None:
    end = now.replace(second=0, microsecond=0)
    response = cloudwatch.get_metric_data(
        MetricDataQueries=metric_queries(config.metrics_namespace, config.model_name),
        StartTime=end - timedelta(minutes=LOOKBACK_MINUTES),
        EndTime=end,
    )
    return region_signals(
        newest_values(response["MetricDataResults"]),
        min_hosts=region.min_hosts,
        degraded=alarm_in_alarm(cloudwatch, region.degraded_alarm),
        gauge_interval_seconds=config.gauge_interval_seconds,
    )


def parse_endpoint(endpoint_json: str | None, health_check_id: str | None) -> Endpoint | None:
    if not endpoint_json:
        return None
    try:
        data = json.loads(endpoint_json)
        return Endpoint(data["alb_dns_name"], data["alb_canonical_hosted_zone_id"], health_check_id or None)
    except (ValueError, KeyError, TypeError):
        return None


def read_endpoint(ssm: Any, region: RegionTarget) -> Endpoint | None:
    """None until the region's stack is deployed: the orchestrator then leaves its record alone."""
    names = [region.endpoint_parameter, region.health_check_parameter]
    found = {p["Name"]: p["Value"] for p in ssm.get_parameters(Names=names)["Parameters"]}
    return parse_endpoint(found.get(region.endpoint_parameter), found.get(region.health_check_parameter))
