"""Control parameters as deployed: the config's stacks are synthesized (the same build_app as `make
synth`, cached by the digest of the config files and the infrastructure code) and every parameter the
twin's control loops use is read back from the CloudFormation templates, never from the config."""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from gameday.cron import Cron, CronError, parse
from gameday.dead_targets import (
    DEREGISTER_TARGETS_ACTION,
    TARGET_GROUP_ENV_PREFIX,
    dead_target_seconds_deployed,
)
from orchestrator.routing.config_source import DIGEST_VARIABLE, PARAMETER_VARIABLE, decode
from settings.loader import load_documents

REPO = Path(__file__).resolve().parents[1]
CACHE = REPO / "build" / "gameday"
# Everything a template is made from: a change in any of these synthesizes again.
SOURCES = ("app.py", "cdk.json", "settings", "stacks", "cdk_constructs", "orchestrator")


class TemplateError(Exception):
    """A template lacks something the twin needs (a resource it cannot model)."""


@dataclass(frozen=True)
class Bounds:
    at: datetime  # a one-time action's moment; a recurring one's start (or the epoch)
    min: int | None
    max: int | None
    name: str
    cron: Cron | None = None  # a recurring action fires each minute its cron matches, from `at` on
    until: datetime | None = None  # a recurring action's end

    def fires(self, before: datetime, now: datetime) -> bool:
        """Whether the action fires in (before, now] (the twin's minutes)."""
        if self.cron is None:
            return before < self.at <= now
        if now < self.at or (self.until is not None and now > self.until):
            return False
        return self.cron.matches(now)

    def last_fired(self, when: datetime) -> datetime | None:
        """When the action last fired at or before `when` (a recurring one: within a week)."""
        if self.cron is None:
            return self.at if self.at <= when else None
        moment = when.replace(second=0, microsecond=0)
        for _ in range(RECURRING_LOOKBACK_MINUTES):
            if self.fires(moment - timedelta(minutes=1), moment):
                return moment
            moment -= timedelta(minutes=1)
        return None


RECURRING_LOOKBACK_MINUTES = 8 * 24 * 60  # a weekly action has fired within this before any start
EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


@dataclass(frozen=True)
class TargetTracking:
    metric: str
    statistic: str
    dimensions: dict[str, str]
    target: float
    scale_out_cooldown: int
    scale_in_cooldown: int
    namespace: str = ""


@dataclass(frozen=True)
class WarmPool:
    min_size: int
    max_prepared: int | None


@dataclass(frozen=True)
class RolloutControl:
    """The service's rolling-deployment settings as the template sets them (AWS::ECS::Service
    DeploymentConfiguration; ECS's defaults where it omits one: 100% minimum healthy, 200% maximum, no
    circuit breaker, no deployment alarms)."""

    min_healthy_percent: int = 100
    max_percent: int = 200
    breaker: bool = False
    breaker_rollback: bool = False
    # ThresholdConfiguration: a fixed COUNT of failed tasks, or a percent of the desired count
    # (BOUNDED_PERCENT: between 3 and 200; UNBOUNDED_PERCENT: no bounds); None: ECS's default, BOUNDED_PERCENT
    # 50 (ECS API reference, ThresholdConfiguration; gameday/deploys.py).
    failed_tasks_threshold: int | None = None
    # The deployment alarms ECS watches during the rollout (the twin's alarm keys: logical ids where the
    # template refers to its own alarm, else the name as written); one in ALARM rolls back if
    # `alarms_rollback`.
    alarms: tuple[str, ...] = ()
    alarms_rollback: bool = False
    # ECS's bake after the last task is replaced, with deployment alarms: the twin's figure, the longest
    # watched alarm's evaluation window in minutes (ECS computes its own and states no formula).
    alarm_bake_minutes: int = 0
    # The percent types of ThresholdConfiguration (see failed_tasks_threshold).
    failed_tasks_percent: int | None = None
    failed_tasks_bounded: bool = True


