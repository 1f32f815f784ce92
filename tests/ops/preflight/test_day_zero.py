"""The preflight's day-zero checks: the network quotas every cell takes against the account's own values
less what others hold, how the orchestrator keeps one run at a time, the AMI parameter per region, every
cell's scheduled start times, and the deploy surge of every cell's group."""

from __future__ import annotations

import json

import boto3

from ops.compile import fleet_artifacts
from ops.preflight.__main__ import main
from ops.preflight.aws import LambdaConcurrency
from ops.preflight.checks import Status, concurrency_finding, scenarios, vcpus_needed
from settings import load_settings
from tests.ops.preflight.conftest import REPO
from tests.ops.preflight.test_main import MotoWithStubbedQuotas
from tests.ops.preflight.test_main import aws as aws

PRIME_DAY = str(REPO / "config" / "prime-day.yaml")
ROOMY = {"L-1945791B": 200_000.0, "L-2C3B7624": 200_000.0}  # above what Prime Day's order needs


def test_elastic_ips_held_by_others_leave_too_few_for_the_cells(aws, capsys):
    """us-east-1's two cells take 4 EIPs; the account's 5 less 2 held by something else leave 3. An EIP of
    this project's own stacks is not counted: a redeploy keeps it."""
    ec2 = boto3.client("ec2", region_name="us-east-1")
    for _ in range(2):
        ec2.allocate_address(Domain="vpc")
    ec2.allocate_address(
        Domain="vpc",
        TagSpecifications=[
            {"ResourceType": "elastic-ip", "Tags": [{"Key": "project", "Value": "shopping-assistant"}]}
        ],
    )
    session = MotoWithStubbedQuotas(ROOMY)
    assert main([PRIME_DAY], session_factory=lambda: session) == 1
    err = capsys.readouterr().err
    assert "us-east-1: 2 cell(s) x 2 NAT gateway(s), an EIP each, need 4 of EC2-VPC Elastic IPs" in err
    assert "the account has 5 with 2 in use by others, so 3" in err


def test_the_default_vpc_counts_and_a_raised_vpc_quota_is_read(aws, capsys):
    """moto, like a new account, has a default VPC and its internet gateway in each region."""
    tight = MotoWithStubbedQuotas(ROOMY, network_quotas={"L-F678F1CE": 2.0})
    assert main([PRIME_DAY], session_factory=lambda: tight) == 1
    assert (
        "need 2 of VPCs per Region (vpc L-F678F1CE), the account has 2 with 1 in use"
        in capsys.readouterr().err
    )
    raised = MotoWithStubbedQuotas(ROOMY, network_quotas={"L-F678F1CE": 10.0})
    assert main([PRIME_DAY], session_factory=lambda: raised) == 0
    assert "VPCs per Region (vpc L-F678F1CE)" in capsys.readouterr().out


def test_it_says_the_run_lock_applies_and_whether_reserved_concurrency_would_fit():
    settings = load_settings(PRIME_DAY)
    small = concurrency_finding(settings, LambdaConcurrency(limit=50, unreserved=50))
    assert small.status is Status.OK and small.check == "orchestrator: run lock (DynamoDB)"
    assert "would not fit" in small.available
    assert "would fit" in concurrency_finding(settings, LambdaConcurrency(1000, 1000)).available


def test_reserved_concurrency_in_an_account_that_cannot_spare_it_is_a_shortfall(tmp_path):
    path = tmp_path / "reserved.yaml"
    path.write_text(f"base: {PRIME_DAY}\nrouting: {{reserved_concurrency: true}}\n")
    settings = load_settings(path)
    finding = concurrency_finding(settings, LambdaConcurrency(limit=50, unreserved=50))
    assert finding.status is Status.SHORTFALL and "set routing.reserved_concurrency false" in finding.advice
    assert concurrency_finding(settings, LambdaConcurrency(1000, 1000)).status is Status.OK


def test_an_unpublished_ami_release_is_a_shortfall_in_each_region(aws, capsys):
    session = MotoWithStubbedQuotas(ROOMY, ami_published=False)
    assert main([PRIME_DAY], session_factory=lambda: session) == 1
    err = capsys.readouterr().err
    for region in ("us-east-1", "us-west-2", "us-east-2"):
        assert f"{region}: SSM parameter /aws/service/ecs/optimized-ami/amazon-linux-2023/neuron/" in err


def test_every_cells_start_times_are_checked_not_only_the_first(aws, tmp_path, capsys):
    assembly = tmp_path / "cdk.out"
    assembly.mkdir()
    late = {
        "Resources": {
            "Target": {
                "Type": "AWS::ApplicationAutoScaling::ScalableTarget",
                "Properties": {
                    "ScheduledActions": [
                        {"ScheduledActionName": "prime-day-raise", "Schedule": "at(2020-07-08T06:00:00)"}
                    ]
                },
            }
        }
    }
    (assembly / "shopping-assistant-us-east-1.template.json").write_text(json.dumps({"Resources": {}}))
    (assembly / "shopping-assistant-us-east-1-cell2.template.json").write_text(json.dumps(late))
    session = MotoWithStubbedQuotas(ROOMY)
    assert main([PRIME_DAY, "--assembly", str(assembly)], session_factory=lambda: session) == 1
    assert "shopping-assistant-us-east-1-cell2 schedules prime-day-raise" in capsys.readouterr().err


def test_each_cells_group_surges_above_its_own_share():
    """us-east-1's inf2 maximum of 434 over 2 cells: 217 + 55 and 217 + 55 hosts, not 434 + 109."""
    settings = load_settings(PRIME_DAY)
    event = next(s for s in scenarios(settings, "us-east-1") if s.name == "prime-day")
    needed = vcpus_needed(settings, "us-east-1", event)
    inf2 = 192 * ((217 + 55) + (217 + 55))
    trn1 = 128 * ((108 + 27) + (108 + 27))
    assert needed == {"L-1945791B": inf2, "L-2C3B7624": trn1}


def test_a_fleet_whose_key_has_no_manifest_is_named_and_refused(aws, capsys):
    """Hosts refuse to start without their key's artifacts; the preflight (and so `make deploy`) refuses
    first, naming each region, type and key."""
    s3 = boto3.client("s3", region_name="us-east-1")
    artifacts = [a for a in fleet_artifacts(load_settings(PRIME_DAY)) if a.instance_type == "trn1.32xlarge"]
    s3.delete_object(Bucket=artifacts[0].bucket, Key=artifacts[0].manifest_key)
    session = MotoWithStubbedQuotas(ROOMY)
    assert main([PRIME_DAY], session_factory=lambda: session) == 1
    err = capsys.readouterr().err
    for region in ("us-east-1", "us-west-2", "us-east-2"):
        assert f"{region}: trn1.32xlarge needs compiled artifacts {artifacts[0].key}" in err
    assert "inf2.48xlarge needs compiled artifacts" not in err and "make compile" in err
