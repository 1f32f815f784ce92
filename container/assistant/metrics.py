"""Per-request metrics as CloudWatch Embedded Metric Format (EMF) log lines, and live request counters.

ALB's TargetResponseTime stops at the first response header, so time to first token must come from the
container itself: one EMF line per request on stdout, which the awslogs driver ships to CloudWatch Logs,
where the metrics are extracted without any API call from the host.
"""

from __future__ import annotations

import json
import math
import os
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, NamedTuple

from assistant.environ_number import number_from_environ

# The variable the AWS EMF client libraries read, so existing task definitions and habits carry over.
NAMESPACE_ENV = "AWS_EMF_NAMESPACE"
DEFAULT_NAMESPACE = "LLMServing"

TIME_TO_FIRST_TOKEN = "TimeToFirstToken"
SLOW_FIRST_TOKEN = "SlowFirstToken"
OUTPUT_TOKENS = "OutputTokens"
INPUT_TOKENS = "InputTokens"
REQUEST_FAILED = "RequestFailed"
REQUEST_REJECTED = "RequestRejected"
SHED = "Shed"
SERVING_ERROR = "ServingError"
REQUESTS_IN_FLIGHT = "RequestsInFlight"
QUEUE_DEPTH = "QueueDepth"
KV_CACHE_USAGE = "KvCacheUsage"
SERVING_SLOTS = "ServingSlots"
# The live catalog (serving/catalog_follow.py): the served build's upload time, and a failed poll.
INDEX_VERSION = "IndexVersion"
INDEX_FOLLOW_FAILED = "IndexFollowFailed"
# The time-to-first-token objective (ms) that SlowFirstToken counts against; the stacks set it from config.
SLOW_FIRST_TOKEN_ENV = "SLOW_FIRST_TOKEN_MS"
DEFAULT_SLOW_FIRST_TOKEN_MS = 1000.0

# Limits and units from the EMF specification and the CloudWatch PutMetricData API.
EMF_UNITS = frozenset(
    str.split(
        """
    Seconds Microseconds Milliseconds Bytes Kilobytes Megabytes Gigabytes Terabytes Bits Kilobits Megabits
    Gigabits Terabits Percent Count Bytes/Second Kilobytes/Second Megabytes/Second Gigabytes/Second
    Terabytes/Second Bits/Second Kilobits/Second Megabits/Second Gigabits/Second Terabits/Second Count/Second
    None
    """
    )
)
MAX_DIMENSIONS_PER_SET = 30
MAX_METRICS_PER_DIRECTIVE = 100
MAX_VALUES_PER_METRIC = 100
MAX_NAME_CHARS = 255
MAX_DIMENSION_VALUE_CHARS = 1024


class EmfError(ValueError):
    """A record that CloudWatch would reject or silently drop; the message names the offending member."""


class MetricValue(NamedTuple):
    name: str
    value: float
    unit: str


def namespace_from_env(environ: Mapping[str, str] | None = None) -> str:
    environ = os.environ if environ is None else environ
    return environ.get(NAMESPACE_ENV, "").strip() or DEFAULT_NAMESPACE


def _check_name(where: str, name: object) -> None:
    if not isinstance(name, str) or not name.strip() or len(name) > MAX_NAME_CHARS:
        raise EmfError(
            f"{where}: must be a non-blank string of 1 to {MAX_NAME_CHARS} characters, got {name!r}"
        )


def _check_dimension_text(where: str, text: str, limit: int) -> None:
    # CloudWatch dimension names and values: printable ASCII, not blank, names not starting with ':'.
    if not text.strip() or len(text) > limit or not all(32 <= ord(char) < 127 for char in text):
        raise EmfError(f"{where}: must be 1 to {limit} printable ASCII characters, not blank, got {text!r}")


def _is_number(value: object) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)


