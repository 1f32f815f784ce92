"""The deploy day's Auto Scaling groups and instance refreshes (gameday/host_groups.py), read and driven
through the host roll's own calls (ops/preflight/aws.py `fleet_groups`, ops/host_roll.py). moto answers the
groups, launch templates and instances; the three refresh calls moto 5.2.5 lacks are the twin's stand-in,
answered from botocore's before-call hook (no Stubber: the answers come from the twin's model)."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import UTC, datetime
from types import SimpleNamespace

import boto3
import pytest
from botocore.exceptions import ClientError
from moto import mock_aws

from gameday.control import BOOT_MINUTES, COLD_START_MINUTES
from gameday.host_groups import HostGroups
from ops.host_roll import RollPolicy, cancel_refreshes, read_refreshes, refresh_request
from ops.preflight.aws import fleet_groups

CELL, REGION, STACK = "us-east-1/1", "us-east-1", "shop-us-east-1"
POLICY = RollPolicy(
    canary_percent=5, checkpoint_delay_seconds=900, instance_warmup_seconds=1800, max_healthy_percent=125
)


@dataclass
class Fleet:
    """What the refresh model reads and moves of gameday/control.py's FleetState."""

    hosts: int
    ami: str = "current"
    ami_hosts: int = 0
    ami_booted: int = 0
    booting: list = field(default_factory=list)

    @property
    def all_hosts(self) -> int:
        return self.hosts


@pytest.fixture
def day():
    with mock_aws():
        clients: dict = {}

        def client(service: str, region: str):
            return clients.setdefault((service, region), boto3.client(service, region_name=region))

        fleet = Fleet(hosts=20)
        twin = SimpleNamespace(
            orchestrator=SimpleNamespace(client=client),
            cells={
                CELL: SimpleNamespace(
                    region=REGION, control=SimpleNamespace(stack=STACK), fleets={"inf2.48xlarge": fleet}
                )
            },
            now_minute=0,
            start=datetime(2027, 7, 8, 3, 0, tzinfo=UTC),
            deployment=SimpleNamespace(home_region=REGION),
        )
        groups = HostGroups(twin, "shop", lambda: {STACK})
        session = boto3.Session(region_name=REGION)
        groups.register(session.events)
        yield SimpleNamespace(twin=twin, fleet=fleet, groups=groups, session=session)


def read(day) -> dict[str, int]:
    (group,) = fleet_groups(day.session.client("autoscaling"), day.session.client("ec2"), "shop", CELL)
    counts: dict[str, int] = {}
    for image in group.hosts.values():
        counts[image] = counts.get(image, 0) + 1
    return {"template": group.template_image, **counts}


def advance(day, minutes: int) -> None:
    for _ in range(minutes):
        day.twin.now_minute += 1
        day.groups.step(day.twin.now_minute)


def test_fleet_groups_reads_each_host_with_the_ami_it_booted_and_the_templates_new_ami(day):
    assert read(day) == {"template": "ami-current", "ami-current": 20}
    day.fleet.ami = "ami-next"  # the launch template's new version: no host replaced
    day.fleet.hosts, day.fleet.ami_hosts = 22, 2  # a scale-out booted two from it
    assert read(day) == {"template": "ami-next", "ami-current": 20, "ami-next": 2}


def test_a_refresh_replaces_its_canary_pauses_at_the_checkpoint_and_is_cancelled(day):
    day.fleet.ami = "ami-next"
    read(day)
    autoscaling = day.session.client("autoscaling")
    (group,) = day.groups.groups
    started = autoscaling.start_instance_refresh(**refresh_request(group, POLICY))["InstanceRefreshId"]
    with pytest.raises(ClientError, match="InstanceRefreshInProgress"):
        autoscaling.start_instance_refresh(**refresh_request(group, POLICY))
    advance(day, 1)
    (refresh,) = read_refreshes(autoscaling, {group: started}).values()
    assert (refresh["Status"], refresh["InstancesToUpdate"]) == ("InProgress", 20)
    advance(day, BOOT_MINUTES)  # the canary host booted: in the group beside the 20 it replaces
    assert read(day) == {"template": "ami-next", "ami-current": 20, "ami-next": 1}
    advance(day, 30 + COLD_START_MINUTES)  # warmed up, then its old host's task moved onto it
    assert day.fleet.ami_hosts == 1
    assert read(day) == {"template": "ami-next", "ami-current": 19, "ami-next": 1}
    (refresh,) = read_refreshes(autoscaling, {group: started}).values()
    assert refresh["Status"] == "InProgress" and "checkpoint" in refresh["StatusReason"]
    assert (refresh["PercentageComplete"], refresh["InstancesToUpdate"]) == (5, 19)
    advance(day, 10)
    assert day.fleet.ami_hosts == 1  # still paused (CheckpointDelay 15 min)
    assert cancel_refreshes(autoscaling, [group]) == []
    advance(day, 1)
    (refresh,) = read_refreshes(autoscaling, {group: started}).values()
    assert refresh["Status"] == "Cancelled" and "EndTime" in refresh
    assert day.fleet.ami_hosts == 1  # the replaced host stays
    with pytest.raises(ClientError, match="ActiveInstanceRefreshNotFound"):
        autoscaling.cancel_instance_refresh(AutoScalingGroupName=group)


def test_a_refresh_left_alone_replaces_every_host_in_batches_of_the_surge(day):
    day.fleet.ami = "ami-next"
    read(day)
    autoscaling = day.session.client("autoscaling")
    (group,) = day.groups.groups
    started = autoscaling.start_instance_refresh(**refresh_request(group, POLICY))["InstanceRefreshId"]
    batch = BOOT_MINUTES + 30 + COLD_START_MINUTES
    advance(day, 1 + batch + 15 + 4 * (batch + 1))  # the canary, its pause, four batches of 5
    (refresh,) = read_refreshes(autoscaling, {group: started}).values()
    assert refresh["Status"] == "Successful" and refresh["PercentageComplete"] == 100
    assert day.fleet.ami_hosts == 20
    assert read(day) == {"template": "ami-next", "ami-next": 20}
