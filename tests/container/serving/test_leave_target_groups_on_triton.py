"""On the real server: a dead engine, or a killed model process, takes the host's own target out of its target
groups, with the ECS task metadata endpoint and ELBv2 stood in for by a local HTTP server and moto's server
(the model and its guard are processes of their own, so the AWS edge is reached over HTTP, as in a task)."""

from __future__ import annotations

import json
import os
import signal
import socket
import threading
import time
import uuid
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import boto3
import pytest
from moto.server import ThreadedMotoServer

from local.demo_assets import DemoAssets
from tests.container.conftest import SERVER_START_TIMEOUT_S, emf_lines, wait_for
from tests.container.serving.test_lifecycle_on_triton import engine_core, own_server
from tests.container.serving.test_stub_death_on_triton import model_stub

pytestmark = [pytest.mark.serving, pytest.mark.vllm_version]

TASK_IP = "10.0.2.100"
REGION = "us-west-2"
# The container metadata's network part for an awsvpc task (ECS docs, "Amazon ECS task metadata v4 examples").
METADATA = {"Name": "serving", "Networks": [{"NetworkMode": "awsvpc", "IPv4Addresses": [TASK_IP]}]}


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


@pytest.fixture
def metadata_endpoint():
    class Answer(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            body = json.dumps(METADATA).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Answer)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{server.server_address[1]}/v4/task-0123"
    server.shutdown()


@pytest.fixture
def target_groups():
    """moto's server with two IP target groups holding this task's target (and another task's)."""
    port = free_port()
    moto = ThreadedMotoServer(ip_address="127.0.0.1", port=port)
    moto.start()
    endpoint = f"http://127.0.0.1:{port}"
    credentials = {"aws_access_key_id": "x", "aws_secret_access_key": "x", "region_name": REGION}
    vpc = boto3.client("ec2", endpoint_url=endpoint, **credentials).create_vpc(CidrBlock="10.0.0.0/16")
    elb = boto3.client("elbv2", endpoint_url=endpoint, **credentials)
    groups = {}
    for name, target_port in (("http", 8000), ("grpc", 8001)):
        arn = elb.create_target_group(
            Name=f"{name}-{uuid.uuid4().hex[:8]}",  # moto's servers in one process share their state
            Protocol="HTTP",
            Port=target_port,
            VpcId=vpc["Vpc"]["VpcId"],
            TargetType="ip",
        )["TargetGroups"][0]["TargetGroupArn"]
        elb.register_targets(
            TargetGroupArn=arn,
            Targets=[{"Id": TASK_IP, "Port": target_port}, {"Id": "10.0.3.7", "Port": target_port}],
        )
        groups[target_port] = arn
    yield elb, endpoint, groups
    moto.stop()


def serving_targets(elb, arn: str) -> set[str]:
    health = elb.describe_target_health(TargetGroupArn=arn)["TargetHealthDescriptions"]
    return {d["Target"]["Id"] for d in health if d["TargetHealth"]["State"] != "draining"}


@pytest.mark.parametrize("death", ["engine core killed", "model process killed"])
def test_a_dead_engine_takes_its_own_target_out_of_both_groups(
    demo_assets: DemoAssets, tmp_path: Path, metadata_endpoint, target_groups, death: str
) -> None:
    elb, endpoint, groups = target_groups
    environment = {
        "ECS_CONTAINER_METADATA_URI_V4": metadata_endpoint,
        "AWS_ENDPOINT_URL_ELASTIC_LOAD_BALANCING_V2": endpoint,
        "AWS_ACCESS_KEY_ID": "x",
        "AWS_SECRET_ACCESS_KEY": "x",
        **{f"TARGET_GROUP_ARN_{port}": arn for port, arn in groups.items()},
    }
    server = own_server(demo_assets, tmp_path, environment=environment)
    server.start(timeout_s=SERVER_START_TIMEOUT_S)
    try:
        assert all(serving_targets(elb, arn) == {TASK_IP, "10.0.3.7"} for arn in groups.values())
        victim = engine_core(server) if death == "engine core killed" else model_stub(server.process.pid)
        killed_at = time.monotonic()
        os.kill(victim, signal.SIGKILL)
        left = wait_for(
            lambda: all(serving_targets(elb, arn) == {"10.0.3.7"} for arn in groups.values()) or None, 20
        )
        left_s = time.monotonic() - killed_at
    finally:
        server.stop()
    assert left, f"the target was still in its groups 20 s after the {death}"
    # The engine watch asks every second; the call itself is a local round trip here.
    assert left_s < 10, f"{left_s:.1f} s to leave"
    print(f"{death}: the target left its groups {left_s:.2f} s after the kill")
    records = wait_for(lambda: [r for r in emf_lines(server) if "TargetDeregistered" in r], 5)
    assert records and records[0]["TargetGroupsLeft"] == [groups[8000], groups[8001]]
    assert records[0]["TargetIp"] == TASK_IP and records[0]["Model"] == "passthrough"
