"""A host whose engine died takes its own target out of the load balancer's target groups.

Why: least outstanding requests sends a target that fails requests at once far more than its share (it holds
none), so every second a dead engine's target stays in rotation costs most of the region's requests. The
ALB's fastest health check (5 s x 2) takes it out about 8 s after the death; this takes it out as soon as
one API call is through. The health check stays as the backstop when the call fails.

What AWS does with the call (ELB API Reference, "DeregisterTargets",
https://docs.aws.amazon.com/elasticloadbalancing/latest/APIReference/API_DeregisterTargets.html): the load
balancer stops sending requests to a deregistering target and drains the requests already in flight on its
connections for the target group's deregistration delay (so the host's other streams still finish while
Triton stops); deregistering a target that is not registered succeeds. A target registered with a port is
deregistered by IP and port.

Which target: with awsvpc networking the task's own IP, from the container metadata the ECS agent serves at
ECS_CONTAINER_METADATA_URI_V4 (`Networks[].IPv4Addresses`, NetworkMode `awsvpc`: Amazon ECS Developer
Guide, "Amazon ECS task metadata v4 examples",
https://docs.aws.amazon.com/AmazonECS/latest/developerguide/task-metadata-endpoint-v4-examples.html), and
in each target group the port ECS registered it with, which the task definition names in one variable per
group: TARGET_GROUP_ARN_<port>=<target group ARN> (cdk_constructs/fleet/task_definition.py). The task role
may call DeregisterTargets on those groups and nothing else (cdk_constructs/load_balancer.py).

Never in the way of the stop: it runs on a thread of its own, each call has a short connect and read timeout,
a few attempts fit in a total deadline, and whoever waits for it waits a bounded time. The outcome is one EMF
line (TargetDeregistered or TargetDeregistrationFailed, with the reason and the detail) and a stderr line.
Decisions are the pure functions below; `leave_target_groups` is the thin AWS edge.
"""

from __future__ import annotations

import json
import os
import re
import sys
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from serving.line_out import emit

METADATA_ENV = "ECS_CONTAINER_METADATA_URI_V4"
TARGET_GROUP_ENV_PREFIX = "TARGET_GROUP_ARN_"
_TARGET_GROUP_ARN = re.compile(
    r"arn:[a-z-]+:elasticloadbalancing:([a-z0-9-]+):\d{12}:targetgroup/[\w-]+/[0-9a-f]+"
)

# The whole leaving, from the death to the last attempt: well inside Triton's graceful stop, so a host never
# waits on it for long, and long enough for three attempts at the timeouts below.
DEADLINE_S = 8.0
MAX_ATTEMPTS = 3
CONNECT_TIMEOUT_S = 1.0
READ_TIMEOUT_S = 2.0
METADATA_TIMEOUT_S = 1.0
FIRST_BACKOFF_S = 0.2
# Errors worth another attempt: throttling and the service's own trouble. Anything else (AccessDenied, a
# target group that is not there) fails the same way again.
RETRYABLE_CODES = frozenset(
    {
        "Throttling",
        "ThrottlingException",
        "RequestLimitExceeded",
        "ServiceUnavailable",
        "InternalFailure",
        "InternalError",
        "RequestTimeout",
    }
)

TARGET_DEREGISTERED = "TargetDeregistered"
TARGET_DEREGISTRATION_FAILED = "TargetDeregistrationFailed"


class LeaveError(ValueError):
    """The environment or the metadata cannot name this host's targets."""


@dataclass(frozen=True)
class GroupTarget:
    """This host's target in one target group: the group and the port the target is registered with."""

    target_group_arn: str
    port: int

    @property
    def region(self) -> str:
        match = _TARGET_GROUP_ARN.fullmatch(self.target_group_arn)
        assert match is not None  # checked by target_groups()
        return match.group(1)


@dataclass
class Outcome:
    reason: str  # why the host leaves (the engine's death, as the model put it)
    deregistered: list[str] = field(default_factory=list)  # target group ARNs left
    failed: dict[str, str] = field(default_factory=dict)  # target group ARN (or "-") -> the last error
    skipped: str | None = None  # not on ECS: nothing to leave
    ip: str | None = None
    attempts: int = 0
    seconds: float = 0.0

    @property
    def ok(self) -> bool:
        return self.skipped is None and not self.failed and bool(self.deregistered)


# ---- decisions (pure) ---------------------------------------------------------------------------------