def _rollout(service: dict[str, Any]) -> RolloutControl:
    config = service.get("DeploymentConfiguration", {})
    breaker = config.get("DeploymentCircuitBreaker", {})
    threshold = breaker.get("ThresholdConfiguration") or {}
    alarms = config.get("Alarms", {})
    enabled = str(alarms.get("Enable", False)).lower() == "true"
    return RolloutControl(
        min_healthy_percent=int(config.get("MinimumHealthyPercent", 100)),
        max_percent=int(config.get("MaximumPercent", 200)),
        breaker=str(breaker.get("Enable", False)).lower() == "true",
        breaker_rollback=str(breaker.get("Rollback", False)).lower() == "true",
        failed_tasks_threshold=int(threshold["Value"]) if threshold.get("Type") == "COUNT" else None,
        failed_tasks_percent=int(threshold["Value"]) if "PERCENT" in str(threshold.get("Type", "")) else None,
        failed_tasks_bounded=threshold.get("Type") != "UNBOUNDED_PERCENT",
        alarms=tuple(_ref(name) or _literal(name) for name in alarms.get("AlarmNames", []))
        if enabled
        else (),
        alarms_rollback=enabled and str(alarms.get("Rollback", False)).lower() == "true",
    )


@dataclass(frozen=True)
class FleetControl:
    instance_type: str
    service_id: str  # logical ids, to find the fleet's alarms
    asg_min: int
    asg_max: int
    asg_schedule: tuple[Bounds, ...]
    service_min: int
    service_max: int
    service_schedule: tuple[Bounds, ...]
    tracking: TargetTracking | None
    warmup_seconds: int  # capacity provider managed scaling
    target_capacity: int
    warm_pool: WarmPool | None
    grace_seconds: int  # the service's health-check grace
    # Seconds on average a target whose engine died keeps taking requests (gameday/dead_targets.py, from the
    # HTTP target group's health-check interval and unhealthy threshold, and leaves_on_death).
    dead_target_seconds: float

    # The tasks take their own target out of their groups when their engine dies: the container names every
    # group the service registers it in, and the task role may deregister targets of each (_leaves_on_death).
    leaves_on_death: bool = False
    rollout: RolloutControl = RolloutControl()

    def bounds_at(self, when: datetime) -> tuple[int, int, int, int]:
        """(asg min, asg max, service min, service max) in force at `when`: each schedule's actions in
        the order they last fired, one-time and recurring alike."""

        def apply(start: tuple[int, int], schedule: tuple[Bounds, ...]) -> tuple[int, int]:
            fired = [(moment, action) for action in schedule if (moment := action.last_fired(when))]
            bounds = start
            for _, action in sorted(fired, key=lambda item: item[0]):
                bounds = (
                    action.min if action.min is not None else bounds[0],
                    action.max if action.max is not None else bounds[1],
                )
            return bounds

        asg = apply((self.asg_min, self.asg_max), self.asg_schedule)
        service = apply((self.service_min, self.service_max), self.service_schedule)
        return (*asg, *service)


@dataclass(frozen=True)
class Alarm:
    logical_id: str
    name: str  # AlarmName, or the logical id where CloudFormation would generate one
    metrics: tuple[str, ...]  # metric names (one, or the inputs of a math expression)
    statistic: str  # Average | Sum | Minimum | Maximum | SampleCount | p99 ... | "math"
    dimensions: dict[str, str]  # literal values; references as "ref:<logical id>"
    period: int
    evaluation_periods: int
    datapoints: int
    threshold: float
    comparison: str
    treat_missing: str
    expression: str | None = None
    namespace: str = ""  # the metric's (the first of a math expression's inputs)


@dataclass(frozen=True)
class CompositeAlarm:
    logical_id: str
    name: str
    rule: str  # ALARM(<logical id>) OR ..., references resolved to logical ids
    pages: bool = False  # has AlarmActions (the stack's alarm topic): its ALARM reaches a person


