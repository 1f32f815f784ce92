"""The serving task for one instance type: every /dev/neuronN of the type, locked memory, the data disk,
a non-root user, an init process, and a container health check that cannot fail a host inside its
cold-start budget yet fails a host whose engine died within a minute.

Non-root on Neuron: the AMI's Neuron driver installs a udev rule that makes /dev/neuron* mode 0666
(aws-neuron-driver README), so the serving user opens the devices the task maps; a host that tightens them
to a group, as the Neuron security page suggests, must make that group the task user's group. Locked
memory needs no capability for a non-root process when RLIMIT_MEMLOCK is unlimited (mlock(2)), which the
ulimit below sets; IPC_LOCK stays in the bounding set for images that run the runtime as root. The host's
data disk is owned by the serving uid (host_boot.py), the only place the task writes besides /tmp.

Beside it, the fleet's compile task (`make compile`): the same image, devices, memory, environment and data
disk, run as `python3 -m entrypoint.compile` under the compile task role, logging to a log group of its own.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from aws_cdk import Duration, Size
from aws_cdk import aws_ecs as ecs
from aws_cdk import aws_iam as iam
from aws_cdk import aws_logs as logs
from constructs import Construct

from cdk_constructs.fleet.host_boot import HOST_DATA_DIR, SERVING_USER_ID, STOP_TIMEOUT_SECONDS
from cdk_constructs.fleet.props import FleetProps
from cdk_constructs.nag import acknowledge
from settings.aws_limits import CONTAINER_START_PERIOD_MAX

CONTAINER_NAME = "serving"
MONITOR_CONTAINER_NAME = "neuron-monitor"
# The sidecar runs neuron-monitor and turns its JSON reports into EMF lines (container/monitoring/).
MONITOR_COMMAND = ["python3", "-m", "monitoring.neuron_exporter"]
MONITOR_MEMORY_MIB = 256
CONTAINER_DATA_DIR = "/opt/models"  # where the entrypoint puts weights/ and compiled/
DATA_VOLUME = "serving-data"

# The compile task definition's construct id under the fleet (ops/compile.py finds the task definition by
# the logical id it gives: Fleet<type>Compile...), its container and the image's compile mode.
COMPILE_CONSTRUCT_ID = "Compile"
COMPILE_CONTAINER_NAME = "compile"
COMPILE_COMMAND = ["python3", "-m", "entrypoint.compile"]

# The awslogs driver's buffer in non-blocking mode (Docker's default is 1 MiB): at a few hundred bytes a line
# it holds minutes of a busy host's metric lines while CloudWatch Logs is slow.
LOG_BUFFER_MIB = 25


# A host whose engine died must be marked unhealthy (and replaced) within this long once it stops
# answering ready; the ALB target groups take it out far sooner (load_balancer.DEFAULT_HEALTH_CHECK).
DEAD_CONTAINER_SECONDS = 60
SERVING_USER = f"{SERVING_USER_ID}:{SERVING_USER_ID}"


@dataclass(frozen=True)
class ContainerHealthTiming:
    start_period_seconds: int
    interval_seconds: int
    retries: int
    timeout_seconds: int
    # The probe answers healthy while the server starts, for this long after its first run.
    cold_start_seconds: int

    @property
    def covered_seconds(self) -> int:
        """How long after start a container can go on failing to be ready before ECS calls it unhealthy."""
        return max(self.start_period_seconds, self.cold_start_seconds) + self.retries * self.interval_seconds

    @property
    def dead_after_seconds(self) -> int:
        """Worst case from a ready container's last good probe to ECS calling it unhealthy."""
        return self.retries * self.interval_seconds + self.timeout_seconds


def container_health_timing(cold_start_budget_seconds: int) -> ContainerHealthTiming:
    """Short retries for the steady state; the cold start is the probe's own business
    (container/entrypoint/healthcheck.py answers healthy while starting within the budget), because ECS's
    start period (at most 300 s) and retries (at most 10) cannot cover a long cold start with short checks.
    Three failures in a row, so one slow answer from a busy server does not replace a host."""
    retries, interval, timeout = 3, 15, 10
    return ContainerHealthTiming(
        start_period_seconds=min(cold_start_budget_seconds, CONTAINER_START_PERIOD_MAX),
        interval_seconds=interval,
        retries=retries,
        timeout_seconds=timeout,
        cold_start_seconds=cold_start_budget_seconds,
    )


