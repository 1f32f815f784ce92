"""The serving task's S3 reads, run under the task role's policy from the synthesized template, with moto
enforcing it: the weights' build and manifest, the compiled artifacts of the host's key, and the catalog
index the pointer names all come through; an object outside the configured prefix does not; and the policy
without its ListBucket statement fails the start."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import boto3
import pytest
from botocore.exceptions import ClientError
from moto import mock_aws

from settings import load_settings
from stacks.routing_names import stack_name
from stacks.serving_app import build_app
from tests.iam.policies import assumed_session, enforced, role_policy

os.environ.setdefault("CDK_VALIDATION", "false")
REPO = Path(__file__).resolve().parents[2]
sys.path.append(str(REPO / "container"))

from entrypoint.s3_fetch import S3Location, current_build, download_prefix, upload_build  # noqa: E402
from entrypoint.weights import fetch as fetch_weights  # noqa: E402
from entrypoint.weights import upload as upload_weights  # noqa: E402
from serving.catalog_follow import fetch_build  # noqa: E402

SETTINGS = load_settings(REPO / "config" / "default.yaml")
REGION = "us-east-1"
BUCKET = "shopping-assistant-model-artifacts"
ROOT = "llama-8b-instruct"


@pytest.fixture(scope="module")
def task_policy(tmp_path_factory) -> dict:
    outdir = tmp_path_factory.mktemp("cdk.out")
    template = build_app(SETTINGS, outdir=str(outdir), nag=False).synth()
    template = template.get_stack_by_name(stack_name(SETTINGS, REGION)).template
    return role_policy(template, "ModelStoreTaskRole", REGION)


@pytest.fixture
def artifacts(monkeypatch, tmp_path):
    for name, value in {
        "AWS_ACCESS_KEY_ID": "x",
        "AWS_SECRET_ACCESS_KEY": "x",
        "AWS_DEFAULT_REGION": REGION,
    }.items():
        monkeypatch.setenv(name, value)
    with mock_aws():
        s3 = boto3.client("s3", region_name=REGION)
        s3.create_bucket(Bucket=BUCKET)
        weights = tmp_path / "weights"
        weights.mkdir()
        (weights / "config.json").write_bytes(b"{}")
        upload_weights(s3, weights, S3Location(BUCKET, f"{ROOT}/weights"))
        s3.put_object(Bucket=BUCKET, Key=f"{ROOT}/compiled/key-1/model.pt", Body=b"neff")
        s3.put_object(Bucket=BUCKET, Key=f"{ROOT}/compiled/key-1/artifact-manifest.json", Body=b"{}")
        index = tmp_path / "index"
        index.mkdir()
        (index / "manifest.json").write_bytes(b'{"files": {}}')
        upload_build(s3, index, S3Location(BUCKET, f"{ROOT}/catalog-index"), manifest="manifest.json")
        s3.put_object(Bucket=BUCKET, Key="other-team/secret.bin", Body=b"no")
        yield tmp_path


def test_the_start_reads_everything_it_needs_under_the_shipped_task_role(task_policy, artifacts):
    session = assumed_session(task_policy, REGION)
    with enforced():
        s3 = session.client("s3")
        assert "1 verified" in fetch_weights(s3, S3Location(BUCKET, f"{ROOT}/weights"), artifacts / "w")
        download_prefix(s3, S3Location(BUCKET, f"{ROOT}/compiled/key-1"), artifacts / "c")
        build = current_build(s3, S3Location(BUCKET, f"{ROOT}/catalog-index"))
        assert build is not None
        download_prefix(s3, build.location, artifacts / "i")
        with pytest.raises(ClientError, match="AccessDenied"):
            s3.get_object(Bucket=BUCKET, Key="other-team/secret.bin")
    assert (artifacts / "c" / "model.pt").read_bytes() == b"neff"


def test_a_policy_missing_a_permission_fails_the_start(task_policy, artifacts):
    without_list = {
        **task_policy,
        "Statement": [s for s in task_policy["Statement"] if s["Action"] != "s3:ListBucket"],
    }
    assert len(without_list["Statement"]) == len(task_policy["Statement"]) - 1
    session = assumed_session(without_list, REGION, name="narrower")
    with enforced(), pytest.raises(ClientError, match="AccessDenied"):
        fetch_weights(session.client("s3"), S3Location(BUCKET, f"{ROOT}/weights"), artifacts / "w")


def test_no_statement_of_the_task_role_grants_a_wildcard_resource(task_policy):
    for statement in task_policy["Statement"]:
        resources = (
            statement["Resource"] if isinstance(statement["Resource"], list) else [statement["Resource"]]
        )
        assert "*" not in resources, statement
        if statement["Action"] == "elasticloadbalancing:DeregisterTargets":
            # Leaving the region's two target groups when the engine dies: those two ARNs, nothing else.
            assert len(resources) == 2 and all(":targetgroup/LoadBalancer" in r for r in resources), statement
            continue
        assert all(r.startswith(f"arn:aws:s3:::{BUCKET}") for r in resources), statement


INDEX_PREFIX = f"{ROOT}/catalog-index"


def _new_index_build(s3, folder: Path) -> None:
    """A second build of the index, uploaded as `make index UPLOAD=` does (its files, manifest, pointer)."""
    folder.mkdir()
    (folder / "segment.bin").write_bytes(b"terms")
    (folder / "manifest.json").write_bytes(b'{"files": {"segment.bin": {}}}')
    upload_build(s3, folder, S3Location(BUCKET, INDEX_PREFIX), manifest="manifest.json")


def _follow(s3, builds: Path) -> Path:
    """What a host's catalog follow asks of S3: the pointer, then the manifest and files it names."""
    build = current_build(s3, S3Location(BUCKET, INDEX_PREFIX))
    assert build is not None
    # The index's own file check needs tantivy, which this environment has not; the S3 reads are the point.
    return fetch_build(s3, build, builds, verify=lambda folder: None)


