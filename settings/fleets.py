"""A region and its fleets: instance types, host bounds, warm pools, reservations, network."""

from __future__ import annotations

import ipaddress
from typing import Annotated, Literal, Self

from pydantic import Field, field_validator, model_validator

from settings.instances import INSTANCES, InstanceFacts, NeuronFamily, capacity_block_types
from settings.types import (
    ACM_ARN,
    RESOURCE_GROUP_ARN,
    CapacityReservationId,
    ImageUris,
    PositiveInt,
    S3Uri,
    StrictModel,
)


class WarmPoolConfig(StrictModel):
    """Stopped hosts kept beside the group: a scale-out starts one instead of launching and booting one."""

    # Stopped hosts the pool keeps at least.
    min_size: Annotated[int, Field(ge=0)] = 0
    # Hosts in service plus in the pool; unset, the pool holds the group's max minus its desired count.
    max_prepared: PositiveInt | None = None


class CapacityReservationConfig(StrictModel):
    """On-Demand Capacity Reservations the fleet's group launches into: by id, or a resource group of them."""

    # first: launch into the reservations while they have room, then On-Demand; only: never outside them.
    preference: Literal["capacity-reservations-first", "capacity-reservations-only"] = (
        "capacity-reservations-first"
    )
    # The reservations' ids (cr-...).
    ids: Annotated[list[CapacityReservationId], Field(min_length=1)] | None = None
    # Or a resource group of reservations (arn:aws:resource-groups:REGION:ACCOUNT:group/NAME).
    resource_group_arn: str | None = None

    @model_validator(mode="after")
    def _one_target(self) -> Self:
        if (self.ids is None) == (self.resource_group_arn is None):
            raise ValueError("name the reservations with exactly one of ids or resource_group_arn")
        if self.resource_group_arn is not None and not RESOURCE_GROUP_ARN.match(self.resource_group_arn):
            raise ValueError(
                "resource_group_arn is not a resource group ARN "
                "(arn:aws:resource-groups:REGION:ACCOUNT:group/NAME)"
            )
        return self


class CapacityBlockConfig(StrictModel):
    """An EC2 Capacity Block for ML: reserved hosts for a fixed window, in one availability zone."""

    # The Capacity Block's reservation id (cr-...).
    id: CapacityReservationId
    # The zone the block's hosts are in: the fleet launches only there.
    availability_zone: str


class FleetConfig(StrictModel):
    # A Neuron instance type of the catalog: inf2.8xlarge, inf2.24xlarge, inf2.48xlarge, trn1.2xlarge,
    # trn1.32xlarge, trn2.48xlarge.
    instance_type: str
    # NeuronCores per engine replica; the host's NeuronCores / tensor_parallel replicas run per host.
    tensor_parallel: PositiveInt
    # Hosts the fleet keeps in service at least (its group's and service's minimum; an event may raise it).
    min: Annotated[int, Field(ge=0)]
    # Hosts it may scale out to; a deploy may start serving.deployment.max_surge_percent more.
    max: PositiveInt
    # Only for types without instance store: the EBS volume that holds weights and compiled artifacts.
    data_volume_gib: Annotated[int, Field(ge=50, le=16384)] = 500
    warm_pool: WarmPoolConfig | None = None
    capacity_reservation: CapacityReservationConfig | None = None
    capacity_block: CapacityBlockConfig | None = None

    @field_validator("instance_type")
    @classmethod
    def _known_neuron_instance(cls, value: str) -> str:
        if value not in INSTANCES:
            supported = ", ".join(INSTANCES)
            family = value.split(".", 1)[0]
            if family in {f.value for f in NeuronFamily}:
                raise ValueError(f"unknown size {value!r}; supported Neuron instance types: {supported}")
            raise ValueError(f"{value!r} has no Neuron devices; supported Neuron instance types: {supported}")
        return value

    @model_validator(mode="after")
    def _fits_the_host(self) -> Self:
        facts = INSTANCES[self.instance_type]
        if self.tensor_parallel > facts.neuron_cores:
            raise ValueError(
                f"tensor_parallel {self.tensor_parallel} exceeds the {facts.neuron_cores} NeuronCores "
                f"of {self.instance_type}"
            )
        if facts.neuron_cores % self.tensor_parallel:
            raise ValueError(
                f"tensor_parallel {self.tensor_parallel} does not divide the {facts.neuron_cores} "
                f"NeuronCores of {self.instance_type}; use one of {list(facts.tensor_parallel_degrees())}"
            )
        if self.min > self.max:
            raise ValueError(f"min ({self.min}) is above max ({self.max})")
        if self.capacity_block is not None:
            self._fits_a_capacity_block(facts)
        return self

    def _fits_a_capacity_block(self, facts: InstanceFacts) -> None:
        if not facts.capacity_block:
            raise ValueError(
                f"a Capacity Block cannot hold {self.instance_type}; Capacity Blocks hold "
                f"{', '.join(capacity_block_types())} of the kit's types"
            )
        if self.capacity_reservation is not None:
            raise ValueError("capacity_block and capacity_reservation exclude each other: choose one")
        if self.warm_pool is not None:
            raise ValueError(
                "a Capacity Block fleet takes no warm_pool: the block is paid for its whole window, so "
                "stopping its hosts saves nothing"
            )
        if self.min > 0:
            raise ValueError(
                f"min is {self.min} on a Capacity Block fleet, whose hosts can run only inside the block: "
                "set min 0 and give the block's window as an event"
            )

    @property
    def instance(self) -> InstanceFacts:
        return INSTANCES[self.instance_type]

    @property
    def engine_replicas(self) -> int:
        """Engines per host: each takes tensor_parallel NeuronCores of its own, so none sit idle."""
        return self.instance.neuron_cores // self.tensor_parallel

    def serving_slots(self, max_num_seqs: int) -> int:
        """Sequences one host serves at once: what scaling and routing count as a host's capacity."""
        return self.engine_replicas * max_num_seqs