@dataclass(frozen=True)
class HealthCheck:
    logical_id: str
    kind: str  # CLOUDWATCH_METRIC | CALCULATED | other (not modelled: healthy)
    alarm: str | None = None
    insufficient_data: str = "LastKnownStatus"
    children: tuple[str, ...] = ()
    threshold: int = 1


@dataclass(frozen=True)
class RegionControl:
    """One serving stack: a one-cell region, or one cell of a region of several (docs/peak-events.md,
    "Cells")."""

    region: str  # the AWS region
    fleets: tuple[FleetControl, ...]
    alarms: dict[str, Alarm]
    composites: tuple[CompositeAlarm, ...]
    health_checks: dict[str, HealthCheck]
    record_check: str | None  # the health check on the region's weighted record (its SSM parameter)
    parameters: tuple[str, ...] = ()  # the SSM parameter names the stack writes
    metrics_namespace: str = ""  # where its serving containers publish (their AWS_EMF_NAMESPACE)
    name: str = ""  # the routing name (`us-east-1`, or `us-east-1/2` for a cell): its record's set id
    stack: str = ""  # the CloudFormation stack (the assembly's artifact) it is deployed by


@dataclass(frozen=True)
class Deployment:
    # Routing name (the orchestrator's target, a one-cell region or a cell `us-east-1/2`) -> its stack's
    # control parameters, in the orchestrator's order.
    cells: dict[str, RegionControl]
    orchestrator_config: str  # the Lambda's ORCHESTRATOR_CONFIG, as deployed
    home_region: str
    schedule: str
    source: Path = field(compare=False, default=Path())


# ---- synthesis ----------------------------------------------------------------------------------


def _digest(config: Path) -> str:
    digest = hashlib.sha256()
    for document in load_documents(config):
        digest.update(str(document.path.resolve()).encode())
        digest.update(document.path.read_bytes())
    for name in SOURCES:
        root = REPO / name
        files = sorted(root.rglob("*.py")) if root.is_dir() else [root]
        for path in files:
            digest.update(str(path.relative_to(REPO)).encode())
            digest.update(path.read_bytes())
    # Templates depend on the date for events already under way (docs/peak-events.md, "Peak events").
    digest.update(datetime.now(UTC).strftime("%Y-%m-%d").encode())
    return digest.hexdigest()[:16]


SYNTH = """
import sys
from settings import load_settings
from stacks.serving_app import build_app
build_app(load_settings(sys.argv[1]), outdir=sys.argv[2], nag=False).synth()
"""
# `make deploy` synthesizes when it starts (ops/deploy_waves.py), and the templates depend on that moment
# (scheduled actions already past are left out: stacks/props.py `fleet_schedule`): a deploy day's assembly
# is synthesized as of the deploy's simulated start, the clock of stacks/props.py swapped in the synth's
# own process.
SYNTH_AT = """
import sys
from datetime import datetime
import stacks.props
from settings import load_settings
from stacks.serving_app import build_app
at = datetime.fromisoformat(sys.argv[3])
class At(datetime):
    @classmethod
    def now(cls, tz=None):
        return at.astimezone(tz) if tz else at.replace(tzinfo=None)
stacks.props.datetime = At
build_app(load_settings(sys.argv[1]), outdir=sys.argv[2], nag=False, first_create=sys.argv[4] == "1").synth()
"""


