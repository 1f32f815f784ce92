"""What a wave waits for before it judges alarms: a cell's load balancer targets healthy, the orchestrator's
first runs after the global stack's deploy. The decisions are pure functions; the AWS reads below them
take clients from the caller's boto3 session.

Why: ECS counts a service stable once its tasks RUN, a cold start before the model is ready, and the alarms
a bake reads include ones whose missing data is breaching (no healthy targets, the orchestrator not running):
a new alarm on a metric with no data yet is in ALARM until data comes (CloudWatch User Guide, "Configuring
how CloudWatch alarms treat missing data": `breaching`, missing data points are treated as bad). A first
deploy judged on them stops by construction.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from ops.release_capacity import CELL_TAG, PROJECT_TAG, batches, has_tag

DESCRIBE_TAGS_BATCH = 20  # elbv2 DescribeTags takes at most 20 resource ARNs per call

# ELB target states (Elastic Load Balancing API Reference, TargetHealth: initial | healthy | unhealthy |
# unhealthy.draining | unused | draining | unavailable). `initial`: registration or the first health checks
# in progress (Elb.RegistrationInProgress, Elb.InitialHealthChecking); `unhealthy`: checks fail, as they do
# while the model loads; `draining`/`unhealthy.draining`: a target being deregistered (the old tasks
# leaving), counted neither way; `unused` (not registered, or in a zone the ALB does not serve) and
# `unavailable` (health checks disabled) are not healthy either.
HEALTHY = "healthy"
PENDING_STATES = ("initial", "unhealthy")
LEAVING_STATES = ("draining", "unhealthy.draining")

# The metric that proves an orchestrator run: Lambda sends AWS/Lambda metrics once a function finishes
# processing an event, in 1-minute intervals (Lambda developer guide, "Using CloudWatch metrics with
# Lambda"); Invocations counts successful and failed runs alike (failures are the Failing alarm's concern).
RUN_NAMESPACE = "AWS/Lambda"
RUN_METRIC = "Invocations"


# ---- a cell's targets (pure) ----------------------------------------------------------------------------


@dataclass(frozen=True)
class TargetGroupHealth:
    """One target group as DescribeTargetGroups and DescribeTargetHealth answer it."""

    name: str
    states: tuple[str, ...]  # one per registered target
    interval_seconds: float = 5
    timeout_seconds: float = 4
    healthy_threshold: int = 2

    @property
    def health_check_seconds(self) -> float:
        """The longest a ready target takes to be counted healthy: the first check may come one interval
        after it is ready, then `healthy_threshold` passing checks one interval apart, the last one
        answering within the timeout."""
        return self.interval_seconds * self.healthy_threshold + self.timeout_seconds

    def counts(self) -> Counter[str]:
        return Counter(self.states)


def target_group_health(group: dict[str, Any], descriptions: Iterable[dict[str, Any]]) -> TargetGroupHealth:
    """From a DescribeTargetGroups entry and its DescribeTargetHealth answer."""
    return TargetGroupHealth(
        name=group.get("TargetGroupName", group.get("TargetGroupArn", "?")),
        states=tuple(d.get("TargetHealth", {}).get("State", "unavailable") for d in descriptions),
        interval_seconds=group.get("HealthCheckIntervalSeconds", 5),
        timeout_seconds=group.get("HealthCheckTimeoutSeconds", 4),
        healthy_threshold=group.get("HealthyThresholdCount", 2),
    )


@dataclass(frozen=True)
class TargetsVerdict:
    settled: bool
    waiting: tuple[str, ...] = ()  # target groups short of healthy targets, with their counts
    failed: tuple[str, ...] = ()  # what waiting will not fix


def describe_counts(group: TargetGroupHealth, tasks: int) -> str:
    counts = group.counts()
    others = ", ".join(f"{n} {state}" for state, n in sorted(counts.items()) if state != HEALTHY)
    return f"target group {group.name}: {counts[HEALTHY]} healthy of {tasks} tasks" + (
        f" ({others})" if others else ""
    )


def judge_targets(groups: Sequence[TargetGroupHealth], tasks: int) -> TargetsVerdict:
    """Every target group of the cell's load balancer holds every task (each service registers its tasks in
    both groups), so each needs at least `tasks` healthy targets and none still initial or unhealthy."""
    if not groups:
        return TargetsVerdict(False, failed=("no target group found on the cell's load balancer",))
    waiting = []
    for group in groups:
        counts = group.counts()
        if counts[HEALTHY] < tasks or any(counts[state] for state in PENDING_STATES):
            waiting.append(describe_counts(group, tasks))
    return TargetsVerdict(not waiting, tuple(waiting))


def targets_budget_seconds(cold_start_seconds: float, groups: Sequence[TargetGroupHealth]) -> float:
    """How long targets may take to be healthy once their tasks run: the model's cold start, then what the
    groups' own health checks need to count a ready target healthy."""
    return cold_start_seconds + max((g.health_check_seconds for g in groups), default=0.0)