class RegionConfig(StrictModel):
    weight: Annotated[int, Field(ge=0, le=255)]  # Route 53 weights are 0-255
    # One fleet per instance type (a task definition maps one type's devices); every fleet serves behind the
    # one ALB.
    fleets: Annotated[list[FleetConfig], Field(min_length=1)]
    # Seeded into the app so synth never asks AWS which zones exist; names differ in availability
    # per account, so a user whose account lacks one lists their own.
    availability_zones: Annotated[list[str], Field(min_length=2, max_length=6)] | None = None
    # The region's VPC address range (each cell's VPC uses the same one: cells never talk to each other).
    vpc_cidr: str = "10.0.0.0/16"
    # An ACM certificate in this region for the ALB; it must cover tls.domain_name. Unset: one is made for
    # tls.domain_name, validated in tls.hosted_zone_id.
    certificate_arn: str | None = None
    # NAT gateways for the hosts' internet egress: one per zone by default (a zone outage must not cut the
    # other zones off), fewer to save cost, 0 for hosts that need no internet at all (S3 through the gateway
    # endpoint, ECR/ECS/Logs/STS/SSM through interface endpoints; the hosts' subnets are then isolated).
    nat_gateways: Annotated[int, Field(ge=0, le=6)] | None = None
    # Interface endpoints for ECR, ECS, Logs, STS and SSM (a fixed hourly cost per endpoint and zone); off
    # only where NAT gateways carry that traffic instead.
    interface_endpoints: bool = True
    # This region's copy of the model and images (S3 and ECR replication), so a cold start reads nearby and
    # one region's S3 or ECR trouble does not stop the others from scaling out.
    artifacts_s3_uri: S3Uri | None = None
    # This region's image per Neuron family (its ECR replica); a family it does not name uses
    # container.image_uris.
    image_uris: ImageUris = Field(default_factory=dict)
    # Independent serving units in the region (docs/peak-events.md, "Cells"): each its own stack with an ALB,
    # ECS cluster, fleets and alarms; every fleet's min and max are split across them.
    cells: Annotated[int, Field(ge=1, le=20)] = 1

    @field_validator("fleets")
    @classmethod
    def _one_fleet_per_instance_type(cls, fleets: list[FleetConfig]) -> list[FleetConfig]:
        seen: set[str] = set()
        for fleet in fleets:
            if fleet.instance_type in seen:
                raise ValueError(
                    f"two fleets of {fleet.instance_type}; a region has one fleet per instance type "
                    "(one task definition maps one type's devices)"
                )
            seen.add(fleet.instance_type)
        return fleets

    @model_validator(mode="after")
    def _nat_gateways_fit_the_zones(self) -> Self:
        zones = self.availability_zones
        if zones and self.nat_gateways is not None and self.nat_gateways > len(zones):
            raise ValueError(
                f"nat_gateways {self.nat_gateways} is more than the {len(zones)} availability zones; "
                "a zone holds one NAT gateway at most"
            )
        if self.nat_gateways == 0 and not self.interface_endpoints:
            raise ValueError(
                "nat_gateways 0 with interface_endpoints false leaves the hosts no way to reach ECR, ECS "
                "or CloudWatch Logs"
            )
        return self

    @field_validator("vpc_cidr")
    @classmethod
    def _cidr(cls, value: str) -> str:
        try:
            network = ipaddress.IPv4Network(value)
        except ValueError as error:
            raise ValueError(f"not an IPv4 CIDR block: {error}") from None
        if not 16 <= network.prefixlen <= 20:
            raise ValueError(
                f"prefix /{network.prefixlen} is outside /16 to /20, too small for 3 zones of hosts"
            )
        return value

    @field_validator("certificate_arn")
    @classmethod
    def _acm_arn(cls, value: str | None) -> str | None:
        if value is not None and not ACM_ARN.match(value):
            raise ValueError("not an ACM certificate ARN (arn:aws:acm:REGION:ACCOUNT:certificate/ID)")
        return value
