import json

import pytest
from aws_cdk import aws_ec2 as ec2
from aws_cdk import aws_ecs as ecs
from aws_cdk import aws_elasticloadbalancingv2 as elbv2
from aws_cdk import aws_iam as iam
from aws_cdk import aws_logs as logs
from aws_cdk.assertions import Annotations, Match, Template
from hypothesis import given
from hypothesis import strategies as st

from cdk_constructs.neuron_fleet import (
    EBS_MODEL,
    INSTANCE_STORE_MODEL,
    STOP_TIMEOUT_SECONDS,
    FleetProps,
    FleetTargets,
    ImageSource,
    NeuronFleet,
    ServingPorts,
    container_health_command,
    container_health_timing,
)
from settings.instances import INSTANCES
from settings.schema import COLD_START_BUDGET_MAX

NEURON_AMI_PARAMETER = "/aws/service/ecs/optimized-ami/amazon-linux-2023/neuron/recommended/image_id"


def _props(instance_type="inf2.48xlarge", **overrides):
    values = dict(
        instance=INSTANCES[instance_type],
        tensor_parallel=INSTANCES[instance_type].neuron_cores,
        min_hosts=2,
        max_hosts=20,
        data_volume_gib=600,
        image=ImageSource(image_uri="public.ecr.aws/example/serving:1"),
        ports=ServingPorts(http=8000, grpc=8001, metrics=8002),
        shared_memory_mib=4096,
        cold_start_budget_seconds=1800,
        health_check_grace_seconds=2400,
        environment=(("ENGINE_MAX_NUM_SEQS", "32"),),
    )
    values.update(overrides)
    return FleetProps(**values)


def build(stack, vpc, props):
    cluster = ecs.Cluster(stack, "Cluster", vpc=vpc)
    alb_sg = ec2.SecurityGroup(stack, "AlbSg", vpc=vpc)
    http = elbv2.ApplicationTargetGroup(
        stack,
        "Http",
        vpc=vpc,
        port=8000,
        protocol=elbv2.ApplicationProtocol.HTTP,
        target_type=elbv2.TargetType.IP,
    )
    grpc = elbv2.ApplicationTargetGroup(
        stack,
        "Grpc",
        vpc=vpc,
        port=8001,
        protocol=elbv2.ApplicationProtocol.HTTP,
        protocol_version=elbv2.ApplicationProtocolVersion.GRPC,
        target_type=elbv2.TargetType.IP,
    )
    role = iam.Role(stack, "TaskRole", assumed_by=iam.ServicePrincipal("ecs-tasks.amazonaws.com"))
    fleet = NeuronFleet(
        stack,
        "Fleet",
        props=props,
        cluster=cluster,
        targets=FleetTargets(http=http, grpc=grpc, load_balancer_security_group=alb_sg),
        task_role=role,
        log_group=logs.LogGroup(stack, "Logs"),
    )
    return fleet, Template.from_stack(stack)


@pytest.fixture
def inf2(stack, vpc):
    return build(stack, vpc, _props())


@pytest.fixture
def template(inf2):
    return inf2[1]


def _container(template):
    task = next(iter(template.find_resources("AWS::ECS::TaskDefinition").values()))
    return task["Properties"]["ContainerDefinitions"][0]


@pytest.mark.parametrize("instance_type", ["inf2.8xlarge", "inf2.48xlarge", "trn1.32xlarge", "trn2.48xlarge"])
def test_fleet_maps_every_neuron_device(stack, vpc, instance_type):
    _, template = build(stack, vpc, _props(instance_type))
    devices = _container(template)["LinuxParameters"]["Devices"]
    expected = [f"/dev/neuron{i}" for i in range(INSTANCES[instance_type].neuron_devices)]
    assert [d["HostPath"] for d in devices] == expected
    assert [d["ContainerPath"] for d in devices] == expected


def test_task_locks_memory_and_gets_the_configured_shared_memory(template):
    container = _container(template)
    assert container["LinuxParameters"]["Capabilities"] == {"Add": ["IPC_LOCK"]}
    assert container["LinuxParameters"]["SharedMemorySize"] == 4096
    assert container["Ulimits"] == [{"Name": "memlock", "SoftLimit": -1, "HardLimit": -1}]


def test_stop_timeout_is_the_ecs_maximum(template):
    assert _container(template)["StopTimeout"] == STOP_TIMEOUT_SECONDS == 120


def test_tensor_parallel_degree_and_engine_settings_reach_the_container(stack, vpc):
    _, template = build(stack, vpc, _props("trn1.32xlarge", tensor_parallel=16))
    environment = {e["Name"]: e["Value"] for e in _container(template)["Environment"]}
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
    check = _container(template)["HealthCheck"]
    assert check["StartPeriod"] == timing.start_period_seconds
    assert check["Interval"] == timing.interval_seconds
    assert check["Retries"] == timing.retries
    assert check["Command"][:2] == ["CMD", "python3"]
    assert "http://127.0.0.1:8000/v2/health/ready" in check["Command"][-1]


