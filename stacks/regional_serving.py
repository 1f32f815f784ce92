"""One region's serving stack: composes the constructs, holds no resource logic of its own."""

from __future__ import annotations

from aws_cdk import Environment, Stack, Tags
from aws_cdk import aws_cloudwatch as cloudwatch
from constructs import Construct

from cdk_constructs.cluster import ServingCluster
from cdk_constructs.fleet import FleetTargets, NeuronFleet
from cdk_constructs.host_sessions import HostSessions
from cdk_constructs.load_balancer import ServingLoadBalancer
from cdk_constructs.log_encryption import EncryptedLogs
from cdk_constructs.model_store import ModelStoreAccess
from cdk_constructs.network import ServingNetwork
from cdk_constructs.observability import FleetView, NeuronView, ServingObservability
from cdk_constructs.routing_endpoint import RoutingEndpoint
from settings.schema import Settings
from stacks import props


class RegionalServing(Stack):
    def __init__(
        self,
        scope: Construct,
        id: str,
        *,
        settings: Settings,
        region: str,
        cell: int = 1,
        first_create: bool = False,
    ) -> None:
        this = settings.cell(region, cell)
        where = region if this.count == 1 else f"{region}, cell {cell} of {this.count}"
        super().__init__(
            scope,
            id,
            env=Environment(account=settings.account, region=region),
            description=f"{settings.project}: LLM serving on Inferentia2/Trainium in {where}",
        )
        Tags.of(self).add("project", settings.project)
        Tags.of(self).add("region", region)
        if this.count > 1:
            Tags.of(self).add("cell", this.name)

        logs = EncryptedLogs(self, "Logs", props=props.log_props(settings))
        network = ServingNetwork(self, "Network", props=props.network_props(settings, region), logs=logs)
        cluster = ServingCluster(
            self, "Cluster", props=props.cluster_props(settings), vpc=network.vpc, logs=logs
        ).cluster
        model_store = ModelStoreAccess(self, "ModelStore", props=props.model_store_props(settings, region))
        load_balancer = ServingLoadBalancer(
            self,
            "LoadBalancer",
            props=props.load_balancer_props(settings, region, cell, first_create=first_create),
            vpc=network.vpc,
            logs=logs,
        )
        targets = FleetTargets(
            http=load_balancer.http_targets,
            grpc=load_balancer.grpc_targets,
            load_balancer_security_group=load_balancer.security_group,
        )
        self.routing = RoutingEndpoint(
            self,
            "RoutingEndpoint",
            props=props.routing_endpoint_props(settings, region, cell),
            load_balancer=load_balancer.alb,
            target_group=load_balancer.http_targets,
        )
        self.fleets = [
            NeuronFleet(
                self,
                f"Fleet-{fleet.instance_type}",
                props=props.fleet_props(settings, region, fleet, cell=cell, bootstrap=first_create),
                cluster=cluster,
                targets=targets,
                task_role=model_store.task_role,
                # A log group per fleet: the Neuron runtime failure count is then per instance type.
                log_group=logs.log_group(f"ServingLogs-{fleet.instance_type}"),
                # `make compile`'s tasks log apart, under the same key and retention, with no metric filter.
                compile_task_role=model_store.compile_task_role,
                compile_log_group=logs.log_group(f"CompileLogs-{fleet.instance_type}"),
            )
            for fleet in settings.regions[region].fleets
        ]
        # A task whose engine dies takes its own target out of both groups (the fleets' services name them
        # in the container's environment): the load balancer grants exactly that to the task role.
        load_balancer.grant_deregister_targets(model_store.task_role)
        sessions_props = props.host_sessions_props(settings, region, cell)
        if sessions_props:
            sessions = HostSessions(self, "HostSessions", props=sessions_props, logs=logs)
            for fleet in self.fleets:
                sessions.grant_agent(fleet.hosts.role)
        self.observability = ServingObservability(
            self,
            "Observability",
            props=props.observability_props(settings, region, cell),
            logs=logs,
            load_balancer=load_balancer.alb,
            target_groups=[load_balancer.http_targets, load_balancer.grpc_targets],
            fleets=[
                FleetView(
                    fleet.instance_type,
                    fleet.running_tasks,
                    fleet.hosts_in_service_metric(),
                    NeuronView(
                        utilization=fleet.neuron.utilization,
                        device_memory_used=fleet.neuron.device_memory,
                        execution_errors=fleet.neuron.execution_errors,
                        hardware_errors=fleet.neuron.hardware_errors,
                        runtime_failures=fleet.neuron.runtime_failures,
                    ),
                )
                for fleet in self.fleets
            ],
            alarms=[
                *network.alarms,
                *load_balancer.alarms,
                *(alarm for fleet in self.fleets for alarm in fleet.alarms),
                *self.routing.alarms,
            ],
            # Hard faults only: latency and sheds page (region-degraded) but never drain.
            serving_alarms=[
                *no_healthy_target_alarms(load_balancer),
                self.routing.error_share_alarm,
            ],
        )


# The load balancer's alarms that say no target group of the region has a healthy target.
NO_HEALTHY_TARGETS_SUFFIX = "NoHealthyTargets"


def no_healthy_target_alarms(load_balancer: ServingLoadBalancer) -> list[cloudwatch.IAlarm]:
    """The load balancer's "no healthy target" alarms (one per target group), by their construct ids. A
    rename must not silently take the signal out of region-unfit, so none found stops the synth."""
    found = [alarm for alarm in load_balancer.alarms if alarm.node.id.endswith(NO_HEALTHY_TARGETS_SUFFIX)]
    if not found:
        raise ValueError(
            f"the load balancer has no *{NO_HEALTHY_TARGETS_SUFFIX} alarm for the region-unfit composite"
        )
    return found
