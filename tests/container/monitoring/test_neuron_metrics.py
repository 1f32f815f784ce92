"""The neuron-monitor report -> EMF mapping, on a report shaped like neuron-monitor's documented output
(an inf2.48xlarge with three TP-8 engines; neuron_monitor_report.json)."""

from __future__ import annotations

import copy
import json
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from assistant.metrics import validate_emf
from monitoring.neuron_metrics import (
    DEVICE_MEMORY_USED,
    HARDWARE_ERRORS,
    NEURONCORE_UTILIZATION,
    emf_line,
    emf_record,
    summarize,
)

SAMPLE = json.loads((Path(__file__).parent / "neuron_monitor_report.json").read_text())


@pytest.fixture
def report() -> dict:
    return copy.deepcopy(SAMPLE)


def test_sample_report_sums_engines_and_averages_every_core_of_the_host(report):
    sample = summarize(report)
    assert sample.neuroncore_utilization == pytest.approx((8 * 62.5 + 8 * 58.0 + 8 * 50.0) / 24, abs=1e-3)
    assert sample.device_memory_used == 3 * 20401094656
    assert sample.execution_errors == 1
    assert sample.hardware_errors == 0
    assert sample.ecc_corrected == 1
    assert sample.instance_id == "i-0a1b2c3d4e5f60718"


def test_cores_no_engine_uses_count_as_idle(report):
    del report["neuron_runtime_data"][2]
    assert summarize(report).neuroncore_utilization == pytest.approx((8 * 62.5 + 8 * 58.0) / 24, abs=1e-3)


def test_uncorrected_ecc_and_hardware_execution_errors_are_hardware_errors(report):
    report["system_data"]["neuron_hw_counters"]["neuron_devices"][3]["sram_ecc_uncorrected"] = 2
    report["neuron_runtime_data"][0]["report"]["execution_stats"]["error_summary"]["hardware"] = 1
    sample = summarize(report)
    assert sample.hardware_errors == 3
    assert sample.execution_errors == 2  # the hardware failure is an execution error too


def test_a_metric_group_that_reports_an_error_is_not_counted(report):
    report["neuron_runtime_data"][0]["report"]["memory_used"]["error"] = "runtime went away"
    assert summarize(report).device_memory_used == 2 * 20401094656


def test_a_host_without_engines_reports_idle_cores_and_no_errors(report):
    report["neuron_runtime_data"] = None
    sample = summarize(report)
    assert (sample.neuroncore_utilization, sample.device_memory_used, sample.execution_errors) == (0.0, 0, 0)


def test_record_is_valid_emf_under_the_instance_type_dimension(report):
    record = emf_record(
        summarize(report), namespace="LLMServing", instance_type="inf2.48xlarge", timestamp_ms=1
    )
    validate_emf(record)  # the container's own EMF checker
    directive = record["_aws"]["CloudWatchMetrics"][0]
    assert directive["Dimensions"] == [["InstanceType"]]
    assert {m["Name"]: m["Unit"] for m in directive["Metrics"]}[NEURONCORE_UTILIZATION] == "Percent"
    assert record["InstanceType"] == "inf2.48xlarge"
    assert record[HARDWARE_ERRORS] == 0 and record[DEVICE_MEMORY_USED] == 3 * 20401094656


def test_a_line_that_is_not_a_report_is_refused():
    with pytest.raises(ValueError):
        emf_line("neuron-monitor: starting", namespace="N", instance_type="t", timestamp_ms=1)
    with pytest.raises(ValueError):
        emf_line("[1, 2]", namespace="N", instance_type="t", timestamp_ms=1)


@given(
    st.lists(
        st.dictionaries(st.integers(0, 23), st.floats(0, 100, allow_nan=False), max_size=24),
        max_size=6,
    )
)
def test_utilisation_stays_a_percentage_however_runtimes_overlap(runtimes):
    report = {
        "neuron_runtime_data": [
            {
                "error": "",
                "report": {
                    "neuroncore_counters": {
                        "error": "",
                        "neuroncores_in_use": {
                            str(c): {"neuroncore_utilization": u} for c, u in cores.items()
                        },
                    }
                },
            }
            for cores in runtimes
        ],
        "neuron_hardware_info": {"neuron_device_count": 12, "neuroncore_per_device_count": 2, "error": ""},
    }
    assert 0.0 <= summarize(report).neuroncore_utilization <= 100.0


def test_with_its_task_revision_the_record_is_also_a_series_of_that_revision(report):
    """A deploy's alarm watches the new task definition revision's hosts alone (neuron_health.py)."""
    record = emf_record(
        summarize(report), namespace="LLMServing", instance_type="inf2.48xlarge", timestamp_ms=1, revision="7"
    )
    validate_emf(record)
    directive = record["_aws"]["CloudWatchMetrics"][0]
    assert directive["Dimensions"] == [["InstanceType"], ["InstanceType", "TaskDefinitionRevision"]]
    assert record["TaskDefinitionRevision"] == "7"
