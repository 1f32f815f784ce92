"""One Neuron instance type's hosts and the serving service on them, with the fleet's own alarms.

ECS on EC2 does not allocate Neuron devices, so a task definition is bound to one instance type (it lists
every /dev/neuronN of that type) and each type gets its own launch template, ASG, capacity provider and
service. All services register into the region's shared target groups, so least outstanding requests
balances across the whole heterogeneous fleet.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass

import jsii
from aws_cdk import Annotations, Aspects, Aws, Duration, IAspect
from aws_cdk import aws_autoscaling as autoscaling
from aws_cdk import aws_cloudwatch as cloudwatch
from aws_cdk import aws_ec2 as ec2
from aws_cdk import aws_ecr as ecr
from aws_cdk import aws_ecs as ecs
from aws_cdk import aws_elasticloadbalancingv2 as elbv2
from aws_cdk import aws_iam as iam
from aws_cdk import aws_logs as logs
from constructs import Construct, IConstruct

from cdk_constructs.nag import acknowledge
from settings.instances import InstanceFacts

# ECS waits at most this long between SIGTERM and SIGKILL; in-flight streams finish earlier, during the
# target groups' deregistration delay, which ECS waits out before it stops the task.
STOP_TIMEOUT_SECONDS = 120
HOST_DATA_DIR = "/opt/serving-data"
CONTAINER_DATA_DIR = "/opt/models"  # where the entrypoint puts weights/ and compiled/
ROOT_VOLUME_GIB = 200  # the Neuron serving image is tens of GiB; the AMI's default root volume is 30 GiB
# NVMe model strings the kernel reports for the two kinds of data disk.
INSTANCE_STORE_MODEL = "Amazon EC2 NVMe Instance Storage"
EBS_MODEL = "Amazon Elastic Block Store"
DATA_VOLUME_DEVICE = "/dev/xvdb"
# ECS container health check limits.
CONTAINER_START_PERIOD_MAX = 300
CONTAINER_RETRIES_MAX = 10
CONTAINER_INTERVAL_MAX = 300


@dataclass(frozen=True)
class ContainerHealthTiming:
    start_period_seconds: int
    interval_seconds: int
    retries: int
    timeout_seconds: int

    @property
    def covered_seconds(self) -> int:
        """How long after start a container can go on failing before ECS calls it unhealthy."""
        return self.start_period_seconds + self.retries * self.interval_seconds


def container_health_timing(cold_start_budget_seconds: int) -> ContainerHealthTiming:
    """A readiness check that cannot fail a container still inside its cold-start budget: the start
    period takes what it can (ECS caps it at 300 s) and the retries at the shortest interval cover the
    rest."""
    start_period = min(cold_start_budget_seconds, CONTAINER_START_PERIOD_MAX)
    remaining = cold_start_budget_seconds - start_period
    interval = max(30, math.ceil(remaining / CONTAINER_RETRIES_MAX))
    if interval > CONTAINER_INTERVAL_MAX:
        raise ValueError(
            f"a cold start of {cold_start_budget_seconds} s is beyond what an ECS health check covers"
        )
    return ContainerHealthTiming(start_period, interval, CONTAINER_RETRIES_MAX, timeout_seconds=10)


def container_health_command(http_port: int) -> list[str]:
    """Triton's server readiness (every model loaded), probed with the image's own Python: the serving
    images are Python images, curl is not guaranteed in them. Any HTTP error or refusal exits non-zero."""
    url = f"http://127.0.0.1:{http_port}/v2/health/ready"
    return ["CMD", "python3", "-c", f"import urllib.request; urllib.request.urlopen({url!r}, timeout=5)"]


def data_disk_commands(instance: InstanceFacts) -> list[str]:
    """User data that formats and mounts the host's data disk where weights and compiled artifacts live:
    the first instance-store NVMe disk where the type has one, else the EBS data volume."""
    model = INSTANCE_STORE_MODEL if instance.has_instance_store else EBS_MODEL
    return [
        "set -euo pipefail",
        'root_disk=$(lsblk -n -o PKNAME "$(findmnt -n -o SOURCE /)")',
        'data_disk=""',
        "for name in $(lsblk -d -n -o NAME); do",
        '  [ "$name" = "$root_disk" ] && continue',
        f'  if grep -q "{model}" "/sys/block/$name/device/model" 2>/dev/null; then',
        "    data_disk=/dev/$name; break",
        "  fi",
        "done",
        f'[ -n "$data_disk" ] || {{ echo "no data disk ({model}) found" >&2; exit 1; }}',
        'mkfs.xfs -f "$data_disk"',
        f"mkdir -p {HOST_DATA_DIR}",
        f'mount -o noatime "$data_disk" {HOST_DATA_DIR}',
    ]


# ECS agent settings: keep the multi-GiB image cached, block task access to instance metadata (tasks use
# their own role), allow the full stop timeout.
ECS_AGENT_CONFIG = (
    "ECS_IMAGE_PULL_BEHAVIOR=prefer-cached",
    "ECS_AWSVPC_BLOCK_IMDS=true",
    f"ECS_CONTAINER_STOP_TIMEOUT={STOP_TIMEOUT_SECONDS}s",
    "ECS_ENABLE_CONTAINER_METADATA=true",
)


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


@dataclass(frozen=True)
class ServingPorts:
    http: int
    grpc: int
    metrics: int


_ECR_IMAGE = re.compile(
    r"^(?P<account>\d{12})\.dkr\.ecr\.(?P<region>[a-z0-9-]+)\.amazonaws\.com(\.cn)?/"
    r"(?P<repository>[a-z0-9._/-]+)(:(?P<tag>[\w.-]+)|@(?P<digest>sha256:[0-9a-f]{64}))$"
)


@dataclass(frozen=True)
class ImageSource:
    """Either a pre-built image URI or a folder built as a CDK asset."""

    image_uri: str | None = None
    asset_directory: str | None = None
    asset_exclude: tuple[str, ...] = ()

    @property
    def pulls_from_ecr(self) -> bool:
        """Assets and private ECR images need the execution role's ECR pull permissions."""
        return self.image_uri is None or _ECR_IMAGE.match(self.image_uri) is not None

    def container_image(self, scope: Construct) -> ecs.ContainerImage:
        if self.image_uri:
            ecr_image = _ECR_IMAGE.match(self.image_uri)
            if ecr_image is None:  # a public registry: nothing to grant
                return ecs.ContainerImage.from_registry(self.image_uri)
            # A private ECR image, possibly in another account or region: grant the pull on that repository.
            name = ecr_image["repository"]
            repository = ecr.Repository.from_repository_attributes(
                scope,
                "ImageRepository",
                repository_name=name,
                repository_arn=f"arn:{Aws.PARTITION}:ecr:{ecr_image['region']}:{ecr_image['account']}:"
                f"repository/{name}",
            )
            return ecs.ContainerImage.from_ecr_repository(repository, ecr_image["tag"] or ecr_image["digest"])
        if not self.asset_directory:
            raise ValueError("ImageSource needs image_uri or asset_directory")
        return ecs.ContainerImage.from_asset(self.asset_directory, exclude=list(self.asset_exclude))


