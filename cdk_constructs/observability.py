"""What an operator and the traffic orchestrator watch in one region: a dashboard, the latency, slow-first-
token, shed, rejected and target 5xx alarms, a "region degraded" composite alarm over every construct's
alarms (it pages), and a "region unfit" composite over the region's hard faults only (the orchestrator
drains on it): no healthy target, engine errors, target 5xx not counting sheds. Overload is not a fault:
latency, sheds and rejected requests page, never drain."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from aws_cdk import Aws, Duration
from aws_cdk import aws_cloudwatch as cloudwatch
from aws_cdk import aws_cloudwatch_actions as cloudwatch_actions
from aws_cdk import aws_elasticloadbalancingv2 as elbv2
from aws_cdk import aws_iam as iam
from aws_cdk import aws_sns as sns
from aws_cdk import aws_sns_subscriptions as subscriptions
from constructs import Construct

from cdk_constructs.log_encryption import EncryptedLogs


@dataclass(frozen=True)
class ObservabilityProps:
    # Deterministic names: the routing stack and the orchestrator find them from config, not by reference.
    dashboard_name: str
    degraded_alarm_name: str
    # What the traffic orchestrator reads: one host's fault (an ECC error, a NAT port error, tasks short of
    # desired) pages through region-degraded but must not drain a region.
    unfit_alarm_name: str
    metrics_namespace: str
    # The container's EMF dimension sets are {Model} (one series per region, which the alarms watch) and
    # {Model, InstanceType} (one per fleet, for the dashboard).
    model_name: str
    ttft_p99_threshold_ms: int
    # Share of requests the targets answer with a 5xx (sheds left out) above which the region is unfit, in
    # unfit_minutes of the last unfit_window_minutes (routing.error_share, the orchestrator's M of N).
    target_error_share: float = 0.01
    unfit_minutes: int = 3
    unfit_window_minutes: int = 5
    # Overload and client mistakes: they page, never drain (3 of the last 5 minutes each).
    slow_first_token_share: float = 0.01  # streams slower than the TTFT objective to their first token
    shed_share: float = 0.05  # requests refused at once for want of a slot
    rejected_share: float = 0.05  # requests refused as the client's mistake (bad input)
    alarm_email: str | None = None
    # The operator's own SNS topic in this region (a pager): region-degraded notifies it too.
    alarm_topic_arn: str | None = None
    # How often each host follows the catalog index's pointer (model.catalog_follow_seconds); 0: hosts load
    # the index at start only, and no alarm watches them agree.
    catalog_follow_seconds: int = 0


@dataclass(frozen=True)
class NeuronView:
    """One fleet's Neuron device series (from the neuron-monitor sidecar and the runtime-failure filter)."""

    utilization: cloudwatch.IMetric
    device_memory_used: cloudwatch.IMetric
    execution_errors: cloudwatch.IMetric
    hardware_errors: cloudwatch.IMetric
    runtime_failures: cloudwatch.IMetric


@dataclass(frozen=True)
class FleetView:
    """What the dashboard shows of one fleet."""

    instance_type: str
    running_tasks: cloudwatch.IMetric
    hosts_in_service: cloudwatch.IMetric
    neuron: NeuronView | None = None


def model_metric(namespace: str, model_name: str, name: str, statistic: str) -> cloudwatch.Metric:
    """A metric the container publishes as EMF log lines (dimension Model)."""
    return cloudwatch.Metric(
        namespace=namespace,
        metric_name=name,
        dimensions_map={"Model": model_name},
        statistic=statistic,
        period=Duration.minutes(1),
    )


def ttft_metric(
    namespace: str, model_name: str, statistic: str, instance_type: str | None = None
) -> cloudwatch.Metric:
    """Time to first token as the container measures it (milliseconds), for the region or one fleet. The
    ALB's TargetResponseTime ends at the first header, before any token, so it cannot stand in."""
    dimensions = {"Model": model_name}
    if instance_type:
        dimensions["InstanceType"] = instance_type
    return cloudwatch.Metric(
        namespace=namespace,
        metric_name="TimeToFirstToken",
        dimensions_map=dimensions,
        statistic=statistic,
        period=Duration.minutes(1),
        unit=cloudwatch.Unit.MILLISECONDS,
    )


