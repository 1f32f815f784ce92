"""The fleet's ECS service: one task per host on the fleet's capacity provider, registered into the
region's shared target groups, with the alarm that says the fleet is short of tasks, and what rolls a deploy
back: a circuit breaker scaled to the deploy's batch and an alarm on the new revision's failed requests."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import jsii
from aws_cdk import Aspects, CfnElement, Duration, IAspect, Stack
from aws_cdk import aws_cloudwatch as cloudwatch
from aws_cdk import aws_ec2 as ec2
from aws_cdk import aws_ecs as ecs
from constructs import Construct, IConstruct

from cdk_constructs.alarm_names import WatchedAlarm
from cdk_constructs.fleet.neuron_health import REVISION_DIMENSION, task_definition_revision
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


# The circuit breaker's threshold, in ECS's BOUNDED_PERCENT terms: this percent of the service's latest
# desired count, never below 3 nor above 200 failed tasks (ECS API reference, ThresholdConfiguration and
# ThresholdType). A fixed count of 3 rolled back good peak deploys: a peak deploy starts 55-127 tasks a batch,
# none healthy for a cold start (~30 min), and three stray failures among them (a host's bad device, a spot
# of ECS trouble) are no verdict on the image. What must hold instead, at any desired count d:
# - a bad image fails ALL of a batch, so the threshold must be reached within one batch: the rollback comes
#   after one cold start, not after several batches of failures (a healthy task resets the count, ECS API
#   reference DeploymentCircuitBreaker.resetOnHealthyTask, so only a bad image's failures pile up);
# - stray failures within a batch must stay below it.
# A deploy's batch at d tasks is min(d, hosts the ASG may still add) (rollout.py deploy_batch), never below
# the surge (max_surge_percent of the maximum) nor above d, so the smallest batch per desired task is the
# surge share. Taking half of it (FAILED_SHARE_OF_BATCH) as the percent keeps the threshold at most half
# of any batch that a bad image fails whole, and at least max_surge_percent/2 % of d: 12% of d with the
# default 25% surge. At Prime Day (a us-east-1 cell's inf2 fleet, 145-217 tasks, batches of 127 down to
# 55) that is 18-27 failed tasks: 14-49% of the batch, against ~1-3 stray failures expected at a 1-2%
# stray rate. Off-peak (batches of 1-17) ECS's floor of 3 holds: a whole batch of 3 or more; at 1 or 2
# desired tasks a bad image takes two or three batches (below 3, one stray failure would roll back).
FAILED_SHARE_OF_BATCH = 0.5
BOUNDED_THRESHOLD_MIN, BOUNDED_THRESHOLD_MAX = 3, 200


def failed_task_percent(max_surge_percent: int) -> int:
    """The circuit breaker's BOUNDED_PERCENT value for a fleet whose deploys surge this share of hosts."""
    return max(1, math.floor(max_surge_percent * FAILED_SHARE_OF_BATCH))


def failed_tasks_to_roll_back(desired: int, percent: int) -> int:
    """ECS's BOUNDED_PERCENT threshold at `desired` tasks. ECS does not document its rounding; rounding up is
    the later rollback, so the bounds tests hold either way."""
    return min(BOUNDED_THRESHOLD_MAX, max(BOUNDED_THRESHOLD_MIN, math.ceil(desired * percent / 100)))


