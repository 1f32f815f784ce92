"""The preflight's comparison of the AMI a cell's hosts run with the one its template boots, and the freeze
before an event: decisions on plain data, the reads against moto (Auto Scaling groups, their instances,
launch template versions, SSM parameters), and the command with moto behind those reads."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta

import boto3
import pytest
from moto import mock_aws

from ops.preflight.__main__ import main
from ops.preflight.aws import FleetGroup, fleet_groups, template_targets
from ops.preflight.checks import Freeze, Status, ami_drift, ami_drifts, ami_freeze, ami_roll_findings
from settings.serving import DEFAULT_NEURON_AMI_RELEASE
from stacks.routing_names import neuron_ami_parameter
from tests.ops.preflight.conftest import REPO
from tests.ops.preflight.test_main import DEFAULT_CONFIG, MotoWithStubbedQuotas, complete_artifacts

REGION = "us-east-1"
START = datetime(2099, 7, 8, 7, tzinfo=UTC)  # the fixture's peak-test, 2099-07-08T00:00-07:00
END = datetime(2099, 7, 10, 7, tzinfo=UTC)
STUBBED_AMI = "ami-0123456789abcdef0"  # what MotoWithStubbedQuotas's SSM answers for the pinned release


# ---- decisions --------------------------------------------------------------------------------------


def test_the_freeze_runs_from_its_hours_before_the_start_to_the_end_in_the_events_regions(peak):
    hours = peak.deploy.freeze_hours_before_event
    assert hours == 48
    begins = START - timedelta(hours=hours)
    assert ami_freeze(peak, REGION, begins - timedelta(seconds=1)) is None
    assert ami_freeze(peak, REGION, begins) == Freeze("peak-test", begins, END)
    assert ami_freeze(peak, REGION, END - timedelta(seconds=1)) is not None
    assert ami_freeze(peak, REGION, END) is None
    assert ami_freeze(peak, "eu-west-1", START) is None  # not one of the event's regions
    unfrozen = peak.model_copy(
        update={"deploy": peak.deploy.model_copy(update={"freeze_hours_before_event": 0})}
    )
    assert ami_freeze(unfrozen, REGION, START) is None


def test_hosts_on_another_ami_are_counted_per_ami():
    group = FleetGroup(
        "g", "inf2.48xlarge", "ami-new", {"i-1": "ami-old", "i-2": "ami-new", "i-3": "ami-older"}
    )
    drift = ami_drift(group, "ami-new")
    assert drift is not None and drift.stale == {"ami-old": 1, "ami-older": 1} and drift.hosts == 3
    assert ami_drift(group, "ami-x") is not None
    assert ami_drift(FleetGroup("g", "t", "ami-new", {"i-1": "ami-new"}), "ami-new") is None
    # A fleet whose template boots nothing resolvable is left out, not guessed.
    assert ami_drifts([group], {"inf2.48xlarge": None}) == []


def test_an_ami_change_is_a_warning_outside_the_freeze_and_a_shortfall_inside_it():
    drift = ami_drift(FleetGroup("g", "inf2.48xlarge", "ami-new", {"i-1": "ami-old"}), "ami-new")
    assert drift is not None
    (outside,) = ami_roll_findings(REGION, "stack", [drift], None)
    assert outside.status is Status.WARNING
    assert outside.advice == (
        "us-east-1 stack: 1 of 1 hosts of inf2.48xlarge (g): 1 run ami-old; the template boots ami-new: "
        "the deploy will roll them (canary first)"
    )
    freeze = Freeze("prime-day", START - timedelta(hours=48), END)
    (inside,) = ami_roll_findings(REGION, "stack", [drift], freeze)
    assert inside.status is Status.SHORTFALL
    assert "inside the freeze before prime-day" in inside.advice and "--roll-ami-in-freeze" in inside.advice
    (deliberate,) = ami_roll_findings(REGION, "stack", [drift], freeze, allowed=True)
    assert deliberate.status is Status.WARNING


# ---- reads against moto -------------------------------------------------------------------------------


def host_group(old: str, new: str | None, project: str = "shopping-assistant", hosts: int = 2) -> str:
    """A group with `hosts` on `old`, its launch template then moved to `new` as a deploy leaves it."""
    ec2 = boto3.client("ec2", region_name=REGION)
    autoscaling = boto3.client("autoscaling", region_name=REGION)
    template = ec2.create_launch_template(
        LaunchTemplateName="hosts", LaunchTemplateData={"ImageId": old, "InstanceType": "inf2.48xlarge"}
    )["LaunchTemplate"]["LaunchTemplateId"]
    autoscaling.create_auto_scaling_group(
        AutoScalingGroupName="hosts",
        LaunchTemplate={"LaunchTemplateId": template, "Version": "1"},
        MinSize=hosts,
        MaxSize=hosts,
        DesiredCapacity=hosts,
        VPCZoneIdentifier=ec2.describe_subnets()["Subnets"][0]["SubnetId"],
        Tags=[{"Key": "project", "Value": project, "PropagateAtLaunch": True,
               "ResourceId": "hosts", "ResourceType": "auto-scaling-group"}],
    )  # fmt: skip
    if new is not None:
        ec2.create_launch_template_version(LaunchTemplateId=template, LaunchTemplateData={"ImageId": new})
        autoscaling.update_auto_scaling_group(
            AutoScalingGroupName="hosts", LaunchTemplate={"LaunchTemplateId": template, "Version": "2"}
        )
    return "hosts"


def two_images() -> tuple[str, str]:
    found = boto3.client("ec2", region_name=REGION).describe_images(Owners=["amazon"])["Images"]
    return found[0]["ImageId"], found[1]["ImageId"]


def test_fleet_groups_read_each_hosts_ami_and_the_launch_template_versions(credentials):
    with mock_aws():
        old, new = two_images()
        host_group(old, new)
        autoscaling = boto3.client("autoscaling", region_name=REGION)
        ec2 = boto3.client("ec2", region_name=REGION)
        (group,) = fleet_groups(autoscaling, ec2, "shopping-assistant")
        assert fleet_groups(autoscaling, ec2, "another-project") == []
    assert group.name == "hosts" and group.instance_type == "inf2.48xlarge"
    assert group.template_image == new
    assert sorted(group.hosts.values()) == [old, old]


def test_template_targets_resolve_parameters_once_and_keep_ids(credentials):
    with mock_aws():
        ssm = boto3.client("ssm", region_name=REGION)
        ssm.put_parameter(Name="/test/ami", Value="ami-0aaa", Type="String")
        known: dict[str, str | None] = {}
        targets = template_targets(
            ssm, {"inf2.48xlarge": "/test/ami", "trn1.32xlarge": "ami-0bbb", "x": "/test/missing"}, known
        )
    assert targets == {"inf2.48xlarge": "ami-0aaa", "trn1.32xlarge": "ami-0bbb", "x": None}
    assert known == {"/test/ami": "ami-0aaa", "/test/missing": None}


# ---- the command ------------------------------------------------------------------------------------


class MotoAutoScaling(MotoWithStubbedQuotas):
    """The preflight's stand-in session, with Auto Scaling from moto too."""

    def client(self, service: str, region_name: str):
        if service == "autoscaling":
            return boto3.client(service, region_name=region_name)
        return super().client(service, region_name)


