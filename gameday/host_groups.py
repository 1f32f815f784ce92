"""A deploy day's Auto Scaling groups: each fleet's hosts in moto as the deploy's host roll reads them
(ops/preflight/aws.py `fleet_groups`), and the instance refreshes it starts, answered from the twin.

`HostGroups` writes, per fleet of a cell whose stack exists, a launch template whose latest version boots the
fleet's AMI and an Auto Scaling group tagged as the stacks tag it (`project`, and `cell` in a region of
several cells), holding one moto instance per host, each with the AMI it booted. It writes them just in time:
before each DescribeAutoScalingGroups the deploy makes (a botocore before-call handler), so the counts per AMI
are the twin's at that moment and a day with no host roll pays nothing. moto's API cannot put an instance
into a group without the group launching or terminating others: `HostGroups._members` sets the group's
members on moto's object, the only place that does.

`InstanceRefreshes` is a stand-in for what moto 5.2.5 lacks: StartInstanceRefresh, DescribeInstanceRefreshes
and CancelInstanceRefresh are answered from the twin's model of a refresh, through botocore's before-call
hook (as gameday/aws.py injects API faults), shaped as the EC2 Auto Scaling API reference gives them
("StartInstanceRefresh", "InstanceRefresh", "CancelInstanceRefresh"). The model, in the twin's minutes:
- MinHealthyPercentage 100 with MaxHealthyPercentage above it launches replacements first, a batch of
  (max - 100)% of the group's hosts at most, each booting from the launch template's AMI (BOOT_MINUTES);
- a new host counts as updated once in service and its InstanceWarmup has passed ("InstanceRefresh",
  PercentageComplete); then an old host is drained (ECS managed draining starts its task on the new host:
  a cold start, the old task serving until it is ready) and terminated: from then its task runs on the new
  AMI, failing as the scenario's revision says (gameday/loop.py counts a fleet's `ami_hosts`' tasks);
- checkpoints: once the share of the group's hosts on the new AMI reaches a checkpoint percentage, the
  refresh pauses CheckpointDelay seconds ("Add checkpoints to an instance refresh");
- Cancel stops new replacements; replacements already made stay ("Cancel an instance refresh"); hosts
  launched for a replacement not made yet are terminated."""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from types import SimpleNamespace
from typing import Any

from gameday.aws import ACCOUNT
from gameday.control import BOOT_MINUTES, COLD_START_MINUTES, FleetState

AUTOSCALING = "auto-scaling"  # botocore's hyphenized service id, as its events name it
STANDIN = ("StartInstanceRefresh", "DescribeInstanceRefreshes", "CancelInstanceRefresh")


def image_id(ami: str) -> str:
    """The twin's AMI name as an image id (`current` is the AMI the day starts on)."""
    return ami if ami.startswith("ami-") else f"ami-{ami}"


@dataclass
class Batch:
    count: int
    launched: int  # minute
    updated: int  # in service and warmed up: the old hosts' tasks start moving
    moved: int  # their tasks ready on the new hosts: the old hosts terminated