def synthesize(
    config: Path, cache: Path = CACHE, at: datetime | None = None, first_create: bool = False
) -> Path:
    """The cloud assembly of `config`: synthesized once per digest, in a process of its own (jsii's Node
    runtime stays out of the twin's), without cdk-nag or aws-cdk-lib's schema validation (neither
    changes a template). `at`: as `make deploy` would synthesize it at that moment (`first_create`: the
    assembly it creates new stacks from)."""
    key = _digest(config)
    if at is not None:
        stamp = at.astimezone(UTC).strftime("%Y%m%dT%H%M")
        key = hashlib.sha256(f"{key}|{stamp}|{first_create}".encode()).hexdigest()[:16]
    out = cache / f"cdk.out-{key}"
    if (out / "manifest.json").is_file():
        return out
    cache.mkdir(parents=True, exist_ok=True)
    # A directory of this run's own: two game days of one config started together (make -j, a CI matrix)
    # once synthesized into the same one, and one's synth read files the other's had just replaced.
    partial = Path(tempfile.mkdtemp(prefix=out.name + ".partial-", dir=cache))
    env = {
        **os.environ,
        "CDK_VALIDATION": "false",
        "JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION": "20",
        "CDK_DISABLE_CLI_TELEMETRY": "1",
    }
    command = [sys.executable, "-c", SYNTH, str(config), str(partial)]
    if at is not None:
        command = [
            sys.executable,
            "-c",
            SYNTH_AT,
            str(config),
            str(partial),
            at.isoformat(),
            str(int(first_create)),
        ]
    result = subprocess.run(
        command,
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )
    if result.returncode != 0:
        shutil.rmtree(partial, ignore_errors=True)
        raise TemplateError(f"synth of {config} failed:\n{result.stderr[-2000:]}")
    try:
        partial.rename(out)
    except OSError:  # another run finished first: its assembly is the same
        shutil.rmtree(partial, ignore_errors=True)
    return out


# ---- reading ------------------------------------------------------------------------------------


def _ref(value: Any) -> str | None:
    if isinstance(value, dict):
        if "Ref" in value:
            return str(value["Ref"])
        if "Fn::GetAtt" in value:
            return str(value["Fn::GetAtt"][0])
    return None


def _literal(value: Any) -> str:
    ref = _ref(value)
    if ref is not None:
        return f"ref:{ref}"
    if isinstance(value, dict):
        refs = re.findall(r'"(?:Ref|Fn::GetAtt)": \[?"([^"]+)"', json.dumps(value))
        return "ref:" + ",".join(refs)
    return str(value)


def _of_type(resources: dict[str, Any], kind: str) -> dict[str, dict[str, Any]]:
    return {key: r.get("Properties", {}) for key, r in resources.items() if r["Type"] == kind}


def _at(text: str) -> datetime:
    """ISO (ASG StartTime) or at(...) (Application Auto Scaling, UTC unless a time zone is given)."""
    match = re.fullmatch(r"at\((.+)\)", text)
    moment = datetime.fromisoformat((match.group(1) if match else text).replace("Z", "+00:00"))
    return moment if moment.tzinfo else moment.replace(tzinfo=UTC)


def _alarm(logical_id: str, props: dict[str, Any]) -> Alarm:
    evaluation = int(props["EvaluationPeriods"])
    common = {
        "logical_id": logical_id,
        "name": str(props.get("AlarmName", logical_id)),
        "evaluation_periods": evaluation,
        "datapoints": int(props.get("DatapointsToAlarm", evaluation)),
        "threshold": float(props["Threshold"]),
        "comparison": props["ComparisonOperator"],
        "treat_missing": props.get("TreatMissingData", "missing"),
    }
    if "Metrics" in props:
        expression = next((m["Expression"] for m in props["Metrics"] if "Expression" in m), None)
        stats = [m["MetricStat"] for m in props["Metrics"] if "MetricStat" in m]
        dimensions = {
            d["Name"]: _literal(d["Value"]) for stat in stats for d in stat["Metric"].get("Dimensions", [])
        }
        return Alarm(
            metrics=tuple(stat["Metric"]["MetricName"] for stat in stats),
            namespace=str(stats[0]["Metric"].get("Namespace", "")) if stats else "",
            statistic="math",
            dimensions=dimensions,
            period=int(stats[0]["Period"]) if stats else 60,
            expression=expression,
            **common,
        )
    return Alarm(
        metrics=(props["MetricName"],),
        namespace=str(props.get("Namespace", "")),
        statistic=props.get("Statistic") or props.get("ExtendedStatistic", "Average"),
        dimensions={d["Name"]: _literal(d["Value"]) for d in props.get("Dimensions", [])},
        period=int(props["Period"]),
        **common,
    )


