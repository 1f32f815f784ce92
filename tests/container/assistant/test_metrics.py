from __future__ import annotations

import json
from typing import Any

import pytest

from assistant.metrics import (
    DEFAULT_NAMESPACE,
    DEFAULT_SLOW_FIRST_TOKEN_MS,
    NAMESPACE_ENV,
    SLOW_FIRST_TOKEN_ENV,
    EmfError,
    HostGauge,
    MetricValue,
    emf_line,
    emf_record,
    host_gauge_record,
    namespace_from_env,
    request_metrics_record,
    serving_dimensions,
    slow_first_token_ms,
    validate_emf,
)

DIMENSIONS = {"Model": "assistant", "InstanceType": "trn1.32xlarge"}


def _record(**changes: Any) -> dict[str, Any]:
    arguments: dict[str, Any] = {
        "ttft_ms": 123.4567,
        "output_tokens": 42,
        "input_tokens": 180,
        "failed": False,
        "dimensions": DIMENSIONS,
        "namespace": "Test",
        "timestamp_ms": 1_700_000_000_000,
    }
    return request_metrics_record(**{**arguments, **changes})


def test_request_record_follows_the_emf_layout() -> None:
    record = _record(properties={"RequestId": "r-1", "Intent": "comparison"})
    assert record == {
        "RequestId": "r-1",
        "Intent": "comparison",
        "Model": "assistant",
        "InstanceType": "trn1.32xlarge",
        "TimeToFirstToken": 123.457,
        "SlowFirstToken": 0,
        "OutputTokens": 42,
        "InputTokens": 180,
        "RequestFailed": 0,
        "Shed": 0,
        "ServingError": 0,
        "_aws": {
            "Timestamp": 1_700_000_000_000,
            "CloudWatchMetrics": [
                {
                    "Namespace": "Test",
                    "Dimensions": [["Model", "InstanceType"]],
                    "Metrics": [
                        {"Name": "TimeToFirstToken", "Unit": "Milliseconds"},
                        {"Name": "SlowFirstToken", "Unit": "Count"},
                        {"Name": "OutputTokens", "Unit": "Count"},
                        {"Name": "InputTokens", "Unit": "Count"},
                        {"Name": "RequestFailed", "Unit": "Count"},
                        {"Name": "Shed", "Unit": "Count"},
                        {"Name": "ServingError", "Unit": "Count"},
                    ],
                }
            ],
        },
    }


def test_one_line_publishes_per_model_and_per_fleet_series() -> None:
    record = _record(dimension_sets=[["Model"], ["Model", "InstanceType"]])
    assert record["_aws"]["CloudWatchMetrics"][0]["Dimensions"] == [["Model"], ["Model", "InstanceType"]]
    validate_emf(record)


def test_a_dimension_set_may_only_name_known_dimensions() -> None:
    with pytest.raises(EmfError, match=r"dimension_sets\[1\]: 'Fleet' is not one of the dimensions"):
        _record(dimension_sets=[["Model"], ["Model", "Fleet"]])


def test_serving_dimensions_add_the_fleet_only_where_the_task_names_it() -> None:
    assert serving_dimensions("assistant", {}) == ({"Model": "assistant"}, [["Model"]])
    assert serving_dimensions("assistant", {"INSTANCE_TYPE": " inf2.48xlarge "}) == (
        {"Model": "assistant", "InstanceType": "inf2.48xlarge"},
        [["Model"], ["Model", "InstanceType"]],
    )


def _names(record: dict[str, Any]) -> list[str]:
    return [metric["Name"] for metric in record["_aws"]["CloudWatchMetrics"][0]["Metrics"]]


def test_no_first_token_means_no_ttft_datapoint() -> None:
    record = _record(ttft_ms=None, failed=True, input_tokens=None)
    assert "TimeToFirstToken" not in _names(record) and "TimeToFirstToken" not in record
    assert "SlowFirstToken" not in record and "InputTokens" not in record
    assert record["RequestFailed"] == 1


