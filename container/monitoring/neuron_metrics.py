"""neuron-monitor report -> the fleet's Neuron metrics, as one CloudWatch Embedded Metric Format record.

neuron-monitor (aws-neuronx-tools) prints one JSON report per period: `neuron_runtime_data` holds a
report per Neuron runtime (one per engine process) with `neuroncore_counters`, `memory_used` and
`execution_stats`; `system_data.neuron_hw_counters` holds the ECC counters per device; every metric group
carries an `error` string, empty when its numbers are good. Counters (errors, ECC events) are counts over
the report's period, so their CloudWatch Sum over a minute is the minute's count.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

NEURONCORE_UTILIZATION = "NeuronCoreUtilization"
DEVICE_MEMORY_USED = "NeuronDeviceMemoryUsed"
EXECUTION_ERRORS = "NeuronExecutionErrors"
HARDWARE_ERRORS = "NeuronHardwareErrors"
ECC_CORRECTED = "NeuronEccCorrected"
UNITS = {
    NEURONCORE_UTILIZATION: "Percent",
    DEVICE_MEMORY_USED: "Bytes",
    EXECUTION_ERRORS: "Count",
    HARDWARE_ERRORS: "Count",
    ECC_CORRECTED: "Count",
}
# ECC events the device could not correct: the data on it is wrong, the host must go.
UNCORRECTED_ECC = ("mem_ecc_uncorrected", "sram_ecc_uncorrected")
CORRECTED_ECC = ("mem_ecc_corrected", "sram_ecc_corrected")

# What the sidecar asks neuron-monitor for (its -c config): the four groups above, every 10 s like the
# container's own gauges.
MONITOR_CONFIG: dict[str, Any] = {
    "period": "10s",
    "neuron_runtimes": [
        {
            "tag_filter": ".*",
            "metrics": [
                {"type": "neuroncore_counters"},
                {"type": "memory_used"},
                {"type": "execution_stats"},
            ],
        }
    ],
    "system_metrics": [{"type": "neuron_hw_counters"}],
}


@dataclass(frozen=True)
class NeuronSample:
    """One report boiled down to the host's figures."""

    neuroncore_utilization: float | None  # percent, averaged over the host's NeuronCores
    device_memory_used: int  # bytes on the Neuron devices, all runtimes
    execution_errors: int  # executions that ended in an error of any kind
    hardware_errors: int  # uncorrected ECC events plus executions failed by a hardware error
    ecc_corrected: int
    instance_id: str | None


def _good(group: Any) -> Mapping[str, Any] | None:
    """A metric group whose numbers can be used: present, a mapping, and without an error."""
    if isinstance(group, Mapping) and not group.get("error"):
        return group
    return None


def _count(value: Any) -> int:
    return int(value) if isinstance(value, int | float) and not isinstance(value, bool) else 0


def _runtime_reports(report: Mapping[str, Any]) -> Iterable[Mapping[str, Any]]:
    for runtime in report.get("neuron_runtime_data") or []:
        if (
            isinstance(runtime, Mapping)
            and not runtime.get("error")
            and isinstance(runtime.get("report"), Mapping)
        ):
            yield runtime["report"]


def _host_core_count(report: Mapping[str, Any]) -> int | None:
    info = _good(report.get("neuron_hardware_info"))
    if info is None:
        return None
    devices, per_device = (
        _count(info.get("neuron_device_count")),
        _count(info.get("neuroncore_per_device_count")),
    )
    return devices * per_device or None