# ---- alarms' data windows and the orchestrator's runs (pure) ----------------------------------------


def breaching_window_seconds(metric_alarms: Iterable[dict[str, Any]]) -> float | None:
    """How long after its metric's first data a missing-data-breaching alarm may stay in ALARM: its whole
    evaluation window (Period x EvaluationPeriods: an M-of-N alarm leaves ALARM once fewer than M of the N
    periods breach, at most N periods after data comes), plus one period for the data to arrive. None when
    no such alarm is among them."""
    windows = [
        alarm.get("Period", 60) * (alarm.get("EvaluationPeriods", 1) + 1)
        for alarm in metric_alarms
        if alarm.get("TreatMissingData") == "breaching"
    ]
    return float(max(windows)) if windows else None


def run_metric(metric_alarms: Iterable[dict[str, Any]]) -> dict[str, Any] | None:
    """The orchestrator's AWS/Lambda Invocations metric (namespace, name, its function's dimension) as its
    NotRunning alarm watches it: the alarm's own metric, so the wait and the alarm look at the same data."""
    for alarm in metric_alarms:
        if alarm.get("Namespace") == RUN_NAMESPACE and alarm.get("MetricName") == RUN_METRIC:
            return {
                "Namespace": RUN_NAMESPACE,
                "MetricName": RUN_METRIC,
                "Dimensions": list(alarm.get("Dimensions", [])),
            }
    return None


def first_whole_minute_after(moment: datetime) -> datetime:
    """GetMetricData rounds a 60-s query's start down to the minute (CloudWatch API Reference,
    GetMetricData, StartTime), so a run of the old function in the deploy's last minute would count: start
    at the next whole minute instead, where every run is the new function's."""
    floor = moment.replace(second=0, microsecond=0)
    return floor if floor == moment else floor + timedelta(minutes=1)


# ---- AWS reads (through the caller's session) -------------------------------------------------------


def cell_load_balancers(elbv2: Any, project: str, cell: str | None) -> list[str]:
    """The ARNs of the project's load balancers in the client's region; with `cell`, only that cell's
    (the cell stacks tag their resources `cell`, as they tag the clusters region_services reads)."""
    arns = [
        lb["LoadBalancerArn"]
        for page in elbv2.get_paginator("describe_load_balancers").paginate()
        for lb in page["LoadBalancers"]
    ]
    found = []
    for chunk in batches(arns, DESCRIBE_TAGS_BATCH):
        for described in elbv2.describe_tags(ResourceArns=list(chunk))["TagDescriptions"]:
            tags = described.get("Tags", [])
            if has_tag(tags, PROJECT_TAG, project) and (cell is None or has_tag(tags, CELL_TAG, cell)):
                found.append(described["ResourceArn"])
    return found


def cell_target_groups(elbv2: Any, project: str, cell: str | None) -> list[TargetGroupHealth]:
    """Every target group of the cell's load balancer(s), with each registered target's state."""
    groups = []
    for arn in cell_load_balancers(elbv2, project, cell):
        pages = elbv2.get_paginator("describe_target_groups").paginate(LoadBalancerArn=arn)
        for group in (g for page in pages for g in page["TargetGroups"]):
            health = elbv2.describe_target_health(TargetGroupArn=group["TargetGroupArn"])
            groups.append(target_group_health(group, health["TargetHealthDescriptions"]))
    return groups


def stack_metric_alarms(cloudwatch: Any, stack: str) -> list[dict[str, Any]]:
    """The stack's metric alarms that CloudFormation named (`<stack>-<logical id>-<suffix>`: the
    no-healthy-targets and NotRunning alarms among them), as DescribeAlarms describes them."""
    pages = cloudwatch.get_paginator("describe_alarms").paginate(
        AlarmNamePrefix=f"{stack}-", AlarmTypes=["MetricAlarm"]
    )
    return [alarm for page in pages for alarm in page.get("MetricAlarms", [])]


def runs_since(cloudwatch: Any, metric: dict[str, Any], since: datetime, until: datetime) -> float:
    """The metric's Sum from `since` to `until` (one-minute periods): the orchestrator's runs after it."""
    if until <= since:
        return 0.0
    # Through the end of the minute `until` falls in: EndTime is exclusive.
    minutes = math.floor((until - since).total_seconds() / 60) + 1
    answer = cloudwatch.get_metric_data(
        MetricDataQueries=[
            {"Id": "runs", "MetricStat": {"Metric": metric, "Period": 60, "Stat": "Sum"}, "ReturnData": True}
        ],
        StartTime=since,
        EndTime=since + timedelta(minutes=minutes),
    )
    return float(sum(v for result in answer["MetricDataResults"] for v in result.get("Values", [])))