@pytest.mark.parametrize(("waited_ms", "slow"), [(None, None), (999.9, None), (1000.1, 1), (60_000.0, 1)])
def test_a_stream_that_ends_without_a_token_after_the_objective_is_slow(waited_ms, slow) -> None:
    """A client that gives up in a long queue, or a stream failed after waiting, is a slow first token."""
    record = _record(ttft_ms=None, failed=False, waited_ms=waited_ms, slow_first_token_ms=1000.0)
    assert record.get("SlowFirstToken") == slow
    assert "TimeToFirstToken" not in record
    validate_emf(record)


def test_a_shed_request_counts_as_shed_and_failed_without_ttft() -> None:
    record = _record(ttft_ms=None, failed=False, shed=True, input_tokens=None, waited_ms=0.2)
    assert record["Shed"] == 1 and record["RequestFailed"] == 1
    assert "SlowFirstToken" not in record and "TimeToFirstToken" not in record
    assert _record()["Shed"] == 0, "every request carries Shed, so its Average is the shed share"


def test_a_shed_is_not_a_serving_error_and_a_failure_is() -> None:
    """Route 53 can follow one metric's Average only: ServingError is the error share with sheds left out,
    so overload (shedding) never takes a region out of DNS while engine failures do."""
    assert _record(ttft_ms=None, failed=False, shed=True, input_tokens=None)["ServingError"] == 0
    assert _record(ttft_ms=None, failed=True, input_tokens=None)["ServingError"] == 1
    assert _record()["ServingError"] == 0
    assert "ServingError" not in _record(ttft_ms=None, failed=None, input_tokens=None)  # rejected


@pytest.mark.parametrize(("ttft_ms", "slow"), [(999.9, 0), (1000.0, 0), (1000.1, 1), (5000.0, 1)])
def test_slow_first_token_counts_against_the_objective(ttft_ms: float, slow: int) -> None:
    assert _record(ttft_ms=ttft_ms, slow_first_token_ms=1000.0)["SlowFirstToken"] == slow


@pytest.mark.parametrize(
    ("raw", "expected"),
    [(None, DEFAULT_SLOW_FIRST_TOKEN_MS), ("", DEFAULT_SLOW_FIRST_TOKEN_MS), ("750", 750.0)],
)
def test_objective_comes_from_the_environment(raw: str | None, expected: float) -> None:
    environ = {} if raw is None else {SLOW_FIRST_TOKEN_ENV: raw}
    assert slow_first_token_ms(environ) == expected


@pytest.mark.parametrize("raw", ["fast", "0", "-5", "nan", "inf"])
def test_an_unusable_objective_is_named(raw: str) -> None:
    with pytest.raises(ValueError, match=SLOW_FIRST_TOKEN_ENV):
        slow_first_token_ms({SLOW_FIRST_TOKEN_ENV: raw})


def test_host_gauge_carries_the_four_signals_in_one_line() -> None:
    record = host_gauge_record(
        HostGauge(in_flight=5, queue_depth=2, kv_cache_usage=1.3, serving_slots=96),
        dimensions=DIMENSIONS,
        dimension_sets=[["Model"], ["Model", "InstanceType"]],
        namespace="Test",
        timestamp_ms=1,
    )
    assert _names(record) == ["RequestsInFlight", "QueueDepth", "KvCacheUsage", "ServingSlots"]
    assert (record["RequestsInFlight"], record["QueueDepth"], record["ServingSlots"]) == (5, 2, 96)
    assert record["KvCacheUsage"] == 1.0, "a usage above 1 (rounding in the engine) is clamped to 0..1"
    assert record["_aws"]["CloudWatchMetrics"][0]["Dimensions"] == [["Model"], ["Model", "InstanceType"]]


def test_namespace_comes_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(NAMESPACE_ENV, raising=False)
    assert (
        _record(namespace=None)["_aws"]["CloudWatchMetrics"][0]["Namespace"]
        == DEFAULT_NAMESPACE
        == "LLMServing"
    )
    monkeypatch.setenv(NAMESPACE_ENV, "ShopAssistant/Prod")
    assert _record(namespace=None)["_aws"]["CloudWatchMetrics"][0]["Namespace"] == "ShopAssistant/Prod"
    assert namespace_from_env({NAMESPACE_ENV: "  "}) == DEFAULT_NAMESPACE