def container_health_command(http_port: int, cold_start_budget_seconds: int) -> list[str]:
    """Triton's server readiness through the image's probe (the serving images are Python images, curl is
    not guaranteed in them): exit 0 while ready or still starting within the budget, else 1."""
    return [
        "CMD",
        "python3",
        "-m",
        "entrypoint.healthcheck",
        f"--port={http_port}",
        f"--cold-start-seconds={cold_start_budget_seconds}",
    ]


def fleet_environment(props: FleetProps) -> dict[str, str]:
    """The container's environment: the settings-wide engine values plus what this instance type sets."""
    environment = dict(props.environment)
    environment.update(
        {
            "INSTANCE_TYPE": props.instance.name,
            "NEURON_FAMILY": props.instance.family.value,
            "ENGINE_TENSOR_PARALLEL_SIZE": str(props.tensor_parallel),
            "AWS_EMF_NAMESPACE": props.metrics_namespace,
        }
    )
    return environment


def neuron_devices(props: FleetProps) -> list[ecs.Device]:
    return [
        ecs.Device(
            host_path=path,
            container_path=path,
            permissions=[ecs.DevicePermission.READ, ecs.DevicePermission.WRITE],
        )
        for path in props.instance.device_paths
    ]


def data_volume() -> ecs.Volume:
    return ecs.Volume(name=DATA_VOLUME, host=ecs.Host(source_path=HOST_DATA_DIR))


def data_mount() -> ecs.MountPoint:
    return ecs.MountPoint(source_volume=DATA_VOLUME, container_path=CONTAINER_DATA_DIR, read_only=False)


def engine_container_options(scope: Construct, props: FleetProps) -> dict[str, Any]:
    """What the engine's container needs on a host of the fleet's type, serving or compiling: every device,
    locked and shared memory, the environment the compiled-artifact key is computed from, the serving
    user."""
    # initProcessEnabled: ECS runs an init process as PID 1 (docker --init) that reaps the orphans a
    # killed Python backend stub would leave (its engine workers), and forwards the stop signal.
    linux = ecs.LinuxParameters(
        scope, "LinuxParameters", shared_memory_size=props.shared_memory_mib, init_process_enabled=True
    )
    linux.add_capabilities(ecs.Capability.IPC_LOCK)
    linux.add_devices(*neuron_devices(props))
    return dict(
        # Leave the host a quarter of its memory for the OS, the ECS agent and the page cache that
        # loading weights leans on.
        memory_reservation_mib=props.instance.memory_gib * 1024 * 3 // 4,
        environment=fleet_environment(props),
        # Not root: the read-only artifact tree stays read-only (root writes through 0555), and code
        # that escaped Triton cannot change the image (container/Dockerfile creates this uid).
        user=SERVING_USER,
        linux_parameters=linux,
        ulimits=[ecs.Ulimit(name=ecs.UlimitName.MEMLOCK, soft_limit=-1, hard_limit=-1)],
    )


def acknowledge_task_definition(
    task_definition: ecs.Ec2TaskDefinition, props: FleetProps, holds: str
) -> None:
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
        f"The environment holds engine settings and paths ({holds}), no secrets.",
    )


