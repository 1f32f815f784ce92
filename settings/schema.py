"""The typed shape of a kit config. Every rule a user can break is checked here, once, so nothing
downstream needs to re-check or re-parse: stacks and constructs read these objects only."""

from __future__ import annotations

import ipaddress
import math
import re
from datetime import UTC, datetime, timedelta
from typing import Annotated, Any, Literal, Self

from pydantic import (
    AfterValidator,
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    ValidationError,
    field_validator,
    model_validator,
)
from pydantic_core import InitErrorDetails, PydanticCustomError

from settings.aws_limits import (
    ALB_TARGETS_PER_LOAD_BALANCER,
    ALB_TARGETS_PER_TARGET_GROUP,
    ALB_TARGETS_PER_TASK,
    CAPACITY_BLOCK_INSTANCES_MAX,
    COLD_START_BUDGET_MAX,
    DEREGISTRATION_DELAY_MAX,
    ECS_INSTANCES_PER_CLUSTER,
    ELASTIC_IPS,
    INSTANCE_WARMUP_MAX,
)
from settings.cells import Cell, cells_needed, split_hosts
from settings.instances import INSTANCES, InstanceFacts, NeuronFamily, capacity_block_types
from settings.regions import KNOWN_REGIONS
from settings.rollout import surge_hosts
from settings.zones import default_zones, fleet_zones, zones_missing

_S3_URI = re.compile(r"^s3://(?P<bucket>[a-z0-9][a-z0-9.-]{1,61}[a-z0-9])(/(?P<prefix>.*))?$")
_ACM_ARN = re.compile(r"^arn:aws[a-z-]*:acm:(?P<region>[a-z0-9-]+):\d{12}:certificate/[A-Za-z0-9-]+$")
_NAME = re.compile(r"^[A-Za-z][A-Za-z0-9-]{0,39}$")
_CAPACITY_RESERVATION_ID = re.compile(r"^cr-[0-9a-f]{17}$")
_RESOURCE_GROUP_ARN = re.compile(r"^arn:aws[a-z-]*:resource-groups:[a-z0-9-]+:\d{12}:group/[A-Za-z0-9_.-]+$")
_ECR_IMAGE_REGION = re.compile(r"^\d{12}\.dkr\.ecr\.(?P<region>[a-z0-9-]+)\.amazonaws\.com(\.cn)?/")

PositiveInt = Annotated[int, Field(gt=0)]
KeyPath = tuple[str | int, ...]


def _at(problems: list[tuple[KeyPath, str]], title: str) -> ValidationError:
    """Several problems found by one cross-field rule, each at its own key path (so each gets its file and
    line), where a plain ValueError would place them all at the model's own key."""
    return ValidationError.from_exception_data(
        title,
        [
            InitErrorDetails(
                type=PydanticCustomError("config", "{message}", {"message": message}), loc=loc, input=None
            )
            for loc, message in problems
        ],
    )


def _capacity_reservation_id(value: str) -> str:
    if not _CAPACITY_RESERVATION_ID.match(value):
        raise ValueError(f"{value!r} is not a capacity reservation id (cr- and 17 hex digits)")
    return value


CapacityReservationId = Annotated[str, AfterValidator(_capacity_reservation_id)]


def _iso8601(value: Any) -> datetime:
    """Quoted ISO 8601 text, or the datetime YAML makes of an unquoted one; always with its UTC offset."""
    example = '"2027-07-08T00:00:00-07:00"'
    if isinstance(value, datetime):
        moment = value
    elif isinstance(value, str):
        try:
            moment = datetime.fromisoformat(value)
        except ValueError:
            raise ValueError(f"{value!r} is not an ISO 8601 time; write it like {example}") from None
    else:
        raise ValueError(f"must be an ISO 8601 time with an offset, like {example}, got {value!r}")
    if moment.utcoffset() is None:
        raise ValueError(
            f"{value!s} has no UTC offset; add one ({example}) or Z for UTC, so the event starts when meant"
        )
    return moment


EventTime = Annotated[datetime, BeforeValidator(_iso8601)]


def _s3_uri(value: str) -> str:
    if not _S3_URI.match(value):
        raise ValueError("must be an S3 URI like s3://bucket/prefix/")
    return value


S3Uri = Annotated[str, AfterValidator(_s3_uri)]


def _image_uris(image_uris: dict[str, str]) -> dict[str, str]:
    families = [family.value for family in NeuronFamily]
    for family, uri in image_uris.items():
        if family not in families:
            raise ValueError(f"unknown Neuron family {family!r}; use one of {families}")
        if not uri or any(c.isspace() for c in uri):
            raise ValueError(f"image_uris.{family} is not an image URI: {uri!r}")
    return image_uris


# Pre-built image per Neuron family; a family without one is built from container/ as a CDK asset.
ImageUris = Annotated[dict[str, str], AfterValidator(_image_uris)]


def s3_bucket(uri: str) -> str:
    match = _S3_URI.match(uri)
    assert match is not None  # validated on the way in
    return match.group("bucket")


def s3_prefix(uri: str) -> str:
    match = _S3_URI.match(uri)
    assert match is not None
    return (match.group("prefix") or "").strip("/")


def _known_region(name: str) -> str:
    if name not in KNOWN_REGIONS:
        raise ValueError(f"unknown region {name!r}")
    return name


RegionName = Annotated[str, AfterValidator(_known_region)]


class StrictModel(BaseModel):
    """Unknown keys are typos until proven otherwise; values never change after validation."""

    model_config = ConfigDict(extra="forbid", frozen=True, strict=True)


class WarmPoolConfig(StrictModel):
    """Stopped hosts kept beside the group: a scale-out starts one instead of launching and booting one."""

    min_size: Annotated[int, Field(ge=0)] = 0
    # Hosts in service plus in the pool; unset, the pool holds the group's max minus its desired count.
    max_prepared: PositiveInt | None = None