def _rule(value: Any) -> str:
    """A composite's AlarmRule with each alarm reference (an ARN from Fn::GetAtt) as its logical id."""
    if isinstance(value, str):
        return value
    if isinstance(value, dict) and "Fn::Join" in value:
        separator, parts = value["Fn::Join"]
        return separator.join(_rule(part) for part in parts)
    ref = _ref(value)
    if ref is None:
        raise TemplateError(f"composite alarm rule part not understood: {value!r}")
    return ref


def _asg_action(key: str, action: dict[str, Any]) -> Bounds:
    """An Auto Scaling group's scheduled action: once at StartTime, or on its Recurrence (Unix cron in its
    TimeZone) from StartTime to EndTime."""
    start = _at(action["StartTime"]) if "StartTime" in action else EPOCH
    low, high = action.get("MinSize"), action.get("MaxSize")
    if "Recurrence" not in action:
        if "StartTime" not in action:
            raise TemplateError(f"{key}: a scheduled action with neither StartTime nor Recurrence")
        return Bounds(start, low, high, key)
    try:
        cron = parse(str(action["Recurrence"]), str(action.get("TimeZone", "UTC")))
    except CronError as error:
        raise TemplateError(f"{key}: Recurrence {action['Recurrence']!r}: {error}") from None
    end = _at(action["EndTime"]) if "EndTime" in action else None
    return Bounds(start, low, high, key, cron, end)


def _service_action(target_id: str, action: dict[str, Any]) -> Bounds:
    """A scalable target's scheduled action: `at(...)` once, `cron(...)` recurring in its Timezone between
    StartTime and EndTime; `rate(...)` is refused by name."""
    name = str(action["ScheduledActionName"])
    schedule = str(action["Schedule"])
    low = action["ScalableTargetAction"].get("MinCapacity")
    high = action["ScalableTargetAction"].get("MaxCapacity")
    if schedule.startswith("at("):
        return Bounds(_at(schedule), low, high, name)
    if not schedule.startswith("cron("):
        raise TemplateError(
            f"{target_id}: scheduled action {name}: {schedule!r} is not modelled (at or cron)"
        )
    try:
        cron = parse(schedule, str(action.get("Timezone", "UTC")))
    except CronError as error:
        raise TemplateError(f"{target_id}: scheduled action {name}: {error}") from None
    start = _at(action["StartTime"]) if "StartTime" in action else EPOCH
    end = _at(action["EndTime"]) if "EndTime" in action else None
    return Bounds(start, low, high, name, cron, end)


# Target tracking metrics the twin produces: the containers' per-host RequestsInFlight gauge, as the
# policy's statistic reads it for a fleet (least outstanding requests keeps a fleet's hosts level, so the
# hosts' Average and Maximum are one value).
TRACKED = {("RequestsInFlight", "Average"), ("RequestsInFlight", "Maximum")}