def summarize(report: Mapping[str, Any]) -> NeuronSample:
    """The host's figures from one neuron-monitor report. Each runtime lists the cores it sees; a core's
    utilisation is summed over runtimes (each engine has its own cores), then averaged over every core of
    the host, so cores no engine uses count as idle."""
    per_core: dict[int, float] = {}
    memory = execution_errors = hardware_errors = 0
    for runtime in _runtime_reports(report):
        counters = _good(runtime.get("neuroncore_counters"))
        for index, values in ((counters or {}).get("neuroncores_in_use") or {}).items():
            utilization = (values or {}).get("neuroncore_utilization")
            if isinstance(utilization, int | float):
                per_core[int(index)] = min(100.0, per_core.get(int(index), 0.0) + float(utilization))
        used = _good(runtime.get("memory_used"))
        memory += _count(((used or {}).get("neuron_runtime_used_bytes") or {}).get("neuron_device"))
        stats = _good(runtime.get("execution_stats"))
        errors = (stats or {}).get("error_summary") or {}
        execution_errors += sum(_count(value) for value in errors.values())
        hardware_errors += _count(errors.get("hardware"))

    ecc_corrected = 0
    hw_counters = _good((report.get("system_data") or {}).get("neuron_hw_counters"))
    for device in (hw_counters or {}).get("neuron_devices") or []:
        hardware_errors += sum(_count(device.get(name)) for name in UNCORRECTED_ECC)
        ecc_corrected += sum(_count(device.get(name)) for name in CORRECTED_ECC)

    cores = _host_core_count(report) or len(per_core)
    utilization = round(sum(per_core.values()) / cores, 3) if cores else None
    instance = _good(report.get("instance_info")) or {}
    return NeuronSample(
        neuroncore_utilization=utilization,
        device_memory_used=memory,
        execution_errors=execution_errors,
        hardware_errors=hardware_errors,
        ecc_corrected=ecc_corrected,
        instance_id=instance.get("instance_id") or None,
    )


# The task definition revision of the task the sidecar runs in: a second dimension set, so a deploy's
# alarms can judge the new revision's hosts alone (cdk_constructs/fleet/neuron_health.py).
REVISION_DIMENSION = "TaskDefinitionRevision"


def emf_record(
    sample: NeuronSample,
    *,
    namespace: str,
    instance_type: str,
    timestamp_ms: int,
    revision: str | None = None,
) -> dict[str, Any]:
    """One EMF record with dimension set {InstanceType}, and {InstanceType, TaskDefinitionRevision} when the
    revision is known (an EMF directive's Dimensions is a list of dimension sets, each its own series: the
    CloudWatch "Embedded metric format specification"); the instance id rides along as a property, so Logs
    Insights finds the host behind an error without making a series per host."""
    values: dict[str, float] = {
        DEVICE_MEMORY_USED: sample.device_memory_used,
        EXECUTION_ERRORS: sample.execution_errors,
        HARDWARE_ERRORS: sample.hardware_errors,
        ECC_CORRECTED: sample.ecc_corrected,
    }
    if sample.neuroncore_utilization is not None:
        values[NEURONCORE_UTILIZATION] = sample.neuroncore_utilization
    record: dict[str, Any] = {
        "_aws": {
            "Timestamp": timestamp_ms,
            "CloudWatchMetrics": [
                {
                    "Namespace": namespace,
                    "Dimensions": [["InstanceType"], ["InstanceType", REVISION_DIMENSION]]
                    if revision
                    else [["InstanceType"]],
                    "Metrics": [{"Name": name, "Unit": UNITS[name]} for name in values],
                }
            ],
        },
        "InstanceType": instance_type,
        **values,
    }
    if revision:
        record[REVISION_DIMENSION] = revision
    if sample.instance_id:
        record["InstanceId"] = sample.instance_id
    return record


def emf_line(
    report_line: str, *, namespace: str, instance_type: str, timestamp_ms: int, revision: str | None = None
) -> str:
    """One neuron-monitor output line -> one EMF log line. Raises ValueError for a line that is not a
    report (neuron-monitor prints nothing else on stdout, so that is worth saying on stderr)."""
    report = json.loads(report_line)
    if not isinstance(report, Mapping):
        raise ValueError("a neuron-monitor report is a JSON object")
    record = emf_record(
        summarize(report),
        namespace=namespace,
        instance_type=instance_type,
        timestamp_ms=timestamp_ms,
        revision=revision,
    )
    return json.dumps(record, separators=(",", ":"))
