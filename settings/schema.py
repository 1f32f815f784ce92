"""The typed shape of a kit config. Every rule a user can break is checked here, once, so nothing
downstream needs to re-check or re-parse: stacks and constructs read these objects only."""

from __future__ import annotations

import ipaddress
import math
import re
from typing import Annotated, Self

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, field_validator, model_validator

from settings.aws_limits import COLD_START_BUDGET_MAX, DEREGISTRATION_DELAY_MAX
from settings.instances import INSTANCES, InstanceFacts, NeuronFamily
from settings.regions import KNOWN_REGIONS

_S3_URI = re.compile(r"^s3://(?P<bucket>[a-z0-9][a-z0-9.-]{1,61}[a-z0-9])(/(?P<prefix>.*))?$")
_ACM_ARN = re.compile(r"^arn:aws[a-z-]*:acm:(?P<region>[a-z0-9-]+):\d{12}:certificate/[A-Za-z0-9-]+$")
_NAME = re.compile(r"^[A-Za-z][A-Za-z0-9-]{0,39}$")

PositiveInt = Annotated[int, Field(gt=0)]


def _known_region(name: str) -> str:
    if name not in KNOWN_REGIONS:
        raise ValueError(f"unknown region {name!r}")
    return name


RegionName = Annotated[str, AfterValidator(_known_region)]


class StrictModel(BaseModel):
    """Unknown keys are typos until proven otherwise; values never change after validation."""

    model_config = ConfigDict(extra="forbid", frozen=True, strict=True)


class FleetConfig(StrictModel):
    instance_type: str
    tensor_parallel: PositiveInt
    min: Annotated[int, Field(ge=0)]
    max: PositiveInt
    # Only for types without instance store: the EBS volume that holds weights and compiled artifacts.
    data_volume_gib: Annotated[int, Field(ge=50, le=16384)] = 500

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
        return self

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
    # Weights and compiled Neuron artifacts; only the task role may read this location.
    artifacts_s3_uri: str
    max_model_len: Annotated[int, Field(ge=256, le=131072)] = 8192
    max_num_seqs: Annotated[int, Field(ge=1, le=512)] = 32
    max_output_tokens: Annotated[int, Field(ge=1, le=32768)] = 1024
    dtype: str = "bfloat16"
    allow_compile_on_start: bool = False

    @field_validator("artifacts_s3_uri")
    @classmethod
    def _s3_uri(cls, value: str) -> str:
        if not _S3_URI.match(value):
            raise ValueError("must be an S3 URI like s3://bucket/prefix/")
        return value

    @property
    def artifacts_bucket(self) -> str:
        match = _S3_URI.match(self.artifacts_s3_uri)
        assert match is not None  # validated above
        return match.group("bucket")

    @property
    def artifacts_prefix(self) -> str:
        match = _S3_URI.match(self.artifacts_s3_uri)
        assert match is not None
        return (match.group("prefix") or "").strip("/")


class ServingConfig(StrictModel):
    # Image pull + weight download + compiled-artifact load on a new host.
    cold_start_budget_seconds: Annotated[int, Field(ge=60, le=COLD_START_BUDGET_MAX)] = 1800
    health_check_grace_seconds: Annotated[int, Field(ge=60)] = 2400
    # Slowest decode rate the service promises; with max_output_tokens it bounds the longest stream.
    min_decode_tokens_per_second: Annotated[float, Field(gt=0)] = 5.0
    prefill_budget_seconds: Annotated[int, Field(ge=1, le=600)] = 30
    shared_memory_mib: Annotated[int, Field(ge=64, le=65536)] = 4096
    grpc_port: Annotated[int, Field(ge=1024, le=65535)] = 8001
    http_port: Annotated[int, Field(ge=1024, le=65535)] = 8000
    metrics_port: Annotated[int, Field(ge=1024, le=65535)] = 8002

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


class ContainerConfig(StrictModel):
    # Pre-built image per Neuron family (Inf2/Trn1 need Neuron SDK 2.28, Trn2 a newer one). A family
    # without an entry is built from container/ as a CDK asset.
    image_uris: dict[str, str] = Field(default_factory=dict)
    log_retention_days: Annotated[int, Field(ge=1)] = 30

    @field_validator("image_uris")
    @classmethod
    def _families(cls, image_uris: dict[str, str]) -> dict[str, str]:
        families = [family.value for family in NeuronFamily]
        for family, uri in image_uris.items():
            if family not in families:
                raise ValueError(f"unknown Neuron family {family!r}; use one of {families}")
            if not uri or any(c.isspace() for c in uri):
                raise ValueError(f"image_uris.{family} is not an image URI: {uri!r}")
        return image_uris

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


class ObservabilityConfig(StrictModel):
    metrics_namespace: str = "LLMServing"
    ttft_p99_threshold_ms: Annotated[int, Field(ge=50)] = 1000
    alarm_email: str | None = None


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
    regions: Annotated[dict[RegionName, RegionConfig], Field(min_length=1)]

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
        for name, region in self.regions.items():
            if region.certificate_arn:
                arn_region = _ACM_ARN.match(region.certificate_arn).group("region")  # type: ignore[union-attr]
                if arn_region != name:
                    raise ValueError(
                        f"regions.{name}.certificate_arn is in {arn_region}; an ALB needs a certificate "
                        "from its own region"
                    )
            if region.availability_zones:
                strays = [zone for zone in region.availability_zones if not zone.startswith(name)]
                if strays:
                    raise ValueError(f"regions.{name}.availability_zones {strays} are not zones of {name}")
        return self

    @property
    def longest_stream_seconds(self) -> int:
        """Longest generation the config allows: what ALB idle timeout and deregistration delay must cover."""
        decode = self.model.max_output_tokens / self.serving.min_decode_tokens_per_second
        return self.serving.prefill_budget_seconds + math.ceil(decode)

    def warnings(self) -> list[tuple[tuple[str | int, ...], str]]:
        """(key path, message) for what validates but will likely fail at deploy time."""
        found: list[tuple[tuple[str | int, ...], str]] = []
        for name, region in self.regions.items():
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
        return found

    def availability_zones(self, region: str) -> list[str]:
        configured = self.regions[region].availability_zones
        return list(configured) if configured else [f"{region}{letter}" for letter in "abc"]