def _fleets(resources: dict[str, Any]) -> tuple[FleetControl, ...]:
    groups = _of_type(resources, "AWS::AutoScaling::AutoScalingGroup")
    templates = _of_type(resources, "AWS::EC2::LaunchTemplate")
    providers = _of_type(resources, "AWS::ECS::CapacityProvider")
    services = _of_type(resources, "AWS::ECS::Service")
    targets = _of_type(resources, "AWS::ApplicationAutoScaling::ScalableTarget")
    policies = _of_type(resources, "AWS::ApplicationAutoScaling::ScalingPolicy")
    asg_actions = _of_type(resources, "AWS::AutoScaling::ScheduledAction")
    warm_pools = _of_type(resources, "AWS::AutoScaling::WarmPool")
    target_groups = _of_type(resources, "AWS::ElasticLoadBalancingV2::TargetGroup")
    http_groups = [
        tg for tg in target_groups.values() if "GRPC" not in str(tg.get("HealthCheckPath", "")).upper()
    ]
    checks = [
        (int(tg.get("HealthCheckIntervalSeconds", 30)), int(tg.get("UnhealthyThresholdCount", 2)))
        for tg in http_groups
    ]

    def dead_seconds(leaves_itself: bool) -> float:
        return max(
            (dead_target_seconds_deployed(*check, leaves_itself) for check in checks),
            default=60.0,
        )

    fleets = []
    for provider_id, provider in providers.items():
        scaling = provider["AutoScalingGroupProvider"]
        group_id = _ref(scaling["AutoScalingGroupArn"])
        group = groups[group_id]
        launch = templates[_ref(group["LaunchTemplate"]["LaunchTemplateId"])]
        instance_type = launch["LaunchTemplateData"]["InstanceType"]
        managed = scaling.get("ManagedScaling", {})
        service_id = next(
            key
            for key, service in services.items()
            if any(
                _ref(s["CapacityProvider"]) == provider_id
                for s in service.get("CapacityProviderStrategy", [])
            )
        )
        target_id, target = next(
            (key, t) for key, t in targets.items() if service_id in json.dumps(t.get("ResourceId"))
        )
        tracking = None
        for policy in policies.values():
            config = policy.get("TargetTrackingScalingPolicyConfiguration")
            if _ref(policy.get("ScalingTargetId")) == target_id and config:
                spec = config.get("CustomizedMetricSpecification")
                if spec is None:
                    raise TemplateError(f"{target_id}: only customized-metric target tracking is modelled")
                if (spec.get("MetricName"), spec.get("Statistic", "Average")) not in TRACKED:
                    raise TemplateError(
                        f"{target_id}: target tracking on {spec.get('MetricName')} "
                        f"({spec.get('Statistic', 'Average')}) is not modelled: the twin produces "
                        + ", ".join(f"{m} ({s})" for m, s in sorted(TRACKED))
                    )
                tracking = TargetTracking(
                    metric=spec["MetricName"],
                    statistic=spec.get("Statistic", "Average"),
                    dimensions={d["Name"]: str(d["Value"]) for d in spec.get("Dimensions", [])},
                    target=float(config["TargetValue"]),
                    # Application Auto Scaling's defaults for ECS services when a template omits them.
                    scale_out_cooldown=int(config.get("ScaleOutCooldown", 300)),
                    scale_in_cooldown=int(config.get("ScaleInCooldown", 300)),
                    namespace=str(spec.get("Namespace", "")),
                )
        pool = next((p for p in warm_pools.values() if _ref(p["AutoScalingGroupName"]) == group_id), None)
        leaves = _leaves_on_death(resources, services[service_id])
        fleets.append(
            FleetControl(
                instance_type=instance_type,
                service_id=service_id,
                asg_min=int(group["MinSize"]),
                asg_max=int(group["MaxSize"]),
                asg_schedule=tuple(
                    sorted(
                        (
                            _asg_action(key, a)
                            for key, a in asg_actions.items()
                            if _ref(a["AutoScalingGroupName"]) == group_id
                        ),
                        key=lambda b: b.at,
                    )
                ),
                service_min=int(target["MinCapacity"]),
                service_max=int(target["MaxCapacity"]),
                service_schedule=tuple(
                    sorted(
                        (_service_action(target_id, a) for a in target.get("ScheduledActions", [])),
                        key=lambda b: b.at,
                    )
                ),
                tracking=tracking,
                # 300 s is ECS's default instance warm-up when a template omits it.
                warmup_seconds=int(managed.get("InstanceWarmupPeriod", 300)),
                target_capacity=int(managed.get("TargetCapacity", 100)),
                warm_pool=WarmPool(int(pool.get("MinSize", 0)), pool.get("MaxGroupPreparedCapacity"))
                if pool
                else None,
                grace_seconds=int(services[service_id].get("HealthCheckGracePeriodSeconds", 0)),
                dead_target_seconds=dead_seconds(leaves),
                leaves_on_death=leaves,
                rollout=_rollout(services[service_id]),
            )
        )
    return tuple(sorted(fleets, key=lambda f: f.instance_type))