def test_timestamp_defaults_to_now_in_milliseconds() -> None:
    import time

    before = int(time.time() * 1000)
    stamp = _record(timestamp_ms=None)["_aws"]["Timestamp"]
    assert before <= stamp <= int(time.time() * 1000)


def test_line_is_one_compact_json_document() -> None:
    record = _record()
    line = emf_line(record)
    assert "\n" not in line
    assert " " not in line
    assert json.loads(line) == record


@pytest.mark.parametrize(
    ("mutate", "fragment"),
    [
        (lambda r: r.pop("_aws"), "_aws: must be an object"),
        (lambda r: r["_aws"].update(Timestamp="now"), "_aws.Timestamp: must be whole milliseconds"),
        (
            lambda r: r["_aws"].update(CloudWatchMetrics=[]),
            "_aws.CloudWatchMetrics: must be a non-empty array",
        ),
        (lambda r: r["_aws"]["CloudWatchMetrics"][0].update(Namespace=" "), "Namespace: must be a non-blank"),
        (
            lambda r: r["_aws"]["CloudWatchMetrics"][0].update(Namespace=":x"),
            "Namespace: must not start with ':'",
        ),
        (
            lambda r: r["_aws"]["CloudWatchMetrics"][0]["Metrics"][0].update(Unit="ms"),
            "'ms' is not a CloudWatch unit",
        ),
        (lambda r: r.update(OutputTokens="42"), "OutputTokens: metric 'OutputTokens' needs a finite number"),
        (lambda r: r.update(OutputTokens=float("nan")), "needs a finite number"),
        (lambda r: r.update(OutputTokens=True), "needs a finite number"),
        (lambda r: r.update(OutputTokens=list(range(101))), "needs a finite number"),
        (lambda r: r.update(Model=3), "Model: dimension 'Model' needs a string at the root, got 3"),
        (lambda r: r.update(Model="é"), "Model: must be 1 to 1024 printable ASCII characters"),
        (lambda r: r.update(Model="x" * 1025), "Model: must be 1 to 1024 printable ASCII characters"),
        (
            lambda r: r["_aws"]["CloudWatchMetrics"][0].update(Dimensions=[[f"D{i}" for i in range(31)]]),
            "must be an array of at most 30 names",
        ),
        (
            lambda r: r["_aws"]["CloudWatchMetrics"][0].update(
                Metrics=[{"Name": "M", "Unit": "Count"}] * 101
            ),
            "Metrics: must hold 1 to 100 metric definitions",
        ),
    ],
)
def test_validation_catches_what_cloudwatch_would_drop(mutate: Any, fragment: str) -> None:
    record = _record()
    mutate(record)
    with pytest.raises(EmfError) as caught:
        validate_emf(record)
    assert fragment in str(caught.value)


def test_a_list_of_values_is_valid_emf() -> None:
    record = _record()
    record["OutputTokens"] = [1, 2, 3]
    validate_emf(record)


def test_empty_dimensions_publish_a_dimensionless_metric() -> None:
    record = emf_record(namespace="N", dimensions={}, metrics=[MetricValue("X", 1, "Count")], timestamp_ms=0)
    assert record["_aws"]["CloudWatchMetrics"][0]["Dimensions"] == [[]]


@pytest.mark.parametrize(
    ("metrics", "properties", "fragment"),
    [
        ([MetricValue("X", 1, "Count")] * 2, None, "names must be unique"),
        ([MetricValue("Model", 1, "Count")], None, "differ from dimension names"),
        ([MetricValue("X", 1, "Count")], {"X": "oops"}, "properties: 'X' clashes"),
        ([MetricValue("X", 1, "Count")], {"_aws": {}}, "properties: '_aws' clashes"),
    ],
)
def test_builder_refuses_ambiguous_members(metrics: list, properties: dict | None, fragment: str) -> None:
    with pytest.raises(EmfError, match=fragment):
        emf_record(
            namespace="N", dimensions=DIMENSIONS, metrics=metrics, timestamp_ms=0, properties=properties
        )


def test_a_rejected_request_stays_out_of_the_error_share() -> None:
    record = _record(ttft_ms=None, failed=None, input_tokens=None)
    assert "RequestFailed" not in _names(record) and "RequestFailed" not in record
    assert record["RequestRejected"] == 1 and "RequestRejected" in _names(record)


