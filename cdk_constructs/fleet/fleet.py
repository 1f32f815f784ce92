"""NeuronFleet: one Neuron instance type's hosts, task definition, service and scaling.

ECS on EC2 does not allocate Neuron devices, so a task definition is bound to one instance type (it lists
every /dev/neuronN of that type) and each type gets its own launch template, ASG, capacity provider and
service. All services register into the region's shared target groups, so least outstanding requests
balances across the whole heterogeneous fleet.
"""

from __future__ import annotations

from aws_cdk import Annotations
from aws_cdk import aws_cloudwatch as cloudwatch
from aws_cdk import aws_ecs as ecs
from aws_cdk import aws_iam as iam
from aws_cdk import aws_logs as logs
from constructs import Construct

from cdk_constructs.fleet.hosts import FleetHosts
from cdk_constructs.fleet.neuron_health import NeuronHealth
from cdk_constructs.fleet.props import FleetProps, FleetTargets
from cdk_constructs.fleet.scaling import ServiceScaling
from cdk_constructs.fleet.service import ServingService
from cdk_constructs.fleet.task_definition import (
    COMPILE_CONSTRUCT_ID,
    CompileTaskDefinition,
    ServingTaskDefinition,
)


class NeuronFleet(Construct):
    def __init__(
        self,
        scope: Construct,
        id: str,
        *,
        props: FleetProps,
        cluster: ecs.Cluster,
        targets: FleetTargets,
        task_role: iam.IRole,
        log_group: logs.ILogGroup,  # this fleet's own: its Neuron runtime failures are counted from it
        compile_task_role: iam.IRole,
        compile_log_group: logs.ILogGroup,  # not `log_group`: a compile's runtime output pages no one
    ) -> None:
        super().__init__(scope, id)
        self.props = props
        self.instance_type = props.instance.name
        if not props.offered_in_region:
            # Synth stays possible (planning, CI), but `cdk synth --strict` and every deploy show it.
            Annotations.of(self).add_warning_v2(
                "neuron-kit:instance-type-not-offered",
                f"{self.instance_type} is not offered in this region per the AWS price list; "
                "the fleet's hosts would not launch and the service would never become stable",
            )
        self.hosts = FleetHosts(self, "Hosts", props=props, cluster=cluster)
        self.task = ServingTaskDefinition(self, "Task", props=props, task_role=task_role, log_group=log_group)
        # `make compile` runs it on this fleet's hosts (ops/compile.py), with the service's network.
        self.compile = CompileTaskDefinition(
            self, COMPILE_CONSTRUCT_ID, props=props, task_role=compile_task_role, log_group=compile_log_group
        )
        self.neuron = NeuronHealth(
            self, "Neuron", props=props, log_group=log_group, task_definition=self.task.task_definition
        )
        self.serving = ServingService(
            self,
            "Serving",
            props=props,
            cluster=cluster,
            task_definition=self.task.task_definition,
            capacity_provider=self.hosts.capacity_provider,
            targets=targets,
            # The new revision's hosts alone, not the fleet's (neuron_health.py).
            deployment_alarms=[self.neuron.deployment_alarm],
        )
        self.scaling = ServiceScaling(self, "Scaling", props=props, service=self.serving.service)

    @property
    def alarms(self) -> list[cloudwatch.Alarm]:
        """The alarms that say this fleet is unhealthy, each owned by the part it watches."""
        return [*self.serving.alarms, *self.neuron.alarms]

    @property
    def running_tasks(self) -> cloudwatch.IMetric:
        return self.serving.running_tasks

    def hosts_in_service_metric(self) -> cloudwatch.Metric:
        return self.hosts.in_service_metric()
