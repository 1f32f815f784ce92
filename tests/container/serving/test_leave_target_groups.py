"""A host whose engine died takes its own target out of its target groups: the decisions, and the call
against moto's ELBv2."""

from __future__ import annotations

import json
import threading
import time

import boto3
import pytest
from moto import mock_aws

from serving.leave_target_groups import (
    DEADLINE_S,
    MAX_ATTEMPTS,
    METADATA_ENV,
    TARGET_DEREGISTERED,
    TARGET_DEREGISTRATION_FAILED,
    GroupTarget,
    LeaveError,
    leave_target_groups,
    next_wait,
    outcome_record,
    requests_for,
    target_groups,
    task_ip,
    time_for_a_call,
)

# It reaches serving.streaming_model (vLLM, torch, transformers): tests/vllm_dependence.py.
pytestmark = pytest.mark.vllm_version

HTTP_ARN = "arn:aws:elasticloadbalancing:us-west-2:123456789012:targetgroup/serving-http/0123456789abcdef"
LOAD_BALANCER_ARN = "arn:aws:elasticloadbalancing:us-west-2:123456789012:loadbalancer/app/serving/0123"
GRPC_ARN = "arn:aws:elasticloadbalancing:us-west-2:123456789012:targetgroup/serving-grpc/fedcba9876543210"
# The container metadata's network part as the ECS docs show it for an awsvpc task
# ("Amazon ECS task metadata v4 examples").
METADATA = {
    "Name": "serving",
    "Networks": [
        {
            "NetworkMode": "awsvpc",
            "IPv4Addresses": ["10.0.2.100"],
            "IPv4SubnetCIDRBlock": "10.0.2.0/24",
        }
    ],
}
ENVIRONMENT = {
    METADATA_ENV: "http://169.254.170.2/v4/0123",
    "TARGET_GROUP_ARN_8001": GRPC_ARN,
    "TARGET_GROUP_ARN_8000": HTTP_ARN,
    "INSTANCE_TYPE": "inf2.48xlarge",
}


# ---- decisions ----------------------------------------------------------------------------------------


def test_the_target_groups_come_from_one_variable_per_port_in_port_order():
    assert target_groups(ENVIRONMENT) == (GroupTarget(HTTP_ARN, 8000), GroupTarget(GRPC_ARN, 8001))
    assert target_groups({"HTTP_PORT": "8000"}) == ()
    assert GroupTarget(HTTP_ARN, 8000).region == "us-west-2"


@pytest.mark.parametrize(
    ("environ", "message"),
    [
        ({"TARGET_GROUP_ARN_http": HTTP_ARN}, "port number"),
        ({"TARGET_GROUP_ARN_70000": HTTP_ARN}, "port number"),
        ({"TARGET_GROUP_ARN_8000": "serving-http"}, "target group ARN"),
        (
            {"TARGET_GROUP_ARN_8000": LOAD_BALANCER_ARN},
            "target group ARN",
        ),
    ],
)
def test_a_variable_that_names_no_target_group_is_an_error(environ, message):
    with pytest.raises(LeaveError, match=message):
        target_groups(environ)


def test_the_target_is_the_tasks_awsvpc_address():
    assert task_ip(METADATA) == "10.0.2.100"
    with pytest.raises(LeaveError, match="no awsvpc"):
        task_ip({"Networks": [{"NetworkMode": "bridge", "IPv4Addresses": ["172.17.0.2"]}]})
    with pytest.raises(LeaveError, match="no awsvpc"):
        task_ip({})


def test_one_request_per_group_with_the_port_the_target_was_registered_with():
    assert requests_for(target_groups(ENVIRONMENT), "10.0.2.100") == [
        {"TargetGroupArn": HTTP_ARN, "Targets": [{"Id": "10.0.2.100", "Port": 8000}]},
        {"TargetGroupArn": GRPC_ARN, "Targets": [{"Id": "10.0.2.100", "Port": 8001}]},
    ]


def test_only_throttling_and_service_trouble_are_tried_again_within_the_attempts_and_the_deadline():
    assert next_wait(1, 0.1, "Throttling") == pytest.approx(0.2)
    assert next_wait(2, 0.5, "ServiceUnavailable") == pytest.approx(0.4)
    assert next_wait(1, 0.1, "ConnectTimeoutError") is not None
    assert next_wait(MAX_ATTEMPTS, 0.1, "Throttling") is None  # attempts used up
    assert next_wait(1, DEADLINE_S - 1.0, "Throttling") is None  # a call would end past the deadline
    for final in ("AccessDenied", "TargetGroupNotFound", "InvalidTarget", "ValidationError"):
        assert next_wait(1, 0.1, final) is None
    assert time_for_a_call(0.0) and not time_for_a_call(DEADLINE_S)


# ---- the edge, with fakes -----------------------------------------------------------------------------