class CapacityReservationConfig(StrictModel):
    """On-Demand Capacity Reservations the fleet's group launches into: by id, or a resource group of them."""

    preference: Literal["capacity-reservations-first", "capacity-reservations-only"] = (
        "capacity-reservations-first"
    )
    ids: Annotated[list[CapacityReservationId], Field(min_length=1)] | None = None
    resource_group_arn: str | None = None

    @model_validator(mode="after")
    def _one_target(self) -> Self:
        if (self.ids is None) == (self.resource_group_arn is None):
            raise ValueError("name the reservations with exactly one of ids or resource_group_arn")
        if self.resource_group_arn is not None and not _RESOURCE_GROUP_ARN.match(self.resource_group_arn):
            raise ValueError(
                "resource_group_arn is not a resource group ARN "
                "(arn:aws:resource-groups:REGION:ACCOUNT:group/NAME)"
            )
        return self


class CapacityBlockConfig(StrictModel):
    """An EC2 Capacity Block for ML: reserved hosts for a fixed window, in one availability zone."""

    id: CapacityReservationId
    availability_zone: str


class FleetConfig(StrictModel):
    instance_type: str
    tensor_parallel: PositiveInt
    min: Annotated[int, Field(ge=0)]
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
    fleets: Annotated[list[FleetConfig], Field(min_length=1)]
    # Seeded into the app so synth never asks AWS which zones exist; names differ in availability
    # per account, so a user whose account lacks one lists their own.
    availability_zones: Annotated[list[str], Field(min_length=2, max_length=6)] | None = None
    vpc_cidr: str = "10.0.0.0/16"
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
    image_uris: ImageUris = Field(default_factory=dict)
    # Independent serving units in the region (README, "Cells"): each its own stack with an ALB, ECS
    # cluster, fleets and alarms; every fleet's min and max are split across them.
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
        if value is not None and not _ACM_ARN.match(value):
            raise ValueError("not an ACM certificate ARN (arn:aws:acm:REGION:ACCOUNT:certificate/ID)")
        return value


class ModelConfig(StrictModel):
    name: str = "assistant"
    # Which weights (and revision) the artifacts hold: part of the compiled-artifact key, so a new model
    # never loads another model's compiled graphs.
    model_id: Annotated[str, Field(min_length=1, max_length=200, pattern=r"^[A-Za-z0-9._/@:-]+$")] = (
        "llama-3.1-8b-instruct"
    )
    # Weights and compiled Neuron artifacts; only the task role may read this location. A region may name its
    # own replica (regions.<name>.artifacts_s3_uri).
    artifacts_s3_uri: S3Uri
    max_model_len: Annotated[int, Field(ge=256, le=131072)] = 8192
    max_num_seqs: Annotated[int, Field(ge=1, le=512)] = 32
    max_output_tokens: Annotated[int, Field(ge=1, le=32768)] = 1024
    dtype: str = "bfloat16"
    allow_compile_on_start: bool = False
    # The shop's catalog index (`make index CATALOG=... UPLOAD=...`); hosts download and verify it at start.
    # It must lie under artifacts_s3_uri, the one prefix the serving tasks may read (a region with its own
    # replica reads it at the same place under its replica); by default <artifacts_s3_uri>/catalog-index/.
    catalog_index_s3_uri: S3Uri | None = None

    @model_validator(mode="after")
    def _index_readable_by_the_tasks(self) -> Self:
        root = self.artifacts_s3_uri.rstrip("/") + "/"
        if self.catalog_index_s3_uri is not None and not self.catalog_index_s3_uri.startswith(root):
            raise ValueError(
                f"catalog_index_s3_uri {self.catalog_index_s3_uri} must lie under artifacts_s3_uri {root} "
                "(the serving tasks may read that prefix only)"
            )
        return self

    def catalog_index_uri(self, artifacts_root: str) -> str:
        """The index under a region's artifacts root, at the same relative place as under the model's."""
        root = self.artifacts_s3_uri.rstrip("/") + "/"
        relative = self.catalog_index_s3_uri[len(root) :] if self.catalog_index_s3_uri else "catalog-index/"
        return artifacts_root.rstrip("/") + "/" + relative

    @property
    def artifacts_bucket(self) -> str:
        return s3_bucket(self.artifacts_s3_uri)

    @property
    def artifacts_prefix(self) -> str:
        return s3_prefix(self.artifacts_s3_uri)


class DeploymentConfig(StrictModel):
    """How a rolling deploy replaces tasks. Each task needs a whole host and the minimum healthy is 100%,
    so a deploy can only start new tasks on hosts above the service's count: the hosts' ceiling is the
    service maximum plus this surge (see cdk_constructs/fleet/rollout.py for the arithmetic)."""

    # Extra hosts a deploy may start at the service maximum, as a share of that maximum (at least one host).
    max_surge_percent: Annotated[int, Field(ge=1, le=100)] = 25


