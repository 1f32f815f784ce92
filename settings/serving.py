"""How a host serves: cold start, health checks, ports, deploy surge, and the image and AMI it runs."""

from __future__ import annotations

import re
from typing import Annotated, Self

from pydantic import Field, field_validator, model_validator

from settings.aws_limits import COLD_START_BUDGET_MAX, INSTANCE_WARMUP_MAX
from settings.instances import NeuronFamily
from settings.types import ImageUris, StrictModel


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
    # The ECS services' health-check grace period for a new task; must cover cold_start_budget_seconds.
    health_check_grace_seconds: Annotated[int, Field(ge=60)] = 2400
    # Slowest decode rate the service promises; with max_output_tokens it bounds the longest stream.
    min_decode_tokens_per_second: Annotated[float, Field(gt=0)] = 5.0
    # Longest wait for a first token the service allows: with max_output_tokens and
    # min_decode_tokens_per_second it sets the longest stream, which the ALB's idle timeout and deregistration
    # delay cover.
    prefill_budget_seconds: Annotated[int, Field(ge=1, le=600)] = 30
    # Shared memory (/dev/shm) of the serving container, which Triton's Python backend uses.
    shared_memory_mib: Annotated[int, Field(ge=64, le=65536)] = 4096
    # Requests an engine replica lets wait beyond its max_num_seqs batch slots; past it a request is refused
    # at once (UNAVAILABLE, counted as Shed) so the client or the ALB's next pick goes to a host with room.
    # A short queue keeps what is admitted within the first-token objective under overload: with one more
    # batch waiting (the container's own default, null here) a request waits about a whole stream for its
    # slot, and an overloaded fleet serves almost nothing within the objective; with one, it sheds the
    # excess and serves what it admits within it (docs/routing.md, "Overload is not a fault"; measured by
    # the planner's simulator, tests/gameday/test_serving.py). 0 refuses whatever finds no free slot.
    max_queued_per_replica: Annotated[int, Field(ge=0, le=4096)] | None = 1
    # Milliseconds from its arrival by which a request that waits for a batch slot must have its first
    # token; past it the replica aborts and sheds it (UNAVAILABLE, counted as Shed), so what an overloaded
    # replica serves stays within the first-token objective however long its streams hold their slots (at
    # Neuron's 33 ms decode steps one queued request waits about a second). null: 80% of
    # observability.ttft_p99_threshold_ms, the rest left for what the container does not see (the client's
    # network, TLS, the ALB). Settings.queue_wait_budget_ms holds the value deployed.
    queue_wait_budget_ms: Annotated[int, Field(ge=50, le=600_000)] | None = None
    # Triton's gRPC port in the container (the ALB's gRPC target group).
    grpc_port: Annotated[int, Field(ge=1024, le=65535)] = 8001
    # Triton's HTTP port in the container (the ALB's HTTP target group and health check).
    http_port: Annotated[int, Field(ge=1024, le=65535)] = 8000
    # Triton's Prometheus metrics port in the container (not exposed through the ALB).
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
    # Days the serving and orchestrator log groups keep their logs.
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