def test_container_health_command_fails_on_a_server_that_is_not_ready():
    """Run the probe for real against a loopback server answering 503, then 200."""
    import http.server
    import subprocess
    import sys
    import threading

    status = {"code": 503}

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self):
            self.send_response(status["code"] if self.path == "/v2/health/ready" else 404)
            self.end_headers()

        def log_message(self, *args):
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        command = container_health_command(server.server_address[1])
        probe = [sys.executable, *command[2:]]
        assert subprocess.run(probe, capture_output=True, check=False).returncode != 0
        status["code"] = 200
        assert subprocess.run(probe, capture_output=True, check=False).returncode == 0
    finally:
        server.shutdown()


def _keys(value):
    if isinstance(value, dict):
        for key, item in value.items():
            yield key
            yield from _keys(item)
    elif isinstance(value, list):
        for item in value:
            yield from _keys(item)


def test_no_desired_capacity_anywhere(template):
    assert "DesiredCapacity" not in set(_keys(template.to_json()))
    template.has_resource_properties("AWS::AutoScaling::AutoScalingGroup", {"MinSize": "2", "MaxSize": "20"})


def test_hosts_boot_the_ecs_neuron_ami_resolved_from_ssm_at_deploy_time(template):
    parameters = template.to_json()["Parameters"]
    ami = [p for p in parameters.values() if p.get("Default") == NEURON_AMI_PARAMETER]
    assert ami and ami[0]["Type"] == "AWS::SSM::Parameter::Value<AWS::EC2::Image::Id>"
    template.has_resource_properties(
        "AWS::EC2::LaunchTemplate",
        {
            "LaunchTemplateData": Match.object_like(
                {
                    "InstanceType": "inf2.48xlarge",
                    "MetadataOptions": Match.object_like({"HttpTokens": "required"}),
                }
            )
        },
    )


def test_capacity_provider_manages_scaling_termination_protection_and_draining(template):
    template.has_resource_properties(
        "AWS::ECS::CapacityProvider",
        {
            "AutoScalingGroupProvider": Match.object_like(
                {
                    "ManagedScaling": Match.object_like({"Status": "ENABLED", "TargetCapacity": 100}),
                    "ManagedTerminationProtection": "ENABLED",
                    "ManagedDraining": "ENABLED",
                }
            )
        },
    )
    template.has_resource_properties(
        "AWS::AutoScaling::AutoScalingGroup", {"NewInstancesProtectedFromScaleIn": True}
    )


def test_service_runs_one_task_per_host_with_rollback_and_grace(template):
    template.has_resource_properties(
        "AWS::ECS::Service",
        {
            "PlacementConstraints": [{"Type": "distinctInstance"}],
            "DeploymentConfiguration": Match.object_like(
                {"DeploymentCircuitBreaker": {"Enable": True, "Rollback": True}, "MinimumHealthyPercent": 100}
            ),
            "HealthCheckGracePeriodSeconds": 2400,
            "CapacityProviderStrategy": [Match.object_like({"Weight": 1})],
        },
    )
    service = next(iter(template.find_resources("AWS::ECS::Service").values()))
    assert "DesiredCount" not in service["Properties"] or service["Properties"]["DesiredCount"] is None


def test_service_registers_into_both_shared_target_groups(template):
    service = next(iter(template.find_resources("AWS::ECS::Service").values()))
    registered = {
        (lb["ContainerPort"], lb["TargetGroupArn"]["Ref"][:4])
        for lb in service["Properties"]["LoadBalancers"]
    }
    assert registered == {(8000, "Http"), (8001, "Grpc")}


def test_tasks_accept_traffic_only_from_the_load_balancer(template):
    task_group = next(
        v
        for v in template.find_resources("AWS::EC2::SecurityGroup").values()
        if "serving tasks" in v["Properties"]["GroupDescription"]
    )
    assert "SecurityGroupIngress" not in task_group["Properties"]
    ingress = template.find_resources("AWS::EC2::SecurityGroupIngress")
    assert {
        (r["Properties"]["FromPort"], r["Properties"]["SourceSecurityGroupId"]["Fn::GetAtt"][0][:5])
        for r in ingress.values()
    } == {(8000, "AlbSg"), (8001, "AlbSg")}


def test_inf2_keeps_weights_on_an_encrypted_ebs_volume_sized_from_config(template):
    data = template.to_json()
    launch = next(iter(template.find_resources("AWS::EC2::LaunchTemplate").values()))
    mappings = launch["Properties"]["LaunchTemplateData"]["BlockDeviceMappings"]
    volume = next(m for m in mappings if m["DeviceName"] == "/dev/xvdb")["Ebs"]
    assert volume == {"Encrypted": True, "VolumeSize": 600, "VolumeType": "gp3"}
    assert EBS_MODEL in json.dumps(data)


