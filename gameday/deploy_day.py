"""A deploy day: the real `make deploy` (ops/deploy_waves.py `main`) rolls the scenario's changes out while
the twin's day goes on.

The deploy code runs unchanged. What it touches is swapped from here, inside `_seams` (restored on exit):
- its CDK CLI seam, `deploy_stack` (ops/cdk_cli.py, as ops/deploy_waves imports it): the stack's change is
  applied to the twin's account instead: each fleet of the stack's cell starts an ECS rolling deployment of
  the new revision (gameday/deploys.py), and the call returns as `cdk deploy` does, once CloudFormation has
  waited for the services to be stable; a deployment the circuit breaker or a deployment alarm fails makes
  the stack's update fail and roll back (CloudFormation waits for the rollback too), and the CLI exit 1;
- `cdk synth` (`synthesize`, `synthesize_first_create`): the same synth as the game day's, as of the deploy's
  simulated start (the templates leave out scheduled actions already past);
- `run_waves`: given the twin's clock: its `sleep(seconds)` steps the twin that many simulated minutes (the
  traffic, the orchestrator and the alarms go on meanwhile) and `clock()` is simulated time; the module's
  `datetime` (the start-time check before each wave) reads the simulated time too;
- `subprocess` (`--all-at-once`'s `cdk deploy --all`): every stack's change at once through the same seam.
A cleaner seam in ops/ would be `main(..., cdk=<synth and deploy_stack>, sleep=, clock=, now=)`.

Its AWS reads go to moto, which holds what the twin knows, written after every minute by `Mirror`:
CloudFormation stacks (so DescribeStacks answers; their status, and the template's resources for
ListStackResources, set on moto's stack objects: `Mirror.set_stack`), ECS clusters tagged as the stacks tag
them and one service per fleet, whose deployments, desired and running counts and rolloutState are set on
moto's service objects (`Mirror._services`), the orchestrator function's AWS/Lambda Invocations and Errors,
the cells' composite alarms (gameday/aws.py mirrors them each minute already) and the global stack's alarms
(held OK: the twin does not evaluate the orchestrator's own alarms). moto's API can set none of the states
named here; those two methods are the only places that set them on its objects. The fleets' Auto Scaling
groups and the instance refreshes moto lacks: gameday/host_groups.py, hooked on the deploy's session."""

from __future__ import annotations

import contextlib
import io
import json
import math
import subprocess
import tempfile
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from functools import partial
from pathlib import Path
from typing import Any

from gameday.aws import ACCOUNT, _botocore_session
from gameday.deploys import COMPLETED, FAILED, IN_PROGRESS
from gameday.host_groups import HostGroups
from gameday.loop import DayOver, Minute, Twin
from gameday.scenario import Deploy
from orchestrator.routing.config_source import PARAMETER_VARIABLE
from settings.schema import Settings

# How long CloudFormation waits for an ECS service to be stable before it fails the update: the twin's
# figure (AWS states none for ECS; a stuck rollout is bounded by the circuit breaker, not by this).
STABILIZE_MINUTES = 180
UPDATE_MINUTES = 1  # a stack update that moves no task: the changed resources themselves
# A new stack's first creation (VPC, NAT gateways, the load balancer, the cluster): the twin's figure.
CREATE_MINUTES = 15
STACK_BODY = json.dumps({"Resources": {"Handle": {"Type": "AWS::CloudFormation::WaitConditionHandle"}}})


@dataclass
class StackDeploy:
    stack: str
    started: int  # minute
    ended: int | None = None
    failed: bool = False