class ServingConfig(StrictModel):
    # Image pull + weight download + compiled-artifact load on a new host.
    cold_start_budget_seconds: Annotated[int, Field(ge=60, le=COLD_START_BUDGET_MAX)] = 1800
    # Boot and ECS registration of a new host: the capacity provider's managed-scaling warm-up. ECS holds
    # further scale-out while hosts are inside it, so it must not be the cold start (the model's load): that
    # would allow one batch of hosts per cold start. The cold-start allowance lives in the alarms only.
    # 0 to 10,000 s (ECS API reference, ManagedScaling.instanceWarmupPeriod; AWS's default 300 s).
    instance_warmup_seconds: Annotated[int, Field(ge=0, le=INSTANCE_WARMUP_MAX)] = 300
    health_check_grace_seconds: Annotated[int, Field(ge=60)] = 2400
    # Slowest decode rate the service promises; with max_output_tokens it bounds the longest stream.
    min_decode_tokens_per_second: Annotated[float, Field(gt=0)] = 5.0
    prefill_budget_seconds: Annotated[int, Field(ge=1, le=600)] = 30
    shared_memory_mib: Annotated[int, Field(ge=64, le=65536)] = 4096
    # Requests an engine replica lets wait beyond its max_num_seqs batch slots; past it a request is refused
    # at once (UNAVAILABLE, counted as Shed) so the client or the ALB's next pick goes to a host with room.
    # None: the container's default, one more batch (max_num_seqs). 0 refuses whatever finds no free slot.
    max_queued_per_replica: Annotated[int, Field(ge=0, le=4096)] | None = None
    grpc_port: Annotated[int, Field(ge=1024, le=65535)] = 8001
    http_port: Annotated[int, Field(ge=1024, le=65535)] = 8000
    metrics_port: Annotated[int, Field(ge=1024, le=65535)] = 8002
    deployment: DeploymentConfig = DeploymentConfig()

    @model_validator(mode="after")
    def _grace_covers_cold_start(self) -> Self:
        if self.health_check_grace_seconds < self.cold_start_budget_seconds:
            raise ValueError(
                f"health_check_grace_seconds ({self.health_check_grace_seconds}) is shorter than "
                f"cold_start_budget_seconds ({self.cold_start_budget_seconds}): ECS would kill hosts "
                "still loading the model"
            )
        if len({self.grpc_port, self.http_port, self.metrics_port}) != 3:
            raise ValueError("grpc_port, http_port and metrics_port must differ")
        return self


# The ECS-optimized AL2023 Neuron AMI release the hosts boot (github.com/aws/amazon-ecs-ami releases:
# ECS agent 1.108.3). Pinned, so a redeploy never moves hosts to a new Neuron driver under a pinned image.
DEFAULT_NEURON_AMI_RELEASE = "al2023-ami-ecs-neuron-hvm-2023.0.20261113-kernel-6.1-x86_64"
RECOMMENDED_AMI = "recommended"
_AMI_RELEASE = re.compile(r"^al2023-ami-ecs-neuron-hvm-2023\.0\.\d{8}-kernel-[\d.]+-x86_64$")


class ContainerConfig(StrictModel):
    # Pre-built image per Neuron family (Inf2/Trn1 need Neuron SDK 2.28, Trn2 a newer one). Inf2 and Trn1
    # without an entry are built from container/ as a CDK asset (SDK 2.28); Trn2 must name its image. A
    # region may name its own replica.
    image_uris: ImageUris = Field(default_factory=dict)
    log_retention_days: Annotated[int, Field(ge=1)] = 30
    # A released ECS Neuron AMI name, or "recommended" to follow AWS's latest at every deploy.
    neuron_ami_release: str = DEFAULT_NEURON_AMI_RELEASE

    @field_validator("neuron_ami_release")
    @classmethod
    def _ami_release(cls, value: str) -> str:
        if value != RECOMMENDED_AMI and not _AMI_RELEASE.match(value):
            raise ValueError(
                f"{value!r} is not an ECS AL2023 Neuron AMI release name like {DEFAULT_NEURON_AMI_RELEASE!r} "
                f"(or {RECOMMENDED_AMI!r})"
            )
        return value

    def image_uri(self, family: NeuronFamily) -> str | None:
        return self.image_uris.get(family.value)


class TlsConfig(StrictModel):
    # Used when a region has no certificate_arn: a certificate for domain_name, validated in this zone.
    domain_name: str = "assistant.example.com"
    hosted_zone_id: str = "Z0000000000000EXAMPLE"
    hosted_zone_name: str = "example.com"

    @model_validator(mode="after")
    def _domain_in_zone(self) -> Self:
        if not (
            self.domain_name == self.hosted_zone_name
            or self.domain_name.endswith("." + self.hosted_zone_name)
        ):
            raise ValueError(
                f"domain_name {self.domain_name!r} is not inside hosted_zone_name {self.hosted_zone_name!r}"
            )
        return self


_HEADER_NAME = re.compile(r"^[A-Za-z0-9!#$%&'*+.^_`|~-]{1,64}$")


class WafConfig(StrictModel):
    enabled: bool = True
    # Requests one client may send per window before WAF blocks it for the rest of the window. A stream
    # is one request, so this counts questions, not tokens. Who "one client" is, is rate_limit_key's choice.
    rate_limit_per_ip: Annotated[int, Field(ge=10, le=2_000_000_000)] = 1000
    rate_limit_window_seconds: Literal[60, 120, 300, 600] = 300
    # What the rate limit counts per (WAF rate-based aggregation keys):
    # - ip (default): the connecting address. Right when shoppers reach the ALB directly; a shop backend,
    #   NAT or CDN calling from a few addresses shares one budget among all its users, so pick another key.
    # - forwarded_ip: the first address in rate_limit_header (default X-Forwarded-For), for a CDN or proxy
    #   that sets it. A client reaching the ALB directly can write that header, so only where the ALB is
    #   reachable through the proxy alone. Requests whose header holds no valid address are counted
    #   together as one client.
    # - header: the value of rate_limit_header (e.g. a shopper or tenant id the shop backend sets).
    # WAF leaves requests without the key's header out of a keyed rule: source_ip_backstop_limit adds a
    # per-address rule beside it that catches them (and sizes the backend's own addresses' ceiling).
    rate_limit_key: Literal["ip", "forwarded_ip", "header"] = "ip"
    rate_limit_header: str | None = None
    source_ip_backstop_limit: Annotated[int, Field(ge=10, le=2_000_000_000)] | None = None

    @field_validator("rate_limit_header")
    @classmethod
    def _header_name(cls, value: str | None) -> str | None:
        if value is not None and not _HEADER_NAME.match(value):
            raise ValueError(f"{value!r} is not an HTTP header name (letters, digits, '-', at most 64)")
        return value

    @model_validator(mode="after")
    def _key_takes_its_header(self) -> Self:
        if self.rate_limit_key == "header" and self.rate_limit_header is None:
            raise _at(
                [(("rate_limit_header",), "rate_limit_key header needs the header's name here")],
                type(self).__name__,
            )
        if self.rate_limit_key == "ip":
            where = [
                (key, f"{key} applies to rate_limit_key forwarded_ip or header only; the key here is ip")
                for key in ("rate_limit_header", "source_ip_backstop_limit")
                if getattr(self, key) is not None
            ]
            if where:
                raise _at([((key,), message) for key, message in where], type(self).__name__)
        return self

    @property
    def rate_limit_header_name(self) -> str | None:
        """The header the key reads: the configured one, X-Forwarded-For for forwarded_ip by default."""
        if self.rate_limit_key == "forwarded_ip":
            return self.rate_limit_header or "X-Forwarded-For"
        return self.rate_limit_header


