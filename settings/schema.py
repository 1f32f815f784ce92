"""The typed shape of a kit config: `Settings` composes one model per section (settings/<section>.py).
Every rule a user can break is checked once, here or in the section, so nothing downstream re-checks or
re-parses: stacks and constructs read these objects only."""

from __future__ import annotations

import math
import re
from datetime import datetime
from typing import Annotated, Self

from pydantic import Field, field_validator, model_validator

from settings.aws_limits import DEREGISTRATION_DELAY_MAX, ELASTIC_IPS
from settings.cells import Cell, split_hosts
from settings.cross_checks import (
    capacity_block_zone_problems,
    cell_problems,
    event_problems,
    network_problems,
)
from settings.deploy import DeployConfig
from settings.deploy_warnings import deploy_warnings, orchestrator_warnings
from settings.events import EventConfig, EventHosts
from settings.fleets import (
    CapacityBlockConfig,
    CapacityReservationConfig,
    FleetConfig,
    RegionConfig,
    WarmPoolConfig,
)
from settings.instances import NeuronFamily
from settings.model import ModelConfig, SamplingDefaults
from settings.operations import (
    LoadBalancerConfig,
    ObservabilityConfig,
    OperationsConfig,
    TlsConfig,
    WafConfig,
)
from settings.rollout import surge_hosts
from settings.routing import RoutingConfig
from settings.serving import (
    DEFAULT_NEURON_AMI_RELEASE,
    RECOMMENDED_AMI,
    ContainerConfig,
    DeploymentConfig,
    ServingConfig,
)
from settings.types import (
    ACM_ARN,
    PROJECT_NAME,
    EventTime,
    KeyPath,
    PositiveInt,
    RegionName,
    StrictModel,
    problems_at,
    s3_bucket,
    s3_prefix,
)
from settings.zones import default_zones, fleet_zones

# The section models are re-exported, so `from settings.schema import FleetConfig` keeps working.
__all__ = [
    "DEFAULT_NEURON_AMI_RELEASE",
    "RECOMMENDED_AMI",
    "CapacityBlockConfig",
    "CapacityReservationConfig",
    "ContainerConfig",
    "DeployConfig",
    "DeploymentConfig",
    "EventConfig",
    "EventHosts",
    "EventTime",
    "FleetConfig",
    "KeyPath",
    "LoadBalancerConfig",
    "ModelConfig",
    "ObservabilityConfig",
    "OperationsConfig",
    "RegionConfig",
    "RegionName",
    "RoutingConfig",
    "SamplingDefaults",
    "ServingConfig",
    "Settings",
    "StrictModel",
    "TlsConfig",
    "WafConfig",
    "WarmPoolConfig",
    "s3_bucket",
    "s3_prefix",
]


class Settings(StrictModel):
    """A validated kit config: what the app, stacks and planner read."""

    # Names the stacks (<project>-<region>), alarms and parameters, and tags them.
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
    # surge are 500 tasks, 1,000 targets: the default ALB quota (docs/peak-events.md, "Cells").
    cell_max_hosts: PositiveInt = 400
    # Every region the kit deploys to, in deploy order (make deploy goes region by region in this order).
    regions: Annotated[dict[RegionName, RegionConfig], Field(min_length=1)]
    events: list[EventConfig] = Field(default_factory=list)

    @field_validator("project")
    @classmethod
    def _project_name(cls, value: str) -> str:
        if not PROJECT_NAME.match(value):
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
        budget, objective = self.queue_wait_budget_ms, self.observability.ttft_p99_threshold_ms
        if budget >= objective:
            raise ValueError(
                f"serving.queue_wait_budget_ms ({budget}) is not below "
                f"observability.ttft_p99_threshold_ms ({objective}): a request could wait past the "
                "first-token objective and still be served"
            )
        home = self.routing.orchestrator_region
        if home is not None and home not in self.regions:
            raise ValueError(
                f"routing.orchestrator_region {home!r} is not one of the configured regions "
                f"({', '.join(self.regions)})"
            )
        for name, region in self.regions.items():
            if region.certificate_arn:
                arn_region = ACM_ARN.match(region.certificate_arn).group("region")  # type: ignore[union-attr]
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
        problems = [
            *self.observability.topic_region_problems({self.orchestrator_region, *self.regions}),
            *cell_problems(self),
            *capacity_block_zone_problems(self),
            *event_problems(self),
            *network_problems(self),
        ]
        if problems:
            raise problems_at(problems, type(self).__name__)
        return self

    @property
    def queue_wait_budget_ms(self) -> int:
        """The queue-wait budget the containers get (serving.queue_wait_budget_ms, or 80% of the first-token
        objective): the stacks set it and the game day's twin simulates it, from this one place."""
        budget = self.serving.queue_wait_budget_ms
        return budget if budget is not None else math.floor(0.8 * self.observability.ttft_p99_threshold_ms)

    @property
    def longest_stream_seconds(self) -> int:
        """Longest generation the config allows: what ALB idle timeout and deregistration delay must cover."""
        decode = self.model.max_output_tokens / self.serving.min_decode_tokens_per_second
        return self.serving.prefill_budget_seconds + math.ceil(decode)

    def warnings(self, now: datetime | None = None) -> list[tuple[KeyPath, str]]:
        """(key path, message) for what validates but will likely fail at deploy time, or is stale."""
        return [
            *deploy_warnings(self, now),
            *orchestrator_warnings(len(self.regions), self.orchestrator_region, self.largest_region),
        ]

    def readiness_problems(self) -> list[tuple[KeyPath, str]]:
        """What a production deploy needs beyond a valid config: the weights' revision, which keys the
        compiled artifacts, and someone the alarms page."""
        found: list[tuple[KeyPath, str]] = []
        if not self.model.revision:
            found.append(
                (
                    ("model",),
                    "revision is not set: compiled artifacts would be keyed without the weights' revision, "
                    "and new weights under the same model_id would load the old graphs; set model.revision",
                )
            )
        if not self.observability.pages_someone:
            found.append(
                (
                    ("observability",),
                    "alarms page no one: set alarm_email (an address to confirm) or alarm_topic_arn (your "
                    "pager's SNS topic, {region} for each region's); `make deploy` refuses a config without "
                    "either",
                )
            )
        return found

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
    def largest_region(self) -> str:
        """The region that serves the most: the highest weight, then the most hosts at its fleets' max."""
        return max(self.regions, key=self._serving_size)

    def _serving_size(self, name: str) -> tuple[int, int]:
        region = self.regions[name]
        return region.weight, sum(fleet.max for fleet in region.fleets)

    @property
    def orchestrator_region(self) -> str:
        """Where the global routing stack and its orchestrator live: as configured, else the largest serving
        region but one, so an impairment of the largest region's CloudWatch or Lambda does not take away
        the orchestrator of the traffic it would have to move (one region: that one)."""
        if self.routing.orchestrator_region:
            return self.routing.orchestrator_region
        others = sorted(
            (name for name in self.regions if name != self.largest_region),
            key=self._serving_size,
            reverse=True,
        )
        return others[0] if others else next(iter(self.regions))

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
