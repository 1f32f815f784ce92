import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

from cdk_constructs.fleet import ImageSource
from cdk_constructs.fleet.host_boot import SERVING_USER_ID, STOP_TIMEOUT_SECONDS, data_disk_script
from cdk_constructs.fleet.neuron_health import RUNTIME_FAILURES_METRIC
from cdk_constructs.fleet.service import TARGET_GROUP_ENV_PREFIX
from cdk_constructs.fleet.task_definition import (
    COMPILE_COMMAND,
    COMPILE_CONTAINER_NAME,
    DEAD_CONTAINER_SECONDS,
    LOG_BUFFER_MIB,
    container_health_command,
    container_health_timing,
)
from settings.aws_limits import COLD_START_BUDGET_MAX
from settings.instances import INSTANCES
from tests.cdk_constructs.fleet.builders import (
    build,
    compile_task_definition,
    fleet_props,
    serving_container,
    serving_task_definition,
)


@pytest.mark.parametrize("instance_type", ["inf2.8xlarge", "inf2.48xlarge", "trn1.32xlarge", "trn2.48xlarge"])
def test_fleet_maps_every_neuron_device(stack, vpc, instance_type):
    _, template = build(stack, vpc, fleet_props(instance_type))
    devices = serving_container(template)["LinuxParameters"]["Devices"]
    expected = [f"/dev/neuron{i}" for i in range(INSTANCES[instance_type].neuron_devices)]
    assert [d["HostPath"] for d in devices] == expected
    assert [d["ContainerPath"] for d in devices] == expected


def test_task_locks_memory_and_gets_the_configured_shared_memory(template):
    container = serving_container(template)
    assert container["LinuxParameters"]["Capabilities"] == {"Add": ["IPC_LOCK"]}
    assert container["LinuxParameters"]["SharedMemorySize"] == 4096
    assert container["Ulimits"] == [{"Name": "memlock", "SoftLimit": -1, "HardLimit": -1}]


def test_stop_timeout_is_the_ecs_maximum(template):
    assert serving_container(template)["StopTimeout"] == STOP_TIMEOUT_SECONDS == 120


def test_tensor_parallel_degree_and_engine_settings_reach_the_container(stack, vpc):
    _, template = build(stack, vpc, fleet_props("trn1.32xlarge", tensor_parallel=16))
    environment = {e["Name"]: e["Value"] for e in serving_container(template)["Environment"]}
    assert environment["ENGINE_TENSOR_PARALLEL_SIZE"] == "16"
    assert environment["ENGINE_MAX_NUM_SEQS"] == "32"
    assert environment["INSTANCE_TYPE"] == "trn1.32xlarge"
    assert environment["NEURON_FAMILY"] == "trn1"


@pytest.mark.parametrize("budget", [60, 300, 301, 1800, 3300])
def test_container_health_check_cannot_fail_inside_the_cold_start_budget(budget):
    timing = container_health_timing(budget)
    assert timing.covered_seconds >= budget
    assert timing.start_period_seconds <= 300 and timing.retries <= 10 and timing.interval_seconds <= 300


def test_container_health_check_is_derived_from_the_budget(template):
    timing = container_health_timing(1800)
    check = serving_container(template)["HealthCheck"]
    assert check["StartPeriod"] == timing.start_period_seconds
    assert check["Interval"] == timing.interval_seconds
    assert check["Retries"] == timing.retries
    assert check["Command"] == [
        "CMD",
        "python3",
        "-m",
        "entrypoint.healthcheck",
        "--port=8000",
        "--cold-start-seconds=1800",
    ]


@pytest.mark.parametrize("budget", [60, 300, 1800, 3300])
def test_a_container_whose_engine_died_is_unhealthy_within_a_minute(stack, vpc, budget):
    _, template = build(stack, vpc, fleet_props(cold_start_budget_seconds=budget))
    check = serving_container(template)["HealthCheck"]
    assert check["Retries"] * check["Interval"] + check["Timeout"] <= DEAD_CONTAINER_SECONDS == 60
    assert check["Retries"] >= 2, "one slow answer must not replace a host"
    assert check["Timeout"] < check["Interval"]


