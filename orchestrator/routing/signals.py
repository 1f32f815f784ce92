"""One region's signals for one complete minute from CloudWatch, and what its regional stack published in
SSM. The handler and the offline rehearsal both read through `read_signals`, so they see the same thing.

Every figure is a standard statistic of what the serving containers publish (no percentiles, which
Route 53 health checks cannot follow either): SlowFirstToken and RequestFailed are 0/1 per request, so
their one-minute Average is the slow and the failed share; RequestsInFlight and ServingSlots are
per-host gauges every `gauge_interval_seconds`, so a minute's SampleCount counts hosts and its Sum adds
up the hosts' values that many times.

Which minute: the newest minute is often still being aggregated for a while after it ends (EMF lines
arrive late; GetMetricData paginates with NextToken and marks a result PartialData or InternalError,
CloudWatch API reference, MetricDataResult.StatusCode), and a partly aggregated minute counts too few
hosts. So a run at T reads the one minute
[T-2m, T-1m), every query for that same minute, and a minute with no datapoint is missing: never the
minute before it again (a bad minute read twice would count as two bad runs).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from .config import OrchestratorConfig, RegionTarget
from .policy import RegionSignals

PERIOD_SECONDS = 60
# Minutes between the run's own minute and the one it reads: the minute that just ended is still settling.
SETTLE_MINUTES = 1
# GetMetricData returns at most this many pages for our five one-datapoint queries before we give up.
MAX_PAGES = 5


class SignalReadError(RuntimeError):
    """CloudWatch answered, but not with the whole minute (a query failed or stayed partial)."""


@dataclass(frozen=True)
class Endpoint:
    alb_dns_name: str
    alb_canonical_hosted_zone_id: str
    health_check_id: str


def minute_to_read(run_minute: datetime) -> datetime:
    """The start of the complete minute a run at `run_minute` reads."""
    return run_minute.replace(second=0, microsecond=0) - timedelta(minutes=1 + SETTLE_MINUTES)


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


def fetch_results(cloudwatch: Any, queries: list[dict[str, Any]], start: datetime) -> list[dict[str, Any]]:
    """Every page of GetMetricData for the one minute from `start`, merged per query id. A query that
    ends in any status but Complete raises: half a minute is not a minute."""
    merged: dict[str, dict[str, Any]] = {}
    request: dict[str, Any] = {
        "MetricDataQueries": queries,
        "StartTime": start,
        "EndTime": start + timedelta(seconds=PERIOD_SECONDS),
    }
    for _ in range(MAX_PAGES):
        response = cloudwatch.get_metric_data(**request)
        for result in response["MetricDataResults"]:
            into = merged.setdefault(
                result["Id"], {"Id": result["Id"], "Timestamps": [], "Values": [], "StatusCode": "Complete"}
            )
            into["Timestamps"].extend(result.get("Timestamps", []))
            into["Values"].extend(result.get("Values", []))
            into["StatusCode"] = result.get("StatusCode", "Complete")
        token = response.get("NextToken")
        if not token:
            break
        request["NextToken"] = token
    else:
        raise SignalReadError(f"GetMetricData still paginating after {MAX_PAGES} pages")
    incomplete = sorted(r["Id"] for r in merged.values() if r["StatusCode"] != "Complete")
    if incomplete:
        raise SignalReadError(f"GetMetricData incomplete for {', '.join(incomplete)}")
    return list(merged.values())


def values_at(results: list[dict[str, Any]], minute: datetime) -> dict[str, float]:
    """Query id -> its datapoint for exactly `minute`, for the queries that have one."""
    found: dict[str, float] = {}
    for result in results:
        for timestamp, value in zip(result.get("Timestamps", []), result.get("Values", []), strict=False):
            if timestamp == minute:
                found[result["Id"]] = float(value)
    return found


def region_signals(
    values: dict[str, float], *, min_hosts: int, degraded: bool, gauge_interval_seconds: int
) -> RegionSignals | None:
    """None when the region's hosts reported no gauges that minute and no alarm says why: its weight then
    holds. Both gauges are needed: spare slots from one of them alone would be a guess."""
    samples_per_host = PERIOD_SECONDS / gauge_interval_seconds
    if "inflight_samples" not in values or "slots_sum" not in values:
        if not degraded:
            return None
        return RegionSignals(0.0, 0.0, 0, min_hosts, 0.0, 0.0, degraded=True)
    return RegionSignals(
        # No streaming request finished in the minute: nothing was slow or failed.
        slow_first_token_share=values.get("slow", 0.0),
        error_share=values.get("failed", 0.0),
        healthy_hosts=round(values["inflight_samples"] / samples_per_host),
        min_hosts=min_hosts,
        serving_slots=values["slots_sum"] / samples_per_host,
        requests_in_flight=values.get("inflight_sum", 0.0) / samples_per_host,
        degraded=degraded,
    )


def alarm_in_alarm(cloudwatch: Any, name: str) -> bool:
    found = cloudwatch.describe_alarms(AlarmNames=[name], AlarmTypes=["CompositeAlarm", "MetricAlarm"])
    alarms = [*found.get("CompositeAlarms", []), *found.get("MetricAlarms", [])]
    return any(alarm["StateValue"] == "ALARM" for alarm in alarms)


def read_signals(
    cloudwatch: Any, config: OrchestratorConfig, region: RegionTarget, run_minute: datetime
) -> RegionSignals | None:
    """The region's signals for the complete minute a run at `run_minute` reads, and its drain alarm
    (whatever name config gives it: the only alarm the orchestrator drains on)."""
    minute = minute_to_read(run_minute)
    results = fetch_results(cloudwatch, metric_queries(config.metrics_namespace, config.model_name), minute)
    return region_signals(
        values_at(results, minute),
        min_hosts=region.min_hosts,
        degraded=alarm_in_alarm(cloudwatch, region.degraded_alarm),
        gauge_interval_seconds=config.gauge_interval_seconds,
    )


def parse_endpoint(endpoint_json: str | None, health_check_id: str | None) -> Endpoint | None:
    """None unless both the ALB and the health check are published: a record is never written without
    the health check that takes a failing region out of DNS by itself."""
    if not endpoint_json or not health_check_id:
        return None
    try:
        data = json.loads(endpoint_json)
        return Endpoint(data["alb_dns_name"], data["alb_canonical_hosted_zone_id"], health_check_id)
    except (ValueError, KeyError, TypeError):
        return None


def read_endpoint(ssm: Any, region: RegionTarget) -> Endpoint | None:
    """None until the region's stack is deployed: the orchestrator then creates no record for it."""
    names = [region.endpoint_parameter, region.health_check_parameter]
    found = {p["Name"]: p["Value"] for p in ssm.get_parameters(Names=names)["Parameters"]}
    return parse_endpoint(found.get(region.endpoint_parameter), found.get(region.health_check_parameter))