@pytest.fixture
def aws(credentials, monkeypatch, tmp_path):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("COLUMNS", "200")
    with mock_aws():
        complete_artifacts(DEFAULT_CONFIG)
        yield


def test_the_preflight_says_which_hosts_the_deploy_will_roll(aws, tmp_path, capsys):
    old, _ = two_images()
    host_group(old, None)
    parameter = neuron_ami_parameter(DEFAULT_NEURON_AMI_RELEASE)
    template = json.loads(
        (
            REPO / "tests/stacks/__snapshots__/test_regional_serving/test_stack_matches_snapshot.json"
        ).read_text()
    )
    assert {p.get("Default") for p in template["Parameters"].values()} >= {parameter}
    assembly = tmp_path / "cdk.out"
    assembly.mkdir()
    (assembly / "shopping-assistant-us-east-1.template.json").write_text(json.dumps(template))
    session = MotoAutoScaling({"L-1945791B": 10_000.0, "L-2C3B7624": 10_000.0})
    assert main([DEFAULT_CONFIG, "--assembly", str(assembly)], session_factory=lambda: session) == 0
    err = capsys.readouterr().err
    stack = "shopping-assistant-us-east-1"
    assert (
        f"warning: us-east-1 {stack}: 2 of 2 hosts of inf2.48xlarge (hosts): 2 run {old}; the template "
        f"boots {STUBBED_AMI}: the deploy will roll them (canary first)" in " ".join(err.split())
    )
    for stub in session.stubs:
        stub.assert_no_pending_responses()


def test_no_assembly_reads_no_groups(aws, capsys):
    """Without launch templates to compare with, the hosts are not read (the session's Auto Scaling is a
    Stubber with nothing queued: a call would fail the run)."""
    session = MotoWithStubbedQuotas({"L-1945791B": 10_000.0, "L-2C3B7624": 10_000.0})
    assert main([DEFAULT_CONFIG], session_factory=lambda: session) == 0
    assert "will roll" not in capsys.readouterr().err