def target_groups(environ: Mapping[str, str]) -> tuple[GroupTarget, ...]:
    """The target groups this container is registered in, from its TARGET_GROUP_ARN_<port> variables, in
    port order. A variable that does not hold a target group ARN, or names no port, is an error."""
    found = []
    for name, value in environ.items():
        if not name.startswith(TARGET_GROUP_ENV_PREFIX):
            continue
        port = name[len(TARGET_GROUP_ENV_PREFIX) :]
        if not port.isdigit() or not 0 < int(port) < 65536:
            raise LeaveError(f"{name}: the part after {TARGET_GROUP_ENV_PREFIX} must be a port number")
        if not _TARGET_GROUP_ARN.fullmatch(value.strip()):
            raise LeaveError(f"{name}: must be a target group ARN, got {value!r}")
        found.append(GroupTarget(value.strip(), int(port)))
    return tuple(sorted(found, key=lambda target: target.port))


def task_ip(container_metadata: Mapping[str, Any]) -> str:
    """The task's IPv4 address from the container metadata (task metadata endpoint v4): the awsvpc
    network's first address. IP targets are registered by this address."""
    for network in container_metadata.get("Networks") or []:
        if network.get("NetworkMode") == "awsvpc" and network.get("IPv4Addresses"):
            return str(network["IPv4Addresses"][0])
    modes = [network.get("NetworkMode") for network in container_metadata.get("Networks") or []]
    raise LeaveError(f"no awsvpc IPv4 address in the container metadata (networks: {modes})")


def requests_for(targets: tuple[GroupTarget, ...], ip: str) -> list[dict[str, Any]]:
    """One DeregisterTargets request per target group: this host's IP at the group's port."""
    return [{"TargetGroupArn": t.target_group_arn, "Targets": [{"Id": ip, "Port": t.port}]} for t in targets]


def retryable(code: str) -> bool:
    return code in RETRYABLE_CODES or code.startswith("Connect") or code.endswith("Timeout")


def time_for_a_call(elapsed_s: float, *, deadline_s: float = DEADLINE_S) -> bool:
    """Whether a call started `elapsed_s` into the leaving ends (at its timeouts) by the deadline."""
    return elapsed_s + CONNECT_TIMEOUT_S + READ_TIMEOUT_S <= deadline_s


def next_wait(attempt: int, elapsed_s: float, code: str, *, deadline_s: float = DEADLINE_S) -> float | None:
    """Seconds to wait before attempt `attempt + 1` after attempt `attempt` (1-based) failed with `code`,
    `elapsed_s` into the leaving; None when there is to be no other attempt (not retryable, attempts used
    up, or the next could not finish by the deadline)."""
    if not retryable(code) or attempt >= MAX_ATTEMPTS:
        return None
    wait = FIRST_BACKOFF_S * 2 ** (attempt - 1)
    return wait if time_for_a_call(elapsed_s + wait, deadline_s=deadline_s) else None


def outcome_record(outcome: Outcome, model_name: str, environ: Mapping[str, str]) -> dict[str, Any] | None:
    """The EMF line for an outcome (None when skipped: off ECS there is nothing to leave or count)."""
    if outcome.skipped is not None:
        return None
    from assistant.metrics import MetricValue, emf_record, namespace_from_env, serving_dimensions

    dimensions, dimension_sets = serving_dimensions(model_name, environ)
    metric = TARGET_DEREGISTERED if outcome.ok else TARGET_DEREGISTRATION_FAILED
    return emf_record(
        namespace=namespace_from_env(environ),
        dimensions=dimensions,
        metrics=[MetricValue(metric, 1, "Count")],
        timestamp_ms=int(time.time() * 1000),
        properties={
            "Outcome": "deregistered" if outcome.ok else "failed",
            "Reason": outcome.reason,
            "TargetIp": outcome.ip or "",
            "TargetGroupsLeft": outcome.deregistered,
            "Errors": outcome.failed,
            "Attempts": outcome.attempts,
            "Seconds": round(outcome.seconds, 3),
        },
        dimension_sets=dimension_sets,
    )


# ---- the AWS edge ---------------------------------------------------------------------------------------


def fetch_container_metadata(uri: str, timeout_s: float = METADATA_TIMEOUT_S) -> dict[str, Any]:
    """GET ${ECS_CONTAINER_METADATA_URI_V4}: this container's metadata, served by the host's ECS agent."""
    import urllib.request  # here, on the leaving thread: its imports must not delay the caller's stop

    with urllib.request.urlopen(uri, timeout=timeout_s) as answer:
        return json.loads(answer.read())