def validate_emf(record: Mapping[str, Any]) -> None:
    """Checks a record against the EMF specification; raises EmfError naming the first problem."""
    aws = record.get("_aws")
    if not isinstance(aws, Mapping):
        raise EmfError("_aws: must be an object")
    timestamp = aws.get("Timestamp")
    if not isinstance(timestamp, int) or isinstance(timestamp, bool) or timestamp < 0:
        raise EmfError(f"_aws.Timestamp: must be whole milliseconds since the epoch, got {timestamp!r}")
    directives = aws.get("CloudWatchMetrics")
    if not isinstance(directives, list) or not directives:
        raise EmfError("_aws.CloudWatchMetrics: must be a non-empty array of metric directives")
    for number, directive in enumerate(directives):
        where = f"_aws.CloudWatchMetrics[{number}]"
        if not isinstance(directive, Mapping):
            raise EmfError(f"{where}: must be an object")
        namespace = directive.get("Namespace")
        _check_name(f"{where}.Namespace", namespace)
        if namespace.startswith(":"):
            raise EmfError(f"{where}.Namespace: must not start with ':', got {namespace!r}")
        dimension_sets = directive.get("Dimensions")
        if not isinstance(dimension_sets, list):
            raise EmfError(f"{where}.Dimensions: must be an array of dimension sets")
        for set_number, dimension_set in enumerate(dimension_sets):
            set_where = f"{where}.Dimensions[{set_number}]"
            if not isinstance(dimension_set, list) or len(dimension_set) > MAX_DIMENSIONS_PER_SET:
                raise EmfError(f"{set_where}: must be an array of at most {MAX_DIMENSIONS_PER_SET} names")
            for key in dimension_set:
                _check_name(set_where, key)
                _check_dimension_text(f"{set_where} name {key!r}", key, MAX_NAME_CHARS)
                if key.startswith(":"):
                    raise EmfError(f"{set_where}: dimension name must not start with ':', got {key!r}")
                value = record.get(key)
                if not isinstance(value, str):
                    raise EmfError(f"{key}: dimension {key!r} needs a string at the root, got {value!r}")
                _check_dimension_text(f"{key}", value, MAX_DIMENSION_VALUE_CHARS)
        definitions = directive.get("Metrics")
        if not isinstance(definitions, list) or not 1 <= len(definitions) <= MAX_METRICS_PER_DIRECTIVE:
            raise EmfError(f"{where}.Metrics: must hold 1 to {MAX_METRICS_PER_DIRECTIVE} metric definitions")
        for metric_number, definition in enumerate(definitions):
            metric_where = f"{where}.Metrics[{metric_number}]"
            if not isinstance(definition, Mapping):
                raise EmfError(f"{metric_where}: must be an object")
            name = definition.get("Name")
            _check_name(f"{metric_where}.Name", name)
            unit = definition.get("Unit", "None")
            if unit not in EMF_UNITS:
                raise EmfError(f"{metric_where}.Unit: {unit!r} is not a CloudWatch unit")
            value = record.get(name)
            values = value if isinstance(value, list) else [value]
            if not values or len(values) > MAX_VALUES_PER_METRIC or not all(_is_number(v) for v in values):
                raise EmfError(
                    f"{name}: metric {name!r} needs a finite number (or a list of 1 to "
                    f"{MAX_VALUES_PER_METRIC}) at the root, got {value!r}"
                )


def emf_record(
    *,
    namespace: str,
    dimensions: Mapping[str, str],
    metrics: Sequence[MetricValue],
    timestamp_ms: int,
    properties: Mapping[str, Any] | None = None,
    dimension_sets: Sequence[Sequence[str]] | None = None,
) -> dict[str, Any]:
    """One EMF document: every metric under each of `dimension_sets` (names drawn from `dimensions`), by
    default one set made of all `dimensions` (which may be empty). `properties` are extra searchable
    members (request id, intent) that do not become metrics."""
    sets = [list(dimensions)] if dimension_sets is None else [list(names) for names in dimension_sets]
    for number, names in enumerate(sets):
        unknown = [name for name in names if name not in dimensions]
        if unknown:
            raise EmfError(f"dimension_sets[{number}]: {unknown[0]!r} is not one of the dimensions")
    record: dict[str, Any] = {}
    for key, value in (properties or {}).items():
        record[key] = value
    clashes = set(record) & ({"_aws"} | set(dimensions) | {metric.name for metric in metrics})
    if clashes:
        raise EmfError(f"properties: {sorted(clashes)[0]!r} clashes with a dimension, metric or _aws")
    names = [metric.name for metric in metrics]
    if len(set(names)) != len(names) or set(names) & set(dimensions):
        raise EmfError(f"metrics: names must be unique and differ from dimension names, got {names}")
    record.update(dimensions)
    record.update({metric.name: metric.value for metric in metrics})
    record["_aws"] = {
        "Timestamp": timestamp_ms,
        "CloudWatchMetrics": [
            {
                "Namespace": namespace,
                "Dimensions": sets,
                "Metrics": [{"Name": metric.name, "Unit": metric.unit} for metric in metrics],
            }
        ],
    }
    validate_emf(record)
    return record


def _replica_record(
    namespace: str | None,
    dimensions: Mapping[str, str],
    metrics: Sequence[MetricValue],
    timestamp_ms: int | None,
    properties: Mapping[str, Any] | None,
    dimension_sets: Sequence[Sequence[str]] | None,
) -> dict[str, Any]:
    """emf_record with a replica's defaults: the namespace from the environment, the time now."""
    return emf_record(
        namespace=namespace or namespace_from_env(),
        dimensions=dimensions,
        metrics=metrics,
        timestamp_ms=int(time.time() * 1000) if timestamp_ms is None else timestamp_ms,
        properties=properties,
        dimension_sets=dimension_sets,
    )


