"""One dashboard for the whole fleet, every region side by side: output tokens per minute (stacked, so
the top line is the sum across regions), time to first token p99 per region, hosts per instance type per
region, and each region's Route 53 weight as the orchestrator publishes it. CloudWatch dashboards read
metrics from any region; each metric here names its own. A region of several cells is drawn cell by cell
(each cell publishes to its own namespace and has its own weighted record)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from aws_cdk import Duration
from aws_cdk import aws_cloudwatch as cloudwatch
from constructs import Construct

PERIOD = Duration.minutes(1)


@dataclass(frozen=True)
class RegionFleets:
    region: str
    instance_types: tuple[str, ...]
    label: str = ""  # a cell's name (`us-east-1/2`); empty: the region, drawn as the region
    metrics_namespace: str = ""  # a cell's own namespace; empty: the dashboard's

    @property
    def name(self) -> str:
        return self.label or self.region


@dataclass(frozen=True)
class FleetDashboardProps:
    dashboard_name: str
    metrics_namespace: str  # the serving containers' EMF namespace
    model_name: str
    routing_metrics_namespace: str  # the orchestrator's RegionWeight
    ttft_p99_threshold_ms: int
    regions: tuple[RegionFleets, ...]
    gauge_interval_seconds: int = 10  # the containers' per-host gauges; a minute holds 60/interval samples


class FleetDashboard(Construct):
    def __init__(
        self,
        scope: Construct,
        id: str,
        *,
        props: FleetDashboardProps,
        alarms: Sequence[cloudwatch.IAlarm] = (),
    ) -> None:
        super().__init__(scope, id)
        self.dashboard = cloudwatch.Dashboard(self, "Dashboard", dashboard_name=props.dashboard_name)
        if alarms:
            self.dashboard.add_widgets(
                cloudwatch.AlarmStatusWidget(title="Routing", alarms=list(alarms), width=24)
            )
        self.dashboard.add_widgets(
            cloudwatch.GraphWidget(
                title="Output tokens per minute (stacked: the top line is all regions)",
                left=[self._serving(props, r, "OutputTokens", "Sum") for r in props.regions],
                stacked=True,
                width=12,
            ),
            cloudwatch.GraphWidget(
                title="Route 53 weight per region (as the orchestrator set it)",
                left=[
                    cloudwatch.Metric(
                        namespace=props.routing_metrics_namespace,
                        metric_name="RegionWeight",
                        dimensions_map={"Region": r.name},
                        statistic="Maximum",
                        period=PERIOD,
                        label=r.name,
                    )
                    for r in props.regions
                ],
                width=12,
            ),
        )
        self.dashboard.add_widgets(
            cloudwatch.GraphWidget(
                title="Time to first token p99 per region (ms)",
                left=[self._serving(props, r, "TimeToFirstToken", "p99") for r in props.regions],
                left_annotations=[
                    cloudwatch.HorizontalAnnotation(value=props.ttft_p99_threshold_ms, label="p99 target")
                ],
                width=12,
            ),
            cloudwatch.GraphWidget(
                title="Hosts per instance type per region (hosts reporting the serving gauges)",
                left=[
                    self._hosts(props, r, t, f"hosts{index}")
                    for index, (r, t) in enumerate((r, t) for r in props.regions for t in r.instance_types)
                ],
                width=12,
            ),
        )

    @staticmethod
    def _serving(
        props: FleetDashboardProps, where: RegionFleets, name: str, statistic: str
    ) -> cloudwatch.Metric:
        return cloudwatch.Metric(
            namespace=where.metrics_namespace or props.metrics_namespace,
            metric_name=name,
            dimensions_map={"Model": props.model_name},
            statistic=statistic,
            period=PERIOD,
            region=where.region,
            label=where.name,
        )

    @staticmethod
    def _hosts(
        props: FleetDashboardProps, where: RegionFleets, instance_type: str, id: str
    ) -> cloudwatch.IMetric:
        # Every host sends the gauge every gauge_interval_seconds: a minute's SampleCount / samples per host.
        samples = cloudwatch.Metric(
            namespace=where.metrics_namespace or props.metrics_namespace,
            metric_name="ServingSlots",
            dimensions_map={"Model": props.model_name, "InstanceType": instance_type},
            statistic="SampleCount",
            period=PERIOD,
            region=where.region,
        )
        return cloudwatch.MathExpression(
            # Ids are per graph, so each series names its own.
            expression=f"{id} / (PERIOD({id}) / {props.gauge_interval_seconds})",
            using_metrics={id: samples},
            label=f"{where.name} {instance_type}",
            period=PERIOD,
        )