def test_container_health_command_fails_on_a_server_that_is_not_ready(tmp_path):
    """Run the probe for real against a loopback server: 503 while starting is healthy inside the budget;
    200 is healthy; 503 after having been ready is unhealthy at once."""
    import http.server
    import subprocess
    import sys
    import threading

    from tests.container.conftest import REPO_DIR

    status = {"code": 503}

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self):
            self.send_response(status["code"] if self.path == "/v2/health/ready" else 404)
            self.end_headers()

        def log_message(self, *args):
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()

    def probe(budget: int) -> int:
        command = container_health_command(server.server_address[1], budget)
        run = [sys.executable, *command[2:], f"--state-dir={tmp_path / str(budget)}"]
        return subprocess.run(run, cwd=REPO_DIR / "container", capture_output=True, check=False).returncode

    try:
        assert probe(1800) == 0, "a server still starting inside its budget is healthy"
        assert probe(0) == 1, "a server not ready past its budget is unhealthy"
        status["code"] = 200
        assert probe(1800) == 0
        status["code"] = 503
        assert probe(1800) == 1, "a server that was ready and is not any more is unhealthy"
    finally:
        server.shutdown()


def test_the_task_runs_as_the_serving_user_with_an_init_process(template):
    container = serving_container(template)
    assert container["User"] == f"{SERVING_USER_ID}:{SERVING_USER_ID}" and SERVING_USER_ID != 0
    assert container["LinuxParameters"]["InitProcessEnabled"] is True
    task = serving_task_definition(template)["Properties"]
    for definition in task["ContainerDefinitions"]:
        assert definition.get("User") == f"{SERVING_USER_ID}:{SERVING_USER_ID}", definition["Name"]
        assert definition["LinuxParameters"]["InitProcessEnabled"] is True, definition["Name"]


def test_the_serving_user_owns_the_host_data_disk_and_the_image_creates_it():
    """The task writes weights and artifacts to the host's data disk as this uid; the image has the user."""
    from tests.container.test_dockerfile import DOCKERFILE

    assert f"chown {SERVING_USER_ID}:{SERVING_USER_ID} /opt/serving-data" in data_disk_script(
        INSTANCES["inf2.48xlarge"]
    )
    assert f"ARG SERVING_UID={SERVING_USER_ID}" in DOCKERFILE


@given(st.integers(min_value=60, max_value=COLD_START_BUDGET_MAX))
def test_any_valid_cold_start_budget_gets_a_covering_container_health_check(budget):
    timing = container_health_timing(budget)
    assert timing.covered_seconds >= budget
    assert timing.dead_after_seconds <= DEAD_CONTAINER_SECONDS
    assert timing.start_period_seconds <= 300 and timing.retries <= 10 and 5 <= timing.interval_seconds <= 300


def test_weights_and_compiled_artifacts_land_on_the_host_data_disk(template):
    task = serving_task_definition(template)["Properties"]
    assert task["Volumes"] == [{"Name": "serving-data", "Host": {"SourcePath": "/opt/serving-data"}}]
    mounts = task["ContainerDefinitions"][0]["MountPoints"]
    assert mounts == [{"SourceVolume": "serving-data", "ContainerPath": "/opt/models", "ReadOnly": False}]


def _execution_policy_statements(template):
    policies = template.find_resources("AWS::IAM::Policy")
    return [
        statement
        for key, policy in policies.items()
        if "ExecutionRole" in key
        for statement in policy["Properties"]["PolicyDocument"]["Statement"]
    ]


def test_private_ecr_image_is_pulled_with_permissions_on_that_repository_only(stack, vpc):
    uri = "222222222222.dkr.ecr.us-west-2.amazonaws.com/serving/neuron:sdk2.28"
    _, template = build(stack, vpc, fleet_props(image=ImageSource(image_uri=uri)))
    statements = _execution_policy_statements(template)
    pull = next(s for s in statements if "ecr:BatchGetImage" in s["Action"])
    arn = "".join(p if isinstance(p, str) else "<partition>" for p in pull["Resource"]["Fn::Join"][1])
    assert arn == "arn:<partition>:ecr:us-west-2:222222222222:repository/serving/neuron"
    image = serving_container(template)["Image"]
    assert "sdk2.28" in json.dumps(image) and "222222222222" in json.dumps(image)


