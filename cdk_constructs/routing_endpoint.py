"""What global routing needs from one region, owned by that region's stack: the hard-fault checks that take
it out of Route 53's answers, combined in a CALCULATED check, and two SSM parameters the orchestrator reads
at run time: the ALB to point the region's record at, and the id of the health check to attach to it.

Only hard faults leave DNS: no healthy target, a front door clients cannot reach (an HTTPS check from
Route 53's checkers outside the region, on the model's ready path), engine errors (sheds left out) on an M
of N rule that catches a region failing every other minute. Latency and shedding rise with load: a DNS
check on them takes a loaded region out whole and tips its load onto the next, so they only move weight
(the orchestrator) and page (the region's observability).

Why here and not in the global stack: a Route 53 health check on a CloudWatch alarm copies the alarm's
configuration when it is created (the health check's CloudWatchAlarmConfiguration), so the alarm must
exist first; beside its alarms, in the stack that creates them, the order is a dependency CloudFormation
keeps, and the global stack can deploy before or after any region. Such a health check follows the
alarm's metric data, not its state, and only an alarm on one standard-resolution metric with Average,
Minimum, Maximum, Sum or SampleCount: no percentile (the p99 alarm), no metric math, no composite alarm.
So each signal is a 0/1 per-request metric whose Average is a share, or a plain count.
"""

from __future__ import annotations

from dataclasses import dataclass

from aws_cdk import Duration, Stack, Tags
from aws_cdk import aws_cloudwatch as cloudwatch
from aws_cdk import aws_elasticloadbalancingv2 as elbv2
from aws_cdk import aws_route53 as route53
from aws_cdk import aws_ssm as ssm
from constructs import Construct

from cdk_constructs.alarm_names import WatchedAlarm

# No data in a minute (no streams finished, a new region with no traffic yet, a region the orchestrator
# drained) must not fail a region out: LastKnownStatus would keep a drained region unhealthy for ever,
# because without traffic it never produces the data that would clear it; Unhealthy would fail out every
# new region. So a check without data counts as healthy, and the orchestrator, which reads the same
# metrics, decides on weights.
INSUFFICIENT_DATA_HEALTH_STATUS = "Healthy"


@dataclass(frozen=True)
class RoutingEndpointProps:
    alarm_name_prefix: str  # <project>-<region>-routing
    endpoint_parameter: str
    health_check_parameter: str
    metrics_namespace: str
    model_name: str
    error_share: float  # of requests failed on the server's side (ServingError: sheds are not errors)
    # Minutes with no healthy target before its check fails: one bad minute moves nothing, as in the
    # orchestrator (routing.bad_runs_to_drain).
    evaluation_minutes: int
    alb_ready_path: str  # the model's readiness path the listener forwards (/v2/models/<name>/ready)
    # M of N for the error share: bad in this many of the last `error_window_minutes` (as the orchestrator).
    error_bad_minutes: int = 3
    error_window_minutes: int = 5
    # What the health checks' Name tags call this endpoint: a cell's name (`us-east-1/2`), so two cells of
    # one region tell apart in the Route 53 console; empty: the stack's region.
    label: str = ""