class FakeElb:
    def __init__(self, errors: list[Exception] | None = None) -> None:
        self.errors = list(errors or [])
        self.calls: list[dict] = []

    def deregister_targets(self, **request):
        self.calls.append(request)
        if self.errors:
            raise self.errors.pop(0)


class ClientError(Exception):
    def __init__(self, code: str) -> None:
        super().__init__(code)
        self.response = {"Error": {"Code": code}}


def leave(environ=ENVIRONMENT, client=None, metadata=None, **kwargs):
    client = client or FakeElb()
    outcome = leave_target_groups(
        "test: the engine is dead",
        environ,
        client_for=lambda region: client,
        metadata=metadata or (lambda uri: METADATA),
        sleep=lambda seconds: None,
        **kwargs,
    )
    return outcome, client


def test_off_ecs_there_is_nothing_to_leave_and_no_metric():
    outcome, client = leave({"TARGET_GROUP_ARN_8000": HTTP_ARN})
    assert outcome.skipped and not client.calls and not outcome.ok
    assert outcome_record(outcome, "assistant", {}) is None


def test_a_throttled_call_is_tried_again_and_the_host_leaves_both_groups():
    outcome, client = leave(client=FakeElb([ClientError("Throttling")]))
    assert outcome.ok and outcome.deregistered == [HTTP_ARN, GRPC_ARN]
    assert outcome.attempts == 3 and len(client.calls) == 3 and outcome.ip == "10.0.2.100"


def test_access_denied_is_one_failed_call_per_group_and_a_failure_metric():
    outcome, client = leave(client=FakeElb([ClientError("AccessDenied"), ClientError("AccessDenied")]))
    assert not outcome.ok and set(outcome.failed) == {HTTP_ARN, GRPC_ARN} and len(client.calls) == 2
    record = outcome_record(outcome, "assistant", ENVIRONMENT)
    assert record[TARGET_DEREGISTRATION_FAILED] == 1 and "AccessDenied" in json.dumps(record["Errors"])
    assert record["InstanceType"] == "inf2.48xlarge"


def test_an_unreachable_metadata_endpoint_fails_without_raising_and_calls_nothing():
    def refused(uri):
        raise OSError("connection refused")

    outcome, client = leave(metadata=refused)
    assert not outcome.ok and "connection refused" in outcome.failed["-"] and not client.calls


def test_a_task_with_no_target_group_variable_fails_loudly():
    outcome, _ = leave({METADATA_ENV: "http://169.254.170.2/v4/0123"})
    assert not outcome.ok and "TARGET_GROUP_ARN_" in outcome.failed["-"]


def test_the_leaving_ends_by_its_deadline_however_slow_each_call_is():
    now = [0.0]

    class Slow(FakeElb):
        def deregister_targets(self, **request):
            now[0] += 3.0  # each call runs to its timeouts
            raise ClientError("RequestTimeout")

    outcome, _ = leave(client=Slow(), clock=lambda: now[0])
    assert not outcome.ok and now[0] <= DEADLINE_S
    assert "deadline" in outcome.failed[GRPC_ARN]  # the second group was not tried: no time left


def test_start_leaving_returns_at_once_and_reports_one_emf_line(monkeypatch, capsys):
    from serving import leave_target_groups as module

    gate = threading.Event()

    def slow_leave(reason, environ=None):
        gate.wait(5)
        return module.Outcome(reason, deregistered=[HTTP_ARN], ip="10.0.2.100", attempts=1)

    monkeypatch.setattr(module, "leave_target_groups", slow_leave)
    began = time.monotonic()
    thread = module.start_leaving("test", "assistant", ENVIRONMENT)
    assert time.monotonic() - began < 0.5 and thread.is_alive()  # the stop goes on meanwhile
    gate.set()
    thread.join(5)
    line = json.loads(capsys.readouterr().out.strip())
    assert line[TARGET_DEREGISTERED] == 1 and line["TargetGroupsLeft"] == [HTTP_ARN]


# ---- against moto's ELBv2 -----------------------------------------------------------------------------


@pytest.fixture
def registered(monkeypatch):
    """Two IP target groups with this task's target (and another task's) registered, as ECS registers them."""
    for name in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY"):
        monkeypatch.setenv(name, "testing")
    with mock_aws():
        ec2 = boto3.client("ec2", region_name="us-west-2")
        vpc = ec2.create_vpc(CidrBlock="10.0.0.0/16")["Vpc"]["VpcId"]
        elb = boto3.client("elbv2", region_name="us-west-2")
        groups = {}
        for name, port in (("serving-http", 8000), ("serving-grpc", 8001)):
            arn = elb.create_target_group(Name=name, Protocol="HTTP", Port=port, VpcId=vpc, TargetType="ip")[
                "TargetGroups"
            ][0]["TargetGroupArn"]
            elb.register_targets(
                TargetGroupArn=arn,
                Targets=[{"Id": "10.0.2.100", "Port": port}, {"Id": "10.0.3.7", "Port": port}],
            )
            groups[port] = arn
        yield elb, groups