@dataclass
class DeployRecord:
    """What one scheduled deploy did: the deploy command's exit status and output, each stack it deployed
    (in order), and every ECS deployment it started (the fleets' rollouts, rollbacks included)."""

    deploy: Deploy
    started: int
    ended: int | None = None  # None: still running when the day ended
    status: int | None = None
    output: str = ""
    stacks: list[StackDeploy] = field(default_factory=list)
    # Routing target -> instance type -> the fleet's rolling deployments of the day, in order.
    rollouts: dict[str, dict[str, list[Any]]] = field(default_factory=dict)
    cells_by_stack: dict[str, list[str]] = field(default_factory=dict)  # stack -> its routing targets
    cpu_seconds: float = 0.0  # the deploy command's own CPU time (the twin's minutes it waited included)
    planned_minutes: float = 0.0  # the dry run's bound: every wave's stable timeout and bake


def _resolved(value: Any, physical: dict[str, str]) -> str:
    """A template value as the twin's account holds it: a Ref to one of the stack's resources is its
    physical name (Mirror._resources)."""
    if isinstance(value, dict) and set(value) == {"Ref"}:
        return physical.get(value["Ref"], value["Ref"])
    return str(value)


class Mirror:
    """The twin's account in moto: what the deploy code reads."""

    def __init__(self, twin: Twin, settings: Settings, assembly: Path, deployed: set[str]) -> None:
        self.twin = twin
        self.settings = settings
        self.assembly = assembly
        manifest = json.loads((assembly / "manifest.json").read_text())
        self.regions = {
            name: artifact["environment"].rsplit("/", 1)[-1]
            for name, artifact in manifest["artifacts"].items()
            if artifact.get("type") == "aws:cloudformation:stack"
        }
        self.templates = {
            name: manifest["artifacts"][name]["properties"]["templateFile"] for name in self.regions
        }
        self.status = {name: "CREATE_COMPLETE" for name in self.regions if name in deployed}
        self._created: set[str] = set()
        self._clusters: set[str] = set()
        self._target_groups: dict[str, list[str]] = {}
        self._registered: dict[str, int] = {}

    # ---- CloudFormation -----------------------------------------------------------------------------

    def _stack(self, name: str) -> Any:
        from moto.cloudformation.models import cloudformation_backends

        backend = cloudformation_backends[ACCOUNT][self.regions[name]]
        return next((s for s in backend.stacks.values() if s.name == name), None)

    def set_stack(self, name: str, status: str) -> None:
        """The stack's CloudFormation status (created in moto the first time)."""
        self.status[name] = status
        if name not in self._created:
            client = self.twin.orchestrator.client("cloudformation", self.regions[name])
            client.create_stack(StackName=name, TemplateBody=STACK_BODY)
            self._created.add(name)
            # ListStackResources answers the template's resources (moto's API creates only what it can
            # model, and none of a stack this size): physical ids as the twin names them in moto.
            self._stack(name).resource_map = self._resources(name)
        self._stack(name).status = status  # moto's API cannot set a stack's status

    def _resources(self, stack: str) -> dict[str, Any]:
        from types import SimpleNamespace

        template = json.loads((self.assembly / self.templates[stack]).read_text())
        region = self.regions[stack]
        services = {
            fleet.control.service_id: instance_type
            for twin in self.twin.cells.values()
            if twin.control.stack == stack
            for instance_type, fleet in twin.fleets.items()
        }
        found = {}
        for key, resource in template["Resources"].items():
            kind = resource["Type"]
            if kind == "AWS::ECS::Cluster":
                physical = f"{stack}-cluster"
            elif kind == "AWS::ECS::Service" and key in services:
                physical = (
                    f"arn:aws:ecs:{region}:{ACCOUNT}:service/{stack}-cluster/{self._service(services[key])}"
                )
            elif kind == "AWS::ECS::TaskDefinition":
                physical = f"arn:aws:ecs:{region}:{ACCOUNT}:task-definition/{stack}-{key}:1"
            else:
                physical = f"{stack}-{key}"[:64]
            found[key] = SimpleNamespace(
                logical_resource_id=key, physical_resource_id=physical, cf_resource_type=kind
            )
        return found

    def orchestrator_function(self, stack: str) -> str | None:
        """The physical name of the global stack's orchestrator function (as `_resources` names it)."""
        template = json.loads((self.assembly / self.templates[stack]).read_text())
        for key, resource in template["Resources"].items():
            variables = resource.get("Properties", {}).get("Environment", {}).get("Variables", {})
            if resource["Type"] == "AWS::Lambda::Function" and PARAMETER_VARIABLE in variables:
                return str(resource["Properties"].get("FunctionName", f"{stack}-{key}"[:64]))
        return None

    def invocations(self, function: str, region: str, minute: int, runs: int, errors: int) -> None:
        """AWS/Lambda's own metrics of the orchestrator's scheduled runs in the minute (Lambda publishes
        Invocations and Errors per function, one-minute period): what a bake on the orchestrator reads."""
        from moto.cloudwatch.models import cloudwatch_backends

        when = (self.twin.start + timedelta(minutes=minute)).astimezone(UTC).replace(tzinfo=None)
        dimensions = [{"Name": "FunctionName", "Value": function}]
        data = [
            {
                "MetricName": "Invocations",
                "Value": runs,
                "Unit": "Count",
                "Dimensions": dimensions,
                "Timestamp": when,
            },
            {
                "MetricName": "Errors",
                "Value": errors,
                "Unit": "Count",
                "Dimensions": dimensions,
                "Timestamp": when,
            },
        ]
        cloudwatch_backends[ACCOUNT][region].put_metric_data("AWS/Lambda", data)

    def global_alarms(self, stack: str) -> None:
        """The global stack's own alarms, named as CloudFormation names them (`<stack>-<id>-<suffix>`)."""
        template = json.loads((self.assembly / self.templates[stack]).read_text())
        cloudwatch = self.twin.orchestrator.client("cloudwatch", self.regions[stack])
        physical = {key: found.physical_resource_id for key, found in self._resources(stack).items()}
        for key, resource in template["Resources"].items():
            properties = resource["Properties"]
            if resource["Type"] != "AWS::CloudWatch::Alarm" or "AlarmName" in properties:
                continue
            name = f"{stack}-{key}-GAMEDAY"
            # An alarm on one metric keeps it (the deploy reads the orchestrator's Invocations from its
            # NotRunning alarm, ops/deploy_readiness.py run_metric); a metric-math one gets a stand-in.
            metric = (
                {
                    "MetricName": properties["MetricName"],
                    "Namespace": properties["Namespace"],
                    "Dimensions": [
                        {"Name": d["Name"], "Value": _resolved(d["Value"], physical)}
                        for d in properties.get("Dimensions", [])
                    ],
                    "Statistic": properties.get("Statistic", "Sum"),
                    "Period": int(properties.get("Period", 60)),
                }
                if "MetricName" in properties
                else {
                    "MetricName": "GlobalStandIn",
                    "Namespace": "GameDay",
                    "Statistic": "Maximum",
                    "Period": 60,
                }
            )
            cloudwatch.put_metric_alarm(
                AlarmName=name,
                EvaluationPeriods=int(properties.get("EvaluationPeriods", 1)),
                Threshold=float(properties.get("Threshold", 1)),
                ComparisonOperator=properties.get("ComparisonOperator", "GreaterThanOrEqualToThreshold"),
                TreatMissingData=properties.get("TreatMissingData", "missing"),
                **metric,
            )
            cloudwatch.set_alarm_state(AlarmName=name, StateValue="OK", StateReason="game day")

    # ---- ECS ------------------------------------------------------------------------------------------

    def _cluster(self, name: str) -> str:
        twin = self.twin.cells[name]
        cluster = f"{twin.control.stack}-cluster"
        if cluster not in self._clusters:
            ecs = self.twin.orchestrator.client("ecs", twin.region)
            tags = [{"key": "project", "value": self.settings.project}]
            if name != twin.region:
                tags.append({"key": "cell", "value": name})
            ecs.create_cluster(clusterName=cluster, tags=tags)
            family = f"{twin.control.stack}-serving"
            ecs.register_task_definition(
                family=family, containerDefinitions=[{"name": "serving", "image": "serving", "memory": 512}]
            )
            for instance_type in twin.fleets:
                ecs.create_service(
                    cluster=cluster, serviceName=self._service(instance_type), taskDefinition=family
                )
            self._clusters.add(cluster)
        return cluster

    @staticmethod
    def _service(instance_type: str) -> str:
        return f"serving-{instance_type.replace('.', '-')}"

    def write(self, minute: int) -> None:
        """Every cell whose stack exists: its services as ECS would describe them now, and its load
        balancer's target groups holding the tasks in service."""
        for name, twin in self.twin.cells.items():
            if twin.control.stack in self.status:
                self._services(name, self._cluster(name), minute)
                self._targets(name)

    # ---- ELB ------------------------------------------------------------------------------------------

    def _load_balancer(self, name: str) -> list[str]:
        """The cell's two target groups (HTTP and gRPC) on a load balancer tagged as the stacks tag it
        (created in moto the first time); their ARNs."""
        if name in self._target_groups:
            return self._target_groups[name]
        twin = self.twin.cells[name]
        ec2 = self.twin.orchestrator.client("ec2", twin.region)
        elbv2 = self.twin.orchestrator.client("elbv2", twin.region)
        vpc = ec2.create_vpc(CidrBlock="10.0.0.0/16")["Vpc"]["VpcId"]
        subnets = [
            ec2.create_subnet(
                VpcId=vpc, CidrBlock=f"10.0.{16 * k}.0/20", AvailabilityZone=f"{twin.region}{z}"
            )["Subnet"]["SubnetId"]
            for k, z in enumerate("ab")
        ]
        tags = [{"Key": "project", "Value": self.settings.project}]
        if name != twin.region:
            tags.append({"Key": "cell", "Value": name})
        # ELB names: 32 characters at most, letters, digits and single hyphens inside.
        slug = f"cell{len(self._target_groups)}"
        balancer = elbv2.create_load_balancer(Name=f"{slug}-alb", Subnets=subnets, Tags=tags)
        arn = balancer["LoadBalancers"][0]["LoadBalancerArn"]
        groups = []
        for port, kind in ((8000, "http"), (8001, "grpc")):
            group = elbv2.create_target_group(
                Name=f"{slug}-{kind}", Protocol="HTTP", Port=port, VpcId=vpc, TargetType="ip"
            )["TargetGroups"][0]["TargetGroupArn"]
            elbv2.create_listener(
                LoadBalancerArn=arn,
                Protocol="HTTP",
                Port=port,
                DefaultActions=[{"Type": "forward", "TargetGroupArn": group}],
            )
            groups.append(group)
        self._target_groups[name] = groups
        return groups

    def _targets(self, name: str) -> None:
        """Each target group holds the cell's tasks in service, registered healthy: a task still in its
        cold start is running for ECS but not yet healthy for ELB, which the deploy's wait tells apart."""
        twin = self.twin.cells[name]
        wanted = sum(fleet.in_service for fleet in twin.fleets.values())
        if self._registered.get(name) == wanted:
            return
        elbv2 = self.twin.orchestrator.client("elbv2", twin.region)
        had = self._registered.get(name, 0)
        for port, group in zip((8000, 8001), self._load_balancer(name), strict=True):
            targets = [
                {"Id": f"10.0.{i // 250}.{i % 250 + 4}", "Port": port}
                for i in range(min(had, wanted), max(had, wanted))
            ]
            for chunk in range(0, len(targets), 100):
                batch = targets[chunk : chunk + 100]
                if wanted > had:
                    elbv2.register_targets(TargetGroupArn=group, Targets=batch)
                else:
                    elbv2.deregister_targets(TargetGroupArn=group, Targets=batch)
        self._registered[name] = wanted

    def _services(self, name: str, cluster: str, minute: int) -> None:
        """The one place moto's ECS objects are set directly: moto's API has no call that sets a service's
        deployments, counts or rolloutState (AWS sets them from the tasks)."""
        from moto.ecs.models import ecs_backends

        twin = self.twin.cells[name]
        backend = ecs_backends[ACCOUNT][twin.region]
        when = self.twin.start + timedelta(minutes=minute)
        for instance_type, fleet in twin.fleets.items():
            service = backend.services[f"{cluster}:{self._service(instance_type)}"]
            family = f"arn:aws:ecs:{twin.region}:{ACCOUNT}:task-definition/{twin.control.stack}-serving"
            old_running = fleet.tasks
            deployments = []
            rollout = fleet.rollout
            if rollout is not None:
                state = rollout.state
                deployments.append(
                    _deployment(
                        f"{rollout.revision}-{rollout.started}",
                        "PRIMARY",
                        f"{family}:{rollout.revision}",
                        fleet.desired,
                        rollout.new_serving + rollout.new_starting,
                        rollout.failed,
                        state,
                        rollout.reason,
                        when,
                    )
                )
                failed = [r for r in fleet.rollouts if r.state == FAILED and r is not rollout]
                if rollout.rolling_back and failed:
                    # The failed deployment, ACTIVE beside its rollback until its tasks are gone.
                    last = failed[-1]
                    deployments.append(
                        _deployment(
                            f"{last.revision}-{last.started}",
                            "ACTIVE",
                            f"{family}:{last.revision}",
                            0,
                            old_running,
                            last.failed,
                            FAILED,
                            last.reason,
                            when,
                        )
                    )
                elif old_running and state == IN_PROGRESS:
                    deployments.append(
                        _deployment(
                            f"{fleet.revision}-0",
                            "ACTIVE",
                            f"{family}:{fleet.revision}",
                            0,
                            old_running,
                            0,
                            COMPLETED,
                            "",
                            when,
                        )
                    )
            else:
                deployments.append(
                    _deployment(
                        f"{fleet.revision}-0",
                        "PRIMARY",
                        f"{family}:{fleet.revision}",
                        fleet.desired,
                        old_running,
                        0,
                        COMPLETED,
                        "",
                        when,
                    )
                )
            service.desired_count = fleet.desired
            service.running_count = sum(d["runningCount"] for d in deployments)
            service.pending_count = max(fleet.desired - service.running_count, 0)
            service.deployments = deployments
            service.task_definition = deployments[0]["taskDefinition"]


