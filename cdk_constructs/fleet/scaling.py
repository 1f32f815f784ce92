"""How many serving tasks a fleet runs: service auto scaling within the config's bounds. The capacity
provider then sizes the hosts to fit (one host per task)."""

from __future__ import annotations

from aws_cdk import Duration
from aws_cdk import aws_applicationautoscaling as appscaling
from aws_cdk import aws_cloudwatch as cloudwatch
from aws_cdk import aws_ecs as ecs
from constructs import Construct

from cdk_constructs.fleet.props import FleetProps


def requests_in_flight_metric(props: FleetProps) -> cloudwatch.Metric:
    """The fleet's own per-host load: the container's 10 s gauge of streams in flight, {Model, InstanceType}.
    Averaged over the fleet's hosts, so a slower fleet that holds its streams longer scales on its own."""
    return cloudwatch.Metric(
        namespace=props.metrics_namespace,
        metric_name="RequestsInFlight",
        dimensions_map={"Model": props.model_name, "InstanceType": props.instance.name},
        statistic="Average",
        period=Duration.minutes(1),
    )


class ServiceScaling(Construct):
    def __init__(self, scope: Construct, id: str, *, props: FleetProps, service: ecs.Ec2Service) -> None:
        super().__init__(scope, id)
        self.scalable_task_count = service.auto_scale_task_count(
            min_capacity=props.deployed_bounds[0], max_capacity=props.deployed_bounds[1]
        )
        self.scalable_task_count.scale_to_track_custom_metric(
            "RequestsInFlight",
            metric=requests_in_flight_metric(props),
            target_value=props.target_requests_in_flight,
            # Scale out fast, in slowly: a host costs a whole cold start to bring back.
            scale_out_cooldown=Duration.minutes(2),
            scale_in_cooldown=Duration.minutes(30),
        )
        # Events: the task bounds change at the same moments as the group's (hosts.py); target tracking
        # keeps scaling inside whichever bounds hold.
        for change in props.scheduled_bounds:
            self.scalable_task_count.scale_on_schedule(
                change.name,
                schedule=appscaling.Schedule.at(change.at),
                min_capacity=change.min_hosts,
                max_capacity=change.max_hosts,
            )
