"""The region's ECS cluster, with Container Insights for per-service task and resource metrics."""

from __future__ import annotations

from aws_cdk import aws_ec2 as ec2
from aws_cdk import aws_ecs as ecs
from constructs import Construct


class ServingCluster(Construct):
    def __init__(self, scope: Construct, id: str, *, vpc: ec2.IVpc) -> None:
        super().__init__(scope, id)
        # Enhanced insights publish RunningTaskCount per service, which the fleets' alarms watch.
        self.cluster = ecs.Cluster(
            self, "Cluster", vpc=vpc, container_insights_v2=ecs.ContainerInsights.ENHANCED
        )
