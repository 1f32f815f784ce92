"""`make compile`: every fleet's key as its hosts compute it, what exists in S3 (moto), and the compile task
of the fleet's own task definition on its region's cluster (moto's ECS)."""

from __future__ import annotations

import sys
from pathlib import Path

import boto3
import pytest
from botocore.stub import Stubber
from moto import mock_aws

from ops.compile import COMPILE_COMMAND, fleet_artifacts, fleet_resources, main, start_compile
from settings import load_settings
from stacks.routing_names import stack_name
from stacks.serving_app import build_app

REPO = Path(__file__).resolve().parents[2]
CONFIG = str(REPO / "config" / "prime-day.yaml")
SETTINGS = load_settings(CONFIG)


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


def test_the_key_here_is_the_key_the_synthesized_task_definition_gives_its_hosts(tmp_path):
    """The hosts compute the key from their task definition's environment: read it from the template."""
    sys.path.append(str(REPO / "container"))
    from entrypoint.artifact_key import TOOLCHAIN_PIN, artifact_key, compile_inputs
    from serving.engine_settings import engine_settings

    template = build_app(SETTINGS, outdir=str(tmp_path), nag=False).synth()
    template = template.get_stack_by_name(stack_name(SETTINGS, "us-west-2")).template
    expected = {a.instance_type: a.key for a in fleet_artifacts(SETTINGS) if a.region == "us-west-2"}
    found = {}
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
            found[environ["INSTANCE_TYPE"]] = artifact_key(inputs)
            assert "MODEL_REVISION" in environ  # the revision reaches the key (empty until model.revision)
    assert found == expected


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


def test_the_compile_task_runs_the_fleets_task_definition_in_compile_mode(aws):
    """botocore's Stubber checks the RunTask request (moto places no task on a capacity provider)."""
    ecs = boto3.client("ecs", region_name="us-east-1")
    artifact = next(a for a in fleet_artifacts(SETTINGS) if a.instance_type == "inf2.48xlarge")
    resources = {
        "cluster": "cell",
        "TaskDefinition": "arn:aws:ecs:us-east-1:111111111111:task-definition/inf2:7",
        "CapacityProvider": "inf2-provider",
        "CompileRole": "cell-ModelStoreCompileTaskRole-X1",
    }
    stub = Stubber(ecs)
    stub.add_response(
        "run_task",
        {"tasks": [{"taskArn": "arn:aws:ecs:us-east-1:111111111111:task/cell/abc"}], "failures": []},
        {
            "cluster": "cell",
            "taskDefinition": "arn:aws:ecs:us-east-1:111111111111:task-definition/inf2:7",
            "capacityProviderStrategy": [{"capacityProvider": "inf2-provider", "weight": 1}],
            "count": 1,
            "startedBy": "make-compile",
            "overrides": {
                # The compile task role, not the serving one: only it may write compiled/.
                "taskRoleArn": "arn:aws:iam::111111111111:role/cell-ModelStoreCompileTaskRole-X1",
                "containerOverrides": [{"name": "serving", "command": COMPILE_COMMAND}],
            },
            "tags": [{"key": "compiled-artifact-key", "value": artifact.key}],
        },
    )
    with stub:
        assert start_compile(ecs, resources, artifact).endswith("/abc")
    stub.assert_no_pending_responses()


def test_fleet_resources_are_found_by_the_fleets_construct_id():
    class Stack:
        def get_paginator(self, name):
            return self

        def paginate(self, StackName):
            summaries = [
                ("AWS::ECS::Cluster", "ClusterAbc", "cluster-1"),
                ("AWS::ECS::TaskDefinition", "Fleetinf248xlargeTaskDef1", "arn:td-inf2"),
                ("AWS::ECS::TaskDefinition", "Fleettrn132xlargeTaskDef2", "arn:td-trn1"),
                ("AWS::ECS::CapacityProvider", "Fleetinf248xlargeHostsProvider", "inf2-provider"),
                ("AWS::IAM::Role", "ModelStoreTaskRole1A2B", "cell-ModelStoreTaskRole-Y"),
                ("AWS::IAM::Role", "ModelStoreCompileTaskRole3C4D", "cell-ModelStoreCompileTaskRole-X"),
            ]
            return [
                {
                    "StackResourceSummaries": [
                        {"ResourceType": t, "LogicalResourceId": logical, "PhysicalResourceId": physical}
                        for t, logical, physical in summaries
                    ]
                }
            ]

    found = fleet_resources(Stack(), "stack", "inf2.48xlarge")
    assert found == {
        "cluster": "cluster-1",
        "TaskDefinition": "arn:td-inf2",
        "CapacityProvider": "inf2-provider",
        "CompileRole": "cell-ModelStoreCompileTaskRole-X",
    }