def _as_list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else [value]


def _allows(statement: dict[str, Any], action: str, resource_id: str) -> bool:
    """Whether an IAM statement allows `action` on the resource with this logical id (its Ref), or on any."""
    if statement.get("Effect") != "Allow" or "Condition" in statement:
        return False
    actions = [str(a).lower() for a in _as_list(statement.get("Action", []))]
    service = action.split(":")[0].lower()
    if not {action.lower(), f"{service}:*", "*"} & set(actions):
        return False
    return any(r == "*" or _ref(r) == resource_id for r in _as_list(statement.get("Resource", [])))


def _role_statements(resources: dict[str, Any], role_id: str) -> list[dict[str, Any]]:
    """Every statement of the role's inline policies and of the stack's policies attached to it."""
    statements = []
    role = resources.get(role_id, {}).get("Properties", {})
    for policy in role.get("Policies", []):
        statements += _as_list(policy["PolicyDocument"]["Statement"])
    for policy in _of_type(resources, "AWS::IAM::Policy").values():
        if any(_ref(r) == role_id for r in policy.get("Roles", [])):
            statements += _as_list(policy["PolicyDocument"]["Statement"])
    return statements


def _leaves_on_death(resources: dict[str, Any], service: dict[str, Any]) -> bool:
    """Whether the service's tasks take their own target out of every target group they are registered in
    when their engine dies (container/serving/leave_target_groups.py): for each of the service's load
    balancer entries, the container names the group at its port (TARGET_GROUP_ARN_<port>), and the task
    role may call DeregisterTargets on it. One missing half and the health check alone acts."""
    entries = service.get("LoadBalancers", [])
    task = resources.get(_ref(service.get("TaskDefinition")) or "", {}).get("Properties", {})
    role_id = _ref(task.get("TaskRoleArn"))
    if not entries or role_id is None:
        return False
    statements = _role_statements(resources, role_id)
    containers = {c.get("Name"): c for c in task.get("ContainerDefinitions", [])}
    for entry in entries:
        group = _ref(entry.get("TargetGroupArn"))
        container = containers.get(entry.get("ContainerName"), {})
        named = {v.get("Name"): _ref(v.get("Value")) for v in container.get("Environment", [])}
        if group is None or named.get(f"{TARGET_GROUP_ENV_PREFIX}{entry.get('ContainerPort')}") != group:
            return False
        if not any(_allows(statement, DEREGISTER_TARGETS_ACTION, group) for statement in statements):
            return False
    return True


def read_region(region: str, template: dict[str, Any]) -> RegionControl:
    resources = template["Resources"]
    alarms = {key: _alarm(key, p) for key, p in _of_type(resources, "AWS::CloudWatch::Alarm").items()}
    composites = tuple(
        CompositeAlarm(key, str(p.get("AlarmName", key)), _rule(p["AlarmRule"]), bool(p.get("AlarmActions")))
        for key, p in _of_type(resources, "AWS::CloudWatch::CompositeAlarm").items()
    )
    checks: dict[str, HealthCheck] = {}
    for key, props in _of_type(resources, "AWS::Route53::HealthCheck").items():
        config = props["HealthCheckConfig"]
        kind = config["Type"]
        if kind == "CLOUDWATCH_METRIC":
            checks[key] = HealthCheck(
                key,
                kind,
                alarm=_ref(config["AlarmIdentifier"]["Name"]),
                insufficient_data=config.get("InsufficientDataHealthStatus", "LastKnownStatus"),
            )
        elif kind == "CALCULATED":
            children = tuple(_ref(child) or str(child) for child in config.get("ChildHealthChecks", []))
            checks[key] = HealthCheck(
                key, kind, children=children, threshold=int(config.get("HealthThreshold", 1))
            )
        else:
            checks[key] = HealthCheck(key, kind)
    record_check = None
    parameters = []
    for props in _of_type(resources, "AWS::SSM::Parameter").values():
        parameters.append(str(props.get("Name", "")))
        if str(props.get("Name", "")).endswith("/routing-health-check"):
            record_check = _ref(props["Value"])
    namespaces = {
        str(variable["Value"])
        for task in _of_type(resources, "AWS::ECS::TaskDefinition").values()
        for container in task.get("ContainerDefinitions", [])
        for variable in container.get("Environment", [])
        if variable.get("Name") == "AWS_EMF_NAMESPACE"
    }
    if len(namespaces) > 1:
        raise TemplateError(f"{region}: one stack's containers publish to several namespaces {namespaces}")
    fleets = tuple(
        replace(
            fleet,
            rollout=replace(
                fleet.rollout,
                alarm_bake_minutes=max(
                    (
                        alarms[a].evaluation_periods * alarms[a].period // 60
                        for a in fleet.rollout.alarms
                        if a in alarms
                    ),
                    default=0,
                ),
            ),
        )
        for fleet in _fleets(resources)
    )
    return RegionControl(
        region,
        fleets,
        alarms,
        composites,
        checks,
        record_check,
        tuple(parameters),
        next(iter(namespaces), ""),
    )


