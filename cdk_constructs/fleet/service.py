"""The fleet's ECS service: one task per host on the fleet's capacity provider, registered into the
region's shared target groups, with the alarm that says the fleet is short of tasks."""

from __future__ import annotations

import jsii
from aws_cdk import Aspects, CfnElement, Duration, IAspect, Stack
from aws_cdk import aws_cloudwatch as cloudwatch
from aws_cdk import aws_ec2 as ec2
from aws_cdk import aws_ecs as ecs
from constructs import Construct, IConstruct

from cdk_constructs.fleet.props import FleetProps, FleetTargets
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
            circuit_breaker=ecs.DeploymentCircuitBreaker(enable=True, rollback=True),
            health_check_grace_period=Duration.seconds(props.health_check_grace_seconds),
            # Rolling deploys start new hosts before old ones stop: capacity never dips below the minimum.
            min_healthy_percent=100,
            max_healthy_percent=200,
            propagate_tags=ecs.PropagatedTagSource.SERVICE,
            # Audited through the cluster's execute-command configuration (encrypted, logged).
            enable_execute_command=props.ecs_exec,
        )
        if props.ecs_exec:
            self._acknowledge_exec_grants(cluster, task_definition)
        # CloudFormation rejects a strategy naming a provider the cluster does not list yet: create the
        # service after the cluster's capacity provider associations.
        Aspects.of(self.service).add(_AfterCapacityProviderAssociations(cluster))
        for group, port in ((targets.http, props.ports.http), (targets.grpc, props.ports.grpc)):
            group.add_target(
                self.service.load_balancer_target(container_name=CONTAINER_NAME, container_port=port)
            )
        self.running_tasks = cloudwatch.Metric(
            namespace="ECS/ContainerInsights",
            metric_name="RunningTaskCount",
            dimensions_map={"ClusterName": cluster.cluster_name, "ServiceName": self.service.service_name},
            statistic="Minimum",
            period=Duration.minutes(5),
        )
        self.alarms = self._alarms(props)

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

    def _alarms(self, props: FleetProps) -> list[cloudwatch.Alarm]:
        self.below_minimum_alarm: cloudwatch.Alarm | None = None
        if props.min_hosts == 0:
            return []  # a fleet allowed to be empty has no floor to fall below
        self.below_minimum_alarm = cloudwatch.Alarm(
            self,
            "BelowMinimumTasks",
            alarm_description=f"{props.instance.name}: fewer serving tasks than the configured minimum "
            "hosts for 15 minutes (hosts failing to start, capacity shortage or a crash loop)",
            metric=self.running_tasks,
            threshold=props.min_hosts,
            comparison_operator=cloudwatch.ComparisonOperator.LESS_THAN_THRESHOLD,
            evaluation_periods=3,
            treat_missing_data=cloudwatch.TreatMissingData.BREACHING,
        )
        return [self.below_minimum_alarm]