class LoadBalancerConfig(StrictModel):
    # On by default so a stack update or a stray delete cannot take the public endpoint away; set false and
    # deploy once before `make destroy`.
    deletion_protection: bool = True
    waf: WafConfig = WafConfig()


class OperationsConfig(StrictModel):
    # Operator shells without SSH, audited; both off unless an operator needs them.
    session_manager: bool = False  # SSM Session Manager on the Neuron hosts
    ecs_exec: bool = False  # ECS Exec into the serving containers, logged to the encrypted log group


class DeployConfig(StrictModel):
    """How `make deploy` rolls a change out: one region at a time, each watched before the next."""

    # Minutes a region's region-unfit and region-degraded alarms are watched after its services are stable;
    # 0 only waits for stability. Long enough for the alarms' own evaluation windows to see new tasks.
    bake_minutes: Annotated[int, Field(ge=0, le=24 * 60)] = 15


_SNS_TOPIC_ARN = re.compile(
    r"^arn:aws[a-z-]*:sns:(?P<region>[a-z0-9-]+|\{region\}):\d{12}:[A-Za-z0-9_-]{1,256}$"
)
REGION_PLACEHOLDER = "{region}"


class ObservabilityConfig(StrictModel):
    metrics_namespace: str = "LLMServing"
    ttft_p99_threshold_ms: Annotated[int, Field(ge=50)] = 1000
    # Who the alarms page: an address subscribed to every stack's alarm topic (confirm the mail AWS sends),
    # and/or an SNS topic of yours (a pager, chat) that every alarm also notifies. CloudWatch notifies topics
    # of the alarm's own region only, so with several regions write {region} where the ARN's region goes.
    alarm_email: str | None = None
    alarm_topic_arn: str | None = None

    @field_validator("alarm_topic_arn")
    @classmethod
    def _topic_arn(cls, value: str | None) -> str | None:
        if value is not None and not _SNS_TOPIC_ARN.match(value):
            raise ValueError(
                "not an SNS topic ARN (arn:aws:sns:REGION:ACCOUNT:NAME, with {region} for the alarm's region)"
            )
        return value

    def alarm_topic(self, region: str) -> str | None:
        """The topic the region's alarms notify, its region filled in."""
        return self.alarm_topic_arn.replace(REGION_PLACEHOLDER, region) if self.alarm_topic_arn else None

    @property
    def pages_someone(self) -> bool:
        return bool(self.alarm_email or self.alarm_topic_arn)


class EventHosts(StrictModel):
    min: Annotated[int, Field(ge=0)]
    max: PositiveInt

    @model_validator(mode="after")
    def _min_within_max(self) -> Self:
        if self.min > self.max:
            raise ValueError(f"min ({self.min}) is above max ({self.max})")
        return self


class EventConfig(StrictModel):
    """A scheduled peak: each named fleet's bounds are raised ahead of start (by the cold-start budget plus
    the margin, so hosts are serving when the doors open) and restored at end."""

    name: Annotated[str, Field(pattern=r"^[a-z0-9](?:[a-z0-9-]{0,62}[a-z0-9])?$")]
    start: EventTime
    end: EventTime
    prewarm_margin_minutes: Annotated[int, Field(ge=0, le=24 * 60)] = 30
    # At `end` only the minimums come back down; the maximums follow this long after, while target tracking
    # scales in at its own pace. Application Auto Scaling scales in to a lowered maximum at once (its user
    # guide, "How scheduled scaling works"), so lowering it at `end` would cut most of an event's tasks in
    # one minute in every region. At least a minute: a
    # maximum lowered with the minimum is that cut.
    scale_in_after_minutes: Annotated[int, Field(ge=1, le=24 * 60)] = 120
    # region -> instance type -> the hosts the event needs
    regions: Annotated[
        dict[RegionName, Annotated[dict[str, EventHosts], Field(min_length=1)]], Field(min_length=1)
    ]

    @model_validator(mode="after")
    def _ends_after_start(self) -> Self:
        if self.end <= self.start:
            message = f"end ({self.end.isoformat()}) is not after start ({self.start.isoformat()})"
            raise _at([(("end",), message)], type(self).__name__)
        return self

    def lead(self, cold_start_budget_seconds: int) -> timedelta:
        return timedelta(seconds=cold_start_budget_seconds, minutes=self.prewarm_margin_minutes)

    def ramp_start(self, cold_start_budget_seconds: int) -> datetime:
        """When the raised bounds take effect: early enough for a new host's whole cold start."""
        return self.start - self.lead(cold_start_budget_seconds)

    @property
    def scale_in_at(self) -> datetime:
        """When the raised maximums come down to the fleets' own: the end of the event's hold on a fleet."""
        return self.end + timedelta(minutes=self.scale_in_after_minutes)


