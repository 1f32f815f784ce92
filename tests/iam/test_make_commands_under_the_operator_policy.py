"""`make deploy` and `make compile` reach their AWS calls on moto with the shipped operator policy: each
command's own `main` runs on the session of a role holding the rendered policy while moto enforces IAM, and
nothing it calls is refused. The policy is widened as tests/iam/test_operator_policy.py widens it (moto
checks non-S3 requests against "*" only; the resources are asserted on the policy there).

What these runs leave to tests/iam/test_operator_policy.py, which makes those calls one by one:
- the preflight (`--skip-preflight` here: moto has no EC2 Service Quotas);
- the instance refresh's three calls: moto 5.2.5 authorizes them, then raises NotImplementedError, which
  the roll rightly does not catch, so the hosts here run their launch template's AMI and the roll reads
  them and has nothing to refresh;
- compile's ListStackResources: moto cannot list the stack (a Stubber answers it here, as in
  tests/ops/test_compile.py)."""

from __future__ import annotations

import sys
from typing import Any

import boto3
import pytest
from moto import mock_aws

from ops import compile as compile_command
from ops import deploy_waves
from ops.operator_policy import render
from settings import load_settings
from tests.iam.policies import ACCOUNT, assumed_session, enforced, suspended
from tests.iam.test_operator_policy import _recorder, widened
from tests.ops import test_compile as compiling
from tests.ops import test_deploy_waves as waves
from tests.ops.compile_fleet import compile_fleet

REGION = "us-east-1"
# The calls today's deploy added: the healthy-targets wait, the first-run wait, the AMI roll's reads.
DEPLOY_READS = {
    "elasticloadbalancing:DescribeLoadBalancers",
    "elasticloadbalancing:DescribeTags",
    "elasticloadbalancing:DescribeTargetGroups",
    "elasticloadbalancing:DescribeTargetHealth",
    "cloudwatch:GetMetricData",
    "cloudwatch:DescribeAlarms",
    "autoscaling:DescribeAutoScalingGroups",
    "ec2:DescribeInstances",
    "ec2:DescribeLaunchTemplateVersions",
}


def _refused(text: str) -> bool:
    return "AccessDenied" in text or "not authorized" in text


@pytest.fixture
def credentials(monkeypatch):
    for name, value in {
        "AWS_ACCESS_KEY_ID": "testing",
        "AWS_SECRET_ACCESS_KEY": "testing",
        "AWS_DEFAULT_REGION": REGION,
        "AWS_EC2_METADATA_DISABLED": "true",
        "MOTO_ECS_SERVICE_RUNNING": "2",  # moto starts this many of a new service's tasks
    }.items():
        monkeypatch.setenv(name, value)


def _hosts(session: Any, project: str, region: str) -> None:
    """The cell's hosts as its stack runs them: a group tagged `project`, launching its launch template,
    every host on the template's AMI (nothing to roll)."""
    ec2 = session.client("ec2", region_name=region)
    image = ec2.describe_images()["Images"][0]["ImageId"]
    template = ec2.create_launch_template(
        LaunchTemplateName=f"{project}-hosts",
        LaunchTemplateData={"ImageId": image, "InstanceType": "inf2.48xlarge"},
    )["LaunchTemplate"]["LaunchTemplateId"]
    session.client("autoscaling", region_name=region).create_auto_scaling_group(
        AutoScalingGroupName=f"{project}-{region}-FleetHostsASG-AbC123",
        LaunchTemplate={"LaunchTemplateId": template, "Version": "$Latest"},
        MinSize=2,
        MaxSize=4,
        DesiredCapacity=2,
        AvailabilityZones=[f"{region}a"],
        Tags=[{"Key": "project", "Value": project, "PropagateAtLaunch": True}],
    )


class _SimClock(waves.SimClock):
    """The deploy tests' simulated clock; the orchestrator's runs it sends (as Lambda would) are not the
    operator's calls, so they are made outside enforcement."""

    def sleep(self, seconds: float) -> None:
        with suspended():
            super().sleep(seconds)


@pytest.fixture
def fake_cdk(tmp_path, monkeypatch) -> str:
    """The deploy tests' stand-in for the CDK CLI (tests/ops/test_deploy_waves.py FAKE_CDK)."""
    script = tmp_path / "cdk"
    script.write_text(waves.FAKE_CDK.format(python=sys.executable))
    script.chmod(0o755)
    monkeypatch.setenv("FAKE_CDK_LOG", str(tmp_path / "cdk-calls.jsonl"))
    monkeypatch.setenv("FAKE_CDK_STACKS", ",".join([waves.GLOBAL_STACK, *waves.NAMES.regional.values()]))
    return str(script)


def test_make_deploy_reaches_its_aws_calls_under_the_shipped_policy(credentials, fake_cdk, tmp_path, capsys):
    settings = load_settings(waves.CONFIG)
    with mock_aws():
        setup = boto3.Session()
        waves.serve_global(setup)
        for region in waves.REGIONS:
            waves.serve(setup, region)
        _hosts(setup, settings.project, REGION)
        session = assumed_session(widened(render(settings, ACCOUNT)), REGION)
        made = _recorder(session)
        sim = _SimClock()
        with enforced():
            status = deploy_waves.main(
                [
                    waves.CONFIG,
                    *("--cdk", fake_cdk, "--assembly", str(tmp_path / "assembly")),
                    *("--bake-minutes", "1", "--skip-preflight"),
                ],
                session_factory=lambda: session,
                sleep=sim.sleep,
                clock=sim.clock,
                now=sim.now,
            )
    out, err = capsys.readouterr()
    assert not _refused(out + err), err
    assert status == 0, err
    assert f"deployed {1 + len(waves.REGIONS)} waves" in out
    assert f"{REGION}: every host runs its launch template's AMI" in out
    assert made[-1] >= DEPLOY_READS, sorted(DEPLOY_READS - made[-1])


def test_make_compile_reaches_its_aws_calls_under_the_shipped_policy(credentials, capsys):
    settings = compiling.SETTINGS
    target = compiling.TARGET
    with mock_aws():
        setup = boto3.Session()
        fleet = compile_fleet(setup, settings.project, target.region)
        compiling._manifests(setup, but=target)
        cloudformation = compiling._fleet_listing(fleet)
        session = assumed_session(widened(render(settings, ACCOUNT)), target.region)
        made = _recorder(session)
        with enforced():
            status = compile_command.main(
                [compiling.CONFIG], session_factory=lambda: compiling._StackListed(session, cloudformation)
            )
        with suspended():
            tasks = setup.client("ecs", region_name=target.region).list_tasks(
                cluster=fleet.resources["cluster"]
            )["taskArns"]
    out, err = capsys.readouterr()
    assert not _refused(out + err), err
    assert status == 0, err
    assert len(tasks) == 1 and tasks[0] in out
    assert {"s3:GetObject", "ecs:DescribeServices", "ecs:RunTask"} <= made[-1]
