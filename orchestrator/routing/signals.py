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
# What one call takes, so a run reads all the targets of an AWS region in one call of each API (the AWS API
# models botocore ships: SSM GetParameters `Names` 1-10 items, CloudWatch DescribeAlarms `AlarmNames` at
# most 100; CloudWatch API reference, GetMetricData: "A single GetMetricData call can include as many as
# 500 MetricDataQuery structures").
GET_PARAMETERS_MAX_NAMES = 10
DESCRIBE_ALARMS_MAX_NAMES = 100
GET_METRIC_DATA_MAX_QUERIES = 500


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


def metric_queries(namespace: str, model_name: str, prefix: str = "") -> list[dict[str, Any]]:
    """One target's queries; `prefix` keeps their ids apart from other targets' in one call (an id starts
    with a lowercase letter: CloudWatch API reference, MetricDataQuery)."""

    def query(id: str, metric: str, stat: str) -> dict[str, Any]:
        return {
            "Id": prefix + id,
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
        # Every request that reached the region, shed ones included (each writes RequestFailed, 0 or 1):
        # what its weight draws, apart from how long each takes.
        query("requests", "RequestFailed", "SampleCount"),
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
        requests_per_second=values["requests"] / PERIOD_SECONDS if "requests" in values else None,
    )


def _chunks(items: list[Any], size: int) -> list[list[Any]]:
    return [items[offset : offset + size] for offset in range(0, len(items), size)]


def alarms_in_alarm(cloudwatch: Any, names: list[str]) -> set[str]:
    """Which of `names` (composite or metric alarms) are in ALARM: one DescribeAlarms per 100 names."""
    found: set[str] = set()
    for chunk in _chunks(names, DESCRIBE_ALARMS_MAX_NAMES):
        answer = cloudwatch.describe_alarms(AlarmNames=chunk, AlarmTypes=["CompositeAlarm", "MetricAlarm"])
        for alarm in [*answer.get("CompositeAlarms", []), *answer.get("MetricAlarms", [])]:
            if alarm["StateValue"] == "ALARM":
                found.add(alarm["AlarmName"])
    return found


def alarm_in_alarm(cloudwatch: Any, name: str) -> bool:
    return name in alarms_in_alarm(cloudwatch, [name])


def _signals_of(
    config: OrchestratorConfig,
    region: RegionTarget,
    results: list[dict[str, Any]],
    incomplete: set[str],
    degraded: bool,
    after: datetime | None,
) -> tuple[RegionSignals | None, datetime | None]:
    by_minute = values_by_minute(results, incomplete)
    minute = newest_complete(by_minute, after)
    signals = region_signals(
        by_minute.get(minute, {}) if minute else {},
        min_hosts=region.min_hosts,
        degraded=degraded,
        gauge_interval_seconds=config.gauge_interval_seconds,
    )
    return signals, minute


def read_newest_of(
    cloudwatch: Any,
    config: OrchestratorConfig,
    regions: list[RegionTarget],
    run_minute: datetime,
    after: dict[str, datetime | None] | None = None,
) -> dict[str, tuple[RegionSignals | None, datetime | None] | SignalReadError]:
    """`read_newest` for several targets of one AWS region (the cells of a region) with one DescribeAlarms
    and one GetMetricData for all of them (up to the APIs' limits), where one call per target each cost as
    many requests as there are targets. Each target's queries are its own, under ids of its own, so one
    target's partial data never touches another's; a GetMetricData that fails its pages fails only the
    targets that asked it, and each of those whose drain alarm is in ALARM is still read as degraded.
    Target name -> its signals and minute, or the error that kept it unread."""
    after = after or {}
    degraded = alarms_in_alarm(cloudwatch, [region.degraded_alarm for region in regions])
    end = run_minute.replace(second=0, microsecond=0)
    start = end - timedelta(minutes=LOOKBACK_MINUTES)
    per_target = len(metric_queries("", ""))
    found: dict[str, tuple[RegionSignals | None, datetime | None] | SignalReadError] = {}
    for chunk in _chunks(list(regions), max(1, GET_METRIC_DATA_MAX_QUERIES // per_target)):
        # One target alone keeps the plain ids; several are told apart by a prefix of their own.
        prefixes = {r.name: (f"t{index}_" if len(chunk) > 1 else "") for index, r in enumerate(chunk)}
        queries = [
            query
            for region in chunk
            for query in metric_queries(config.namespace_of(region), config.model_name, prefixes[region.name])
        ]
        try:
            results, incomplete = fetch_results(cloudwatch, queries, start, end)
        except SignalReadError as error:
            failed: SignalReadError | None = error
            results, incomplete = [], set()
        else:
            failed = None
        for region in chunk:
            is_degraded = region.degraded_alarm in degraded
            if failed is not None and not is_degraded:
                found[region.name] = failed
                continue
            prefix = prefixes[region.name]
            own = [
                {**result, "Id": result["Id"][len(prefix) :]}
                for result in results
                if result["Id"].startswith(prefix)
            ]
            own_incomplete = {i[len(prefix) :] for i in incomplete if i.startswith(prefix)}
            found[region.name] = _signals_of(
                config, region, own, own_incomplete, is_degraded, after.get(region.name)
            )
    return found


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
    found = read_newest_of(cloudwatch, config, [region], run_minute, {region.name: after})[region.name]
    if isinstance(found, SignalReadError):
        raise found
    return found


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


def read_parameters(ssm: Any, names: list[str]) -> dict[str, dict[str, Any]]:
    """Name -> the parameter, for those of `names` that exist: one GetParameters per 10 names (a name not
    found is listed as invalid, not raised)."""
    found: dict[str, dict[str, Any]] = {}
    for chunk in _chunks(list(dict.fromkeys(names)), GET_PARAMETERS_MAX_NAMES):
        for parameter in ssm.get_parameters(Names=chunk)["Parameters"]:
            found[parameter["Name"]] = parameter
    return found


def read_endpoints(ssm: Any, regions: list[RegionTarget]) -> dict[str, Endpoint | None]:
    """Target name -> its endpoint, for several targets of one AWS region in one GetParameters (None until
    a target's stack is deployed: the orchestrator then creates no record for it)."""
    names = [n for r in regions for n in (r.endpoint_parameter, r.health_check_parameter)]
    return endpoints_from(read_parameters(ssm, names), regions)


def endpoints_from(
    parameters: dict[str, dict[str, Any]], regions: list[RegionTarget]
) -> dict[str, Endpoint | None]:
    """Target name -> its endpoint, from parameters read already (name -> parameter)."""
    found = {name: parameter["Value"] for name, parameter in parameters.items()}
    return {
        r.name: parse_endpoint(found.get(r.endpoint_parameter), found.get(r.health_check_parameter))
        for r in regions
    }


def read_endpoint(ssm: Any, region: RegionTarget) -> Endpoint | None:
    """None until the region's stack is deployed: the orchestrator then creates no record for it."""
    return read_endpoints(ssm, [region])[region.name]