@dataclass
class Refresh:
    """One group's instance refresh in the twin."""

    id: str
    group: str
    fleet: FleetState
    image: str
    started: int
    preferences: dict[str, Any]
    total: int  # hosts to replace when it started
    status: str = "Pending"
    reason: str = ""
    replaced: int = 0  # old hosts terminated, their tasks on new hosts
    batches: list[Batch] = field(default_factory=list)
    paused_until: int | None = None
    checkpoints_done: int = 0
    ended: int | None = None

    @property
    def in_flight(self) -> int:
        return sum(b.count for b in self.batches)

    @property
    def percent(self) -> int:
        return 100 if not self.total else math.floor(100 * self.replaced / self.total)

    def step(self, minute: int) -> None:
        if self.status in ("Successful", "Cancelled", "Failed"):
            return
        if self.status == "Cancelling":
            self.batches = [b for b in self.batches if b.updated <= minute]  # launched, not updated: gone
            if not self.batches:
                self.status, self.reason, self.ended = "Cancelled", "", minute
            else:
                self._move(minute)
            return
        self.status = "InProgress"
        self._move(minute)
        if self.replaced >= self.total and not self.batches:
            self.status, self.reason, self.ended = "Successful", "", minute
            return
        if self.paused_until is not None:
            if minute < self.paused_until:
                return
            self.paused_until, self.reason = None, ""
        checkpoints = list(self.preferences.get("CheckpointPercentages") or [100])
        group = max(self.fleet.all_hosts, 1)
        while self.checkpoints_done < len(checkpoints) - 1 and self.in_flight == 0:
            wanted = math.ceil(group * checkpoints[self.checkpoints_done] / 100)
            if self.fleet.ami_hosts < min(wanted, self.total):
                break
            self.checkpoints_done += 1
            delay = int(self.preferences.get("CheckpointDelay", 3600))
            self.paused_until = minute + math.ceil(delay / 60)
            self.reason = f"Waiting for checkpoint: {checkpoints[self.checkpoints_done - 1]}% reached"
            return
        if self.in_flight:
            return  # one batch at a time: the next waits for this one's replacements
        surge = max(int(self.preferences.get("MaxHealthyPercentage", 100)) - 100, 0)
        batch = max(1, math.floor(group * surge / 100)) if surge else 1
        wanted = math.ceil(group * checkpoints[self.checkpoints_done] / 100)
        step = min(batch, self.total - self.replaced, max(wanted - self.fleet.ami_hosts, 1))
        if step <= 0:
            return
        warmup = math.ceil(int(self.preferences.get("InstanceWarmup", 0)) / 60)
        updated = minute + BOOT_MINUTES + warmup
        self.batches.append(Batch(step, minute, updated, updated + COLD_START_MINUTES))

    def _move(self, minute: int) -> None:
        """Batches whose tasks are ready on their new hosts: the old hosts leave, the new ones hold them."""
        done = [b for b in self.batches if b.moved <= minute]
        self.batches = [b for b in self.batches if b.moved > minute]
        for batch in done:
            moved = min(batch.count, max(self.fleet.hosts - self.fleet.ami_hosts, 0))
            self.fleet.ami_hosts += moved
            self.fleet.ami_booted += batch.count
            self.replaced += batch.count

    def new_hosts(self, minute: int) -> int:
        """Hosts launched for replacements not made yet that have booted (instances in the group)."""
        return sum(b.count for b in self.batches if b.launched + BOOT_MINUTES <= minute)

    def describe(self, when: Callable[[int], datetime]) -> dict[str, Any]:
        answer: dict[str, Any] = {
            "InstanceRefreshId": self.id,
            "AutoScalingGroupName": self.group,
            "Status": self.status,
            "StartTime": when(self.started),
            "PercentageComplete": self.percent,
            "InstancesToUpdate": self.total - self.replaced,
            "ProgressDetails": {
                "LivePoolProgress": {
                    "PercentageComplete": self.percent,
                    "InstancesToUpdate": self.total - self.replaced,
                }
            },
            "Preferences": self.preferences,
            "Strategy": "Rolling",
        }
        if self.reason:
            answer["StatusReason"] = self.reason
        if self.ended is not None:
            answer["EndTime"] = when(self.ended)
        return answer


