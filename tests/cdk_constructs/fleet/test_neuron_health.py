from aws_cdk.assertions import Match

from cdk_constructs.fleet.neuron_health import NEURON_RUNTIME_FAILURE_TERMS
from cdk_constructs.fleet.task_definition import MONITOR_COMMAND, MONITOR_CONTAINER_NAME

# Neuron runtime and driver errors as they appear in logs (from the Neuron troubleshooting guides).
RUNTIME_FAILURE_LINES = (
    "2021-Aug-27 23:22:12.0323 28078:28078 ERROR   NRT:nrt_allocate_neuron_cores  NeuronCore(s) not "
    "available "
    "- Requested:nc1-nc1 Available:0",
    "2022-Sep-08 21:52:11.0307     7:7     ERROR  TDRV:tdrv_init_mla_phase1   Could not open the nd1",
)


def test_runtime_failures_are_counted_per_fleet_from_its_log_group(template):
    template.has_resource_properties(
        "AWS::Logs::MetricFilter",
        {
            "FilterPattern": " ".join(f'?"{term}"' for term in NEURON_RUNTIME_FAILURE_TERMS),
            "MetricTransformations": [
                Match.object_like(
                    {
                        "MetricName": "NeuronRuntimeFailures-inf2.48xlarge",
                        "MetricNamespace": "LLMServing",
                        "MetricValue": "1",
                    }
                )
            ],
        },
    )
    for line in RUNTIME_FAILURE_LINES:
        assert any(term in line for term in NEURON_RUNTIME_FAILURE_TERMS)


def test_fleet_alarms_on_runtime_failures_and_hardware_errors(inf2):
    fleet, template = inf2
    assert fleet.neuron.runtime_failure_alarm in fleet.alarms
    assert fleet.neuron.hardware_error_alarm in fleet.alarms
    template.has_resource_properties(
        "AWS::CloudWatch::Alarm",
        {"MetricName": "NeuronRuntimeFailures-inf2.48xlarge", "Statistic": "Sum", "Threshold": 1},
    )
    template.has_resource_properties(
        "AWS::CloudWatch::Alarm",
        {
            "MetricName": "NeuronHardwareErrors",
            "Namespace": "LLMServing",
            "Dimensions": [{"Name": "InstanceType", "Value": "inf2.48xlarge"}],
            "Statistic": "Sum",
            "DatapointsToAlarm": 3,
        },
    )


def test_neuron_monitor_runs_as_a_sidecar_that_sees_the_engines_devices_and_processes(template):
    task = next(iter(template.find_resources("AWS::ECS::TaskDefinition").values()))["Properties"]
    assert task["PidMode"] == "task"
    containers = {c["Name"]: c for c in task["ContainerDefinitions"]}
    monitor = containers[MONITOR_CONTAINER_NAME]
    assert monitor["Essential"] is False
    assert monitor["EntryPoint"] == MONITOR_COMMAND
    assert monitor["Image"] == containers["serving"]["Image"]
    assert len(monitor["LinuxParameters"]["Devices"]) == 12  # every /dev/neuronN of inf2.48xlarge
    environment = {e["Name"]: e["Value"] for e in monitor["Environment"]}
    assert (
        environment.items() >= {"INSTANCE_TYPE": "inf2.48xlarge", "AWS_EMF_NAMESPACE": "LLMServing"}.items()
    )


def test_alarms_and_dashboard_read_the_names_the_sidecar_publishes():
    # The exporter runs in the image, the alarms in CDK: the one contract between them is these names.
    from cdk_constructs.fleet import neuron_health
    from monitoring import neuron_metrics

    for name in (
        "NEURONCORE_UTILIZATION",
        "DEVICE_MEMORY_USED",
        "EXECUTION_ERRORS",
        "HARDWARE_ERRORS",
        "ECC_CORRECTED",
    ):
        assert getattr(neuron_health, name) == getattr(neuron_metrics, name)
