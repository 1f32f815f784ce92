"""The global routing stack, deployed once beside the regional ones (in the orchestrator's region): the
traffic orchestrator and the fleet-wide dashboard. It references no regional resource: it knows regions
by the names config gives them, and the orchestrator reads what they publish at run time. The weighted
records and health checks are not here (see docs/routing.md)."""

from __future__ import annotations

from aws_cdk import Environment, Stack, Tags
from constructs import Construct

from cdk_constructs.fleet_dashboard import FleetDashboard
from cdk_constructs.traffic_orchestrator import TrafficOrchestrator
from settings.schema import Settings
from stacks import props


class GlobalRouting(Stack):
    def __init__(self, scope: Construct, id: str, *, settings: Settings) -> None:
        super().__init__(
            scope,
            id,
            env=Environment(account=settings.account, region=settings.orchestrator_region),
            description=f"{settings.project}: traffic orchestrator and fleet dashboard across regions",
        )
        Tags.of(self).add("project", settings.project)
        orchestrator = TrafficOrchestrator(
            self, "TrafficOrchestrator", props=props.orchestrator_props(settings)
        )
        FleetDashboard(
            self,
            "FleetDashboard",
            props=props.fleet_dashboard_props(settings),
            alarms=list(orchestrator.alarms),
        )