class HostGroups:
    """The fleets' groups in moto, and the refreshes of them (see the module's docstring)."""

    def __init__(self, twin: Any, project: str, stacks: Callable[[], set[str]]) -> None:
        self.twin = twin
        self.project = project
        self.stacks = stacks  # the stacks that exist now: their cells' groups are mirrored
        self.groups: dict[str, tuple[str, str]] = {}  # group -> (cell, instance type)
        self._templates: dict[str, tuple[str, str]] = {}  # group -> (launch template id, image)
        self._instances: dict[str, dict[str, list[str]]] = {}  # group -> image -> instance ids
        self.refreshes: dict[str, list[Refresh]] = {}  # group -> its refreshes, newest last
        self._subnets: dict[str, str] = {}

    @staticmethod
    def name(cell: str, instance_type: str) -> str:
        return f"{cell.replace('/', '-')}-hosts-{instance_type.replace('.', '-')}"

    # ---- botocore hooks ------------------------------------------------------------------------------

    def register(self, events: Any) -> None:
        events.register(f"before-parameter-build.{AUTOSCALING}", self._keep_params)
        events.register(f"before-call.{AUTOSCALING}", self._answer)

    @staticmethod
    def _keep_params(params: dict[str, Any], context: dict[str, Any], **_: Any) -> None:
        context["gameday_params"] = dict(params)

    def _answer(self, model: Any, context: dict[str, Any], **_: Any) -> Any:
        region = context.get("client_region") or self.twin.deployment.home_region
        params = context.get("gameday_params", {})
        if model.name == "DescribeAutoScalingGroups":
            self.write(region)
            return None  # moto answers
        if model.name not in STANDIN:
            return None
        minute = self.twin.now_minute + 1
        group = params.get("AutoScalingGroupName", "")
        if group not in self.groups:
            return _error(
                "ValidationError", f"AutoScalingGroup name not found - AutoScalingGroup {group} not found"
            )
        found = self.refreshes.setdefault(group, [])
        active = next((r for r in found if r.status in ("Pending", "InProgress", "Cancelling")), None)
        if model.name == "StartInstanceRefresh":
            if active is not None:
                return _error(
                    "InstanceRefreshInProgress",
                    f"An Instance Refresh is already in progress and blocks the execution of this "
                    f"Instance Refresh ({active.id}).",
                )
            refresh = self.start(group, dict(params.get("Preferences", {})), minute)
            return _ok({"InstanceRefreshId": refresh.id})
        if model.name == "CancelInstanceRefresh":
            if active is None or active.status == "Cancelling":
                return _error(
                    "ActiveInstanceRefreshNotFound", "No in progress or pending Instance Refresh found"
                )
            active.status, active.reason = "Cancelling", ""
            return _ok({"InstanceRefreshId": active.id})
        wanted = set(params.get("InstanceRefreshIds") or [r.id for r in found])
        listed = [r.describe(self._when) for r in reversed(found) if r.id in wanted]
        return _ok({"InstanceRefreshes": listed})

    def _when(self, minute: int) -> datetime:
        return (self.twin.start + timedelta(minutes=minute)).astimezone(UTC)

    # ---- the twin's side -----------------------------------------------------------------------------

    def start(self, group: str, preferences: dict[str, Any], minute: int) -> Refresh:
        cell, instance_type = self.groups[group]
        fleet = self.twin.cells[cell].fleets[instance_type]
        old = max(fleet.all_hosts - fleet.ami_hosts, 0) if fleet.ami != "current" else 0
        count = sum(len(r) for r in self.refreshes.values())
        refresh = Refresh(
            f"{count + 1:08x}-gameday-refresh",
            group,
            fleet,
            image_id(fleet.ami),
            minute,
            preferences,
            old,
        )
        self.refreshes.setdefault(group, []).append(refresh)
        return refresh

    def step(self, minute: int) -> None:
        """Each refresh's minute (after the twin's)."""
        for refreshes in self.refreshes.values():
            for refresh in refreshes:
                refresh.step(minute)

    def write(self, region: str) -> None:
        """Every group of the region's cells whose stack exists, as the twin holds its hosts now."""
        stacks = self.stacks()
        for cell, twin in self.twin.cells.items():
            if twin.region != region or twin.control.stack not in stacks:
                continue
            for instance_type, fleet in twin.fleets.items():
                self._write(cell, twin, instance_type, fleet)

    def _write(self, cell: str, twin: Any, instance_type: str, fleet: FleetState) -> None:
        group = self.name(cell, instance_type)
        ec2 = self.twin.orchestrator.client("ec2", twin.region)
        image = image_id(fleet.ami)
        if group not in self.groups:
            autoscaling = self.twin.orchestrator.client("autoscaling", twin.region)
            template = ec2.create_launch_template(
                LaunchTemplateName=group,
                LaunchTemplateData={"ImageId": image, "InstanceType": instance_type},
            )["LaunchTemplate"]["LaunchTemplateId"]
            tags = [{"Key": "project", "Value": self.project, "PropagateAtLaunch": True}]
            if cell != twin.region:
                tags.append({"Key": "cell", "Value": cell, "PropagateAtLaunch": True})
            autoscaling.create_auto_scaling_group(
                AutoScalingGroupName=group,
                LaunchTemplate={"LaunchTemplateId": template, "Version": "$Latest"},
                MinSize=0,
                MaxSize=10_000,
                DesiredCapacity=0,
                VPCZoneIdentifier=self._subnet(twin.region),
                Tags=tags,
            )
            self.groups[group] = (cell, instance_type)
            self._templates[group] = (template, image)
            self._instances[group] = {}
        template, had = self._templates[group]
        if had != image:  # CloudFormation's new launch template version, which the group launches
            ec2.create_launch_template_version(
                LaunchTemplateId=template,
                LaunchTemplateData={"ImageId": image, "InstanceType": instance_type},
            )
            self._templates[group] = (template, image)
        self._members(group, twin.region, instance_type, self._counts(group, fleet))

    def _counts(self, group: str, fleet: FleetState) -> dict[str, int]:
        """AMI -> the group's hosts that booted it: the launch template's for hosts booted since it took
        it (booting ones included) and for the refresh's new ones; the day's first AMI for the rest."""
        minute = self.twin.now_minute + 1
        extra = sum(r.new_hosts(minute) for r in self.refreshes.get(group, []))
        hosts = fleet.all_hosts
        if fleet.ami == "current":
            return {image_id("current"): hosts}
        new = min(fleet.ami_hosts + sum(c.count for c in fleet.booting), hosts)
        return {image_id("current"): hosts - new, image_id(fleet.ami): new + extra}

    def _members(self, group: str, region: str, instance_type: str, counts: dict[str, int]) -> None:
        """The one place moto's objects are set directly: the group's members are the instances the twin
        counts (moto's API would launch or terminate others to keep the desired capacity), launched by
        moto's EC2 backend itself (its RunInstances less the request and response: a fleet at an event's
        peak is hundreds of hosts, and the XML of each was most of their cost)."""
        from moto.autoscaling.models import InstanceState, autoscaling_backends
        from moto.ec2.models import ec2_backends

        ec2 = ec2_backends[ACCOUNT][region]
        held = self._instances[group]
        for image in set(held) | set(counts):
            ids = held.setdefault(image, [])
            wanted = counts.get(image, 0)
            if wanted > len(ids):
                # Each new moto instance looks its AMI up among the ~1,300 moto ships, filtering every one:
                # most of a host's cost. The twin's AMIs are none of them, so the lookup finds nothing anyway.
                ec2.describe_images = _no_images
                try:
                    launched = ec2.run_instances(
                        image,
                        wanted - len(ids),
                        None,
                        [],
                        instance_type=instance_type,
                        is_instance_type_default=True,  # no instance type check: the twin's are valid
                        subnet_id=self._subnet(region),
                    )
                finally:
                    del ec2.describe_images  # the backend's own method again
                ids.extend(i.id for i in launched.instances)
            elif wanted < len(ids):
                gone, held[image] = ids[wanted:], ids[:wanted]
                ec2.terminate_instances(gone)
        moto_group = autoscaling_backends[ACCOUNT][region].autoscaling_groups[group]
        members = [ec2.get_instance(i) for ids in held.values() for i in ids]
        moto_group.instance_states = [InstanceState(i, autoscaling_group=moto_group) for i in members]
        moto_group.desired_capacity = len(members)

    def _subnet(self, region: str) -> str:
        if region not in self._subnets:
            ec2 = self.twin.orchestrator.client("ec2", region)
            vpc = ec2.create_vpc(CidrBlock="10.1.0.0/16")["Vpc"]["VpcId"]
            self._subnets[region] = ec2.create_subnet(
                VpcId=vpc, CidrBlock="10.1.0.0/18", AvailabilityZone=f"{region}a"
            )["Subnet"]["SubnetId"]
        return self._subnets[region]


def _no_images(**_: Any) -> list[Any]:
    return []


def _ok(body: dict[str, Any]) -> tuple[Any, dict[str, Any]]:
    return SimpleNamespace(status_code=200, headers={}), {
        **body,
        "ResponseMetadata": {"HTTPStatusCode": 200, "RequestId": "gameday"},
    }


def _error(code: str, message: str) -> tuple[Any, dict[str, Any]]:
    return SimpleNamespace(status_code=400, headers={}), {
        "Error": {"Code": code, "Message": message, "Type": "Sender"},
        "ResponseMetadata": {"HTTPStatusCode": 400, "RequestId": "gameday"},
    }