class RoutingConfig(StrictModel):
    """How the traffic orchestrator and the Route 53 health checks judge a region and move its weight."""

    # Where the orchestrator runs (its schedule, state and override parameters); default: the first region.
    orchestrator_region: RegionName | None = None
    # A region is bad in a minute when the share of its streams with a first token slower than
    # observability.ttft_p99_threshold_ms is above this (0.01: p99 above the threshold) ...
    slow_first_token_share: Annotated[float, Field(gt=0, lt=1)] = 0.01
    # ... or when more than this share of its requests failed ...
    error_share: Annotated[float, Field(gt=0, lt=1)] = 0.01
    # ... or when fewer hosts are healthy than this share of its fleets' summed minimums (at least one).
    min_healthy_host_share: Annotated[float, Field(gt=0, le=1)] = 0.5
    # Weight every region keeps while it is not pinned, degraded or not, so it stays warm.
    floor: Annotated[int, Field(ge=1, le=255)] = 5
    # Largest change of a healthy region's weight in one run (rebalancing and regaining weight).
    gain_step: Annotated[int, Field(ge=1, le=255)] = 10
    # Bad runs in a row before a region loses weight: a single bad minute moves nothing.
    bad_runs_to_drain: Annotated[int, Field(ge=1, le=5)] = 2
    # Runs from the first bad one until the region's weight is at the floor, from any weight.
    drain_runs: Annotated[int, Field(ge=1, le=10)] = 3
    # Healthy runs in a row before a region that was bad (or just looked bad) gains weight again.
    healthy_runs_to_recover: Annotated[int, Field(ge=1, le=60)] = 3
    # Runs (minutes) a weighted record whose region left config keeps its weight before the orchestrator
    # sets it to 0 (a region removed by mistake and put back in time loses nothing); deletion is by hand.
    remove_after_runs: Annotated[int, Field(ge=1, le=1440)] = 10
    # One orchestrator run at a time is kept by a run lock (a DynamoDB conditional write) in every account;
    # true adds reserved concurrency 1, which Lambda allows only where the account keeps 100 unreserved
    # besides it (`make preflight` reads the account's concurrency and says whether it fits).
    reserved_concurrency: bool = False

    @model_validator(mode="after")
    def _drain_after_confirming(self) -> Self:
        if self.bad_runs_to_drain > self.drain_runs:
            raise ValueError(
                f"bad_runs_to_drain ({self.bad_runs_to_drain}) exceeds drain_runs ({self.drain_runs}): "
                "a region could not reach its floor in drain_runs runs"
            )
        return self