class ServingTaskDefinition(Construct):
    def __init__(
        self,
        scope: Construct,
        id: str,
        *,
        props: FleetProps,
        task_role: iam.IRole,
        log_group: logs.ILogGroup,
    ) -> None:
        super().__init__(scope, id)
        self.task_definition = ecs.Ec2TaskDefinition(
            self,
            "TaskDefinition",
            network_mode=ecs.NetworkMode.AWS_VPC,
            task_role=task_role,
            volumes=[data_volume()],
            # neuron-monitor finds the Neuron runtimes by their processes: the sidecar must see the
            # serving container's.
            pid_mode=ecs.PidMode.TASK,
        )
        timing = container_health_timing(props.cold_start_budget_seconds)
        image = props.image.container_image(self)
        self.container = self.task_definition.add_container(
            CONTAINER_NAME,
            container_name=CONTAINER_NAME,
            image=image,
            **engine_container_options(self, props),
            port_mappings=[
                ecs.PortMapping(container_port=props.ports.http, name="http"),
                ecs.PortMapping(container_port=props.ports.grpc, name="grpc"),
                ecs.PortMapping(container_port=props.ports.metrics, name="metrics"),
            ],
            health_check=ecs.HealthCheck(
                command=container_health_command(props.ports.http, timing.cold_start_seconds),
                start_period=Duration.seconds(timing.start_period_seconds),
                interval=Duration.seconds(timing.interval_seconds),
                retries=timing.retries,
                timeout=Duration.seconds(timing.timeout_seconds),
            ),
            stop_timeout=Duration.seconds(STOP_TIMEOUT_SECONDS),
            # Non-blocking: a slow CloudWatch Logs must not stall the streams (in blocking mode a full pipe
            # stops the process that writes); the buffer holds minutes of metric lines, and the model counts
            # the lines its own writer drops (LogLinesDropped, container/serving/log_writer.py).
            logging=ecs.LogDrivers.aws_logs(
                stream_prefix=props.instance.name,
                log_group=log_group,
                mode=ecs.AwsLogDriverMode.NON_BLOCKING,
                max_buffer_size=Size.mebibytes(LOG_BUFFER_MIB),
            ),
        )
        self.container.add_mount_points(data_mount())
        self.monitor = self._monitor_sidecar(props, image, log_group)
        acknowledge_task_definition(
            self.task_definition, props, "tensor-parallel degree, ports, S3 location, the target group ARNs"
        )

    def _monitor_sidecar(
        self, props: FleetProps, image: ecs.ContainerImage, log_group: logs.ILogGroup
    ) -> ecs.ContainerDefinition:
        """neuron-monitor beside the engine, from the same image (the Neuron images carry aws-neuronx-tools):
        one per host because there is one task per host, bound to this instance type's devices, and gone
        with the task. Not essential: losing the metrics must not stop serving."""
        linux = ecs.LinuxParameters(self, "MonitorLinuxParameters", init_process_enabled=True)
        linux.add_devices(*neuron_devices(props))
        return self.task_definition.add_container(
            MONITOR_CONTAINER_NAME,
            container_name=MONITOR_CONTAINER_NAME,
            image=image,
            # The image's entry point starts the engine; the sidecar replaces it.
            entry_point=MONITOR_COMMAND,
            essential=False,
            user=SERVING_USER,
            memory_reservation_mib=MONITOR_MEMORY_MIB,
            environment={
                "INSTANCE_TYPE": props.instance.name,
                "AWS_EMF_NAMESPACE": props.metrics_namespace,
            },
            linux_parameters=linux,
            logging=ecs.LogDrivers.aws_logs(
                stream_prefix=f"{props.instance.name}-monitor", log_group=log_group
            ),
        )


class CompileTaskDefinition(Construct):
    """The fleet's compile task (`make compile` runs it with RunTask on the fleet's cluster, capacity
    provider, subnets and security group). A task definition of its own, not the serving one with RunTask
    overrides, for two reasons:

    - its logs go to a log group of their own: the fleet's log group feeds the NeuronRuntimeFailures metric
      filter (neuron_health.py), and a compile's Neuron runtime output must not page the fleet. RunTask
      cannot move a container's logs: a ContainerOverride holds command, environment, environmentFiles,
      cpu, memory, memoryReservation and resourceRequirements, no logConfiguration (ECS API reference,
      ContainerOverride);
    - its task role is the compile task role (the only role that may write compiled/) and its command the
      compile mode, so RunTask needs no taskRoleArn or command override.

    No sidecar (neuron-monitor's hardware metrics are the serving fleet's), no ports, no health check (the
    probe asks Triton, which a compile never starts). The same container options as serving: the key a
    compile writes is the key the serving hosts compute from the same environment."""

    def __init__(
        self,
        scope: Construct,
        id: str,
        *,
        props: FleetProps,
        task_role: iam.IRole,
        log_group: logs.ILogGroup,
    ) -> None:
        super().__init__(scope, id)
        self.task_definition = ecs.Ec2TaskDefinition(
            self,
            "TaskDefinition",
            network_mode=ecs.NetworkMode.AWS_VPC,
            task_role=task_role,
            volumes=[data_volume()],
        )
        self.container = self.task_definition.add_container(
            COMPILE_CONTAINER_NAME,
            container_name=COMPILE_CONTAINER_NAME,
            image=props.image.container_image(self),
            command=COMPILE_COMMAND,
            **engine_container_options(self, props),
            # Blocking: a compile's log is the record of why it failed, and a stalled write delays no
            # request (the serving container's non-blocking reasoning does not apply).
            logging=ecs.LogDrivers.aws_logs(
                stream_prefix=f"{props.instance.name}-compile",
                log_group=log_group,
                mode=ecs.AwsLogDriverMode.BLOCKING,
            ),
        )
        self.container.add_mount_points(data_mount())
        acknowledge_task_definition(self.task_definition, props, "tensor-parallel degree, S3 location")
