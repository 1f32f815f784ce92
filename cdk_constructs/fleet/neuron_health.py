"""Whether a fleet's Neuron devices and runtime work: the Neuron runtime's failures counted from the serving
logs, and the hardware errors the neuron-monitor sidecar publishes (container/monitoring/), each with its
alarm. ECS Container Insights has no Neuron metrics, so both come from the host itself."""

from __future__ import annotations

from aws_cdk import Duration, Fn, Stack
from aws_cdk import aws_cloudwatch as cloudwatch
from aws_cdk import aws_ecs as ecs
from aws_cdk import aws_logs as logs
from constructs import Construct

from cdk_constructs.alarm_names import WatchedAlarm
from cdk_constructs.fleet.props import FleetProps

# Neuron runtime (NRT) and driver (TDRV) messages that mean the engine could not get or start its
# NeuronCores: cores held by a process that did not exit, a device the container cannot open, a runtime
# that does not match the host's driver. The engine then dies and the host serves nothing.
NEURON_RUNTIME_FAILURE_TERMS = (
    "NRT:nrt_allocate_neuron_cores",
    "NRT:nrt_init",
    "nrt_init failed",
    "TDRV:tdrv_init",
)
RUNTIME_FAILURES_METRIC = "NeuronRuntimeFailures"


def runtime_failures_metric_name(instance_type: str) -> str:
    """A metric filter cannot give plain-text log lines a fixed dimension, so the instance type goes in the
    metric's name: one series per fleet, like the sidecar's {InstanceType} ones."""
    return f"{RUNTIME_FAILURES_METRIC}-{instance_type}"


# What the sidecar publishes (container/monitoring/neuron_metrics.py), dimension InstanceType.
NEURONCORE_UTILIZATION = "NeuronCoreUtilization"
DEVICE_MEMORY_USED = "NeuronDeviceMemoryUsed"
EXECUTION_ERRORS = "NeuronExecutionErrors"
HARDWARE_ERRORS = "NeuronHardwareErrors"
ECC_CORRECTED = "NeuronEccCorrected"
# container/monitoring/neuron_metrics.py REVISION_DIMENSION.
REVISION_DIMENSION = "TaskDefinitionRevision"
# The revision's place in a task definition ARN split at ':'.
ARN_REVISION_INDEX = 6


def task_definition_revision(task_definition: ecs.TaskDefinition) -> str:
    """The revision number of the task definition this stack registers, as a CloudFormation expression."""
    return Fn.select(ARN_REVISION_INDEX, Fn.split(":", task_definition.task_definition_arn))


def neuron_metric(props: FleetProps, name: str, statistic: str) -> cloudwatch.Metric:
    return cloudwatch.Metric(
        namespace=props.metrics_namespace,
        metric_name=name,
        dimensions_map={"InstanceType": props.instance.name},
        statistic=statistic,
        period=Duration.minutes(1),
    )


class NeuronHealth(Construct):
    def __init__(
        self,
        scope: Construct,
        id: str,
        *,
        props: FleetProps,
        log_group: logs.ILogGroup,
        task_definition: ecs.TaskDefinition,
    ) -> None:
        super().__init__(scope, id)
        instance_type = props.instance.name
        # The fleet's log group holds only this instance type's tasks, so the count is per fleet.
        logs.MetricFilter(
            self,
            "RuntimeFailures",
            log_group=log_group,
            filter_pattern=logs.FilterPattern.any_term(*NEURON_RUNTIME_FAILURE_TERMS),
            metric_namespace=props.metrics_namespace,
            metric_name=runtime_failures_metric_name(instance_type),
            metric_value="1",
            unit=cloudwatch.Unit.COUNT,
        )
        self.runtime_failures = cloudwatch.Metric(
            namespace=props.metrics_namespace,
            metric_name=runtime_failures_metric_name(instance_type),
            statistic="Sum",
            period=Duration.minutes(1),
        )
        self.runtime_failure_alarm = self._any_in_minutes(
            "RuntimeFailureAlarm",
            self.runtime_failures,
            minutes=2,
            description=f"{instance_type}: the Neuron runtime failed to start or to claim its NeuronCores "
            "on a host (nrt_allocate_neuron_cores / NRT init / driver init errors in the serving logs) in 2 "
            "of the last 5 minutes; that host serves nothing until its task is replaced",
        )
        self.utilization = neuron_metric(props, NEURONCORE_UTILIZATION, "Average")
        self.device_memory = neuron_metric(props, DEVICE_MEMORY_USED, "Maximum")
        self.execution_errors = neuron_metric(props, EXECUTION_ERRORS, "Sum")
        self.hardware_errors = neuron_metric(props, HARDWARE_ERRORS, "Sum")
        self.ecc_corrected = neuron_metric(props, ECC_CORRECTED, "Sum")
        # A single event can be a blip; errors in 3 of 5 minutes are a failing device.
        self.hardware_error_alarm = self._any_in_minutes(
            "HardwareErrorAlarm",
            self.hardware_errors,
            minutes=3,
            description=f"{instance_type}: uncorrected ECC or hardware execution errors on a Neuron device "
            "in 3 of the last 5 minutes: a failing device, replace its host",
        )

        self.new_revision_hardware_errors = cloudwatch.Metric(
            namespace=props.metrics_namespace,
            metric_name=HARDWARE_ERRORS,
            dimensions_map={
                "InstanceType": instance_type,
                REVISION_DIMENSION: task_definition_revision(task_definition),
            },
            statistic="Sum",
            period=Duration.minutes(1),
        )
        self.deployment_alarm = self._any_in_minutes(
            "NewRevisionHardwareErrorAlarm",
            self.new_revision_hardware_errors,
            minutes=3,
            description=f"{instance_type}: hardware errors on a Neuron device of a host running the "
            "service's current task definition revision, in 3 of the last 5 minutes; a deploy of that "
            "revision rolls back on it (hosts of older revisions are not counted)",
            # Each revision its own alarm in a fresh state (alarm_names.py): updated in place, it would
            # keep the previous revision's ALARM and roll back the next deploy at once.
            name_prefix=f"{Stack.of(self).stack_name}-{instance_type}-deploy-hardware-errors",
        )

    def _any_in_minutes(
        self,
        id: str,
        metric: cloudwatch.Metric,
        *,
        minutes: int,
        description: str,
        name_prefix: str | None = None,
    ) -> cloudwatch.Alarm:
        """At least one event in `minutes` of the last five one-minute periods; no data is no event. With a
        `name_prefix`, named for what it watches (alarm_names.py); else CloudFormation names it."""
        settings = dict(
            alarm_description=description,
            metric=metric,
            threshold=1,
            comparison_operator=cloudwatch.ComparisonOperator.GREATER_THAN_OR_EQUAL_TO_THRESHOLD,
            evaluation_periods=5,
            datapoints_to_alarm=minutes,
            treat_missing_data=cloudwatch.TreatMissingData.NOT_BREACHING,
        )
        if name_prefix is None:
            return cloudwatch.Alarm(self, id, **settings)
        return WatchedAlarm(self, id, name_prefix=name_prefix, **settings)

    @property
    def alarms(self) -> list[cloudwatch.Alarm]:
        return [self.runtime_failure_alarm, self.hardware_error_alarm]