class Settings(StrictModel):
    """A validated kit config: what the app, stacks and planner read."""

    project: str = "shopping-assistant"
    # Stacks are bound to an account so that zones, ARNs and the SSM AMI parameter resolve without
    # lookups; this placeholder synthesizes anywhere, a real deploy sets the user's account.
    account: str = "111111111111"
    model: ModelConfig
    serving: ServingConfig = ServingConfig()
    container: ContainerConfig = ContainerConfig()
    tls: TlsConfig = TlsConfig()
    observability: ObservabilityConfig = ObservabilityConfig()
    routing: RoutingConfig = RoutingConfig()
    load_balancer: LoadBalancerConfig = LoadBalancerConfig()
    operations: OperationsConfig = OperationsConfig()
    deploy: DeployConfig = DeployConfig()
    # Most hosts one cell may run at its fleets' max (events included); 400 hosts plus the default 25% deploy
    # surge are 500 tasks, 1,000 targets: the default ALB quota (README, "Cells").
    cell_max_hosts: PositiveInt = 400
    regions: Annotated[dict[RegionName, RegionConfig], Field(min_length=1)]
    events: list[EventConfig] = Field(default_factory=list)

    @field_validator("project")
    @classmethod
    def _project_name(cls, value: str) -> str:
        if not _NAME.match(value):
            raise ValueError("must start with a letter and hold only letters, digits and '-' (at most 40)")
        return value

    @field_validator("account")
    @classmethod
    def _account_id(cls, value: str) -> str:
        if not re.fullmatch(r"\d{12}", value):
            raise ValueError("must be a 12-digit AWS account id (quote it in YAML)")
        return value

    @model_validator(mode="after")
    def _cross_field_rules(self) -> Self:
        if sum(region.weight for region in self.regions.values()) == 0:
            raise ValueError("every region has weight 0, so no traffic would go anywhere")
        longest = self.longest_stream_seconds
        if longest > DEREGISTRATION_DELAY_MAX:
            raise ValueError(
                f"the longest stream ({longest} s = prefill_budget_seconds + max_output_tokens / "
                f"min_decode_tokens_per_second) exceeds the ALB's {DEREGISTRATION_DELAY_MAX} s "
                "deregistration delay limit"
            )
        home = self.routing.orchestrator_region
        if home is not None and home not in self.regions:
            raise ValueError(
                f"routing.orchestrator_region {home!r} is not one of the configured regions "
                f"({', '.join(self.regions)})"
            )
        for name, region in self.regions.items():
            if region.certificate_arn:
                arn_region = _ACM_ARN.match(region.certificate_arn).group("region")  # type: ignore[union-attr]
                if arn_region != name:
                    raise ValueError(
                        f"regions.{name}.certificate_arn is in {arn_region}; an ALB needs a certificate "
                        "from its own region"
                    )
            for index, fleet in enumerate(region.fleets):
                family = fleet.instance.family
                # The asset image is built on Neuron SDK 2.28, whose inference stack stops at Inf2/Trn1.
                if family is NeuronFamily.TRN2 and not self.image_uri(name, family):
                    raise ValueError(
                        f"regions.{name}.fleets[{index}] is a {fleet.instance_type} fleet but "
                        f"container.image_uris.trn2 is not set (nor regions.{name}.image_uris.trn2): the "
                        "image built from container/ carries Neuron SDK 2.28, which does not serve Trn2; "
                        "name a Trn2 serving image"
                    )
            if region.availability_zones:
                strays = [zone for zone in region.availability_zones if not zone.startswith(name)]
                if strays:
                    raise ValueError(f"regions.{name}.availability_zones {strays} are not zones of {name}")
        topic = self.observability.alarm_topic_arn
        if topic and REGION_PLACEHOLDER not in topic:
            topic_region = _SNS_TOPIC_ARN.match(topic)["region"]  # type: ignore[index]
            others = sorted({self.orchestrator_region, *self.regions} - {topic_region})
            if others:
                raise _at(
                    [
                        (
                            ("observability", "alarm_topic_arn"),
                            f"the topic is in {topic_region}, but alarms in {', '.join(others)} can notify "
                            "only a topic of their own region: write {region} in place of the ARN's region "
                            "and create the topic in each",
                        )
                    ],
                    type(self).__name__,
                )
        problems = [
            *self._cell_problems(),
            *self._capacity_block_zone_problems(),
            *self._event_problems(),
            *self._network_problems(),
        ]
        if problems:
            raise _at(problems, type(self).__name__)
        return self

    def _cell_problems(self) -> list[tuple[KeyPath, str]]:
        """Every cell runs every fleet of its region, with at least one host at the fleet's max, and no cell
        runs more than cell_max_hosts at its fleets' max or an event's."""
        problems: list[tuple[KeyPath, str]] = []
        for name, region in self.regions.items():
            for index, fleet in enumerate(region.fleets):
                if fleet.max < region.cells:
                    problems.append(
                        (
                            ("regions", name, "fleets", index, "max"),
                            f"max {fleet.max} is below the region's {region.cells} cells: every cell runs "
                            "every fleet and needs at least one host at its max",
                        )
                    )
            for index, event in enumerate(self.events):
                for instance_type, bounds in event.regions.get(name, {}).items():
                    if bounds.max < region.cells:
                        problems.append(
                            (
                                ("events", index, "regions", name, instance_type, "max"),
                                f"max {bounds.max} is below {name}'s {region.cells} cells: every cell runs "
                                "every fleet and needs at least one host at its max",
                            )
                        )
            scopes: list[tuple[KeyPath, EventConfig | None]] = [(("regions", name, "cells"), None)]
            scopes += [
                (("events", index, "regions", name), event)
                for index, event in enumerate(self.events)
                if name in event.regions
            ]
            for where, event in scopes:
                hosts = sum(self.region_max_hosts(name, event))
                needed = cells_needed(hosts, self.cell_max_hosts)
                if needed > region.cells:
                    when = f"during event {event.name!r}" if event else "at the fleets' max"
                    busiest = split_hosts(hosts, region.cells)[0]
                    problems.append(
                        (
                            where,
                            f"{when}, {name} runs up to {hosts} hosts: {busiest} in its busiest of "
                            f"{region.cells} cell(s), above cell_max_hosts {self.cell_max_hosts}; set "
                            f"regions.{name}.cells to at least {needed}",
                        )
                    )
        return problems

    def _network_problems(self) -> list[tuple[KeyPath, str]]:
        """NAT gateways beyond the zones defaults resolve to, and images a region without NAT cannot pull."""
        problems: list[tuple[KeyPath, str]] = []
        for name, region in self.regions.items():
            where: KeyPath = ("regions", name, "nat_gateways")
            zones = self.availability_zones(name)
            if len(zones) < self.nat_gateways(name):
                problems.append(
                    (
                        where,
                        f"{region.nat_gateways} is more than the region's {len(zones)} availability zones "
                        f"({', '.join(zones)}); a zone holds one NAT gateway at most",
                    )
                )
            if self.nat_gateways(name) == 0:
                problems.extend((where, message) for message in self._unreachable_without_nat(name))
        return problems

    def _unreachable_without_nat(self, region: str) -> list[str]:
        """Without NAT the hosts reach only this region's AWS endpoints: an image elsewhere never pulls."""
        problems = []
        for fleet in self.regions[region].fleets:
            uri = self.image_uri(region, fleet.instance.family)
            if uri is None:
                continue  # an asset: CDK pushes it to the bootstrap repository in the stack's region
            ecr = _ECR_IMAGE_REGION.match(uri)
            if ecr is None or ecr["region"] != region:
                family = fleet.instance.family.value
                problems.append(
                    f"0 NAT gateways, so the hosts cannot pull {uri} (the {family} image); replicate it "
                    f"to ECR in {region} and set regions.{region}.image_uris.{family}"
                )
        return problems

    def _capacity_block_zone_problems(self) -> list[tuple[KeyPath, str]]:
        problems: list[tuple[KeyPath, str]] = []
        for name, region in self.regions.items():
            zones = self.availability_zones(name)
            for index, fleet in enumerate(region.fleets):
                block = fleet.capacity_block
                if block is not None and block.availability_zone not in zones:
                    problems.append(
                        (
                            ("regions", name, "fleets", index, "capacity_block", "availability_zone"),
                            f"{block.availability_zone} is not one of the stack's zones in {name} "
                            f"({', '.join(zones)}); a Capacity Block lives in one zone the hosts' subnets "
                            "must include",
                        )
                    )
        return problems

    def _event_problems(self) -> list[tuple[KeyPath, str]]:
        problems: list[tuple[KeyPath, str]] = []
        seen: dict[str, int] = {}
        for index, event in enumerate(self.events):
            if event.name in seen:
                problems.append(((("events", index, "name")), f"a second event named {event.name!r}"))
            seen.setdefault(event.name, index)
            for region, hosts in event.regions.items():
                problems.extend(self._event_region_problems(index, event, region, hosts))
        problems.extend(self._overlap_problems())
        return problems

    def _event_region_problems(
        self, index: int, event: EventConfig, region: str, hosts: dict[str, EventHosts]
    ) -> list[tuple[KeyPath, str]]:
        where: KeyPath = ("events", index, "regions", region)
        if region not in self.regions:
            return [(where, f"region {region} is not in the config's regions ({', '.join(self.regions)})")]
        fleets = {fleet.instance_type: fleet for fleet in self.regions[region].fleets}
        problems: list[tuple[KeyPath, str]] = []
        for instance_type, bounds in hosts.items():
            fleet = fleets.get(instance_type)
            if fleet is None:
                problems.append(
                    (
                        (*where, instance_type),
                        f"{region} has no {instance_type} fleet (its fleets: {', '.join(fleets)})",
                    )
                )
            elif fleet.capacity_block is not None and bounds.max > CAPACITY_BLOCK_INSTANCES_MAX:
                problems.append(
                    (
                        (*where, instance_type, "max"),
                        f"max {bounds.max} is above the {CAPACITY_BLOCK_INSTANCES_MAX} instances one "
                        f"Capacity Block holds ({fleet.capacity_block.id})",
                    )
                )
        return problems

    def _overlap_problems(self) -> list[tuple[KeyPath, str]]:
        """Two events on one fleet whose windows (ramp to lowered maximums) meet: the first one's restore
        or scale-in would cut the second one's raised bounds; windows that touch would change the bounds
        twice in one moment, in an order AWS does not promise."""
        budget = self.serving.cold_start_budget_seconds
        problems: list[tuple[KeyPath, str]] = []
        for later_index, later in enumerate(self.events):
            for earlier in self.events[:later_index]:
                if not (
                    later.ramp_start(budget) <= earlier.scale_in_at
                    and earlier.ramp_start(budget) <= later.scale_in_at
                ):
                    continue
                for region, hosts in later.regions.items():
                    shared = [t for t in hosts if t in earlier.regions.get(region, {})]
                    for instance_type in shared:
                        problems.append(
                            (
                                ("events", later_index, "regions", region, instance_type),
                                f"overlaps event {earlier.name!r} on this fleet (windows include the "
                                f"{self._lead_text(later)} pre-warm lead and the scale_in_after_minutes "
                                "after the end); one fleet takes one event at a time: merge them or move one",
                            )
                        )
        return problems

    def _lead_text(self, event: EventConfig) -> str:
        minutes = int(event.lead(self.serving.cold_start_budget_seconds).total_seconds() // 60)
        return f"{minutes} min"

    @property
    def longest_stream_seconds(self) -> int:
        """Longest generation the config allows: what ALB idle timeout and deregistration delay must cover."""
        decode = self.model.max_output_tokens / self.serving.min_decode_tokens_per_second
        return self.serving.prefill_budget_seconds + math.ceil(decode)

    def warnings(self, now: datetime | None = None) -> list[tuple[KeyPath, str]]:
        """(key path, message) for what validates but will likely fail at deploy time, or is stale."""
        found: list[tuple[KeyPath, str]] = []
        for name, region in self.regions.items():
            for fleet in region.fleets:
                missing = zones_missing(name, fleet.instance_type, region.availability_zones or [])
                if missing:
                    found.append(
                        (
                            ("regions", name, "availability_zones"),
                            f"{fleet.instance_type} is not offered in {', '.join(missing)} per EC2's zone "
                            "offerings (zone names as the data's account sees them; check yours, see "
                            "settings/zone_offerings.py); its hosts would not launch there",
                        )
                    )
            for index, fleet in enumerate(region.fleets):
                if not fleet.instance.offered_in(name):
                    offered = ", ".join(sorted(fleet.instance.regions))
                    found.append(
                        (
                            ("regions", name, "fleets", index, "instance_type"),
                            f"{fleet.instance_type} is not offered in {name} per the AWS price list "
                            f"(offered in {offered}); its hosts would not launch there",
                        )
                    )
        found.extend(self._event_warnings(now or datetime.now(UTC)))
        return found

    def readiness_problems(self) -> list[tuple[KeyPath, str]]:
        """What a production deploy needs beyond a valid config: someone the alarms page."""
        if self.observability.pages_someone:
            return []
        return [
            (
                ("observability",),
                "alarms page no one: set alarm_email (an address to confirm) or alarm_topic_arn (your "
                "pager's SNS topic, {region} for each region's); `make deploy` refuses a config without "
                "either",
            )
        ]

    def _event_warnings(self, now: datetime) -> list[tuple[KeyPath, str]]:
        found: list[tuple[KeyPath, str]] = []
        for index, event in enumerate(self.events):
            if event.scale_in_at <= now:
                found.append(
                    (
                        ("events", index, "end"),
                        f"event {event.name!r} ended at {event.end.isoformat()} and its maximums came down "
                        f"at {event.scale_in_at.isoformat()}; nothing is scheduled for it (remove it when "
                        "convenient)",
                    )
                )
        found.extend(self._region_scale_warnings())
        return found

    def _region_scale_warnings(self) -> list[tuple[KeyPath, str]]:
        """A region's hosts at their maximums plus the deploy surge against the default quotas of its one
        ALB, its target groups and its one ECS cluster: everyday at the fleets, per event at the event."""
        found: list[tuple[KeyPath, str]] = []
        for name in self.regions:
            scopes: list[tuple[KeyPath, EventConfig | None]] = [(("regions", name, "fleets"), None)]
            scopes += [
                (("events", index, "regions", name), event)
                for index, event in enumerate(self.events)
                if name in event.regions
            ]
            for where, event in scopes:
                when = f"during event {event.name!r}" if event else "at the fleets' max"
                found.extend((where, message) for message in self._scale_problems(name, event, when))
        return found

    def _scale_problems(self, region: str, event: EventConfig | None, when: str) -> list[str]:
        # Cell 1 takes the remainder of every split, so it is the busiest cell.
        hosts = self.peak_hosts(region, event, cell=1)
        targets = hosts * ALB_TARGETS_PER_TASK
        busiest = self.cell(region, 1)
        who = region if busiest.count == 1 else f"each cell of {region} (cell {busiest.name} the busiest)"
        head = f"{when}, {who} may run {hosts} hosts (max plus deploy surge), one task each"
        problems = []
        if targets > ALB_TARGETS_PER_LOAD_BALANCER:
            problems.append(
                f"{head}: {targets} targets on its one ALB (each task is an HTTP and a gRPC target), above "
                f"the default {ALB_TARGETS_PER_LOAD_BALANCER:,} targets per ALB: ask AWS to raise it "
                "(Service Quotas, Elastic Load Balancing); `make preflight` reads your account's"
            )
        if hosts > ALB_TARGETS_PER_TARGET_GROUP:
            problems.append(
                f"{head}: {hosts} targets in each target group, above the default "
                f"{ALB_TARGETS_PER_TARGET_GROUP:,} targets per target group: ask AWS to raise it"
            )
        if hosts > ECS_INSTANCES_PER_CLUSTER:
            problems.append(
                f"{head}: above ECS's {ECS_INSTANCES_PER_CLUSTER:,} container instances per cluster: split "
                "the region's load or ask AWS"
            )
        return problems

    def peak_hosts(self, region: str, event: EventConfig | None = None, cell: int = 1) -> int:
        """Hosts one cell of the region (the region itself when it is one cell) may run at once: each
        fleet's maximum (the event's where it names the fleet) plus the hosts a rolling deploy may start
        above it."""
        percent = self.serving.deployment.max_surge_percent
        total = 0
        for fleet in self.regions[region].fleets:
            high = self.cell_bounds(self.cell(region, cell), fleet, event)[1]
            total += high + surge_hosts(high, percent)
        return total

    def region_max_hosts(self, region: str, event: EventConfig | None = None) -> list[int]:
        """Each fleet's maximum in the region, the event's where it names the fleet (no surge)."""
        return [
            self.event_bounds(event, region, fleet)[1] if event else fleet.max
            for fleet in self.regions[region].fleets
        ]

    def cells(self, region: str) -> tuple[Cell, ...]:
        count = self.regions[region].cells
        return tuple(Cell(region, index, count) for index in range(1, count + 1))

    def cell(self, region: str, index: int) -> Cell:
        return Cell(region, index, self.regions[region].cells)

    @property
    def all_cells(self) -> tuple[Cell, ...]:
        """Every cell of every region, in config order: what routing weighs and deploy waves go through."""
        return tuple(cell for region in self.regions for cell in self.cells(region))

    def cell_bounds(
        self, cell: Cell, fleet: FleetConfig, event: EventConfig | None = None
    ) -> tuple[int, int]:
        """(min, max) hosts of a fleet in one cell: the region's bounds (the event's while it holds) split
        across the region's cells."""
        low, high = self.event_bounds(event, cell.region, fleet) if event else (fleet.min, fleet.max)
        position = cell.index - 1
        return split_hosts(low, cell.count)[position], split_hosts(high, cell.count)[position]

    def cell_metrics_namespace(self, cell: Cell) -> str:
        """Where a cell's containers publish: the configured namespace for a one-cell region, a namespace
        per cell otherwise, so each cell's scaling, alarms and routing signals read only its own hosts."""
        base = self.observability.metrics_namespace
        return base if cell.count == 1 else f"{base}/cell{cell.index}"

    def event_bounds(self, event: EventConfig, region: str, fleet: FleetConfig) -> tuple[int, int]:
        """(min, max) hosts of a fleet while the event's bounds hold: the event's, or the fleet's own."""
        hosts = event.regions.get(region, {}).get(fleet.instance_type)
        return (hosts.min, hosts.max) if hosts else (fleet.min, fleet.max)

    @property
    def orchestrator_region(self) -> str:
        """Where the global routing stack and its orchestrator live."""
        return self.routing.orchestrator_region or next(iter(self.regions))

    def min_healthy_hosts(self, region: str, cell: int = 1) -> int:
        """Healthy hosts below which a cell (the region, when it is one cell) is failed out of DNS and
        drained by the orchestrator."""
        this = self.cell(region, cell)
        minimum = sum(self.cell_bounds(this, fleet)[0] for fleet in self.regions[region].fleets)
        return max(1, math.ceil(self.routing.min_healthy_host_share * minimum))

    def availability_zones(self, region: str) -> list[str]:
        """The region's zones: as configured, else the zones that offer every fleet's instance type plus any
        Capacity Block's zone (the account holds a block there, so that zone surely exists for it)."""
        configured = self.regions[region].availability_zones
        if configured:
            return list(configured)
        fleets = self.regions[region].fleets
        zones = default_zones(region, [fleet.instance_type for fleet in fleets])
        blocks = {fleet.capacity_block.availability_zone for fleet in fleets if fleet.capacity_block}
        return sorted(set(zones) | blocks)

    def fleet_availability_zones(self, region: str, fleet: FleetConfig) -> list[str]:
        """Where a fleet's hosts launch: its Capacity Block's zone; else every configured zone (the user knows
        their account's zone names; misses are warnings), or the default zones that offer the fleet's type."""
        if fleet.capacity_block is not None:
            return [fleet.capacity_block.availability_zone]
        zones = self.availability_zones(region)
        if self.regions[region].availability_zones:
            return zones
        return fleet_zones(region, fleet.instance_type, zones)

    def nat_gateways(self, region: str) -> int:
        """NAT gateways in each cell's VPC: as configured; by default one per zone, but no more than the
        region's cells together fit in the default 5 Elastic IPs (at least one per cell). The hosts reach S3,
        ECR, ECS, Logs, STS and SSM through endpoints, so a zone without its own NAT gateway loses only its
        internet egress, through another zone's gateway, when that zone fails (README, "Quotas")."""
        configured = self.regions[region].nat_gateways
        if configured is not None:
            return configured
        zones = len(self.availability_zones(region))
        return min(zones, max(1, ELASTIC_IPS.default // self.regions[region].cells))

    def artifacts_s3_uri(self, region: str) -> str:
        return self.regions[region].artifacts_s3_uri or self.model.artifacts_s3_uri

    def image_uri(self, region: str, family: NeuronFamily) -> str | None:
        """The region's own image for the family, else the shared one, else None (built from container/)."""
        return self.regions[region].image_uris.get(family.value) or self.container.image_uri(family)