def _deployment(
    key: str,
    status: str,
    task_definition: str,
    desired: int,
    running: int,
    failed: int,
    rollout: str,
    reason: str,
    when: datetime,
) -> dict[str, Any]:
    return {
        "id": f"ecs-svc/{key}",
        "status": status,
        "taskDefinition": task_definition,
        "desiredCount": desired,
        "pendingCount": max(desired - running, 0),
        "runningCount": running,
        "failedTasks": failed,
        "rolloutState": rollout,
        "rolloutStateReason": reason or f"ECS deployment {rollout.lower().replace('_', ' ')}.",
        "launchType": "EC2",
        "createdAt": when.astimezone(UTC).replace(tzinfo=None),
        "updatedAt": when.astimezone(UTC).replace(tzinfo=None),
    }


class DeployDay:
    """Runs the scenario's deploys from the twin's minutes (`Twin.before_minute`)."""

    def __init__(
        self,
        twin: Twin,
        settings: Settings,
        config: Path,
        assembly: Path,
        extra_args: Sequence[str] = (),
    ) -> None:
        self.twin = twin
        self.settings = settings
        self.config = config
        self.assembly = assembly
        self.extra_args = list(extra_args)  # the mutation tests' (`--all-at-once`)
        self.pending = list(twin.scenario.deploys)
        self.records: list[DeployRecord] = []
        self.mirror: Mirror | None = None
        self.function: str | None = None  # the orchestrator's function, for its AWS/Lambda metrics
        self._global: str | None = None
        self.current: DeployRecord | None = None
        self.host_groups: HostGroups | None = None  # the fleets' groups and their instance refreshes
        twin.before_minute = self.before_minute
        twin.after_minute = self.after_minute

    def before_minute(self, minute: int) -> None:
        if self.twin.orchestrator is None or not self.pending or self.pending[0].at != minute:
            return
        deploy = self.pending.pop(0)
        if self.mirror is None:
            absent = {d.cell for d in self.twin.scenario.deploys if d.change == "new_cell"}
            deployed = {twin.control.stack for name, twin in self.twin.cells.items() if name not in absent}
            deployed.add(self._global_stack())
            self.mirror = Mirror(self.twin, self.settings, self.assembly, deployed)
            mirror = self.mirror
            self.host_groups = HostGroups(self.twin, self.settings.project, lambda: set(mirror.status))
            for stack in sorted(self.mirror.status):
                self.mirror.set_stack(stack, "CREATE_COMPLETE")
            self.mirror.global_alarms(self._global_stack())
            self.function = self.mirror.orchestrator_function(self._global_stack())
            self.mirror.write(minute - 1)
        self.run(deploy)

    def after_minute(self, result: Minute) -> None:
        if self.host_groups is not None:
            self.host_groups.step(result.minute)
        if self.mirror is not None:
            self.mirror.write(result.minute)
            if self.function is not None:
                runs = sum(1 for e in result.events if e.startswith(("orchestrator:", "orchestrator failed")))
                errors = sum(1 for e in result.events if e.startswith("orchestrator failed"))
                self.mirror.invocations(
                    self.function,
                    self.mirror.regions[self._global_stack()],
                    result.minute,
                    max(runs, 1),
                    errors,
                )

    def _global_stack(self) -> str:
        if self._global is None:
            from ops.deploy_waves import _stack_names

            self._global = _stack_names(self.settings).global_stack
        return self._global

    def run(self, deploy: Deploy) -> DeployRecord:
        import ops.deploy_waves as waves

        cpu = time.process_time()
        record = DeployRecord(deploy, self.twin.now_minute + 1)
        self.records.append(record)
        self.current = record
        plan = waves.plan_waves(self.settings, waves._stack_names(self.settings))
        bake = self.settings.deploy.bake_minutes
        record.planned_minutes = sum(
            (0 if w.region is None else w.stable_timeout_seconds / 60) + bake for w in plan
        )
        out = io.StringIO()
        with tempfile.TemporaryDirectory(prefix="gameday-deploy-") as directory:
            here = Path(directory) / "cdk.out"
            argv = [
                str(self.config),
                "--assembly",
                str(here),
                "--approve",
                "--skip-preflight",
                *deploy.args,
                *self.extra_args,
            ]
            with self._seams(deploy), contextlib.redirect_stdout(out), contextlib.redirect_stderr(out):
                try:
                    record.status = waves.main(
                        argv, session_factory=self._session, sleep=self.sleep, clock=self.clock, now=self.now
                    )
                    record.ended = self.twin.now_minute + 1
                except DayOver:
                    record.status = None
        record.output = out.getvalue()
        record.cpu_seconds = time.process_time() - cpu
        for name, twin in self.twin.cells.items():
            record.cells_by_stack.setdefault(twin.control.stack, []).append(name)
        for name, twin in self.twin.cells.items():
            record.rollouts[name] = {t: list(f.rollouts) for t, f in twin.fleets.items()}
        self.current = None
        return record

    def _session(self) -> Any:
        import boto3

        session = boto3.Session(
            botocore_session=_botocore_session(), region_name=self.twin.deployment.home_region
        )
        if self.host_groups is not None:
            # The groups written as the deploy reads them; the refresh calls moto lacks answered.
            self.host_groups.register(session.events)
        return session

    # ---- the seams ----------------------------------------------------------------------------------

    def sleep(self, seconds: float) -> None:
        for _ in range(math.ceil(max(seconds, 0.0) / 60 - 1e-9)):
            self.twin.advance()

    def clock(self) -> float:
        return (self.twin.now_minute + 1) * 60.0

    def now(self) -> datetime:
        """Wall time for the deploy's CloudWatch queries and start-time checks: the simulated moment."""
        return (self.twin.start + timedelta(minutes=self.twin.now_minute + 1)).astimezone(UTC)

    def deploy_stack(self, deploy: Deploy, cdk: Sequence[str], assembly: Path, stack: str, **_: Any) -> None:
        """`cdk deploy` of one stack: the change applied to the twin, returned once CloudFormation would
        be done with it."""
        assert self.mirror is not None and self.current is not None
        started = self.twin.now_minute + 1
        entry = StackDeploy(stack, started)
        self.current.stacks.append(entry)
        creating = stack not in self.mirror.status
        self.mirror.set_stack(stack, "CREATE_IN_PROGRESS" if creating else "UPDATE_IN_PROGRESS")
        fleets = [
            fleet
            for twin in self.twin.cells.values()
            if twin.control.stack == stack
            for fleet in twin.fleets.values()
        ]
        if creating:
            # The first creation, from the first-create assembly: fleets at zero tasks, no schedule.
            for _ in range(CREATE_MINUTES):
                self.twin.advance()
        elif deploy.change == "new_cell" and fleets and not any(f.asg_max for f in fleets):
            # The update after the first creation: the fleets' bounds as the template sets them now
            # (Application Auto Scaling raises the desired count to the new minimum).
            now = self.twin.start + timedelta(minutes=started)
            for fleet in fleets:
                bounds = fleet.control.bounds_at(now)
                fleet.asg_min, fleet.asg_max, fleet.service_min, fleet.service_max = bounds
                fleet.desired = max(fleet.desired, fleet.service_min)
        elif deploy.change == "image":
            for fleet in fleets:
                fleet.deploy(deploy.revision.name, started, deploy.revision.crashes)
        elif deploy.change == "ami":
            # The launch template's new version: the group replaces no host for it (the template sets no
            # rolling update policy; a host roll is the deploy code's to start).
            for fleet in fleets:
                fleet.change_ami(deploy.revision.name)
        for _ in range(UPDATE_MINUTES):
            self.twin.advance()
        waited = 0
        while waited < STABILIZE_MINUTES and any(
            (f.rollout is not None and not f.rollout.done) or f.in_service < f.desired for f in fleets
        ):
            # CloudFormation waits for each service to be stable: its deployment done, as many tasks
            # running as desired (a new cell's first tasks: hosts launched, booted, cold-started).
            self.twin.advance()
            waited += 1
        entry.ended = self.twin.now_minute + 1
        failed = any(r.state == FAILED and r.started >= started for f in fleets for r in f.rollouts)
        if failed or waited >= STABILIZE_MINUTES:
            entry.failed = True
            self.mirror.set_stack(stack, "ROLLBACK_COMPLETE" if creating else "UPDATE_ROLLBACK_COMPLETE")
            raise subprocess.CalledProcessError(1, ["cdk", "deploy", stack])
        self.mirror.set_stack(stack, "CREATE_COMPLETE" if creating else "UPDATE_COMPLETE")

    @contextlib.contextmanager
    def _seams(self, deploy: Deploy) -> Iterator[None]:
        import ops.deploy_waves as waves

        day = self

        class Subprocess:
            """`cdk deploy --all` (`--all-at-once`): every stack's change at once; anything else refused."""

            CalledProcessError = subprocess.CalledProcessError

            @staticmethod
            def run(command: Sequence[str], **_: Any) -> subprocess.CompletedProcess[str]:
                if "deploy" in command and "--all" in command:
                    assert day.mirror is not None
                    stacks = sorted(day.mirror.regions)
                    try:
                        day._deploy_all(deploy, stacks)
                    except subprocess.CalledProcessError as error:
                        return subprocess.CompletedProcess(list(command), error.returncode)
                    return subprocess.CompletedProcess(list(command), 0)
                raise AssertionError(f"the game day runs no command: {list(command)}")

        saved = {
            name: getattr(waves, name)
            for name in (
                "deploy_stack",
                "synthesize",
                "synthesize_first_create",
                "deploy_stacks",
                "subprocess",
            )
        }
        waves.deploy_stack = partial(self.deploy_stack, deploy)
        waves.synthesize = partial(self._synthesize, False)
        waves.synthesize_first_create = partial(self._synthesize, True)
        waves.deploy_stacks = partial(self.deploy_stacks, deploy)
        waves.subprocess = Subprocess  # type: ignore[assignment]
        try:
            yield
        finally:
            for name, value in saved.items():
                setattr(waves, name, value)

    def _synthesize(self, first_create: bool, cdk: Sequence[str], config: str, assembly: Path) -> None:
        """`cdk synth` as `make deploy` runs it now: the assembly as of the simulated moment."""
        from gameday.templates import synthesize

        now = self.twin.start + timedelta(minutes=self.twin.now_minute + 1)
        built = synthesize(Path(config), at=now, first_create=first_create)
        if assembly.is_symlink() or assembly.exists():
            assembly.unlink()
        assembly.symlink_to(built, target_is_directory=True)

    def deploy_stacks(
        self, deploy: Deploy, cdk: Sequence[str], assembly: Path, stacks: Sequence[str], **_: Any
    ) -> None:
        """`cdk deploy --concurrency N` of several stacks (the hotfix path's cells of a region)."""
        self._deploy_all(deploy, stacks)

    def _deploy_all(self, deploy: Deploy, stacks: Sequence[str]) -> None:
        """Several stacks at once (`--all`, or `--concurrency`): each of their fleets' rollouts starts in the
        same minute; CloudFormation's deploys of them run side by side, the CLI waits for all."""
        assert self.mirror is not None and self.current is not None
        started = self.twin.now_minute + 1
        fleets = [
            fleet
            for twin in self.twin.cells.values()
            if twin.control.stack in stacks
            for fleet in twin.fleets.values()
        ]
        for stack in stacks:
            self.current.stacks.append(StackDeploy(stack, started))
            self.mirror.set_stack(stack, "UPDATE_IN_PROGRESS")
        if deploy.change == "image":
            for fleet in fleets:
                fleet.deploy(deploy.revision.name, started, deploy.revision.crashes)
        elif deploy.change == "ami":
            for fleet in fleets:
                fleet.change_ami(deploy.revision.name)
        self.twin.advance()
        waited = 0
        while (
            any(f.rollout is not None and not f.rollout.done for f in fleets) and waited < STABILIZE_MINUTES
        ):
            self.twin.advance()
            waited += 1
        failed = False
        for entry in self.current.stacks:
            fleets_of = [
                f
                for t in self.twin.cells.values()
                if t.control.stack == entry.stack
                for f in t.fleets.values()
            ]
            entry.ended = self.twin.now_minute + 1
            entry.failed = any(
                r.state == FAILED and r.started >= started for f in fleets_of for r in f.rollouts
            )
            failed = failed or entry.failed
            self.mirror.set_stack(
                entry.stack, "UPDATE_ROLLBACK_COMPLETE" if entry.failed else "UPDATE_COMPLETE"
            )
        if failed:
            raise subprocess.CalledProcessError(1, ["cdk", "deploy", "--all"])