def elbv2_client(region: str):
    """An ELBv2 client that gives up fast: one attempt per call (the retries are next_wait's), short
    timeouts."""
    import boto3
    from botocore.config import Config

    return boto3.client(
        "elbv2",
        region_name=region,
        config=Config(
            connect_timeout=CONNECT_TIMEOUT_S,
            read_timeout=READ_TIMEOUT_S,
            retries={"total_max_attempts": 1},
        ),
    )


def _error_code(error: BaseException) -> str:
    response = getattr(error, "response", None)
    if isinstance(response, dict):
        return str(response.get("Error", {}).get("Code", type(error).__name__))
    return type(error).__name__


def leave_target_groups(
    reason: str,
    environ: Mapping[str, str] | None = None,
    *,
    client_for: Callable[[str], Any] = elbv2_client,
    metadata: Callable[[str], Mapping[str, Any]] = fetch_container_metadata,
    sleep: Callable[[float], None] = time.sleep,
    clock: Callable[[], float] = time.monotonic,
) -> Outcome:
    """Deregister this host's target from each of its target groups, within DEADLINE_S. Never raises."""
    environ = os.environ if environ is None else environ
    started = clock()
    outcome = Outcome(reason)
    uri = environ.get(METADATA_ENV, "").strip()
    if not uri:
        outcome.skipped = f"{METADATA_ENV} is not set (not an ECS task)"
        return outcome
    try:
        targets = target_groups(environ)
        if not targets:
            raise LeaveError(f"no {TARGET_GROUP_ENV_PREFIX}<port> variable names a target group")
        outcome.ip = task_ip(metadata(uri))
        client = client_for(targets[0].region)
    except Exception as error:  # the environment, the metadata endpoint, or the SDK: one outcome, no raise
        outcome.failed["-"] = f"{type(error).__name__}: {error}"
        outcome.seconds = clock() - started
        return outcome
    for request in requests_for(targets, outcome.ip):
        arn = request["TargetGroupArn"]
        if not time_for_a_call(clock() - started):
            outcome.failed[arn] = f"not tried: the {DEADLINE_S:g} s deadline was spent on the groups before"
            continue
        attempt = 0
        while True:
            attempt += 1
            outcome.attempts += 1
            try:
                client.deregister_targets(**request)
            except Exception as error:
                code = _error_code(error)
                outcome.failed[arn] = f"{code}: {error}"
                wait = next_wait(attempt, clock() - started, code)
                if wait is None:
                    break
                sleep(wait)
                continue
            outcome.failed.pop(arn, None)
            outcome.deregistered.append(arn)
            break
    outcome.seconds = clock() - started
    return outcome


def report(outcome: Outcome, model_name: str, environ: Mapping[str, str] | None = None) -> None:
    """The outcome as one EMF line on stdout and one readable line on stderr."""
    environ = os.environ if environ is None else environ
    if outcome.skipped is not None:
        emit(f"leave_target_groups: skipped: {outcome.skipped}", sys.stderr)
        return
    try:
        from assistant.metrics import emf_line

        record = outcome_record(outcome, model_name, environ)
        if record is not None:
            emit(emf_line(record))
    except Exception as error:  # a metric line must not hide the outcome below
        emit(f"leave_target_groups: no EMF line: {error}", sys.stderr)
    if outcome.ok:
        text = f"left target groups {outcome.deregistered} as {outcome.ip}"
    else:
        text = f"could not leave every target group (left {outcome.deregistered}; errors {outcome.failed})"
    took = f"in {outcome.seconds:.2f} s, {outcome.attempts} calls"
    emit(f"leave_target_groups: {text} {took} ({outcome.reason})", sys.stderr)


def start_leaving(reason: str, model_name: str, environ: Mapping[str, str] | None = None) -> threading.Thread:
    """Leave the target groups on a thread of its own, and report: the caller goes on with its stop at once
    and may join the thread for a bounded time (it ends within DEADLINE_S and a report)."""

    def run() -> None:
        try:
            report(leave_target_groups(reason, environ), model_name, environ)
        except Exception as error:  # never raised by design; a thread's traceback would be the only trace
            emit(f"leave_target_groups: {type(error).__name__}: {error}", sys.stderr)

    thread = threading.Thread(target=run, name="leave-target-groups", daemon=True)
    thread.start()
    return thread