@dataclass(frozen=True)
class FleetProps:
    instance: InstanceFacts
    tensor_parallel: int
    min_hosts: int
    max_hosts: int
    data_volume_gib: int
    image: ImageSource
    ports: ServingPorts
    shared_memory_mib: int
    cold_start_budget_seconds: int
    health_check_grace_seconds: int
    # Engine and model settings for the container, beside the per-type ones the fleet sets itself.
    environment: tuple[tuple[str, str], ...] = ()
    # Tasks per host the service scales for: the engine's batch slots in use that count as "busy".
    target_requests_in_flight: float = 24.0
    metrics_namespace: str = "LLMServing"
    model_name: str = "assistant"  # the EMF dimension the container publishes its metrics under
    # Capacity providers keep this share of the ASG busy with tasks; 100 means no idle spare hosts.
    target_capacity_percent: int = 100
    # False when EC2 does not offer the type in the stack's region (settings/instances.py).
    offered_in_region: bool = True


@dataclass(frozen=True)
class FleetTargets:
    """The shared target groups a fleet's service registers into."""

    http: elbv2.IApplicationTargetGroup
    grpc: elbv2.IApplicationTargetGroup
    load_balancer_security_group: ec2.ISecurityGroup


class NeuronFleet(Construct):
    """Launch template, ASG, capacity provider, task definition, service and alarms for one instance type."""

    def __init__(
        self,
        scope: Construct,
        id: str,
        *,
        props: FleetProps,
        cluster: ecs.Cluster,
        targets: FleetTargets,
        task_role: iam.IRole,
        log_group: logs.ILogGroup,
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
        self.auto_scaling_group = self._hosts(props, cluster)
        self.capacity_provider = ecs.AsgCapacityProvider(
            self,
            "CapacityProvider",
            auto_scaling_group=self.auto_scaling_group,
            enable_managed_scaling=True,
            enable_managed_termination_protection=True,
            enable_managed_draining=True,
            target_capacity_percent=props.target_capacity_percent,
            # A new host is useful only once its model is loaded.
            instance_warmup_period=props.cold_start_budget_seconds,
        )
        cluster.add_asg_capacity_provider(self.capacity_provider)
        for line in ECS_AGENT_CONFIG:
            self.auto_scaling_group.add_user_data(f"echo {line} >> /etc/ecs/ecs.config")

        self.task_definition = self._task_definition(props, task_role, log_group)
        self.security_group = ec2.SecurityGroup(
            self, "TaskSecurityGroup", vpc=cluster.vpc, description=f"{self.instance_type} serving tasks"
        )
        for port in (props.ports.http, props.ports.grpc):
            self.security_group.add_ingress_rule(
                targets.load_balancer_security_group, ec2.Port.tcp(port), "from the serving ALB only"
            )
        self.service = ecs.Ec2Service(
            self,
            "Service",
            cluster=cluster,
            task_definition=self.task_definition,
            security_groups=[self.security_group],
            vpc_subnets=ec2.SubnetSelection(subnet_type=ec2.SubnetType.PRIVATE_WITH_EGRESS),
            capacity_provider_strategies=[
                ecs.CapacityProviderStrategy(
                    capacity_provider=self.capacity_provider.capacity_provider_name, weight=1
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
        )
        # CloudFormation rejects a strategy naming a provider the cluster does not list yet: create the
        # service after the cluster's capacity provider associations.
        Aspects.of(self.service).add(_AfterCapacityProviderAssociations(cluster))
        targets.http.add_target(
            self.service.load_balancer_target(container_name="serving", container_port=props.ports.http)
        )
        targets.grpc.add_target(
            self.service.load_balancer_target(container_name="serving", container_port=props.ports.grpc)
        )
        self._scaling(props)
        self.alarms = self._alarms(props, cluster)

    def _hosts(self, props: FleetProps, cluster: ecs.Cluster) -> autoscaling.AutoScalingGroup:
        user_data = ec2.UserData.for_linux()
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
        self.host_security_group = ec2.SecurityGroup(
            self, "HostSecurityGroup", vpc=cluster.vpc, description=f"{props.instance.name} hosts: no inbound"
        )
        self.host_role = iam.Role(
            self,
            "HostRole",
            assumed_by=iam.ServicePrincipal("ec2.amazonaws.com"),
            description=f"{props.instance.name} ECS container instances",
        )
        # The statements ECS adds for its agent: cluster-scoped where the API allows a resource, `*` where it
        # does not (DiscoverPollEndpoint, GetAuthorizationToken, the agent's own log streams).
        acknowledge(
            self.host_role,
            "AwsSolutions-IAM5[Action::ecs:Submit*]",
            "The ECS agent's state-change reports (SubmitTaskStateChange etc.), scoped to this cluster's "
            "ARN.",
        )
        acknowledge(
            self.host_role,
            "AwsSolutions-IAM5[Resource::*]",
            "ECS agent calls that take no resource ARN (DiscoverPollEndpoint, ecr:GetAuthorizationToken) and "
            "Poll/StartTelemetrySession, which carry an ecs:cluster condition for this cluster.",
        )
        launch_template = ec2.LaunchTemplate(
            self,
            "LaunchTemplate",
            instance_type=ec2.InstanceType(props.instance.name),
            # Resolved at deploy time from the public SSM parameter: no lookup, no cached AMI id.
            machine_image=ecs.EcsOptimizedImage.amazon_linux2023(ecs.AmiHardwareType.NEURON),
            user_data=user_data,
            block_devices=block_devices,
            security_group=self.host_security_group,
            role=self.host_role,
            require_imdsv2=True,
            http_put_response_hop_limit=1,
        )
        group = autoscaling.AutoScalingGroup(
            self,
            "Hosts",
            vpc=cluster.vpc,
            vpc_subnets=ec2.SubnetSelection(subnet_type=ec2.SubnetType.PRIVATE_WITH_EGRESS),
            launch_template=launch_template,
            # No desired capacity: a redeploy must never reset a running fleet; the capacity provider
            # owns the desired count and the config owns the bounds.
            min_capacity=props.min_hosts,
            max_capacity=props.max_hosts,
            group_metrics=[autoscaling.GroupMetrics.all()],
        )
        acknowledge(
            group,
            "AwsSolutions-AS3",
            "Scaling is driven by the ECS capacity provider; the fleet's alarms and the region-degraded "
            "composite alarm notify, per-instance launch/terminate notifications would be noise.",
        )
        return group

    def _task_definition(
        self, props: FleetProps, task_role: iam.IRole, log_group: logs.ILogGroup
    ) -> ecs.Ec2TaskDefinition:
        task_definition = ecs.Ec2TaskDefinition(
            self,
            "TaskDefinition",
            network_mode=ecs.NetworkMode.AWS_VPC,
            task_role=task_role,
            volumes=[ecs.Volume(name="serving-data", host=ecs.Host(source_path=HOST_DATA_DIR))],
        )
        linux = ecs.LinuxParameters(self, "LinuxParameters", shared_memory_size=props.shared_memory_mib)
        linux.add_capabilities(ecs.Capability.IPC_LOCK)
        linux.add_devices(
            *(
                ecs.Device(
                    host_path=path,
                    container_path=path,
                    permissions=[ecs.DevicePermission.READ, ecs.DevicePermission.WRITE],
                )
                for path in props.instance.device_paths
            )
        )
        timing = container_health_timing(props.cold_start_budget_seconds)
        environment = dict(props.environment)
        environment.update(
            {
                "INSTANCE_TYPE": props.instance.name,
                "NEURON_FAMILY": props.instance.family.value,
                "ENGINE_TENSOR_PARALLEL_SIZE": str(props.tensor_parallel),
                "AWS_EMF_NAMESPACE": props.metrics_namespace,
            }
        )
        container = task_definition.add_container(
            "serving",
            container_name="serving",
            image=props.image.container_image(self),
            # Leave the host a quarter of its memory for the OS, the ECS agent and the page cache that
            # loading weights leans on.
            memory_reservation_mib=props.instance.memory_gib * 1024 * 3 // 4,
            environment=environment,
            linux_parameters=linux,
            ulimits=[ecs.Ulimit(name=ecs.UlimitName.MEMLOCK, soft_limit=-1, hard_limit=-1)],
            port_mappings=[
                ecs.PortMapping(container_port=props.ports.http, name="http"),
                ecs.PortMapping(container_port=props.ports.grpc, name="grpc"),
                ecs.PortMapping(container_port=props.ports.metrics, name="metrics"),
            ],
            health_check=ecs.HealthCheck(
                command=container_health_command(props.ports.http),
                start_period=Duration.seconds(timing.start_period_seconds),
                interval=Duration.seconds(timing.interval_seconds),
                retries=timing.retries,
                timeout=Duration.seconds(timing.timeout_seconds),
            ),
            stop_timeout=Duration.seconds(STOP_TIMEOUT_SECONDS),
            logging=ecs.LogDrivers.aws_logs(stream_prefix=props.instance.name, log_group=log_group),
        )
        container.add_mount_points(
            ecs.MountPoint(source_volume="serving-data", container_path=CONTAINER_DATA_DIR, read_only=False)
        )
        if props.image.pulls_from_ecr:
            acknowledge(
                task_definition.obtain_execution_role(),
                "AwsSolutions-IAM5[Resource::*]",
                "ecr:GetAuthorizationToken has no resource-level permissions; the image pull itself is "
                "granted on the one repository.",
            )
        acknowledge(
            task_definition,
            "AwsSolutions-ECS2",
            "The environment holds engine settings and paths (tensor-parallel degree, ports, S3 "
            "location), no secrets.",
        )
        return task_definition

    def _scaling(self, props: FleetProps) -> None:
        # Service scaling sets the task count within the config's bounds; the capacity provider then sizes
        # the ASG to fit (one host per task). The container reports in-flight requests per model, not per
        # instance type; least outstanding requests keeps per-host load alike across fleets, so each fleet
        # scales on the region's average.
        scaling = self.service.auto_scale_task_count(
            min_capacity=props.min_hosts, max_capacity=props.max_hosts
        )
        scaling.scale_to_track_custom_metric(
            "RequestsInFlight",
            metric=self.requests_in_flight_metric(),
            target_value=props.target_requests_in_flight,
            # Scale out fast, in slowly: a host costs a whole cold start to bring back.
            scale_out_cooldown=Duration.minutes(2),
            scale_in_cooldown=Duration.minutes(30),
        )

    def requests_in_flight_metric(self) -> cloudwatch.Metric:
        return cloudwatch.Metric(
            namespace=self.props.metrics_namespace,
            metric_name="RequestsInFlight",
            dimensions_map={"Model": self.props.model_name},
            statistic="Average",
            period=Duration.minutes(1),
        )

    def hosts_in_service_metric(self) -> cloudwatch.Metric:
        return cloudwatch.Metric(
            namespace="AWS/AutoScaling",
            metric_name="GroupInServiceInstances",
            dimensions_map={"AutoScalingGroupName": self.auto_scaling_group.auto_scaling_group_name},
            statistic="Average",
            period=Duration.minutes(5),
        )

    def running_tasks_metric(self, cluster: ecs.Cluster) -> cloudwatch.Metric:
        return cloudwatch.Metric(
            namespace="ECS/ContainerInsights",
            metric_name="RunningTaskCount",
            dimensions_map={"ClusterName": cluster.cluster_name, "ServiceName": self.service.service_name},
            statistic="Minimum",
            period=Duration.minutes(5),
        )

    def _alarms(self, props: FleetProps, cluster: ecs.Cluster) -> list[cloudwatch.Alarm]:
        self.running_tasks = self.running_tasks_metric(cluster)
        self.unhealthy_alarm: cloudwatch.Alarm | None = None
        if props.min_hosts == 0:
            return []  # a fleet allowed to be empty has no floor to fall below
        self.unhealthy_alarm = cloudwatch.Alarm(
            self,
            "BelowMinimumTasks",
            alarm_description=f"{self.instance_type}: fewer serving tasks than the configured minimum hosts "
            "for 15 minutes (hosts failing to start, capacity shortage or a crash loop)",
            metric=self.running_tasks,
            threshold=props.min_hosts,
            comparison_operator=cloudwatch.ComparisonOperator.LESS_THAN_THRESHOLD,
            evaluation_periods=3,
            treat_missing_data=cloudwatch.TreatMissingData.BREACHING,
        )
        return [self.unhealthy_alarm]
