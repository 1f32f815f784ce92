"""One region's signals for one complete minute from CloudWatch, and what its regional stack published in
SSM. The handler and the offline rehearsal both read through `read_signals`, so they see the same thing.

Every figure is a standard statistic of what the serving containers publish (no percentiles, which
Route 53 health checks cannot follow either): SlowFirstToken and RequestFailed are 0/1 per request, so
their one-minute Average is the slow and the failed share; RequestsInFlight and ServingSlots are
per-host gauges every `gauge_interval_seconds`, so a minute's SampleCount counts hosts and its Sum adds
up the hosts' values that many times.

Which minute: a minute is readable some time after it ends, and AWS gives no bound (often one minute, two
or more under load); the newest minute is often still being aggregated (EMF lines arrive late;
GetMetricData paginates with NextToken and marks a result PartialData or InternalError, CloudWatch API
reference, MetricDataResult.StatusCode), and a partly aggregated minute counts too few hosts. So a run
reads the last LOOKBACK_MINUTES ended minutes at once and takes the newest complete one, judged from the
data: both gauges present and as many host samples as the window's fuller minutes have (never assumed to
be a fixed minute back), and newer than the minute it read last run (a bad minute read twice would count
as two bad runs). A query that is not Complete is left out alone: the region's drain alarm, read on its
own, still counts, so PartialData on one metric never hides a region's alarm.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from .config import OrchestratorConfig, RegionTarget
from .policy import RegionSignals

PERIOD_SECONDS = 60
# The minute a run reads when metrics are readable one minute after their minute (the replay's and the
# tests' publishing clock); the run itself takes the newest complete minute it finds (`newest_complete`).
SETTLE_MINUTES = 1
# How many ended minutes a run looks back for a complete one: a bounded wait, then the region is missing.
LOOKBACK_MINUTES = 5
# A minute is complete when it has at least this share of the host samples of the window's fullest older
# minute (a host or two may come or go in a minute; half the hosts missing is a minute still aggregating).
COMPLETE_SHARE = 0.9
# GetMetricData returns at most this many pages for our queries before we give up.
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
        # Refused at once for overload: demand, not failure (RequestFailed counts them too).
        query("shed", "Shed", "Average"),
        # Failed on the server's side, sheds left out: the error share routing judges (when published).
        query("serving_error", "ServingError", "Average"),
        query("inflight_sum", "RequestsInFlight", "Sum"),
        query("inflight_samples", "RequestsInFlight", "SampleCount"),
        query("slots_sum", "ServingSlots", "Sum"),
    ]


def fetch_results(
    cloudwatch: Any, queries: list[dict[str, Any]], start: datetime, end: datetime | None = None
) -> tuple[list[dict[str, Any]], set[str]]:
    """Every page of GetMetricData for the minutes from `start` to `end` (one minute by default), merged
    per query id; and the ids of the queries that did not end Complete (their values are not to be used:
    half a minute is not a minute)."""
    merged: dict[str, dict[str, Any]] = {}
    request: dict[str, Any] = {
        "MetricDataQueries": queries,
        "StartTime": start,
        "EndTime": end or start + timedelta(seconds=PERIOD_SECONDS),
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
    incomplete = {r["Id"] for r in merged.values() if r["StatusCode"] != "Complete"}
    return list(merged.values()), incomplete


def _as_minute(timestamp: Any) -> datetime:
    moment = timestamp if timestamp.tzinfo else timestamp.replace(tzinfo=UTC)
    return moment.astimezone(UTC).replace(second=0, microsecond=0)


def values_by_minute(
    results: list[dict[str, Any]], skip: set[str] = frozenset()
) -> dict[datetime, dict[str, float]]:  # type: ignore[assignment]
    """Minute -> query id -> its datapoint, for the queries not in `skip`."""
    found: dict[datetime, dict[str, float]] = {}
    for result in results:
        if result["Id"] in skip:
            continue
        for timestamp, value in zip(result.get("Timestamps", []), result.get("Values", []), strict=False):
            found.setdefault(_as_minute(timestamp), {})[result["Id"]] = float(value)
    return found


def values_at(results: list[dict[str, Any]], minute: datetime) -> dict[str, float]:
    """Query id -> its datapoint for exactly `minute`, for the queries that have one."""
    return values_by_minute(results).get(_as_minute(minute), {})


def newest_complete(
    by_minute: dict[datetime, dict[str, float]], after: datetime | None = None
) -> datetime | None:
    """The newest minute newer than `after` whose gauges are both present and that is complete: followed by
    a newer minute, or with at least COMPLETE_SHARE of the host samples of the minute before it; None when
    there is none."""
    gauged = sorted(
        (m for m, v in by_minute.items() if "inflight_samples" in v and "slots_sum" in v), reverse=True
    )
    for index, minute in enumerate(gauged):
        if after is not None and minute <= after:
            return None
        # A minute with a newer one after it has settled; the newest must hold its predecessor's hosts
        # (a scale-in of more than a tenth in one minute costs one run, never several).
        older = gauged[index + 1 : index + 2]
        settled = index > 0
        if (
            settled
            or not older
            or by_minute[minute]["inflight_samples"]
            >= COMPLETE_SHARE * by_minute[older[0]]["inflight_samples"]
        ):
            return minute
    return None


def region_signals(
    values: dict[str, float], *, min_hosts: int, degraded: bool, gauge_interval_seconds: int
) -> RegionSignals | None:
    """None when the region's hosts reported no gauges that minute and no alarm says why: its weight then
    holds. Both gauges are needed: spare slots from one of them alone would be a guess. The error share
    leaves sheds out: ServingError where the containers publish it, else RequestFailed less Shed (a shed
    request is counted failed as well)."""
    samples_per_host = PERIOD_SECONDS / gauge_interval_seconds
    if "inflight_samples" not in values or "slots_sum" not in values:
        if not degraded:
            return None
        return RegionSignals(0.0, 0.0, 0, min_hosts, 0.0, 0.0, degraded=True)
    shed = values.get("shed", 0.0)
    errors = (
        values["serving_error"] if "serving_error" in values else max(values.get("failed", 0.0) - shed, 0.0)
    )
    return RegionSignals(
        # No streaming request finished in the minute: nothing was slow or failed.
        slow_first_token_share=values.get("slow", 0.0),
        error_share=errors,
        healthy_hosts=round(values["inflight_samples"] / samples_per_host),
        min_hosts=min_hosts,
        serving_slots=values["slots_sum"] / samples_per_host,
        requests_in_flight=values.get("inflight_sum", 0.0) / samples_per_host,
        degraded=degraded,
        shed_share=shed,
    )


def alarm_in_alarm(cloudwatch: Any, name: str) -> bool:
    found = cloudwatch.describe_alarms(AlarmNames=[name], AlarmTypes=["CompositeAlarm", "MetricAlarm"])
    alarms = [*found.get("CompositeAlarms", []), *found.get("MetricAlarms", [])]
    return any(alarm["StateValue"] == "ALARM" for alarm in alarms)


def read_newest(
    cloudwatch: Any,
    config: OrchestratorConfig,
    region: RegionTarget,
    run_minute: datetime,
    after: datetime | None = None,
) -> tuple[RegionSignals | None, datetime | None]:
    """The region's signals for the newest complete minute within LOOKBACK_MINUTES before `run_minute`
    (newer than `after`, the minute read last run), and that minute; with its drain alarm (whatever name
    config gives it: the only alarm the orchestrator drains on), read first and on its own."""
    degraded = alarm_in_alarm(cloudwatch, region.degraded_alarm)
    end = run_minute.replace(second=0, microsecond=0)
    start = end - timedelta(minutes=LOOKBACK_MINUTES)
    namespace = config.namespace_of(region)
    try:
        results, incomplete = fetch_results(
            cloudwatch, metric_queries(namespace, config.model_name), start, end
        )
    except SignalReadError:
        if not degraded:
            raise
        results, incomplete = [], set()
    by_minute = values_by_minute(results, incomplete)
    minute = newest_complete(by_minute, after)
    signals = region_signals(
        by_minute.get(minute, {}) if minute else {},
        min_hosts=region.min_hosts,
        degraded=degraded,
        gauge_interval_seconds=config.gauge_interval_seconds,
    )
    return signals, minute


def read_signals(
    cloudwatch: Any,
    config: OrchestratorConfig,
    region: RegionTarget,
    run_minute: datetime,
    after: datetime | None = None,
) -> RegionSignals | None:
    """`read_newest`'s signals alone."""
    return read_newest(cloudwatch, config, region, run_minute, after)[0]


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
