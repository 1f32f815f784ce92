"""AWS rules the kit relies on that moto does not model: each written down once, as data with its source, with
the check that applies it to a policy document or to a synthesized template. Tests of the shipped policies and
templates call these checks; moto would let a breach of any of them pass unnoticed."""

from __future__ import annotations

import fnmatch
import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Rule:
    says: str
    source: str


# ---- (a) CloudWatch DescribeAlarms and composite alarms ---------------------------------------------------
DESCRIBE_ALARMS_COMPOSITES_NEED_STAR = Rule(
    says=(
        "DescribeAlarms returns composite alarms only to a caller allowed cloudwatch:DescribeAlarms on "
        "Resource '*'; with a narrower scope the composite alarms are simply left out of the answer"
    ),
    source=(
        "CloudWatch API Reference, DescribeAlarms: 'To use this operation and return information about "
        "composite alarms, you must be signed on with the cloudwatch:DescribeAlarms permission that is "
        "scoped to *. You can't return information about composite alarms if your cloudwatch:DescribeAlarms "
        "permission has a narrower scope.'"
    ),
)
DESCRIBE_ALARMS_ACTION = "cloudwatch:DescribeAlarms"


def _listed(value: Any) -> list[Any]:
    return value if isinstance(value, list) else [value]


def _names(statement: Mapping[str, Any], action: str) -> bool:
    """Whether the statement's Action names `action`, wildcards included (IAM matches actions without
    regard to case)."""
    return any(
        fnmatch.fnmatchcase(action.lower(), str(a).lower()) for a in _listed(statement.get("Action", []))
    )


def describe_alarms_sees_composites(policy: Mapping[str, Any]) -> bool:
    """Whether an identity policy lets DescribeAlarms return composite alarms (rule (a)): some unconditional
    Allow of cloudwatch:DescribeAlarms on Resource "*", and no Deny of it."""
    statements = _listed(policy.get("Statement", []))
    allowed = any(
        s.get("Effect") == "Allow"
        and _names(s, DESCRIBE_ALARMS_ACTION)
        and "*" in _listed(s.get("Resource", []))
        and not s.get("Condition")
        for s in statements
    )
    denied = any(s.get("Effect") == "Deny" and _names(s, DESCRIBE_ALARMS_ACTION) for s in statements)
    return allowed and not denied


# ---- (b) Route 53 health checks on CloudWatch alarms ------------------------------------------------------
ROUTE53_ALARM_HEALTH_CHECKS = Rule(
    says=(
        "A Route 53 health check of type CLOUDWATCH_METRIC copies the alarm's settings when it is created "
        "(and when UpdateHealthCheck names a new AlarmIdentifier) and does not follow later changes to the "
        "alarm; it evaluates the alarm's metric data itself, not the alarm's state (SetAlarmState does not "
        "move it); and it supports only alarms on one standard-resolution metric with the statistic "
        "Average, Minimum, Maximum, Sum or SampleCount: no extended statistic (percentile), no metric math, "
        "so no composite alarm either"
    ),
    source=(
        "Route 53 API Reference, AlarmIdentifier ('Route 53 supports CloudWatch alarms with the following "
        "features: Standard-resolution metrics. High-resolution metrics aren't supported. Statistics: "
        "Average, Minimum, Maximum, Sum, and SampleCount. Extended statistics aren't supported.') and "
        "CloudWatchAlarmConfiguration (the settings copied); Route 53 Developer Guide, 'Creating, updating, "
        "and deleting health checks' (update the health check when the alarm's settings change)"
    ),
)
ROUTE53_ALARM_STATISTICS = frozenset({"Average", "Minimum", "Maximum", "Sum", "SampleCount"})
# Standard resolution: one-minute granularity; a period under 60 s needs a high-resolution metric.
STANDARD_RESOLUTION_PERIOD = 60
# What Route 53 copies (API Reference, CloudWatchAlarmConfiguration): a change to any of these is invisible to
# an existing health check. DatapointsToAlarm and TreatMissingData are not among them.
ROUTE53_COPIED_ALARM_SETTINGS = (
    "ComparisonOperator",
    "Dimensions",
    "EvaluationPeriods",
    "MetricName",
    "Namespace",
    "Period",
    "Statistic",
    "Threshold",
)


def _resources(template: Mapping[str, Any], kind: str) -> dict[str, dict[str, Any]]:
    return {k: v for k, v in template.get("Resources", {}).items() if v.get("Type") == kind}


