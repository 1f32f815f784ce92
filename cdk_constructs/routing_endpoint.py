"""What global routing needs from one region, owned by that region's stack: the alarms Route 53 health
checks can follow, the health checks themselves (one per signal, combined in a CALCULATED check) and two
SSM parameters the orchestrator reads at run time: the ALB to point the region's record at, and the id of
the health check to attach to it.

Why here and not in the global stack: a Route 53 health check on a CloudWatch alarm copies the alarm's
configuration when it is created (the health check's CloudWatchAlarmConfiguration), so the alarm must
exist first; beside its alarms, in the stack that creates them, the order is a dependency CloudFormation
keeps, and the global stack can deploy before or after any region. Such a health check follows the
alarm's metric data, not its state, and only an alarm on one standard-resolution metric with Average,
Minimum, Maximum, Sum or SampleCount: no percentile (the p99 alarm), no metric math, no composite alarm.
So each signal is a 0/1 per-request metric whose Average is a share, or a plain count.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass

from aws_cdk import Duration, Stack
from aws_cdk import aws_cloudwatch as cloudwatch
from aws_cdk import aws_elasticloadbalancingv2 as elbv2
from aws_cdk import aws_route53 as route53
from aws_cdk import aws_ssm as ssm
from constructs import Construct

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
    slow_first_token_share: float  # above: the region's p(1 - share) time to first token is above the SLO
    error_share: float
    min_healthy_hosts: int
    # Minutes a signal must stay bad before its alarm (and so its health check) fails: one bad minute
    # moves nothing, as in the orchestrator (routing.bad_runs_to_drain).
    evaluation_minutes: int


def alarm_name(prefix: str, signal: str, *settings: object) -> str:
    """Deterministic from config, and new whenever the alarm's settings change: a new name makes
    CloudFormation update the health check, which is when Route 53 copies the alarm's settings again."""
    digest = hashlib.sha256(repr(settings).encode()).hexdigest()[:8]
    return f"{prefix}-{signal}-{digest}"


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
        minutes = props.evaluation_minutes
        share_settings = (minutes, props.metrics_namespace, props.model_name)
        self.alarms = [
            self._alarm(
                "SlowFirstTokenShare",
                alarm_name(
                    props.alarm_name_prefix,
                    "slow-first-tokens",
                    props.slow_first_token_share,
                    *share_settings,
                ),
                f"Over {props.slow_first_token_share:.1%} of streams slow to a first token for {minutes} min",
                self._model_metric(props, "SlowFirstToken"),
                props.slow_first_token_share,
                cloudwatch.ComparisonOperator.GREATER_THAN_THRESHOLD,
                minutes,
            ),
            self._alarm(
                "ErrorShare",
                alarm_name(props.alarm_name_prefix, "errors", props.error_share, *share_settings),
                f"More than {props.error_share:.1%} of requests failed for {minutes} min",
                self._model_metric(props, "RequestFailed"),
                props.error_share,
                cloudwatch.ComparisonOperator.GREATER_THAN_THRESHOLD,
                minutes,
            ),
            self._alarm(
                "HealthyHostsBelowFloor",
                alarm_name(props.alarm_name_prefix, "healthy-hosts", props.min_healthy_hosts, minutes),
                f"Fewer than {props.min_healthy_hosts} healthy hosts behind the ALB for {minutes} min",
                target_group.metrics.healthy_host_count(statistic="Minimum", period=Duration.minutes(1)),
                props.min_healthy_hosts,
                cloudwatch.ComparisonOperator.LESS_THAN_THRESHOLD,
                minutes,
            ),
        ]
        # The shares are region-wide serving signals (the region-unfit composite's); the host floor is the
        # orchestrator's own reading of healthy hosts, here for Route 53.
        self.slow_first_token_alarm, self.error_share_alarm, self.healthy_hosts_alarm = self.alarms
        region = Stack.of(self).region
        self.signal_checks = [
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
                        key="Name", value=f"{region} {alarm.node.id}"
                    )
                ],
            )
            for alarm in self.alarms
        ]
        # Healthy only while every signal is: any one of them takes the region out of DNS by itself.
        self.health_check = route53.CfnHealthCheck(
            self,
            "RegionCheck",
            health_check_config=route53.CfnHealthCheck.HealthCheckConfigProperty(
                type="CALCULATED",
                child_health_checks=[check.attr_health_check_id for check in self.signal_checks],
                health_threshold=len(self.signal_checks),
            ),
            health_check_tags=[
                route53.CfnHealthCheck.HealthCheckTagProperty(key="Name", value=f"{region} serving")
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
        name: str,
        description: str,
        metric: cloudwatch.IMetric,
        threshold: float,
        comparison: cloudwatch.ComparisonOperator,
        minutes: int,
    ) -> cloudwatch.Alarm:
        return cloudwatch.Alarm(
            self,
            id,
            alarm_name=name,
            alarm_description=f"{description}; a Route 53 health check follows it",
            metric=metric,
            threshold=threshold,
            comparison_operator=comparison,
            evaluation_periods=minutes,
            datapoints_to_alarm=minutes,
            # For the alarm's own state only: Route 53 follows the metric data and decides missing data
            # with the health check's InsufficientDataHealthStatus.
            treat_missing_data=cloudwatch.TreatMissingData.NOT_BREACHING,
        )
