"""`make compile`: every fleet's key as its hosts compute it, what exists in S3 (moto), and the compile task
of the fleet's compile task definition started on moto's ECS in the fleet's service's subnets and security
group (tests/ops/compile_fleet.py builds that fleet through the ECS, EC2 and Auto Scaling APIs).

CloudFormation's ListStackResources is botocore's Stubber wherever a stack listing is needed: moto's
CloudFormation cannot create the stack's AWS::ECS::CapacityProvider (unsupported there) nor give an
AWS::ECS::Service its NetworkConfiguration, so it cannot list the stack `make compile` reads. The listings
name the resources moto's ECS holds, or the synthesized template's own logical ids."""

from __future__ import annotations

import sys
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import boto3
import pytest
from botocore.exceptions import ClientError
from botocore.stub import Stubber
from moto import mock_aws

from cdk_constructs.fleet.task_definition import COMPILE_COMMAND, COMPILE_CONTAINER_NAME
from ops.compile import STARTED_BY, fleet_artifacts, fleet_resources, main, start_compile
from settings import load_settings
from stacks.routing_names import stack_name
from stacks.serving_app import build_app
from tests.ops.compile_fleet import MotoFleet, compile_fleet

REPO = Path(__file__).resolve().parents[2]
CONFIG = str(REPO / "config" / "prime-day.yaml")
SETTINGS = load_settings(CONFIG)
TARGET = next(a for a in fleet_artifacts(SETTINGS) if a.instance_type == "inf2.48xlarge")
REGION = TARGET.region


@pytest.fixture
def aws(monkeypatch):
    for name, value in {
        "AWS_ACCESS_KEY_ID": "testing",
        "AWS_SECRET_ACCESS_KEY": "testing",
        "AWS_DEFAULT_REGION": "us-east-1",
        "AWS_EC2_METADATA_DISABLED": "true",
    }.items():
        monkeypatch.setenv(name, value)
    with mock_aws():
        yield boto3.Session()


@pytest.fixture
def fleet(aws) -> MotoFleet:
    return compile_fleet(aws, "shopping-assistant", REGION)


@pytest.fixture(scope="module")
def template(tmp_path_factory) -> dict:
    outdir = tmp_path_factory.mktemp("cdk.out")
    assembly = build_app(SETTINGS, outdir=str(outdir), nag=False).synth()
    return assembly.get_stack_by_name(stack_name(SETTINGS, "us-west-2")).template


def test_the_key_here_is_the_key_the_synthesized_task_definitions_give_their_hosts(template):
    """The hosts compute the key from their task definition's environment, and so does the compile task:
    both of each fleet's task definitions give the key computed here."""
    sys.path.append(str(REPO / "container"))
    from entrypoint.artifact_key import TOOLCHAIN_PIN, artifact_key, compile_inputs
    from serving.engine_settings import engine_settings

    expected = {a.instance_type: a.key for a in fleet_artifacts(SETTINGS) if a.region == "us-west-2"}
    found: dict[str, list[str]] = {}
    for resource in template["Resources"].values():
        if resource["Type"] != "AWS::ECS::TaskDefinition":
            continue
        for container in resource["Properties"]["ContainerDefinitions"]:
            environ = {
                v["Name"]: v["Value"] for v in container.get("Environment", []) if isinstance(v["Value"], str)
            }
            if "MODEL_ID" not in environ:  # the neuron-monitor sidecar
                continue
            model_json = REPO / "container" / "model_repository" / "assistant" / "1" / "model.json"
            inputs = compile_inputs(
                engine_settings(model_json, environ), environ, tuple(sorted(TOOLCHAIN_PIN))
            )
            found.setdefault(environ["INSTANCE_TYPE"], []).append(artifact_key(inputs))
            assert "MODEL_REVISION" in environ  # the revision reaches the key (empty until model.revision)
    assert found == {instance_type: [key, key] for instance_type, key in expected.items()}


def test_a_new_model_revision_is_a_new_key(tmp_path):
    path = tmp_path / "revised.yaml"
    path.write_text(f"base: {CONFIG}\nmodel: {{revision: 0e9e39f}}\n")
    before = {a.key for a in fleet_artifacts(SETTINGS)}
    after = {a.key for a in fleet_artifacts(load_settings(path))}
    assert len(before) == len(after) == 2 and not before & after


def test_dry_run_lists_every_key_and_what_exists(aws, capsys):
    s3 = aws.client("s3", region_name="us-east-1")
    artifacts = fleet_artifacts(SETTINGS)
    s3.create_bucket(Bucket=artifacts[0].bucket)
    done = next(a for a in artifacts if a.instance_type == "inf2.48xlarge")
    s3.put_object(Bucket=done.bucket, Key=done.manifest_key, Body=b"{}")
    assert main([CONFIG, "--dry-run"]) == 0
    out = capsys.readouterr().out
    assert "6 compiled-artifact keys" in out
    assert out.count(": complete") == 3 and out.count("MISSING: `make compile` builds it") == 3