def alarm_health_checks(template: Mapping[str, Any]) -> dict[str, dict[str, Any]]:
    """Logical id -> HealthCheckConfig of every CLOUDWATCH_METRIC health check in the template."""
    checks = _resources(template, "AWS::Route53::HealthCheck")
    return {
        logical_id: check["Properties"]["HealthCheckConfig"]
        for logical_id, check in checks.items()
        if check["Properties"]["HealthCheckConfig"].get("Type") == "CLOUDWATCH_METRIC"
    }


def named_alarm(template: Mapping[str, Any], config: Mapping[str, Any]) -> tuple[str, dict[str, Any]] | None:
    """The (logical id, resource) of the alarm a health check names, when the template holds it: by Ref (the
    health check then depends on the alarm, so the alarm exists when Route 53 copies it) or by its literal
    AlarmName."""
    name = config.get("AlarmIdentifier", {}).get("Name")
    resources = template.get("Resources", {})
    if isinstance(name, dict) and set(name) == {"Ref"} and name["Ref"] in resources:
        return name["Ref"], resources[name["Ref"]]
    for logical_id, resource in resources.items():
        alarm = resource.get("Type", "").startswith("AWS::CloudWatch::")
        if alarm and name is not None and resource.get("Properties", {}).get("AlarmName") == name:
            return logical_id, resource
    return None


def health_check_problems(template: Mapping[str, Any]) -> list[str]:
    """Each breach of rule (b) by the template's CLOUDWATCH_METRIC health checks and the alarms they name."""
    problems = []
    for check_id, config in sorted(alarm_health_checks(template).items()):
        found = named_alarm(template, config)
        if found is None:
            problems.append(
                f"{check_id}: names alarm {json.dumps(config.get('AlarmIdentifier'))}, which this template "
                "does not create: Route 53 copies the alarm when the check is created, so it must exist first"
            )
            continue
        alarm_id, alarm = found
        where = f"{check_id} -> {alarm_id}"
        if alarm["Type"] != "AWS::CloudWatch::Alarm":
            problems.append(f"{where}: a {alarm['Type']} has no single metric for Route 53 to evaluate")
            continue
        if isinstance(config.get("AlarmIdentifier", {}).get("Name"), str):
            problems.append(f"{where}: name the alarm by Ref, so the check is created after the alarm")
        properties = alarm["Properties"]
        if "Metrics" in properties:
            problems.append(f"{where}: metric math (Metrics) is not supported by Route 53")
        if "ExtendedStatistic" in properties:
            problems.append(f"{where}: extended statistic {properties['ExtendedStatistic']} is not supported")
        elif properties.get("Statistic") not in ROUTE53_ALARM_STATISTICS:
            problems.append(
                f"{where}: statistic {properties.get('Statistic')!r} is not one Route 53 supports"
            )
        period = properties.get("Period")
        if "Metrics" not in properties and (
            not isinstance(period, int) or period < STANDARD_RESOLUTION_PERIOD or period % 60
        ):
            problems.append(f"{where}: period {period!r} is not a standard-resolution period (n x 60 s)")
        if not isinstance(properties.get("AlarmName"), str):
            problems.append(
                f"{where}: AlarmName is not fixed at synth, so a change of what the alarm watches cannot "
                "be seen to rename it"
            )
        if "InsufficientDataHealthStatus" not in config:
            problems.append(
                f"{check_id}: no InsufficientDataHealthStatus: the check decides missing data itself (it "
                "ignores the alarm's TreatMissingData), so say what it decides"
            )
    return problems


def copied_settings(alarm: Mapping[str, Any]) -> dict[str, Any]:
    properties = alarm.get("Properties", {})
    return {key: properties.get(key) for key in ROUTE53_COPIED_ALARM_SETTINGS}


def stale_health_checks(before: Mapping[str, Any], after: Mapping[str, Any]) -> list[str]:
    """Health checks (by logical id, in both templates) whose alarm's copied settings change between two
    synths while the AlarmIdentifier they name does not: CloudFormation would update the alarm in place, and
    Route 53 would keep evaluating the old settings."""
    stale = []
    earlier = alarm_health_checks(before)
    for check_id, config in sorted(alarm_health_checks(after).items()):
        if check_id not in earlier:
            continue
        old, new = named_alarm(before, earlier[check_id]), named_alarm(after, config)
        if old is None or new is None:
            continue
        same_name = old[1]["Properties"].get("AlarmName") == new[1]["Properties"].get("AlarmName")
        if same_name and copied_settings(old[1]) != copied_settings(new[1]):
            changed = sorted(
                k for k, v in copied_settings(new[1]).items() if copied_settings(old[1]).get(k) != v
            )
            stale.append(f"{check_id}: {new[0]}'s {', '.join(changed)} changed under the same AlarmName")
    return stale