# The deployment alarm on the new revision's own requests (the container's {Model, InstanceType,
# TaskDefinitionRevision} series, container/assistant/metrics.py): an image that starts and answers but fails
# 10% of requests passes every health check and the circuit breaker. Judged on the new revision alone: on the
# fleet's series a fault already present would roll back every deploy, and a bad revision's errors would be
# diluted by the old tasks. Above 5% (routing.dns_error_share's bar for a hard fault) in 2 of the last 3
# minutes, each minute judged only on at least DEPLOY_MIN_REQUESTS requests (one stray error among ten is not
# 10%). The arithmetic at Prime Day: a us-east-1 cell serves ~1,250 requests/s on ~220-325 hosts, 4-6 a
# host; the first batch of 55 new hosts, once past its cold start, takes ~13,000 requests a minute, 1,300 of
# them failing at 10%. The alarm is in ALARM after the second such minute plus CloudWatch's delay in
# extracting EMF (~1-2 min): ~3-4 min, ~4,000-5,000 failed requests (~10,000 for the 127-host batch a deploy
# at the event's minimum starts), before ECS rolls the deploy back, well inside the next batch's cold start.
# The rollback then starts old-revision tasks, a cold start long, while the bad ones serve on (ECS keeps 100%
# healthy): the cell's error share (~1.7% with 55 of ~325 hosts failing 10%) is above routing.error_share,
# so the orchestrator moves weight off it meanwhile.
# A new revision has no data until it serves: missing data is not breaching.
DEPLOY_ERROR_SHARE = 0.05
DEPLOY_MIN_REQUESTS = 20
DEPLOY_BAD_MINUTES, DEPLOY_WINDOW_MINUTES = 2, 3
SERVING_ERROR_METRIC = "ServingError"
# The same judge for a revision that answers correctly but slowly (a build that halves the engine's speed
# passes every health check, fails no request, and target tracking hides it by adding hosts): the share of its
# requests whose first token came later than the objective (the container's SlowFirstToken, 0/1 against
# SLOW_FIRST_TOKEN_MS). The objective is a p99, so a revision serving within it has at most ~1% late; load
# alone does not push the share up, because a queued request that cannot get its first token within the
# objective is shed at once (a shed is not slow). Above 5% in 2 of the last 3 minutes, the error judge's
# windows. A half-speed build doubles every prefill and decode step and halves the host's slots: at Prime
# Day's per-host load its first tokens queue past the objective for most requests.
DEPLOY_SLOW_SHARE = 0.05
SLOW_FIRST_TOKEN_METRIC = "SlowFirstToken"
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
        # The service's own judge of a deploy, beside those of other parts (the Neuron devices').
        self.deployment_alarm = self._new_revision_error_alarm(props, task_definition)
        self.slow_deployment_alarm = self._new_revision_slow_alarm(props, task_definition)
        judges = [self.deployment_alarm, self.slow_deployment_alarm, *deployment_alarms]
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
            # cannot start: the failed-task threshold below, a share of the batch); so do the new revision's
            # tasks failing requests or a device under them (the deployment alarms, scoped to that revision).
            circuit_breaker=ecs.DeploymentCircuitBreaker(enable=True, rollback=True),
            deployment_alarms=ecs.DeploymentAlarmConfig(
                alarm_names=[alarm.alarm_name for alarm in judges],
                behavior=ecs.AlarmBehavior.ROLLBACK_ON_ALARM,
            ),
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
            {"Type": "BOUNDED_PERCENT", "Value": failed_task_percent(props.max_surge_percent)},
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

    def new_revision_errors(
        self, props: FleetProps, task_definition: ecs.TaskDefinition
    ) -> cloudwatch.IMetric:
        """The failed share of the requests served by tasks of this stack's task definition revision."""
        return self._new_revision_share(
            props, task_definition, SERVING_ERROR_METRIC, "errors", "new revision's failed share"
        )

    def new_revision_slow(self, props: FleetProps, task_definition: ecs.TaskDefinition) -> cloudwatch.IMetric:
        """The late share of the first tokens served by tasks of this stack's task definition revision."""
        return self._new_revision_share(
            props, task_definition, SLOW_FIRST_TOKEN_METRIC, "slow", "new revision's late first tokens"
        )

    def _new_revision_share(
        self, props: FleetProps, task_definition: ecs.TaskDefinition, metric_name: str, name: str, label: str
    ) -> cloudwatch.IMetric:
        """A 0/1 per-request metric's share over the revision's own requests (its Sum over its SampleCount),
        judged only on minutes with DEPLOY_MIN_REQUESTS of them."""
        dimensions = {
            "Model": props.model_name,
            "InstanceType": props.instance.name,
            REVISION_DIMENSION: task_definition_revision(task_definition),
        }
        minute = Duration.minutes(1)

        def per_request(statistic: str) -> cloudwatch.Metric:
            return cloudwatch.Metric(
                namespace=props.metrics_namespace,
                metric_name=metric_name,
                dimensions_map=dimensions,
                statistic=statistic,
                period=minute,
            )

        return cloudwatch.MathExpression(
            # ServingError is 0 or 1 on every accepted request: its SampleCount is the requests, its Sum the
            # failed ones (sheds not counted: overload is not the revision's fault). SlowFirstToken likewise
            # on every request that got a first token (or waited past the objective for one).
            expression=f"IF(requests >= {DEPLOY_MIN_REQUESTS}, {name} / requests, 0)",
            using_metrics={name: per_request("Sum"), "requests": per_request("SampleCount")},
            label=label,
            period=minute,
        )

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

    def _new_revision_error_alarm(
        self, props: FleetProps, task_definition: ecs.TaskDefinition
    ) -> cloudwatch.Alarm:
        return self._new_revision_alarm(
            props,
            "NewRevisionErrorShare",
            "serving-errors",
            f"more than {DEPLOY_ERROR_SHARE:.0%} of the requests served by the service's current task "
            "definition revision failed on the server's side (sheds not counted; ",
            self.new_revision_errors(props, task_definition),
            DEPLOY_ERROR_SHARE,
        )

    def _new_revision_slow_alarm(
        self, props: FleetProps, task_definition: ecs.TaskDefinition
    ) -> cloudwatch.Alarm:
        return self._new_revision_alarm(
            props,
            "NewRevisionSlowShare",
            "slow-first-tokens",
            f"more than {DEPLOY_SLOW_SHARE:.0%} of the first tokens served by the service's current task "
            "definition revision came later than the objective (",
            self.new_revision_slow(props, task_definition),
            DEPLOY_SLOW_SHARE,
        )

    def _new_revision_alarm(
        self,
        props: FleetProps,
        id: str,
        signal: str,
        what: str,
        metric: cloudwatch.IMetric,
        threshold: float,
    ) -> cloudwatch.Alarm:
        """A deploy's judge, not a page: the service rolls back on it. Named for what it watches, the revision
        included (alarm_names.py): each revision gets a new alarm in a fresh state, where one updated in
        place would keep the previous revision's ALARM and roll back the next deploy at once."""
        return WatchedAlarm(
            self,
            id,
            name_prefix=f"{Stack.of(self).stack_name}-{props.instance.name}-deploy-{signal}",
            alarm_description=f"{props.instance.name}: {what}minutes with {DEPLOY_MIN_REQUESTS}+ requests), "
            f"in {DEPLOY_BAD_MINUTES} of the last {DEPLOY_WINDOW_MINUTES} min; a deploy of that revision "
            "rolls back on it",
            metric=metric,
            threshold=threshold,
            comparison_operator=cloudwatch.ComparisonOperator.GREATER_THAN_THRESHOLD,
            evaluation_periods=DEPLOY_WINDOW_MINUTES,
            datapoints_to_alarm=DEPLOY_BAD_MINUTES,
            treat_missing_data=cloudwatch.TreatMissingData.NOT_BREACHING,
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
