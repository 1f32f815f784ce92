"""What a fleet is built from: typed values derived once from the settings in stacks/props.py."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Literal

from aws_cdk import aws_ec2 as ec2
from aws_cdk import aws_elasticloadbalancingv2 as elbv2

from cdk_constructs.fleet.image import ImageSource
from cdk_constructs.fleet.rollout import HostBounds
from settings.instances import InstanceFacts


@dataclass(frozen=True)
class ServingPorts:
    http: int
    grpc: int
    metrics: int


@dataclass(frozen=True)
class ScheduledBounds:
    """From `at` on, the fleet's hosts and tasks stay within [min_hosts, max_hosts]: set on both the service's
    scalable target and the Auto Scaling group, because the capacity provider overrides the group's desired
    count and only the group's minimum holds hosts up."""

    name: str  # unique per fleet, e.g. "prime-day-raise"
    at: datetime  # timezone-aware
    min_hosts: int
    max_hosts: int


@dataclass(frozen=True)
class WarmPoolProps:
    min_size: int
    max_prepared: int | None


@dataclass(frozen=True)
class CapacityReservationProps:
    """On-Demand Capacity Reservations, targeted from the Auto Scaling group (the group, unlike a launch
    template, takes several ids and the capacity-reservations-first preference)."""

    preference: Literal["capacity-reservations-first", "capacity-reservations-only"]
    ids: tuple[str, ...] = ()
    resource_group_arn: str | None = None


@dataclass(frozen=True)
class CapacityBlockProps:
    """A Capacity Block for ML: the launch template's market type and target, hosts only in its zone."""

    reservation_id: str
    availability_zone: str


@dataclass(frozen=True)
class FleetProps:
    instance: InstanceFacts
    tensor_parallel: int
    # The service's task bounds (one task per host); the ASG adds the deploy surge on top (host_bounds).
    min_hosts: int
    max_hosts: int
    # Hosts a deploy may add above the task maximum, as a share of it (at least one host): rollout.py.
    max_surge_percent: int
    # SSM parameter holding the hosts' AMI id, resolved at deploy time: a named ECS Neuron AMI release.
    ami_parameter_name: str
    data_volume_gib: int
    image: ImageSource
    ports: ServingPorts
    shared_memory_mib: int
    cold_start_budget_seconds: int
    health_check_grace_seconds: int
    # Boot and ECS registration of a new host, not its model's cold start: ECS holds further scale-out for
    # hosts inside this warm-up (hosts.py).
    instance_warmup_seconds: int
    # Engine and model settings for the container, beside the per-type ones the fleet sets itself.
    environment: tuple[tuple[str, str], ...]
    # Requests in flight per host that count as "busy": the service adds a task above it. A share of the
    # host's serving slots (engine replicas x max_num_seqs).
    target_requests_in_flight: float
    metrics_namespace: str
    model_name: str  # the EMF dimension the container publishes its metrics under
    # False when EC2 does not offer the type in the stack's region (settings/instances.py).
    offered_in_region: bool
    # The region's zones the hosts launch in (those that offer the type, settings/zones.py).
    availability_zones: tuple[str, ...]
    # Operator access, off by default: SSM Agent on the hosts, ECS Exec into the serving containers.
    session_manager: bool = False
    ecs_exec: bool = False
    # Capacity providers keep this share of the ASG busy with tasks; 100 means no idle spare hosts.
    target_capacity_percent: int = 100
    # Bound changes for scheduled events, in time order (stacks/props.py derives them from `events:`).
    scheduled_bounds: tuple[ScheduledBounds, ...] = ()
    # (min, max) of an event already under way when the stack deploys: the group and the scalable target
    # start there, so a redeploy mid-event keeps its floor; min_hosts/max_hosts stay the fleet's own.
    event_bounds_at_deploy: tuple[int, int] | None = None
    warm_pool: WarmPoolProps | None = None
    capacity_reservation: CapacityReservationProps | None = None
    capacity_block: CapacityBlockProps | None = None
    # The stack's first creation: the service starts with 0 tasks (min_hosts is 0 too), so nothing needs the
    # compiled artifacts before `make compile` has run on the cluster this creates.
    bootstrap: bool = False

    @property
    def deployed_bounds(self) -> tuple[int, int]:
        """(min, max) hosts the group and the scalable target hold right after a deploy."""
        return self.event_bounds_at_deploy or (self.min_hosts, self.max_hosts)

    def host_bounds(self, min_tasks: int, max_tasks: int) -> HostBounds:
        """The Auto Scaling group's bounds for task bounds [min_tasks, max_tasks], the fleet's own or an
        event's: the deploy surge rides on whichever maximum holds."""
        return HostBounds.for_service(min_tasks, max_tasks, self.max_surge_percent)


@dataclass(frozen=True)
class FleetTargets:
    """The shared target groups a fleet's service registers into."""

    http: elbv2.IApplicationTargetGroup
    grpc: elbv2.IApplicationTargetGroup
    load_balancer_security_group: ec2.ISecurityGroup