def targets_in(elb, arn: str) -> set[str]:
    health = elb.describe_target_health(TargetGroupArn=arn)["TargetHealthDescriptions"]
    return {d["Target"]["Id"] for d in health if d.get("TargetHealth", {}).get("State") != "draining"}


def test_the_call_takes_this_hosts_target_out_of_both_groups_and_leaves_the_others(registered):
    elb, groups = registered
    environ = {METADATA_ENV: "http://169.254.170.2/v4/0123"} | {
        f"TARGET_GROUP_ARN_{port}": arn for port, arn in groups.items()
    }
    outcome = leave_target_groups(
        "test: the engine is dead",
        environ,
        client_for=lambda region: boto3.client("elbv2", region_name=region),
        metadata=lambda uri: METADATA,
    )
    assert outcome.ok, outcome.failed
    for arn in groups.values():
        assert targets_in(elb, arn) == {"10.0.3.7"}


# ---- where the death paths call it --------------------------------------------------------------------


def test_a_dead_engine_starts_leaving_before_it_stops_the_server(monkeypatch):
    from types import SimpleNamespace

    from serving import leave_target_groups as module
    from serving.streaming_model import StreamingModel

    order: list[str] = []
    monkeypatch.setattr(module, "start_leaving", lambda reason, model: order.append(f"leave: {reason}"))
    model = object.__new__(StreamingModel)
    model.model_name, model.healthy, model.live = "assistant", True, {}
    model.engine = SimpleNamespace(loop=SimpleNamespace(call_soon_threadsafe=lambda callback: None))
    model.outbox = SimpleNamespace(put=lambda job: job())
    model._stop_server = lambda: order.append("stop")
    model._engine_died("EngineDeadError")
    model._engine_died("EngineDeadError")  # once only
    model._dying.join(timeout=5)
    assert order == ["leave: assistant: the vLLM engine is dead (EngineDeadError)", "stop"]


def test_a_dead_engine_stops_the_server_only_once_its_requests_errors_are_sent(monkeypatch):
    """Stopped first, Triton closed a stream before its error went out, and the client saw a clean end of
    an answer cut short: the server stops only once the live requests have ended and the outbox has run the
    errors they queued."""
    import contextlib
    import queue as queue_module
    from types import SimpleNamespace

    from serving import leave_target_groups as module
    from serving import streaming_model
    from serving.streaming_model import StreamingModel

    monkeypatch.setattr(module, "start_leaving", lambda reason, model: None)
    order: list[str] = []
    jobs: queue_module.SimpleQueue = queue_module.SimpleQueue()
    model = object.__new__(StreamingModel)
    model.model_name, model.healthy, model.live = "assistant", True, {"r1": object()}

    def cancel_live() -> None:  # the engine loop ends the request, which queues its error in the outbox
        jobs.put(lambda: order.append("error sent"))
        model.live.clear()

    model.engine = SimpleNamespace(loop=SimpleNamespace(call_soon_threadsafe=lambda callback: None))
    model._cancel_live = cancel_live
    model.outbox = SimpleNamespace(put=jobs.put)
    model._stop_server = lambda: order.append("stop")
    model._engine_died("EngineDeadError")
    assert order == [] and model._dying.is_alive(), "the server stopped with a request still live"
    cancel_live()
    while not jobs.empty() or model._dying.is_alive():  # the outbox thread, in order
        with contextlib.suppress(queue_module.Empty):
            jobs.get(timeout=0.05)()
    assert order == ["error sent", "stop"]

    # A loop that never ends its requests does not keep a dead host up: the server stops after the bound.
    monkeypatch.setattr(streaming_model, "ERRORS_DELIVERY_S", 0.2)
    order.clear()
    model.healthy, model.live = True, {"r2": object()}
    model.outbox = SimpleNamespace(put=lambda job: None)  # nothing ever runs
    model._engine_died("EngineDeadError")
    model._dying.join(timeout=5)
    assert order == ["stop"]


def test_a_dead_model_process_starts_leaving_before_the_guard_stops_the_server(monkeypatch):
    import subprocess
    import sys

    from serving import leave_target_groups as module
    from serving import orphan_guard

    order: list[str] = []

    def leaving(reason, model):
        order.append("leave")
        thread = threading.Thread(target=lambda: None)
        thread.start()
        return thread

    monkeypatch.setattr(module, "start_leaving", leaving)
    monkeypatch.setattr(orphan_guard, "stub_death_record", lambda *a: order.append("report") or {})
    server = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
    try:
        orphan_guard.stop_server_for_dead_stub(12345, server.pid, "assistant")
        assert server.wait(5) < 0  # SIGTERM reached the stand-in server
    finally:
        server.kill()
    assert order == ["leave", "report"]