def _routing_names(orchestrator_config: str, stacks: list[RegionControl]) -> dict[str, RegionControl]:
    """Each serving stack under the orchestrator target whose health-check parameter it writes: a cell's
    stack is found by what it publishes, not by how its stack is named."""
    from orchestrator.routing.config import parse_config

    by_parameter = {p: stack for stack in stacks for p in stack.parameters}
    found: dict[str, RegionControl] = {}
    for target in parse_config(orchestrator_config).regions:
        stack = by_parameter.get(target.health_check_parameter)
        if stack is None:
            raise TemplateError(
                f"no serving template writes {target.health_check_parameter} (routing target {target.name})"
            )
        found[target.name] = replace(stack, name=target.name)
    return found


def _orchestrator_config(resources: dict[str, Any], environment: dict[str, Any]) -> str:
    """The orchestrator's config JSON as deployed: the stack's SSM parameter that the function's environment
    names, checked against the digest beside it (orchestrator/routing/config_source.py)."""
    name = environment[PARAMETER_VARIABLE]
    for parameter in _of_type(resources, "AWS::SSM::Parameter").values():
        if parameter.get("Name") == name:
            config = decode(parameter["Value"], environment[DIGEST_VARIABLE], f"parameter {name}")
            return config.to_json()
    raise TemplateError(f"the orchestrator's config parameter {name} is not in its template")


def read_deployment(assembly: Path) -> Deployment:
    manifest = json.loads((assembly / "manifest.json").read_text())
    stacks: list[RegionControl] = []
    orchestrator = None
    home = "us-east-1"
    schedule = "rate(1 minute)"
    for name, artifact in manifest["artifacts"].items():
        if artifact.get("type") != "aws:cloudformation:stack":
            continue
        region = artifact["environment"].rsplit("/", 1)[-1]
        template = json.loads((assembly / artifact["properties"]["templateFile"]).read_text())
        resources = template["Resources"]
        functions = _of_type(resources, "AWS::Lambda::Function")
        found = [
            _orchestrator_config(resources, f["Environment"]["Variables"])
            for f in functions.values()
            if PARAMETER_VARIABLE in f.get("Environment", {}).get("Variables", {})
        ]
        if found:
            orchestrator, home = found[0], region
            for rule in _of_type(resources, "AWS::Events::Rule").values():
                schedule = rule.get("ScheduleExpression", schedule)
        if _of_type(resources, "AWS::ECS::CapacityProvider"):
            stacks.append(replace(read_region(region, template), stack=name))
    if orchestrator is None:
        raise TemplateError(f"{assembly}: no traffic orchestrator function in any template")
    if schedule != "rate(1 minute)":
        raise TemplateError(f"the orchestrator runs on {schedule}; the twin models rate(1 minute) only")
    return Deployment(_routing_names(orchestrator, stacks), orchestrator, home, schedule, assembly)