@pytest.mark.parametrize("failed", [True, False])
def test_an_accepted_request_counts_in_the_error_share(failed: bool) -> None:
    record = _record(ttft_ms=None, failed=failed, input_tokens=None)
    assert record["RequestFailed"] == int(failed) and "RequestRejected" not in record


def test_serving_dimensions_add_the_task_definition_revision_where_ecs_tells_it() -> None:
    """The deployment alarm judges a revision on its own requests: {Model, InstanceType,
    TaskDefinitionRevision} beside the region's and the fleet's series (cdk_constructs/fleet/service.py)."""
    dimensions, sets = serving_dimensions("assistant", {"INSTANCE_TYPE": "inf2.48xlarge"}, revision="42")
    assert dimensions == {
        "Model": "assistant",
        "InstanceType": "inf2.48xlarge",
        "TaskDefinitionRevision": "42",
    }
    assert sets == [["Model"], ["Model", "InstanceType"], ["Model", "InstanceType", "TaskDefinitionRevision"]]
    record = request_metrics_record(
        output_tokens=3, input_tokens=5, failed=True, dimensions=dimensions, dimension_sets=sets, ttft_ms=9.0
    )
    validate_emf(record)
    assert record["TaskDefinitionRevision"] == "42" and record["ServingError"] == 1


def test_the_revision_comes_from_the_task_metadata_endpoint_once_per_process(monkeypatch) -> None:
    from assistant import metrics

    monkeypatch.setattr(metrics, "_revisions", {})
    asked = []

    def read(uri: str) -> dict[str, Any]:
        asked.append(uri)
        return {"Family": "serving-inf2", "Revision": 42}

    environ = {"INSTANCE_TYPE": "inf2.48xlarge", "ECS_CONTAINER_METADATA_URI_V4": "http://169.254.170.2/v4/x"}
    assert metrics.task_revision(environ, read) == "42"
    assert metrics.task_revision(environ, read) == "42"
    assert asked == ["http://169.254.170.2/v4/x"]  # the revision never changes under a running task
    assert metrics.task_revision({}, read) is None and len(asked) == 1  # off ECS: nothing to ask


def test_an_endpoint_that_cannot_tell_leaves_the_revision_series_out(monkeypatch, capsys) -> None:
    from assistant import metrics

    monkeypatch.setattr(metrics, "_revisions", {})

    def refused(uri: str) -> dict[str, Any]:
        raise OSError("connection refused")

    environ = {"INSTANCE_TYPE": "inf2.48xlarge", "ECS_CONTAINER_METADATA_URI_V4": "http://169.254.170.2/v4/y"}
    monkeypatch.setattr(metrics.os, "environ", environ)
    monkeypatch.setattr(metrics, "_read_task_metadata", refused)
    assert serving_dimensions("assistant")[1] == [["Model"], ["Model", "InstanceType"]]
    assert "connection refused" in capsys.readouterr().err


def test_the_models_start_asks_for_the_revision_and_later_reports_reuse_it(monkeypatch) -> None:
    """The model's start (its own environment) asks the endpoint; an engine-death report, given the
    environment explicitly, only reads what the start learned: it must not wait on a call."""
    from assistant import metrics

    monkeypatch.setattr(metrics, "_revisions", {})
    asked = []
    environ = {"INSTANCE_TYPE": "inf2.48xlarge", "ECS_CONTAINER_METADATA_URI_V4": "http://169.254.170.2/v4/z"}
    monkeypatch.setattr(metrics.os, "environ", environ)
    monkeypatch.setattr(metrics, "_read_task_metadata", lambda uri: asked.append(uri) or {"Revision": "7"})
    assert serving_dimensions("assistant", dict(environ))[0].get("TaskDefinitionRevision") is None
    assert not asked
    assert serving_dimensions("assistant")[0]["TaskDefinitionRevision"] == "7"
    assert serving_dimensions("assistant", dict(environ))[0]["TaskDefinitionRevision"] == "7"
    assert asked == ["http://169.254.170.2/v4/z"]