class RoutingEndpoint(Construct):
    def __init__(
        self,
        scope: Construct,
        id: str,
        *,
        props: RoutingEndpointProps,
        load_balancer: elbv2.ApplicationLoadBalancer,
        target_group: elbv2.ApplicationTargetGroup,
    ) -> None:
        super().__init__(scope, id)
        self._prefix = props.alarm_name_prefix
        minutes = props.evaluation_minutes
        bad, window = props.error_bad_minutes, props.error_window_minutes
        self.error_share_alarm = self._alarm(
            "ErrorShare",
            "serving-errors",
            f"More than {props.error_share:.1%} of requests failed on the server's side (sheds not counted) "
            f"in {bad} of the last {window} min",
            self._model_metric(props, "ServingError"),
            props.error_share,
            cloudwatch.ComparisonOperator.GREATER_THAN_THRESHOLD,
            window,
            bad,
        )
        self.healthy_hosts_alarm = self._alarm(
            "NoHealthyHosts",
            "no-healthy-hosts",
            f"No healthy host behind the ALB for {minutes} min",
            target_group.metrics.healthy_host_count(statistic="Minimum", period=Duration.minutes(1)),
            1,
            cloudwatch.ComparisonOperator.LESS_THAN_THRESHOLD,
            minutes,
            minutes,
        )
        self.alarms = [self.error_share_alarm, self.healthy_hosts_alarm]
        region = Stack.of(self).region
        label = props.label or region
        self.signal_checks: list[route53.CfnHealthCheck] = [
            route53.CfnHealthCheck(
                self,
                f"{alarm.node.id}Check",
                health_check_config=route53.CfnHealthCheck.HealthCheckConfigProperty(
                    type="CLOUDWATCH_METRIC",
                    alarm_identifier=route53.CfnHealthCheck.AlarmIdentifierProperty(
                        name=alarm.alarm_name, region=region
                    ),
                    insufficient_data_health_status=INSUFFICIENT_DATA_HEALTH_STATUS,
                ),
                health_check_tags=[
                    route53.CfnHealthCheck.HealthCheckTagProperty(
                        key="Name", value=f"{label} {alarm.node.id}"
                    )
                ],
            )
            for alarm in self.alarms
        ]
        # What clients see: a listener, certificate, WAF or network fault fails this while every target is
        # healthy. Route 53's checkers probe from outside the region; without an IP address they resolve
        # the name and send it as the Host header and, with SNI on, in the TLS client hello (Route 53 API
        # reference, HealthCheckConfig: FullyQualifiedDomainName, EnableSNI; a certificate without that
        # name makes the checker retry the handshake without SNI). The ready path is one the listener
        # forwards to the model. 3 failures 30 s apart: a minute and a half, as the other checks' two
        # minutes.
        self.front_door_check = route53.HealthCheck(
            self,
            "FrontDoorCheck",
            type=route53.HealthCheckType.HTTPS,
            fqdn=load_balancer.load_balancer_dns_name,
            port=443,
            resource_path=props.alb_ready_path,
            enable_sni=True,
            request_interval=Duration.seconds(30),
            failure_threshold=3,
        )
        Tags.of(self.front_door_check).add("Name", f"{label} FrontDoor")
        children = [
            *(check.attr_health_check_id for check in self.signal_checks),
            self.front_door_check.health_check_id,
        ]
        # Healthy only while every hard-fault check is: any one of them takes the region out by itself.
        self.health_check = route53.CfnHealthCheck(
            self,
            "RegionCheck",
            health_check_config=route53.CfnHealthCheck.HealthCheckConfigProperty(
                type="CALCULATED",
                child_health_checks=children,
                health_threshold=len(children),
            ),
            health_check_tags=[
                route53.CfnHealthCheck.HealthCheckTagProperty(key="Name", value=f"{label} serving")
            ],
        )
        ssm.StringParameter(
            self,
            "EndpointParameter",
            parameter_name=props.endpoint_parameter,
            description="The region's serving ALB, read by the traffic orchestrator for its weighted record",
            string_value=Stack.of(self).to_json_string(
                {
                    "alb_dns_name": load_balancer.load_balancer_dns_name,
                    "alb_canonical_hosted_zone_id": load_balancer.load_balancer_canonical_hosted_zone_id,
                    "region": region,
                }
            ),
        )
        ssm.StringParameter(
            self,
            "HealthCheckParameter",
            parameter_name=props.health_check_parameter,
            description="The region's calculated Route 53 health check, attached to its weighted record",
            string_value=self.health_check.attr_health_check_id,
        )

    @staticmethod
    def _model_metric(props: RoutingEndpointProps, name: str) -> cloudwatch.Metric:
        return cloudwatch.Metric(
            namespace=props.metrics_namespace,
            metric_name=name,
            dimensions_map={"Model": props.model_name},
            statistic="Average",
            period=Duration.minutes(1),
        )

    def _alarm(
        self,
        id: str,
        signal: str,
        description: str,
        metric: cloudwatch.IMetric,
        threshold: float,
        comparison: cloudwatch.ComparisonOperator,
        minutes: int,
        datapoints: int,
    ) -> cloudwatch.Alarm:
        """An alarm Route 53 follows. Route 53 copies the alarm's metric, statistic, period, evaluation
        periods and threshold (API reference, CloudWatchAlarmConfiguration: no DatapointsToAlarm), so the M
        of N rule is the alarm's own; the orchestrator drains on the same rule. Named for what it watches
        (alarm_names.py): a change of metric, dimensions (a replaced target group) or rule is a new alarm, and
        the health check naming it is updated, which is when Route 53 copies the alarm's settings again."""
        return WatchedAlarm(
            self,
            id,
            name_prefix=f"{self._prefix}-{signal}",
            alarm_description=f"{description}; a Route 53 health check follows it",
            metric=metric,
            threshold=threshold,
            comparison_operator=comparison,
            evaluation_periods=minutes,
            datapoints_to_alarm=datapoints,
            # For the alarm's own state only: Route 53 follows the metric data and decides missing data
            # with the health check's InsufficientDataHealthStatus.
            treat_missing_data=cloudwatch.TreatMissingData.NOT_BREACHING,
        )
