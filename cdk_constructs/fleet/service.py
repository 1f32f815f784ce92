"""The fleet's ECS service: one task per host on the fleet's capacity provider, registered into the
region's shared target groups, with the alarm that says the fleet is short of tasks."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import jsii
from aws_cdk import Aspects, CfnElement, Duration, IAspect, Stack
from aws_cdk import aws_cloudwatch as cloudwatch
from aws_cdk import aws_ec2 as ec2
from aws_cdk import aws_ecs as ecs
from constructs import Construct, IConstruct

from cdk_constructs.fleet.props import FleetProps, FleetTargets
from cdk_constructs.fleet.rollout import MAX_HEALTHY_PERCENT, MIN_HEALTHY_PERCENT
from cdk_constructs.fleet.task_definition import CONTAINER_NAME
from cdk_constructs.nag import acknowledge
from cdk_constructs.network import HOST_SUBNETS


@jsii.implements(IAspect)
class _AfterCapacityProviderAssociations:
    """Makes the service depend on the cluster's capacity provider associations, which the cluster creates
    in an aspect of its own at synthesis (so they do not exist yet when the service is built)."""

    def __init__(self, cluster: ecs.Cluster) -> None:
        self._cluster = cluster

    def visit(self, node: IConstruct) -> None:
        if isinstance(node, ecs.CfnService):
            for child in self._cluster.node.children:
                if isinstance(child, ecs.CfnClusterCapacityProviderAssociations):
                    node.node.add_dependency(child)


# The container's variable naming a target group it is registered in, with the port it is registered at
# (container/serving/leave_target_groups.py TARGET_GROUP_ENV_PREFIX; a test keeps the two equal).
TARGET_GROUP_ENV_PREFIX = "TARGET_GROUP_ARN_"


def target_group_variable(port: int) -> str:
    return f"{TARGET_GROUP_ENV_PREFIX}{port}"


# Failed tasks after which the circuit breaker rolls a deploy back. ECS's default threshold is half the
# desired count (between 3 and 200): 132 failed tasks at 264 desired, about 80 minutes of cold starts at
# the peak, before a broken image is rolled back. A fixed count (ThresholdConfiguration type COUNT, ECS API
# reference) judges the new task set at once: with one task per host a healthy deploy fails almost no
# task, and three failed is the image, not a host.
FAILED_TASKS_TO_ROLL_BACK = 3
# Container Insights publishes the service's task counts once a minute.
TASK_COUNT_PERIOD_SECONDS = 60


@dataclass(frozen=True)
class ShortOfTasksRule:
    """When "fewer tasks running than desired" is a fault rather than hosts still starting: each period
    compares the fewest desired with the most running (so only a gap that lasted the whole period
    breaches), and the gap must last longer than a cold start."""

    period_seconds: int
    evaluation_periods: int

    @classmethod
    def for_cold_start(cls, cold_start_budget_seconds: int) -> ShortOfTasksRule:
        # Whole periods inside a cold start can all breach; one more than fit in it cannot.
        periods = cold_start_budget_seconds // TASK_COUNT_PERIOD_SECONDS + 1
        return cls(period_seconds=TASK_COUNT_PERIOD_SECONDS, evaluation_periods=periods)


class ServingService(Construct):
    def __init__(
        self,
        scope: Construct,
        id: str,
        *,
        props: FleetProps,
        cluster: ecs.Cluster,
        task_definition: ecs.Ec2TaskDefinition,
        capacity_provider: ecs.AsgCapacityProvider,
        targets: FleetTargets,
        deployment_alarms: Sequence[cloudwatch.IAlarm] = (),
    ) -> None:
        super().__init__(scope, id)
        instance_type = props.instance.name
        self.security_group = ec2.SecurityGroup(
            self, "TaskSecurityGroup", vpc=cluster.vpc, description=f"{instance_type} serving tasks"
        )
        for port in (props.ports.http, props.ports.grpc):
            self.security_group.add_ingress_rule(
                targets.load_balancer_security_group, ec2.Port.tcp(port), "from the serving ALB only"
            )
        self.service = ecs.Ec2Service(
            self,
            "Service",
            cluster=cluster,
            task_definition=task_definition,
            security_groups=[self.security_group],
            vpc_subnets=HOST_SUBNETS,
            capacity_provider_strategies=[
                ecs.CapacityProviderStrategy(
                    capacity_provider=capacity_provider.capacity_provider_name, weight=1
                )
            ],
            # ECS does not count Neuron devices: one task per host keeps two tasks off the same chips.
            placement_constraints=[ecs.PlacementConstraint.distinct_instances()],
            # Tasks that never become healthy roll the deploy back (a new image or AMI whose Neuron runtime
            # cannot start: the fixed failed-task threshold below); so does a device failing under the new
            # revision's tasks (the deployment alarm, scoped to that revision: neuron_health.py).
            circuit_breaker=ecs.DeploymentCircuitBreaker(enable=True, rollback=True),
            deployment_alarms=ecs.DeploymentAlarmConfig(
                alarm_names=[alarm.alarm_name for alarm in deployment_alarms],
                behavior=ecs.AlarmBehavior.ROLLBACK_ON_ALARM,
            )
            if deployment_alarms
            else None,
            health_check_grace_period=Duration.seconds(props.health_check_grace_seconds),
            # Rolling deploys start new hosts before old ones stop: capacity never dips below the minimum;
            # the hosts' surge above the service maximum is what lets them start (rollout.py).
            min_healthy_percent=MIN_HEALTHY_PERCENT,
            max_healthy_percent=MAX_HEALTHY_PERCENT,
            propagate_tags=ecs.PropagatedTagSource.SERVICE,
            # Audited through the cluster's execute-command configuration (encrypted, logged).
            enable_execute_command=props.ecs_exec,
            # Unset, a redeploy never resets the count scaling chose (removeDefaultDesiredCount); a bootstrap
            # creates the service with none, so no task waits for artifacts not compiled yet.
            desired_count=0 if props.bootstrap else None,
        )
        self.service.node.default_child.add_property_override(
            "DeploymentConfiguration.DeploymentCircuitBreaker.ThresholdConfiguration",
            {"Type": "COUNT", "Value": FAILED_TASKS_TO_ROLL_BACK},
        )
        if props.ecs_exec:
            self._acknowledge_exec_grants(cluster, task_definition)
        # CloudFormation rejects a strategy naming a provider the cluster does not list yet: create the
        # service after the cluster's capacity provider associations.
        Aspects.of(self.service).add(_AfterCapacityProviderAssociations(cluster))
        serving = task_definition.find_container(CONTAINER_NAME)
        for group, port in ((targets.http, props.ports.http), (targets.grpc, props.ports.grpc)):
            group.add_target(
                self.service.load_balancer_target(container_name=CONTAINER_NAME, container_port=port)
            )
            # The container leaves this group by itself when its engine dies (the target is its task IP at
            # this port): container/serving/leave_target_groups.py; the task role's grant is the load
            # balancer's (ServingLoadBalancer.grant_deregister_targets).
            serving.add_environment(target_group_variable(port), group.target_group_arn)
        self._dimensions = {"ClusterName": cluster.cluster_name, "ServiceName": self.service.service_name}
        self.running_tasks = self.task_count("RunningTaskCount", "Minimum", Duration.minutes(5))
        self.below_desired_alarm = self._below_desired_alarm(props)
        self.alarms = [self.below_desired_alarm]

    @staticmethod
    def _acknowledge_exec_grants(cluster: ecs.Cluster, task_definition: ecs.Ec2TaskDefinition) -> None:
        """ECS Exec gives the task role what the in-container SSM Agent needs: session channels and
        logs:DescribeLogGroups (no resource ARN exists for them), and writes to the exec log's streams."""
        role = task_definition.task_role
        acknowledge(
            role,
            "AwsSolutions-IAM5[Resource::*]",
            "ECS Exec's session channels (ssmmessages) and logs:DescribeLogGroups take no resource ARN; "
            "the sessions themselves are encrypted and logged by the cluster's exec configuration.",
        )
        logging = cluster.execute_command_configuration
        group = (
            logging.log_configuration.cloud_watch_log_group if logging and logging.log_configuration else None
        )
        if group is not None and isinstance(group.node.default_child, CfnElement):
            stack = Stack.of(group)
            logical_id = stack.resolve(group.node.default_child.logical_id)
            acknowledge(
                role,
                f"AwsSolutions-IAM5[Resource::arn:aws:logs:{stack.region}:{stack.account}:log-group:"
                f"<{logical_id}>:*]",
                "Exec session transcripts: log streams of the one exec log group, named per session.",
            )

    def task_count(self, name: str, statistic: str, period: Duration) -> cloudwatch.Metric:
        return cloudwatch.Metric(
            namespace="ECS/ContainerInsights",
            metric_name=name,
            dimensions_map=self._dimensions,
            statistic=statistic,
            period=period,
        )

    def _below_desired_alarm(self, props: FleetProps) -> cloudwatch.Alarm:
        """Tasks short of the desired count for longer than a cold start. Not against the configured
        minimum: raising it for a peak (or scaling out) leaves new hosts starting for up to a cold start,
        which is the plan working, not a fault."""
        rule = ShortOfTasksRule.for_cold_start(props.cold_start_budget_seconds)
        period = Duration.seconds(rule.period_seconds)
        return cloudwatch.Alarm(
            self,
            "TasksBelowDesired",
            alarm_description=f"{props.instance.name}: fewer serving tasks running than desired for longer "
            f"than the {props.cold_start_budget_seconds} s cold-start budget (hosts failing to launch or "
            "start, capacity shortage, a crash loop)",
            metric=cloudwatch.MathExpression(
                expression="desired - running",
                using_metrics={
                    "desired": self.task_count("DesiredTaskCount", "Minimum", period),
                    "running": self.task_count("RunningTaskCount", "Maximum", period),
                },
                label="tasks short of desired",
                period=period,
            ),
            threshold=1,
            comparison_operator=cloudwatch.ComparisonOperator.GREATER_THAN_OR_EQUAL_TO_THRESHOLD,
            evaluation_periods=rule.evaluation_periods,
            datapoints_to_alarm=rule.evaluation_periods,
            # No task counts means no service to compare; "no healthy target" alarms cover an empty region.
            treat_missing_data=cloudwatch.TreatMissingData.NOT_BREACHING,
        )
