"""The orchestrator's settings, handed over by the global stack as one JSON environment variable. The
stack builds it from the validated kit config (stacks/props.py), so the Lambda re-validates nothing."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from .policy import PolicyParams

ENVIRONMENT_VARIABLE = "ORCHESTRATOR_CONFIG"


@dataclass(frozen=True)
class RegionTarget:
    name: str
    initial_weight: int  # the record's weight when the orchestrator first creates it
    min_hosts: int
    endpoint_parameter: str  # /<project>/<region>/serving-endpoint (written by the regional stack)
    health_check_parameter: str  # the id of the region's calculated Route 53 health check
    degraded_alarm: str  # the alarm the orchestrator drains on, whatever the regional stack names it


@dataclass(frozen=True)
class OrchestratorConfig:
    domain_name: str
    hosted_zone_id: str
    metrics_namespace: str  # where the serving containers publish (EMF)
    model_name: str
    state_parameter: str
    override_parameter: str
    policy: PolicyParams
    regions: tuple[RegionTarget, ...]
    gauge_interval_seconds: int = 10  # the containers' periodic gauges (RequestsInFlight, ServingSlots)
    remove_after_runs: int = 10  # runs a record not in config keeps its weight before it is set to 0

    @property
    def budget(self) -> int:
        """What the weights of healthy regions add up to: the configured initial weights' sum."""
        return sum(region.initial_weight for region in self.regions)

    @property
    def region_names(self) -> set[str]:
        return {region.name for region in self.regions}

    def to_json(self) -> str:
        data: dict[str, Any] = {
            key: getattr(self, key)
            for key in (
                "domain_name",
                "hosted_zone_id",
                "metrics_namespace",
                "model_name",
                "state_parameter",
                "override_parameter",
                "gauge_interval_seconds",
                "remove_after_runs",
            )
        }
        data["policy"] = vars(self.policy)
        data["regions"] = [vars(region) for region in self.regions]
        return json.dumps(data, sort_keys=True, separators=(",", ":"))


def parse_config(text: str) -> OrchestratorConfig:
    data = json.loads(text)
    return OrchestratorConfig(
        domain_name=data["domain_name"],
        hosted_zone_id=data["hosted_zone_id"],
        metrics_namespace=data["metrics_namespace"],
        model_name=data["model_name"],
        state_parameter=data["state_parameter"],
        override_parameter=data["override_parameter"],
        gauge_interval_seconds=int(data.get("gauge_interval_seconds", 10)),
        remove_after_runs=int(data.get("remove_after_runs", 10)),
        policy=PolicyParams(**data["policy"]),
        regions=tuple(RegionTarget(**region) for region in data["regions"]),
    )
