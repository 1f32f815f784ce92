"""Alarm names that change with what the alarm watches.

Two readers copy or remember an alarm by its name and miss a change made to it in place:
- ECS deployment alarms: PutMetricAlarm on an existing alarm leaves its state unchanged (CloudWatch API
  reference, PutMetricAlarm), so an alarm whose revision dimension is updated in place keeps the old
  revision's ALARM state and rolls back the next deploy at once.
- Route 53 health checks of type CLOUDWATCH_METRIC copy the alarm's metric, dimensions, statistic, period,
  evaluation periods, threshold and comparison when created, or updated with a new AlarmIdentifier (Route 53
  API reference, CloudWatchAlarmConfiguration), and do not follow later changes: a target group replaced under
  the alarm leaves the check watching the old group's series, which has no data (InsufficientData -> healthy).
So the name carries a digest of the alarm's settings; a change makes CloudFormation create a new alarm (a
name change replaces it) with a fresh state, and update whatever names it (the service, the health check).

Names are resolved at synthesis, even where a dimension is a token: the digest is taken over the
template-level expression (`{"Fn::GetAtt": ["HttpTargets…", "TargetGroupFullName"]}`), plus what makes the
resource behind each reference a new one under the same logical id: a target group's or load balancer's
replacing properties, and every property of anything else (a task definition registers a new revision on any
change). The digest is taken lazily, when the template is written, so properties added after the alarm (a
container's environment) count.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Iterator, Mapping
from typing import Any

import jsii
from aws_cdk import CfnResource, IStableStringProducer, Lazy, Stack
from aws_cdk import aws_cloudwatch as cloudwatch
from constructs import Construct

DIGEST_CHARS = 8
MAX_NAME_CHARS = 255  # CloudWatch's limit on an alarm name (API reference, PutMetricAlarm AlarmName)
# Properties that describe a resource to people or act on an alarm's state, not what the alarm watches.
NOT_WATCHED = frozenset(
    {
        "alarmName",
        "alarmDescription",
        "alarmActions",
        "okActions",
        "insufficientDataActions",
        "actionsEnabled",
        "tags",
    }
)
# Properties whose change replaces the resource (CloudFormation template reference, "Update requires:
# Replacement"), in the L1's property names: a new group under the same logical id is a new series.
REPLACED_BY: dict[str, frozenset[str]] = {
    "AWS::ElasticLoadBalancingV2::TargetGroup": frozenset(
        {"name", "port", "protocol", "protocolVersion", "targetType", "vpcId", "ipAddressType"}
    ),
    "AWS::ElasticLoadBalancingV2::LoadBalancer": frozenset({"name", "scheme", "type"}),
}
_SUB_REFERENCE = re.compile(r"\$\{([A-Za-z0-9]+)(?:\.[A-Za-z0-9.]+)?\}")


def digest(value: object) -> str:
    """A short stable digest of a JSON-able value: the same in every synthesis of the same settings."""
    text = json.dumps(value, sort_keys=True, separators=(",", ":"), default=str)
    return hashlib.sha256(text.encode()).hexdigest()[:DIGEST_CHARS]


def references(value: Any) -> Iterator[str]:
    """Logical ids a resolved template expression refers to (Ref, Fn::GetAtt, Fn::Sub)."""
    if isinstance(value, Mapping):
        for key, inner in value.items():
            if key == "Ref" and isinstance(inner, str):
                yield inner
            elif key == "Fn::GetAtt" and isinstance(inner, list) and inner and isinstance(inner[0], str):
                yield inner[0]
            elif key == "Fn::Sub":
                text = inner[0] if isinstance(inner, list) else inner
                if isinstance(text, str):
                    yield from _SUB_REFERENCE.findall(text)
                yield from references(inner)
            else:
                yield from references(inner)
    elif isinstance(value, list):
        for inner in value:
            yield from references(inner)


class _LogicalIds:
    """Logical id -> L1 resource of the stack last asked about: one walk of the tree per stack, not one per
    alarm (a walk costs ~0.1 s on a regional stack), walked again when an id is missing (a resource added
    since). The allocated ids: none of the kit's resources overrides its own."""

    def __init__(self) -> None:
        self._stack: Stack | None = None
        self._found: dict[str, CfnResource] = {}

    def lookup(self, stack: Stack, logical_ids: set[str]) -> dict[str, CfnResource]:
        wanted = {logical_id for logical_id in logical_ids if not logical_id.startswith("AWS::")}
        if self._stack is not stack or not wanted <= set(self._found):
            self._stack = stack
            self._found = {
                stack.get_logical_id(node): node
                for node in stack.node.find_all()
                if isinstance(node, CfnResource)
            }
        return {logical_id: self._found[logical_id] for logical_id in wanted if logical_id in self._found}


_logical_ids = _LogicalIds()


def identity(stack: Stack, resource: CfnResource) -> dict[str, Any]:
    """What makes the resource behind a logical id a new one: its replacing properties where known, else
    all of them. Property overrides are not seen (none of the kit's referenced resources has one)."""
    # The L1's own properties (jsii's protected cfnProperties): the one public view before synthesis ends.
    properties = {key: value for key, value in resource._cfn_properties.items() if key not in NOT_WATCHED}
    replacing = REPLACED_BY.get(resource.cfn_resource_type)
    if replacing is not None:
        properties = {key: value for key, value in properties.items() if key in replacing}
    return {"type": resource.cfn_resource_type, "properties": stack.resolve(properties)}


def watched(stack: Stack, alarm: cloudwatch.CfnAlarm) -> dict[str, Any]:
    """The alarm's settings as the template writes them, and the identity of every resource they name."""
    settings = stack.resolve(
        {key: value for key, value in alarm._cfn_properties.items() if key not in NOT_WATCHED}
    )
    found = _logical_ids.lookup(stack, set(references(settings)))
    behind = {logical_id: identity(stack, found[logical_id]) for logical_id in sorted(found)}
    return {"alarm": settings, "references": behind}


@jsii.implements(IStableStringProducer)
class _WatchedName:
    """Produces the name when the template is written: the alarm it names exists by then."""

    def __init__(self, prefix: str) -> None:
        self.prefix = prefix
        self.alarm: cloudwatch.CfnAlarm | None = None

    def produce(self) -> str:
        if self.alarm is None:
            raise RuntimeError(f"{self.prefix}: the alarm was never bound to its name")
        return f"{self.prefix}-{digest(watched(Stack.of(self.alarm), self.alarm))}"


class WatchedAlarm(cloudwatch.Alarm):
    """A CloudWatch alarm named `<name_prefix>-<digest of what it watches>`; any other Alarm argument."""

    def __init__(self, scope: Construct, id: str, *, name_prefix: str, **alarm: Any) -> None:
        if len(name_prefix) + 1 + DIGEST_CHARS > MAX_NAME_CHARS:
            raise ValueError(f"alarm name prefix {name_prefix!r} leaves no room for its digest")
        name = _WatchedName(name_prefix)
        super().__init__(scope, id, alarm_name=Lazy.string(name), **alarm)
        cfn = self.node.default_child
        assert isinstance(cfn, cloudwatch.CfnAlarm)
        name.alarm = cfn