def test_without_the_regions_stack_it_asks_for_approval_to_bootstrap_it(aws, capsys):
    assert main([CONFIG]) == 1
    assert "does not exist yet; `make compile APPROVE=1` creates it first" in capsys.readouterr().err


def _summaries(resources: list[tuple[str, str, str]]) -> dict[str, Any]:
    return {
        "StackResourceSummaries": [
            {
                "ResourceType": kind,
                "LogicalResourceId": logical,
                "PhysicalResourceId": physical,
                "LastUpdatedTimestamp": datetime(2026, 12, 1, tzinfo=UTC),
                "ResourceStatus": "CREATE_COMPLETE",
            }
            for kind, logical, physical in resources
        ]
    }


def _stack_listing(stack: str, resources: list[tuple[str, str, str]], region: str = REGION) -> Any:
    """A CloudFormation client whose one ListStackResources answer lists `resources` (see the module
    docstring for why this is a Stubber)."""
    client = boto3.client("cloudformation", region_name=region)
    stub = Stubber(client)
    stub.add_response("list_stack_resources", _summaries(resources), {"StackName": stack})
    stub.activate()
    return client


def test_fleet_resources_finds_each_fleets_compile_task_definition_in_the_synthesized_stack(template):
    """Listed with the template's own logical ids (as physical ids): per fleet, its compile task definition
    (not its serving one), its capacity provider and its service, and the stack's cluster."""
    listed = [(r["Type"], logical, logical) for logical, r in template["Resources"].items()]
    for fleet in SETTINGS.regions["us-west-2"].fleets:
        found = fleet_resources(_stack_listing("stack", listed, "us-west-2"), "stack", fleet.instance_type)
        resource = {key: template["Resources"][logical] for key, logical in found.items()}
        assert {key: r["Type"] for key, r in resource.items()} == {
            "cluster": "AWS::ECS::Cluster",
            "TaskDefinition": "AWS::ECS::TaskDefinition",
            "CapacityProvider": "AWS::ECS::CapacityProvider",
            "Service": "AWS::ECS::Service",
        }
        (container,) = resource["TaskDefinition"]["Properties"]["ContainerDefinitions"]
        assert container["Name"] == COMPILE_CONTAINER_NAME and container["Command"] == COMPILE_COMMAND
        environment = {e["Name"]: e["Value"] for e in container["Environment"]}
        assert environment["INSTANCE_TYPE"] == fleet.instance_type
        strategy = resource["Service"]["Properties"]["CapacityProviderStrategy"]
        assert strategy[0]["CapacityProvider"] == {"Ref": found["CapacityProvider"]}


def test_ecs_refuses_runtask_of_an_awsvpc_task_without_a_network_configuration(fleet, aws):
    """The request `make compile` made before: moto refuses it as ECS does (ECS API reference, RunTask:
    networkConfiguration "is required for task definitions that use the awsvpc network mode")."""
    ecs = aws.client("ecs", region_name=REGION)
    with pytest.raises(ClientError, match="Network Configuration must be provided when networkMode 'awsvpc'"):
        ecs.run_task(
            cluster=fleet.resources["cluster"],
            taskDefinition=fleet.resources["TaskDefinition"],
            capacityProviderStrategy=[{"capacityProvider": fleet.resources["CapacityProvider"], "weight": 1}],
            count=1,
        )


def test_the_compile_task_starts_in_the_services_subnets_and_security_group(fleet, aws):
    ecs = aws.client("ecs", region_name=REGION)
    arn = start_compile(ecs, fleet.resources, TARGET)
    (task,) = ecs.describe_tasks(cluster=fleet.resources["cluster"], tasks=[arn], include=["TAGS"])["tasks"]
    assert task["taskDefinitionArn"] == fleet.resources["TaskDefinition"]
    assert task["capacityProviderName"] == fleet.resources["CapacityProvider"]
    assert task["startedBy"] == STARTED_BY
    assert task["tags"] == [{"key": "compiled-artifact-key", "value": TARGET.key}]
    # Nothing overridden: the compile task definition holds the command and the compile task role.
    assert not task["overrides"].get("taskRoleArn") and not task["overrides"].get("containerOverrides")
    (attachment,) = task["attachments"]
    details = {d["name"]: d["value"] for d in attachment["details"]}
    assert details["subnetId"] in fleet.host_subnets
    (interface,) = aws.client("ec2", region_name=REGION).describe_network_interfaces(
        NetworkInterfaceIds=[details["networkInterfaceId"]]
    )["NetworkInterfaces"]
    assert [g["GroupId"] for g in interface["Groups"]] == [fleet.task_security_group]


def test_a_service_without_a_network_configuration_stops_the_compile_with_a_clear_message(fleet, aws):
    ecs = aws.client("ecs", region_name=REGION)
    bare = ecs.create_service(
        cluster=fleet.resources["cluster"],
        serviceName="bridge",
        taskDefinition=fleet.resources["TaskDefinition"],
    )["service"]["serviceArn"]
    with pytest.raises(RuntimeError, match="has no awsvpc network configuration; `make deploy` first"):
        start_compile(ecs, {**fleet.resources, "Service": bare}, TARGET)
    assert ecs.list_tasks(cluster=fleet.resources["cluster"])["taskArns"] == []