def slow_first_token_ms(environ: Mapping[str, str] | None = None) -> float:
    """The TTFT objective from SLOW_FIRST_TOKEN_MS; ValueError naming the variable when it is unusable."""
    environ = os.environ if environ is None else environ
    value, raw = number_from_environ(
        environ, SLOW_FIRST_TOKEN_ENV, DEFAULT_SLOW_FIRST_TOKEN_MS, "milliseconds"
    )
    if not math.isfinite(value) or value <= 0:
        raise ValueError(f"{SLOW_FIRST_TOKEN_ENV}: must be above 0, got {raw!r}")
    return value


def request_metrics_record(
    *,
    output_tokens: int,
    input_tokens: int | None,
    failed: bool | None,
    dimensions: Mapping[str, str],
    ttft_ms: float | None = None,
    slow_first_token_ms: float = DEFAULT_SLOW_FIRST_TOKEN_MS,
    namespace: str | None = None,
    timestamp_ms: int | None = None,
    properties: Mapping[str, Any] | None = None,
    dimension_sets: Sequence[Sequence[str]] | None = None,
    shed: bool = False,
    waited_ms: float | None = None,
) -> dict[str, Any]:
    """The record for one finished request.

    ttft_ms is given for streaming requests that produced a token, and only then: a non-streaming request's
    first byte is its last, and an error or a cancel before the first token is a missing datapoint, not a
    number that would bend the percentiles. SlowFirstToken (0/1 against the objective) travels with it, so
    its Average is the slow share, which a standard-statistic alarm (and a Route 53 health check) can use.
    RequestFailed is 0 or 1 for every request the server accepted: its Average is the error share. A
    request rejected as the client's mistake (failed=None: bad input, a prompt over max_model_len) carries
    RequestRejected=1 instead and no RequestFailed, so it stays out of the error share's denominator: a
    client sending bad requests cannot make a healthy region look healthier, nor a sick one look sick.
    input_tokens is None when the request never reached the engine.
    A stream that ended without a token after waiting longer than the objective (waited_ms: failed,
    cancelled or cut off while queued) counts SlowFirstToken=1 too, with no TTFT: a queue that makes clients
    give up must show in the slow share. Shed is 0 or 1 for every accepted request (its Average is the share
    refused at once because the replica's queue was full); a shed request is also a failed one.
    ServingError is 0 or 1 for every accepted request too: failed on the server's side, sheds not counted,
    so its Average is the error share a Route 53 health check can follow (overload is not a fault).
    """
    metrics = []
    if ttft_ms is not None:
        metrics.append(MetricValue(TIME_TO_FIRST_TOKEN, round(ttft_ms, 3), "Milliseconds"))
        metrics.append(MetricValue(SLOW_FIRST_TOKEN, int(ttft_ms > slow_first_token_ms), "Count"))
    elif waited_ms is not None and waited_ms > slow_first_token_ms:
        metrics.append(MetricValue(SLOW_FIRST_TOKEN, 1, "Count"))
    metrics.append(MetricValue(OUTPUT_TOKENS, output_tokens, "Count"))
    if input_tokens is not None:
        metrics.append(MetricValue(INPUT_TOKENS, input_tokens, "Count"))
    if failed is None:
        metrics.append(MetricValue(REQUEST_REJECTED, 1, "Count"))
    else:
        metrics.append(MetricValue(REQUEST_FAILED, int(failed or shed), "Count"))
        metrics.append(MetricValue(SHED, int(shed), "Count"))
        metrics.append(MetricValue(SERVING_ERROR, int(bool(failed) and not shed), "Count"))
    return _replica_record(namespace, dimensions, metrics, timestamp_ms, properties, dimension_sets)


@dataclass(frozen=True)
class HostGauge:
    """What one host holds right now, summed over its engine replicas."""

    in_flight: int
    queue_depth: int
    kv_cache_usage: float
    serving_slots: int