def test_trn1_keeps_weights_on_instance_store_without_an_ebs_data_volume(stack, vpc):
    _, template = build(stack, vpc, _props("trn1.32xlarge"))
    launch = next(iter(template.find_resources("AWS::EC2::LaunchTemplate").values()))
    devices = [m["DeviceName"] for m in launch["Properties"]["LaunchTemplateData"]["BlockDeviceMappings"]]
    assert devices == ["/dev/xvda"]
    user_data = json.dumps(launch["Properties"]["LaunchTemplateData"]["UserData"])
    assert INSTANCE_STORE_MODEL in user_data and EBS_MODEL not in user_data


def test_host_joins_the_cluster_and_blocks_task_metadata_access(template):
    launch = next(iter(template.find_resources("AWS::EC2::LaunchTemplate").values()))
    user_data = json.dumps(launch["Properties"]["LaunchTemplateData"]["UserData"])
    assert "ECS_CLUSTER=" in user_data
    assert "ECS_AWSVPC_BLOCK_IMDS=true" in user_data
    assert "ECS_CONTAINER_STOP_TIMEOUT=120s" in user_data


def test_service_scales_on_requests_in_flight_within_config_bounds(template):
    template.has_resource_properties(
        "AWS::ApplicationAutoScaling::ScalableTarget", {"MinCapacity": 2, "MaxCapacity": 20}
    )
    template.has_resource_properties(
        "AWS::ApplicationAutoScaling::ScalingPolicy",
        {
            "TargetTrackingScalingPolicyConfiguration": Match.object_like(
                {
                    "CustomizedMetricSpecification": Match.object_like(
                        {"MetricName": "RequestsInFlight", "Namespace": "LLMServing"}
                    )
                }
            )
        },
    )


def test_fleet_alarms_when_running_tasks_fall_below_the_minimum(inf2):
    fleet, template = inf2
    assert fleet.alarms and fleet.unhealthy_alarm is fleet.alarms[0]
    template.has_resource_properties(
        "AWS::CloudWatch::Alarm",
        {"MetricName": "RunningTaskCount", "Threshold": 2, "ComparisonOperator": "LessThanThreshold"},
    )


def test_fleet_allowed_to_be_empty_has_no_floor_alarm(stack, vpc):
    fleet, template = build(stack, vpc, _props(min_hosts=0))
    assert fleet.alarms == []
    template.resource_count_is("AWS::CloudWatch::Alarm", 0)


def test_service_waits_for_the_capacity_provider_association(template):
    service = next(iter(template.find_resources("AWS::ECS::Service").values()))
    associations = template.find_resources("AWS::ECS::ClusterCapacityProviderAssociations")
    assert set(associations) <= set(service["DependsOn"])
    assert associations


@given(st.integers(min_value=60, max_value=COLD_START_BUDGET_MAX))
def test_any_valid_cold_start_budget_gets_a_covering_container_health_check(budget):
    timing = container_health_timing(budget)
    assert timing.covered_seconds >= budget
    assert timing.start_period_seconds <= 300 and timing.retries <= 10 and 5 <= timing.interval_seconds <= 300


def test_weights_and_compiled_artifacts_land_on_the_host_data_disk(template):
    task = next(iter(template.find_resources("AWS::ECS::TaskDefinition").values()))["Properties"]
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
    _, template = build(stack, vpc, _props(image=ImageSource(image_uri=uri)))
    statements = _execution_policy_statements(template)
    pull = next(s for s in statements if "ecr:BatchGetImage" in s["Action"])
    arn = "".join(p if isinstance(p, str) else "<partition>" for p in pull["Resource"]["Fn::Join"][1])
    assert arn == "arn:<partition>:ecr:us-west-2:222222222222:repository/serving/neuron"
    image = _container(template)["Image"]
    assert "sdk2.28" in json.dumps(image) and "222222222222" in json.dumps(image)


def test_public_image_needs_no_pull_permissions(template):
    assert not any("ecr:BatchGetImage" in s["Action"] for s in _execution_policy_statements(template))
    assert _container(template)["Image"] == "public.ecr.aws/example/serving:1"


def test_asset_image_is_built_from_the_folder(stack, vpc, tmp_path):
    (tmp_path / "Dockerfile").write_text("FROM scratch\n")
    _, template = build(stack, vpc, _props(image=ImageSource(asset_directory=str(tmp_path))))
    assert "cdk-hnb659fds-container-assets" in json.dumps(_container(template)["Image"])


def test_fleet_of_a_type_ec2_does_not_offer_in_the_region_warns_at_synth(stack, vpc) -> None:
    build(stack, vpc, _props("trn1.32xlarge", offered_in_region=False))
    Annotations.from_stack(stack).has_warning(
        "/Test/Fleet", Match.string_like_regexp("trn1.32xlarge is not offered in this region")
    )


def test_fleet_of_an_offered_type_synthesizes_without_warnings(stack, vpc) -> None:
    build(stack, vpc, _props())
    Annotations.from_stack(stack).has_no_warning("*", Match.any_value())