class ServingObservability(Construct):
    def __init__(
        self,
        scope: Construct,
        id: str,
        *,
        props: ObservabilityProps,
        logs: EncryptedLogs,
        load_balancer: elbv2.ApplicationLoadBalancer,
        target_groups: Sequence[elbv2.ApplicationTargetGroup],
        fleets: Sequence[FleetView],
        alarms: Sequence[cloudwatch.IAlarm],
        serving_alarms: Sequence[cloudwatch.IAlarm] = (),
    ) -> None:
        """`alarms`: every alarm of the region, for paging. `serving_alarms`: the region-wide serving signals
        among them or beside them (no healthy targets, slow-first-token share, error share), which with this
        construct's target 5xx share make the region-unfit composite."""
        super().__init__(scope, id)
        logs.allow_alarm_notifications()
        self.topic = sns.Topic(self, "AlarmTopic", master_key=logs.key, enforce_ssl=True)
        if props.alarm_email:
            self.topic.add_subscription(subscriptions.EmailSubscription(props.alarm_email))

        self.ttft_alarm = cloudwatch.Alarm(
            self,
            "TtftP99",
            alarm_description=f"p99 time to first token above {props.ttft_p99_threshold_ms} ms for 5 of the "
            "last 10 minutes",
            metric=ttft_metric(props.metrics_namespace, props.model_name, "p99"),
            threshold=props.ttft_p99_threshold_ms,
            comparison_operator=cloudwatch.ComparisonOperator.GREATER_THAN_THRESHOLD,
            evaluation_periods=10,
            datapoints_to_alarm=5,
            treat_missing_data=cloudwatch.TreatMissingData.NOT_BREACHING,
        )
        self.target_error_alarm = self._target_error_alarm(props, load_balancer)
        self.slow_first_token_alarm = self._share_alarm(
            "SlowFirstTokenShare",
            f"Over {props.slow_first_token_share:.1%} of streams slower than the objective to a first token",
            model_metric(props.metrics_namespace, props.model_name, "SlowFirstToken", "Average"),
            props.slow_first_token_share,
        )
        self.shed_alarm = self._share_alarm(
            "ShedShare",
            f"Over {props.shed_share:.0%} of requests shed for want of a slot: the region is past its "
            "capacity (overload, not a fault: it pages, the orchestrator moves weight, nothing drains)",
            model_metric(props.metrics_namespace, props.model_name, "Shed", "Average"),
            props.shed_share,
        )
        self.rejected_alarm = self._share_alarm(
            "RejectedShare",
            f"Over {props.rejected_share:.0%} of requests rejected as the client's mistake: a front end "
            "sending what this model refuses (it pages, never drains)",
            cloudwatch.MathExpression(
                # RequestRejected is 1 on each rejected request's line; every accepted one carries
                # RequestFailed (0 or 1): their counts are the two halves of all requests.
                expression="IF(FILL(rejected, 0) + FILL(accepted, 0) > 0, "
                "FILL(rejected, 0) / (FILL(rejected, 0) + FILL(accepted, 0)), 0)",
                using_metrics={
                    "rejected": model_metric(
                        props.metrics_namespace, props.model_name, "RequestRejected", "Sum"
                    ),
                    "accepted": model_metric(
                        props.metrics_namespace, props.model_name, "RequestFailed", "SampleCount"
                    ),
                },
                label="rejected share",
                period=Duration.minutes(1),
            ),
            props.rejected_share,
        )
        unfit = [*serving_alarms, self.target_error_alarm]
        paging_only = [self.ttft_alarm, self.slow_first_token_alarm, self.shed_alarm, self.rejected_alarm]
        self.index_versions_alarm = self._index_versions_alarm(props)
        if self.index_versions_alarm is not None:
            # A host stuck on an old catalog pages; it serves, so it does not make the region unfit.
            paging_only.append(self.index_versions_alarm)
        every_alarm = [*alarms, *(a for a in unfit if a not in alarms), *paging_only]
        self.degraded_alarm = cloudwatch.CompositeAlarm(
            self,
            "RegionDegraded",
            composite_alarm_name=props.degraded_alarm_name,
            alarm_description="Any alarm of this region, one host's included: it pages. The orchestrator "
            "drains on region-unfit, not on this",
            alarm_rule=cloudwatch.AlarmRule.any_of(*every_alarm),
        )
        # No action: region-degraded already pages for every one of these.
        self.unfit_alarm = cloudwatch.CompositeAlarm(
            self,
            "RegionUnfit",
            composite_alarm_name=props.unfit_alarm_name,
            alarm_description="The region has a hard fault (no healthy targets, engine errors or target 5xx, "
            "sheds not counted): the traffic orchestrator drains it. Latency and sheds never do",
            alarm_rule=cloudwatch.AlarmRule.any_of(*unfit),
        )
        self.degraded_alarm.add_alarm_action(cloudwatch_actions.SnsAction(self.topic))
        self.degraded_alarm.add_ok_action(cloudwatch_actions.SnsAction(self.topic))
        if props.alarm_topic_arn:
            pager = cloudwatch_actions.SnsAction(
                sns.Topic.from_topic_arn(self, "PagerTopic", props.alarm_topic_arn)
            )
            self.degraded_alarm.add_alarm_action(pager)
            self.degraded_alarm.add_ok_action(pager)
        self._allow_publishing(self.degraded_alarm)

        self.dashboard = cloudwatch.Dashboard(self, "Dashboard", dashboard_name=props.dashboard_name)
        self.dashboard.add_widgets(
            cloudwatch.AlarmStatusWidget(
                title="Region health",
                alarms=[self.degraded_alarm, self.unfit_alarm, *every_alarm],
                width=24,
            )
        )
        self.dashboard.add_widgets(
            cloudwatch.GraphWidget(
                title="Time to first token (ms)",
                left=[
                    ttft_metric(props.metrics_namespace, props.model_name, statistic).with_(label=statistic)
                    for statistic in ("p50", "p99")
                ],
                left_annotations=[
                    cloudwatch.HorizontalAnnotation(value=props.ttft_p99_threshold_ms, label="p99 target")
                ],
                width=8,
            ),
            cloudwatch.GraphWidget(
                title="Output tokens per minute",
                left=[model_metric(props.metrics_namespace, props.model_name, "OutputTokens", "Sum")],
                width=8,
            ),
            cloudwatch.GraphWidget(
                title="Requests in flight and queued (average per host)",
                left=[
                    model_metric(props.metrics_namespace, props.model_name, name, "Average").with_(label=name)
                    for name in ("RequestsInFlight", "QueueDepth")
                ],
                width=8,
            ),
        )
        self.dashboard.add_widgets(
            cloudwatch.GraphWidget(
                title="Requests shed (overload), rejected (client mistakes) and failed (server), per minute",
                left=[
                    model_metric(props.metrics_namespace, props.model_name, name, "Sum").with_(label=label)
                    for name, label in (
                        ("Shed", "shed"),
                        ("RequestRejected", "rejected"),
                        ("ServingError", "failed (server)"),
                    )
                ],
                width=24,
            )
        )
        self.dashboard.add_widgets(
            # One balancer feeds every fleet by least outstanding requests: a slower fleet shows here first.
            cloudwatch.GraphWidget(
                title="Time to first token p99 per fleet (ms)",
                left=[
                    ttft_metric(props.metrics_namespace, props.model_name, "p99", fleet.instance_type).with_(
                        label=fleet.instance_type
                    )
                    for fleet in fleets
                ],
                left_annotations=[
                    cloudwatch.HorizontalAnnotation(value=props.ttft_p99_threshold_ms, label="p99 target")
                ],
                width=8,
            ),
            cloudwatch.GraphWidget(
                title="Per fleet: running serving tasks (left), hosts in service (right)",
                left=[fleet.running_tasks.with_(label=f"{fleet.instance_type} tasks") for fleet in fleets],
                right=[
                    fleet.hosts_in_service.with_(label=f"{fleet.instance_type} hosts") for fleet in fleets
                ],
                width=8,
            ),
            cloudwatch.GraphWidget(
                title="ALB: requests, 5xx and active connections",
                left=[
                    load_balancer.metrics.request_count(period=Duration.minutes(1)),
                    load_balancer.metrics.http_code_elb(
                        elbv2.HttpCodeElb.ELB_5XX_COUNT, period=Duration.minutes(1)
                    ),
                    load_balancer.metrics.http_code_target(
                        elbv2.HttpCodeTarget.TARGET_5XX_COUNT, period=Duration.minutes(1)
                    ),
                ],
                right=[load_balancer.metrics.active_connection_count(period=Duration.minutes(1))],
                width=8,
            ),
        )
        self.dashboard.add_widgets(
            cloudwatch.GraphWidget(
                title="Healthy targets per target group (least outstanding requests)",
                left=[
                    group.metrics.healthy_host_count(period=Duration.minutes(1), label=group.node.id)
                    for group in target_groups
                ],
                width=12,
            ),
            cloudwatch.GraphWidget(
                title="Requests per target",
                left=[
                    group.metrics.request_count_per_target(period=Duration.minutes(1), label=group.node.id)
                    for group in target_groups
                ],
                width=12,
            ),
        )
        self._add_neuron_row([(fleet.instance_type, fleet.neuron) for fleet in fleets if fleet.neuron])

    def _target_error_alarm(
        self, props: ObservabilityProps, load_balancer: elbv2.ApplicationLoadBalancer
    ) -> cloudwatch.Alarm:
        """The share of requests the region's targets answered with a 5xx, less the requests shed (an HTTP
        shed is a 503 at the ALB, and overload is not a fault): the engines failing, whichever host serves.
        A share, not a count, so a peak's volume does not trip it; sheds counted over gRPC too (they are 200
        at the ALB) can only lower it, toward not draining."""
        bad, window = props.unfit_minutes, props.unfit_window_minutes
        minute = Duration.minutes(1)
        return cloudwatch.Alarm(
            self,
            "Target5xxShare",
            alarm_description=f"More than {props.target_error_share:.1%} of requests answered with a 5xx by "
            f"the region's targets, sheds not counted, in {bad} of the last {window} min",
            metric=cloudwatch.MathExpression(
                expression="IF(requests > 0 AND FILL(errors, 0) > FILL(sheds, 0), "
                "(FILL(errors, 0) - FILL(sheds, 0)) / requests, 0)",
                using_metrics={
                    "errors": load_balancer.metrics.http_code_target(
                        elbv2.HttpCodeTarget.TARGET_5XX_COUNT, period=minute
                    ),
                    "requests": load_balancer.metrics.request_count(period=minute),
                    "sheds": model_metric(props.metrics_namespace, props.model_name, "Shed", "Sum"),
                },
                label="target 5xx share, sheds not counted",
                period=minute,
            ),
            threshold=props.target_error_share,
            comparison_operator=cloudwatch.ComparisonOperator.GREATER_THAN_THRESHOLD,
            evaluation_periods=window,
            datapoints_to_alarm=bad,
            # No requests is no evidence of failing (no healthy targets has its own alarm).
            treat_missing_data=cloudwatch.TreatMissingData.NOT_BREACHING,
        )

    def _index_versions_alarm(self, props: ObservabilityProps) -> cloudwatch.Alarm | None:
        """Hosts serving different catalog builds for longer than two follow intervals. Every replica writes
        IndexVersion (its build's upload time) each interval under {Model}: a minute's Maximum less its
        Minimum is the spread between the newest and oldest build served. A new build spreads them for up to
        one interval plus its download; a host that cannot fetch or open it keeps the spread."""
        if props.catalog_follow_seconds <= 0:
            return None
        minute = Duration.minutes(1)
        # Breaching minutes in a row that together last longer than two intervals.
        minutes = 2 * props.catalog_follow_seconds // 60 + 1
        return cloudwatch.Alarm(
            self,
            "IndexVersionsDisagree",
            alarm_description=f"Hosts have served different catalog builds for more than {minutes - 1} min "
            f"(two follow intervals of {props.catalog_follow_seconds} s): one keeps failing to follow "
            "current.json (its log's `catalog follow:` lines and IndexFollowFailed say why)",
            metric=cloudwatch.MathExpression(
                expression="newest - oldest",
                using_metrics={
                    "newest": model_metric(
                        props.metrics_namespace, props.model_name, "IndexVersion", "Maximum"
                    ),
                    "oldest": model_metric(
                        props.metrics_namespace, props.model_name, "IndexVersion", "Minimum"
                    ),
                },
                label="newest - oldest catalog build served (s)",
                period=minute,
            ),
            threshold=0,
            comparison_operator=cloudwatch.ComparisonOperator.GREATER_THAN_THRESHOLD,
            evaluation_periods=minutes,
            datapoints_to_alarm=minutes,
            # No host reporting is no disagreement (no healthy targets has its own alarm).
            treat_missing_data=cloudwatch.TreatMissingData.NOT_BREACHING,
        )

    def _share_alarm(
        self, construct_id: str, description: str, metric: cloudwatch.IMetric, threshold: float
    ) -> cloudwatch.Alarm:
        """A share above `threshold` in 3 of the last 5 minutes; it pages through region-degraded."""
        return cloudwatch.Alarm(
            self,
            construct_id,
            alarm_description=f"{description}; 3 of the last 5 min",
            metric=metric,
            threshold=threshold,
            comparison_operator=cloudwatch.ComparisonOperator.GREATER_THAN_THRESHOLD,
            evaluation_periods=5,
            datapoints_to_alarm=3,
            treat_missing_data=cloudwatch.TreatMissingData.NOT_BREACHING,
        )

    def _allow_publishing(self, *alarms: cloudwatch.IAlarm) -> None:
        """The topic's policy replaces SNS's default one (it holds the deny-without-TLS statement), so
        CloudWatch must be allowed to publish explicitly: for the alarms that notify, from this account."""
        self.topic.add_to_resource_policy(
            iam.PolicyStatement(
                sid="AllowCloudWatchAlarms",
                principals=[iam.ServicePrincipal("cloudwatch.amazonaws.com")],
                actions=["sns:Publish"],
                resources=[self.topic.topic_arn],
                conditions={
                    "StringEquals": {"aws:SourceAccount": Aws.ACCOUNT_ID},
                    "ArnLike": {"aws:SourceArn": [alarm.alarm_arn for alarm in alarms]},
                },
            )
        )

    def _add_neuron_row(self, fleets: Sequence[tuple[str, NeuronView]]) -> None:
        """NeuronCore load and device health per fleet: what ECS Container Insights cannot show."""
        if not fleets:
            return

        def series(pick: str, suffix: str = "") -> list[cloudwatch.IMetric]:
            return [getattr(view, pick).with_(label=f"{name}{suffix}") for name, view in fleets]

        self.dashboard.add_widgets(
            cloudwatch.GraphWidget(
                title="NeuronCore utilisation per fleet (%)",
                left=series("utilization"),
                left_y_axis=cloudwatch.YAxisProps(min=0, max=100),
                width=6,
            ),
            cloudwatch.GraphWidget(
                title="Neuron device memory used, busiest host (bytes)",
                left=series("device_memory_used"),
                width=6,
            ),
            cloudwatch.GraphWidget(
                title="Neuron execution errors and runtime failures",
                left=[*series("execution_errors", " execution"), *series("runtime_failures", " runtime")],
                width=6,
            ),
            cloudwatch.GraphWidget(
                title="Neuron hardware errors (uncorrected ECC)",
                left=series("hardware_errors"),
                width=6,
            ),
        )