def test_public_image_needs_no_pull_permissions(template):
    assert not any("ecr:BatchGetImage" in s["Action"] for s in _execution_policy_statements(template))
    assert serving_container(template)["Image"] == "public.ecr.aws/example/serving:1"


def test_asset_image_is_built_from_the_folder(stack, vpc, tmp_path):
    (tmp_path / "Dockerfile").write_text("FROM scratch\n")
    _, template = build(stack, vpc, fleet_props(image=ImageSource(asset_directory=str(tmp_path))))
    assert "cdk-hnb659fds-container-assets" in json.dumps(serving_container(template)["Image"])


def test_container_logs_never_block_the_streams(template):
    """In blocking mode a slow CloudWatch Logs fills the pipe and stops the process writing to it."""
    options = serving_container(template)["LogConfiguration"]["Options"]
    assert options["mode"] == "non-blocking"
    assert options["max-buffer-size"] == f"{LOG_BUFFER_MIB * 1024 * 1024}b"


def _logical_id(template, resource_type, prefix):
    (found,) = (key for key in template.find_resources(resource_type) if key.startswith(prefix))
    return found


def test_compile_tasks_log_apart_from_the_group_the_runtime_failure_filter_reads(template):
    """A compile's Neuron runtime output must not count as the fleet's NeuronRuntimeFailures (it pages)."""
    serving_logs = _logical_id(template, "AWS::Logs::LogGroup", "Logs")
    compile_logs = _logical_id(template, "AWS::Logs::LogGroup", "CompileLogs")
    (compile_container,) = compile_task_definition(template)["Properties"]["ContainerDefinitions"]
    options = compile_container["LogConfiguration"]["Options"]
    assert options["awslogs-group"] == {"Ref": compile_logs}
    filters = template.find_resources("AWS::Logs::MetricFilter").values()
    runtime = [
        f
        for f in filters
        if f["Properties"]["MetricTransformations"][0]["MetricName"].startswith(RUNTIME_FAILURES_METRIC)
    ]
    assert [f["Properties"]["LogGroupName"] for f in runtime] == [{"Ref": serving_logs}]
    assert not [f for f in filters if f["Properties"]["LogGroupName"] == {"Ref": compile_logs}]
    # Every container of the serving task still logs where the filter reads.
    for container in serving_task_definition(template)["Properties"]["ContainerDefinitions"]:
        assert container["LogConfiguration"]["Options"]["awslogs-group"] == {"Ref": serving_logs}


def test_the_compile_task_runs_the_compile_mode_under_the_compile_role_with_nothing_to_override(template):
    task = compile_task_definition(template)["Properties"]
    (container,) = task["ContainerDefinitions"]
    assert container["Name"] == COMPILE_CONTAINER_NAME and container["Command"] == COMPILE_COMMAND
    compile_role = _logical_id(template, "AWS::IAM::Role", "CompileTaskRole")
    assert task["TaskRoleArn"] == {"Fn::GetAtt": [compile_role, "Arn"]}
    # awsvpc like the service, so the compile runs in the service's subnets and security group.
    assert task["NetworkMode"] == "awsvpc"
    assert "PortMappings" not in container and "HealthCheck" not in container


def test_the_compile_container_is_the_serving_container_the_key_is_computed_from(template):
    """Same image, devices, memory, user, data disk and environment (the compiled-artifact key's inputs):
    what the compile writes is what the serving hosts load. The serving container adds only the target
    groups it is registered in."""
    (compiling,) = compile_task_definition(template)["Properties"]["ContainerDefinitions"]
    serving = serving_container(template)
    for field in ("Image", "LinuxParameters", "Ulimits", "User", "MemoryReservation", "MountPoints"):
        assert compiling[field] == serving[field], field
    environment = {e["Name"]: e["Value"] for e in serving["Environment"]}
    environment = {k: v for k, v in environment.items() if not k.startswith(TARGET_GROUP_ENV_PREFIX)}
    assert {e["Name"]: e["Value"] for e in compiling["Environment"]} == environment
    assert (
        compile_task_definition(template)["Properties"]["Volumes"]
        == serving_task_definition(template)["Properties"]["Volumes"]
    )