def host_gauge_record(
    gauge: HostGauge,
    *,
    dimensions: Mapping[str, str],
    namespace: str | None = None,
    timestamp_ms: int | None = None,
    dimension_sets: Sequence[Sequence[str]] | None = None,
    properties: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """The periodic per-host line: written every interval whether or not a request finished, so the
    scaling and routing signals keep flowing when traffic stops or a host hangs."""
    metrics = [
        MetricValue(REQUESTS_IN_FLIGHT, gauge.in_flight, "Count"),
        MetricValue(QUEUE_DEPTH, gauge.queue_depth, "Count"),
        MetricValue(KV_CACHE_USAGE, round(min(max(gauge.kv_cache_usage, 0.0), 1.0), 4), "None"),
        MetricValue(SERVING_SLOTS, gauge.serving_slots, "Count"),
    ]
    return _replica_record(namespace, dimensions, metrics, timestamp_ms, properties, dimension_sets)


INSTANCE_TYPE_ENV = "INSTANCE_TYPE"


def index_follow_record(
    version: int | None,
    failed: bool,
    *,
    dimensions: Mapping[str, str],
    dimension_sets: Sequence[Sequence[str]] | None = None,
    properties: Mapping[str, Any] | None = None,
    namespace: str | None = None,
    timestamp_ms: int | None = None,
) -> dict[str, Any]:
    """A replica's catalog-follow line, one per poll: IndexVersion (the served build's upload time in Unix
    seconds; left out until a poll has named it) and IndexFollowFailed (0/1). Under the {Model} set, the
    Maximum and Minimum of IndexVersion over a period are the newest and oldest build any host serves."""
    metrics = [MetricValue(INDEX_FOLLOW_FAILED, 1 if failed else 0, "Count")]
    if version is not None:
        metrics.insert(0, MetricValue(INDEX_VERSION, version, "None"))
    return _replica_record(namespace, dimensions, metrics, timestamp_ms, properties, dimension_sets)


# ECS sets this variable in every container of a task (container agent 1.39.0 or later); GET <it>/task
# answers the task's metadata, "Revision" its task definition revision (ECS developer guide, "Amazon ECS task
# metadata endpoint version 4" and its "JSON response"), as the Neuron sidecar reads it.
METADATA_ENV = "ECS_CONTAINER_METADATA_URI_V4"
METADATA_TIMEOUT_S = 2.0
# The per-request series of one task definition revision, which a deploy of it is judged on
# (cdk_constructs/fleet/service.py): the new revision's errors alone, neither diluted by the old tasks'
# requests nor blamed for a fault they already had. The sidecar's dimension of the same name.
REVISION_DIMENSION = "TaskDefinitionRevision"
_revisions: dict[str, str | None] = {}


def _read_task_metadata(uri: str) -> Mapping[str, Any]:
    import urllib.request  # here: only a task on ECS asks

    with urllib.request.urlopen(f"{uri}/task", timeout=METADATA_TIMEOUT_S) as answer:
        return json.loads(answer.read())


def task_revision(
    environ: Mapping[str, str], read: Callable[[str], Mapping[str, Any]] | None = None
) -> str | None:
    """This task's task definition revision, or None off ECS or where the endpoint cannot tell: the metrics
    then go out without the revision's series (a deploy's alarm sees no data, which is not breaching, and
    the circuit breaker still judges it). Asked once per process: the revision never changes under a task."""
    uri = environ.get(METADATA_ENV, "").strip()
    if not uri:
        return None
    if uri not in _revisions:
        try:
            revision = (read or _read_task_metadata)(uri).get("Revision")
        except (OSError, ValueError, AttributeError) as error:
            # stderr: stdout carries the EMF lines.
            print(f"metrics: no task revision from the ECS metadata endpoint: {error}", file=sys.stderr)
            revision = None
        _revisions[uri] = str(revision) if revision not in (None, "") else None
    return _revisions[uri]


def serving_dimensions(
    model_name: str, environ: Mapping[str, str] | None = None, revision: str | None = None
) -> tuple[dict[str, str], list[list[str]]]:
    """Dimensions and dimension sets of the per-request metrics: per model (the region's series, which the
    alarms watch) and, where the task names its instance type, per model and fleet, so a dashboard can
    tell inf2 from trn1 behind the same load balancer, and per model, fleet and task definition revision
    where it is known, for the deployment alarm. The revision: `revision`, else for this process's own
    environment (no `environ`: the model's start) the task metadata endpoint, else what that start read
    (the engine-death and stub-death reports, which must not wait on a call)."""
    own = environ is None
    environ = os.environ if environ is None else environ
    instance_type = environ.get(INSTANCE_TYPE_ENV, "").strip()
    if not instance_type:
        return {"Model": model_name}, [["Model"]]
    dimensions = {"Model": model_name, "InstanceType": instance_type}
    sets = [["Model"], ["Model", "InstanceType"]]
    if not revision:
        uri = environ.get(METADATA_ENV, "").strip()
        revision = task_revision(environ) if own else _revisions.get(uri)
    if revision:
        dimensions[REVISION_DIMENSION] = revision
        sets.append(["Model", "InstanceType", REVISION_DIMENSION])
    return dimensions, sets


def emf_line(record: Mapping[str, Any]) -> str:
    """One log line; CloudWatch Logs needs the whole JSON document on a single line."""
    return json.dumps(record, separators=(",", ":"), allow_nan=False)