class _StackListed:
    """The session `make compile` gets: moto behind every client but CloudFormation's (the module
    docstring says why that one is a Stubber)."""

    def __init__(self, session: Any, cloudformation: Any) -> None:
        self._session = session
        self._cloudformation = cloudformation

    def get_credentials(self) -> Any:
        return self._session.get_credentials()

    def client(self, service: str, region_name: str | None = None) -> Any:
        if service == "cloudformation":
            assert region_name == REGION
            return self._cloudformation
        return self._session.client(service, region_name=region_name)


def _manifests(session: Any, *, but: Any = None) -> None:
    """Every key's manifest but `but`'s (the regions share the artifacts prefix: one manifest each key)."""
    for artifact in fleet_artifacts(SETTINGS):
        s3 = session.client("s3", region_name=artifact.region)
        if artifact.bucket not in {b["Name"] for b in s3.list_buckets()["Buckets"]}:
            s3.create_bucket(Bucket=artifact.bucket)
        if but is None or artifact.manifest_key != but.manifest_key:
            s3.put_object(Bucket=artifact.bucket, Key=artifact.manifest_key, Body=b"{}")


def _fleet_listing(fleet: MotoFleet, *, compile_task_definition: bool = True) -> Any:
    listed = [
        ("AWS::ECS::Cluster", "ClusterCluster8A5E8A5D", fleet.resources["cluster"]),
        ("AWS::ECS::TaskDefinition", "Fleetinf248xlargeTaskTaskDefinition33B91DF7", "arn:serving"),
        (
            "AWS::ECS::CapacityProvider",
            "Fleetinf248xlargeHostsProvider1",
            fleet.resources["CapacityProvider"],
        ),
        ("AWS::ECS::Service", "Fleetinf248xlargeServingService1", fleet.resources["Service"]),
    ]
    if compile_task_definition:
        listed.append(
            (
                "AWS::ECS::TaskDefinition",
                "Fleetinf248xlargeCompileTaskDefinition3BA4C25F",
                fleet.resources["TaskDefinition"],
            )
        )
    return _stack_listing(stack_name(SETTINGS, REGION), listed)


def test_make_compile_starts_one_task_for_the_one_missing_key(fleet, aws, capsys):
    """Missing in every region (they share the prefix), compiled once: in the first region listing it (the
    listing is the first region's alone, so a second region's stack read would fail the test)."""
    _manifests(aws, but=TARGET)
    cloudformation = _fleet_listing(fleet)
    assert main([CONFIG], session_factory=lambda: _StackListed(aws, cloudformation)) == 0
    out = capsys.readouterr().out
    assert out.count("MISSING: `make compile` builds it") == 3
    assert f"{REGION} inf2.48xlarge: compiling {TARGET.key} in arn:aws:ecs:" in out
    ecs = aws.client("ecs", region_name=REGION)
    (arn,) = ecs.list_tasks(cluster=fleet.resources["cluster"])["taskArns"]
    assert arn in out
    (task,) = ecs.describe_tasks(cluster=fleet.resources["cluster"], tasks=[arn])["tasks"]
    assert task["taskDefinitionArn"] == fleet.resources["TaskDefinition"]
    details = {d["name"]: d["value"] for d in task["attachments"][0]["details"]}
    assert details["subnetId"] in fleet.host_subnets


def test_make_compile_starts_nothing_when_every_key_is_complete(fleet, aws, capsys):
    _manifests(aws)
    cloudformation = _fleet_listing(fleet)  # not read: nothing to compile
    assert main([CONFIG], session_factory=lambda: _StackListed(aws, cloudformation)) == 0
    assert "every fleet's compiled artifacts are complete" in capsys.readouterr().out
    assert (
        aws.client("ecs", region_name=REGION).list_tasks(cluster=fleet.resources["cluster"])["taskArns"] == []
    )


def test_a_stack_deployed_before_the_compile_task_definition_is_updated_not_bootstrapped(fleet, aws, capsys):
    """A bootstrap's first-create template would set a live stack's fleets to zero tasks."""
    _manifests(aws, but=TARGET)
    cloudformation = _fleet_listing(fleet, compile_task_definition=False)
    status = main(
        [CONFIG, "--approve", "--cdk", "false"], session_factory=lambda: _StackListed(aws, cloudformation)
    )
    assert status == 1
    err = capsys.readouterr().err
    assert "has no TaskDefinition for inf2.48xlarge; `make deploy` it with the config it runs now" in err
    assert "does not exist yet" not in err  # not offered a bootstrap
    assert (
        aws.client("ecs", region_name=REGION).list_tasks(cluster=fleet.resources["cluster"])["taskArns"] == []
    )
