"""A fleet's hosts: launch template on the ECS Neuron AMI, the Auto Scaling group and the ECS capacity
provider that sizes it to the service's tasks; the group's warm pool, capacity reservations and the
scheduled minimums of events."""

from __future__ import annotations

from aws_cdk import Duration
from aws_cdk import aws_autoscaling as autoscaling
from aws_cdk import aws_cloudwatch as cloudwatch
from aws_cdk import aws_ec2 as ec2
from aws_cdk import aws_ecs as ecs
from aws_cdk import aws_iam as iam
from constructs import Construct

from cdk_constructs.fleet.host_boot import (
    DATA_VOLUME_DEVICE,
    USER_DATA_EVERY_BOOT,
    data_disk_commands,
    ecs_agent_commands,
    ssm_agent_commands,
)
from cdk_constructs.fleet.props import FleetProps, ScheduledBounds
from cdk_constructs.nag import acknowledge
from cdk_constructs.network import HOST_SUBNET_GROUP

ROOT_VOLUME_GIB = 200  # the Neuron serving image is tens of GiB; the AMI's default root volume is 30 GiB


class FleetHosts(Construct):
    """Hosts of one instance type, registered with the cluster as a capacity provider."""

    def __init__(self, scope: Construct, id: str, *, props: FleetProps, cluster: ecs.Cluster) -> None:
        super().__init__(scope, id)
        self.auto_scaling_group = self._group(props, cluster)
        self.capacity_provider = ecs.AsgCapacityProvider(
            self,
            "CapacityProvider",
            auto_scaling_group=self.auto_scaling_group,
            enable_managed_scaling=True,
            enable_managed_termination_protection=True,
            enable_managed_draining=True,
            target_capacity_percent=props.target_capacity_percent,
            # Boot and ECS registration only: ECS holds further scale-out while hosts are inside their warm-up
            # (ECS developer guide, managed scaling), so the model's cold start here would allow one batch of
            # hosts per cold start. The cold start is the alarms' allowance (service.py), not the scaler's.
            instance_warmup_period=props.instance_warmup_seconds,
        )
        cluster.add_asg_capacity_provider(self.capacity_provider)
        for command in ecs_agent_commands(warm_pool=props.warm_pool is not None):
            self.auto_scaling_group.add_user_data(command)
        if props.session_manager:
            # Permissions come from the region's HostSessions construct (grant_agent on self.role).
            for command in ssm_agent_commands():
                self.auto_scaling_group.add_user_data(command)
        if props.warm_pool is not None:
            self.auto_scaling_group.add_warm_pool(
                min_size=props.warm_pool.min_size,
                max_group_prepared_capacity=props.warm_pool.max_prepared,
                pool_state=autoscaling.PoolState.STOPPED,
                # ECS does not support returning a host to the pool on scale-in.
                reuse_on_scale_in=False,
            )
        self._reserve_capacity(props)
        self.scheduled_actions = [self._schedule(props, change) for change in props.scheduled_bounds]

    def _reserve_capacity(self, props: FleetProps) -> None:
        if props.capacity_block is not None:
            # A Capacity Block is consumed through the launch template's market type and target.
            template = self.launch_template.node.default_child
            assert isinstance(template, ec2.CfnLaunchTemplate)
            template.add_property_override(
                "LaunchTemplateData.InstanceMarketOptions", {"MarketType": "capacity-block"}
            )
            template.add_property_override(
                "LaunchTemplateData.CapacityReservationSpecification",
                {"CapacityReservationTarget": {"CapacityReservationId": props.capacity_block.reservation_id}},
            )
        reservation = props.capacity_reservation
        if reservation is not None:
            group = self.auto_scaling_group.node.default_child
            assert isinstance(group, autoscaling.CfnAutoScalingGroup)
            spec = autoscaling.CfnAutoScalingGroup
            target = (
                spec.CapacityReservationTargetProperty(capacity_reservation_ids=list(reservation.ids))
                if reservation.ids
                else spec.CapacityReservationTargetProperty(
                    capacity_reservation_resource_group_arns=[reservation.resource_group_arn]
                )
            )
            group.capacity_reservation_specification = spec.CapacityReservationSpecificationProperty(
                capacity_reservation_preference=reservation.preference, capacity_reservation_target=target
            )

    def _schedule(self, props: FleetProps, change: ScheduledBounds) -> autoscaling.CfnScheduledAction:
        """A one-time change of the group's bounds. The minimum is what holds hosts up: the capacity provider
        owns the desired count, so none is set here either. The maximum keeps the deploy surge above the
        event's task maximum."""
        hosts = props.host_bounds(change.min_hosts, change.max_hosts)
        return autoscaling.CfnScheduledAction(
            self,
            f"Scheduled-{change.name}",
            auto_scaling_group_name=self.auto_scaling_group.auto_scaling_group_name,
            start_time=change.at.strftime("%Y-%m-%dT%H:%M:%SZ"),
            min_size=hosts.min_hosts,
            max_size=hosts.max_hosts,
        )

    def _group(self, props: FleetProps, cluster: ecs.Cluster) -> autoscaling.AutoScalingGroup:
        user_data = _user_data(every_boot=props.warm_pool is not None)
        user_data.add_commands(*data_disk_commands(props.instance))
        block_devices = [
            ec2.BlockDevice(
                device_name="/dev/xvda",
                volume=ec2.BlockDeviceVolume.ebs(
                    ROOT_VOLUME_GIB, volume_type=ec2.EbsDeviceVolumeType.GP3, encrypted=True
                ),
            )
        ]
        if not props.instance.has_instance_store:
            block_devices.append(
                ec2.BlockDevice(
                    device_name=DATA_VOLUME_DEVICE,
                    volume=ec2.BlockDeviceVolume.ebs(
                        props.data_volume_gib, volume_type=ec2.EbsDeviceVolumeType.GP3, encrypted=True
                    ),
                )
            )
        self.security_group = ec2.SecurityGroup(
            self, "HostSecurityGroup", vpc=cluster.vpc, description=f"{props.instance.name} hosts: no inbound"
        )
        self.role = iam.Role(
            self,
            "HostRole",
            assumed_by=iam.ServicePrincipal("ec2.amazonaws.com"),
            description=f"{props.instance.name} ECS container instances",
        )
        # The statements ECS adds for its agent: cluster-scoped where the API allows a resource, `*` where it
        # does not (DiscoverPollEndpoint, GetAuthorizationToken, the agent's own log streams).
        acknowledge(
            self.role,
            "AwsSolutions-IAM5[Action::ecs:Submit*]",
            "The ECS agent's state-change reports (SubmitTaskStateChange etc.), scoped to this cluster's "
            "ARN.",
        )
        acknowledge(
            self.role,
            "AwsSolutions-IAM5[Resource::*]",
            "ECS agent calls that take no resource ARN (DiscoverPollEndpoint, ecr:GetAuthorizationToken) and "
            "Poll/StartTelemetrySession, which carry an ecs:cluster condition for this cluster; with Session "
            "Manager on, SSM Agent's session channels and logs:DescribeLogGroups, which take none either.",
        )
        self.launch_template = ec2.LaunchTemplate(
            self,
            "LaunchTemplate",
            instance_type=ec2.InstanceType(props.instance.name),
            # Resolved at deploy time from AWS's public parameter for one named AMI release: no lookup at
            # synth, and a redeploy keeps the driver the image was tested with until the config moves it.
            machine_image=ec2.MachineImage.from_ssm_parameter(
                props.ami_parameter_name, os=ec2.OperatingSystemType.LINUX
            ),
            user_data=user_data,
            block_devices=block_devices,
            security_group=self.security_group,
            role=self.role,
            require_imdsv2=True,
            http_put_response_hop_limit=1,
        )
        # Only the zones that offer the type (a launch elsewhere fails and delays the scale-out); a Capacity
        # Block lives in one zone, where its hosts must be.
        block = props.capacity_block
        zones = [block.availability_zone] if block else list(props.availability_zones)
        group = autoscaling.AutoScalingGroup(
            self,
            "Hosts",
            vpc=cluster.vpc,
            vpc_subnets=ec2.SubnetSelection(subnet_group_name=HOST_SUBNET_GROUP, availability_zones=zones),
            launch_template=self.launch_template,
            # No desired capacity: a redeploy must never reset a running fleet; the capacity provider
            # owns the desired count and the config owns the bounds.
            # Above the service maximum by the deploy surge: at the maximum a rolling deploy still has hosts
            # to start new tasks on (rollout.py). The capacity provider only launches them for tasks.
            min_capacity=props.host_bounds(*props.deployed_bounds).min_hosts,
            max_capacity=props.host_bounds(*props.deployed_bounds).max_hosts,
            group_metrics=[autoscaling.GroupMetrics.all()],
        )
        acknowledge(
            group,
            "AwsSolutions-AS3",
            "Scaling is driven by the ECS capacity provider; the fleet's alarms and the region-degraded "
            "composite alarm notify, per-instance launch/terminate notifications would be noise.",
        )
        return group

    def in_service_metric(self) -> cloudwatch.Metric:
        return cloudwatch.Metric(
            namespace="AWS/AutoScaling",
            metric_name="GroupInServiceInstances",
            dimensions_map={"AutoScalingGroupName": self.auto_scaling_group.auto_scaling_group_name},
            statistic="Average",
            period=Duration.minutes(5),
        )


def _user_data(every_boot: bool) -> ec2.UserData:
    """A shell script; with `every_boot`, wrapped with the cloud-config that runs it at every boot."""
    script = ec2.UserData.for_linux()
    if not every_boot:
        return script
    multipart = ec2.MultipartUserData()
    multipart.add_user_data_part(script, ec2.MultipartBody.SHELL_SCRIPT, True)
    multipart.add_part(
        ec2.MultipartBody.from_raw_body(
            content_type='text/cloud-config; charset="utf-8"', body=USER_DATA_EVERY_BOOT
        )
    )
    return multipart