def test_the_catalog_follow_reads_the_new_build_under_the_shipped_task_role(task_policy, artifacts):
    _new_index_build(boto3.client("s3", region_name=REGION), artifacts / "v2")
    session = assumed_session(task_policy, REGION)
    with enforced():
        folder = _follow(session.client("s3"), artifacts / "builds")
    assert (folder / "segment.bin").read_bytes() == b"terms"


def test_the_catalog_follow_needs_get_object_on_the_index_prefix_only(artifacts):
    _new_index_build(boto3.client("s3", region_name=REGION), artifacts / "v2")
    only_get = {
        "Version": "2012-10-17",
        "Statement": [
            {
                "Effect": "Allow",
                "Action": "s3:GetObject",
                "Resource": f"arn:aws:s3:::{BUCKET}/{INDEX_PREFIX}/*",
            }
        ],
    }
    session = assumed_session(only_get, REGION, name="follow-only")
    with enforced():
        folder = _follow(session.client("s3"), artifacts / "b1")
    assert (folder / "segment.bin").read_bytes() == b"terms"
    # The same grant on another prefix: the pointer itself is refused.
    elsewhere = {
        **only_get,
        "Statement": [{**only_get["Statement"][0], "Resource": f"arn:aws:s3:::{BUCKET}/{ROOT}/weights/*"}],
    }
    session = assumed_session(elsewhere, REGION, name="follow-elsewhere")
    with enforced(), pytest.raises(ClientError, match="AccessDenied"):
        _follow(session.client("s3"), artifacts / "b2")


def _deregistration_only(policy: dict, *, keep: bool = True) -> dict:
    """The shipped policy's DeregisterTargets statement with its resources widened to `*` (moto checks
    non-S3 resources against `*` only: tests/cdk_constructs/test_load_balancer.py asserts the two target
    groups on the template), or the policy without it."""
    statements = [
        {**s, "Resource": "*"} if keep else s
        for s in policy["Statement"]
        if (s["Action"] == "elasticloadbalancing:DeregisterTargets") == keep
    ]
    return {**policy, "Statement": statements}


@pytest.fixture
def registered(monkeypatch):
    from serving.leave_target_groups import METADATA_ENV

    for name, value in {"AWS_ACCESS_KEY_ID": "x", "AWS_SECRET_ACCESS_KEY": "x"}.items():
        monkeypatch.setenv(name, value)
    with mock_aws():
        vpc = boto3.client("ec2", region_name=REGION).create_vpc(CidrBlock="10.0.0.0/16")["Vpc"]["VpcId"]
        elb = boto3.client("elbv2", region_name=REGION)
        environ = {METADATA_ENV: "http://169.254.170.2/v4/0123"}
        for name, port in (("http", 8000), ("grpc", 8001)):
            arn = elb.create_target_group(Name=name, Protocol="HTTP", Port=port, VpcId=vpc, TargetType="ip")[
                "TargetGroups"
            ][0]["TargetGroupArn"]
            elb.register_targets(TargetGroupArn=arn, Targets=[{"Id": "10.0.2.100", "Port": port}])
            environ[f"TARGET_GROUP_ARN_{port}"] = arn
        yield elb, environ


def test_a_dead_engines_task_leaves_its_target_groups_under_the_shipped_task_role(task_policy, registered):
    from serving.leave_target_groups import leave_target_groups

    elb, environ = registered
    metadata = {"Networks": [{"NetworkMode": "awsvpc", "IPv4Addresses": ["10.0.2.100"]}]}
    outcomes = {}
    for name, policy in (
        ("shipped", _deregistration_only(task_policy)),
        ("without", _deregistration_only(task_policy, keep=False)),
    ):
        session = assumed_session(policy, REGION, name=name)
        with enforced():
            outcomes[name] = leave_target_groups(
                "test",
                environ,
                client_for=lambda region, session=session: session.client("elbv2", region_name=region),
                metadata=lambda uri: metadata,
            )
    assert outcomes["shipped"].ok, outcomes["shipped"].failed
    for port in (8000, 8001):
        health = elb.describe_target_health(TargetGroupArn=environ[f"TARGET_GROUP_ARN_{port}"])
        assert all(d["TargetHealth"]["State"] == "draining" for d in health["TargetHealthDescriptions"])
    assert not outcomes["without"].ok
    assert all("AccessDenied" in error for error in outcomes["without"].failed.values())
