"""The pre-destroy release against moto's ECS, Application Auto Scaling and Auto Scaling APIs."""

from __future__ import annotations

import io
from pathlib import Path

import boto3
import pytest
from moto import mock_aws

from ops.release_capacity import batches, has_tag, main, protected_instance_ids, release_region

REPO = Path(__file__).resolve().parents[2]
REGION = "us-east-1"
PROJECT = "shopping-assistant"


@pytest.fixture
def aws(monkeypatch):
    for name, value in {
        "AWS_ACCESS_KEY_ID": "testing",
        "AWS_SECRET_ACCESS_KEY": "testing",
        "AWS_DEFAULT_REGION": REGION,
        "AWS_EC2_METADATA_DISABLED": "true",
    }.items():
        monkeypatch.setenv(name, value)
    with mock_aws():
        yield boto3.Session(region_name=REGION)


def _deploy(session, project, hosts=3, service_minimum=2):
    """What a deployed region looks like to the script: tagged cluster, scaled service, protected hosts."""
    ec2 = session.client("ec2")
    ecs = session.client("ecs")
    scaling = session.client("application-autoscaling")
    autoscaling = session.client("autoscaling")
    image = ec2.describe_images()["Images"][0]["ImageId"]
    template = ec2.create_launch_template(
        LaunchTemplateName=f"{project}-hosts",
        LaunchTemplateData={"ImageId": image, "InstanceType": "t3.micro"},
    )["LaunchTemplate"]["LaunchTemplateId"]
    group = f"{project}-inf2-hosts"
    autoscaling.create_auto_scaling_group(
        AutoScalingGroupName=group,
        LaunchTemplate={"LaunchTemplateId": template, "Version": "$Latest"},
        MinSize=hosts,
        MaxSize=10,
        DesiredCapacity=hosts,
        AvailabilityZones=[f"{REGION}a"],
        NewInstancesProtectedFromScaleIn=True,
        Tags=[{"Key": "project", "Value": project, "PropagateAtLaunch": True}],
    )
    cluster = f"{project}-cluster"
    ecs.create_cluster(clusterName=cluster, tags=[{"key": "project", "value": project}])
    ecs.register_task_definition(
        family="serving", containerDefinitions=[{"name": "serving", "image": "x", "memory": 512}]
    )
    ecs.create_service(
        cluster=cluster, serviceName="inf2", taskDefinition="serving", desiredCount=service_minimum
    )
    scaling.register_scalable_target(
        ServiceNamespace="ecs",
        ResourceId=f"service/{cluster}/inf2",
        ScalableDimension="ecs:service:DesiredCount",
        MinCapacity=service_minimum,
        MaxCapacity=20,
    )
    return group, cluster


def _group(session, name):
    return session.client("autoscaling").describe_auto_scaling_groups(AutoScalingGroupNames=[name])[
        "AutoScalingGroups"
    ][0]


def test_release_scales_services_and_hosts_to_zero_and_lifts_protection(aws):
    group, cluster = _deploy(aws, PROJECT)
    assert len(protected_instance_ids(_group(aws, group))) == 3

    result = release_region(
        aws, PROJECT, REGION, timeout_seconds=5, poll_seconds=0, sleep=lambda _: None, log=lambda _: None
    )

    assert result.done and result.unprotected_instances == 3
    assert result.services == [f"{cluster}/inf2"] and result.groups == [group]
    described = _group(aws, group)
    assert (described["MinSize"], described["DesiredCapacity"]) == (0, 0)
    assert described["NewInstancesProtectedFromScaleIn"] is False
    assert described["Instances"] == []
    service = aws.client("ecs").describe_services(cluster=cluster, services=["inf2"])["services"][0]
    assert service["desiredCount"] == 0
    target = aws.client("application-autoscaling").describe_scalable_targets(ServiceNamespace="ecs")[
        "ScalableTargets"
    ][0]
    assert (target["MinCapacity"], target["MaxCapacity"]) == (0, 0)


def test_release_leaves_other_projects_alone(aws):
    other_group, other_cluster = _deploy(aws, "someone-else")
    _deploy(aws, PROJECT)

    release_region(
        aws, PROJECT, REGION, timeout_seconds=5, poll_seconds=0, sleep=lambda _: None, log=lambda _: None
    )

    described = _group(aws, other_group)
    assert (described["MinSize"], len(described["Instances"])) == (3, 3)
    assert len(protected_instance_ids(described)) == 3
    service = aws.client("ecs").describe_services(cluster=other_cluster, services=["inf2"])["services"][0]
    assert service["desiredCount"] == 2


def test_release_reports_hosts_that_outlive_the_timeout(aws, monkeypatch):
    _deploy(aws, PROJECT)
    # Hosts that never terminate: the group refuses to shrink (as a stuck lifecycle hook would).
    client = aws.client("autoscaling")
    real_client = aws.client
    monkeypatch.setattr(client, "update_auto_scaling_group", lambda **kwargs: None)
    monkeypatch.setattr(
        aws, "client", lambda name, **kw: client if name == "autoscaling" else real_client(name, **kw)
    )
    waits = []

    result = release_region(
        aws, PROJECT, REGION, timeout_seconds=0, poll_seconds=0, sleep=waits.append, log=lambda _: None
    )

    assert not result.done and result.remaining_instances == 3


def test_pure_helpers():
    assert [list(b) for b in batches(["a", "b", "c"], 2)] == [["a", "b"], ["c"]]
    assert has_tag([{"key": "project", "value": "p"}], "project", "p")
    assert has_tag([{"Key": "project", "Value": "p"}], "project", "p")
    assert not has_tag([{"Key": "project", "Value": "q"}], "project", "p")
    group = {"Instances": [{"InstanceId": "i-1", "ProtectedFromScaleIn": True}, {"InstanceId": "i-2"}]}
    assert protected_instance_ids(group) == ["i-1"]


def test_cli_refuses_a_bad_config_without_a_traceback(tmp_path, capsys):
    bad = tmp_path / "bad.yaml"
    bad.write_text("regions: {}\n")
    assert main([str(bad), "--yes"]) == 1
    error = capsys.readouterr().err
    assert "config error" in error and "Traceback" not in error


@pytest.fixture
def teardown_config(tmp_path):
    """The default config with the ALBs' deletion protection off, as the teardown asks (docs/deploying.md)."""
    path = tmp_path / "teardown.yaml"
    path.write_text(
        f"base: {REPO / 'config' / 'default.yaml'}\nload_balancer:\n  deletion_protection: false\n"
    )
    return str(path)


def test_cli_refuses_while_deletion_protection_is_on(aws, capsys):
    group, _ = _deploy(aws, PROJECT)
    assert main([str(REPO / "config" / "default.yaml"), "--yes"]) == 1
    error = capsys.readouterr().err
    assert "deletion_protection is on" in error and "nothing changed" in error
    assert _group(aws, group)["MinSize"] == 3


def test_cli_changes_nothing_unless_confirmed(aws, monkeypatch, capsys, teardown_config):
    group, _ = _deploy(aws, PROJECT)
    monkeypatch.setattr("ops.release_capacity.stdin_is_terminal", lambda: True)
    monkeypatch.setattr("builtins.input", lambda _: "no")
    assert main([teardown_config]) == 1
    assert "nothing changed" in capsys.readouterr().err
    assert _group(aws, group)["MinSize"] == 3


def test_cli_releases_every_configured_region(aws, capsys, teardown_config):
    group, _ = _deploy(aws, PROJECT)  # the default config's project, in one of its regions
    assert main([teardown_config, "--yes", "--timeout", "5"]) == 0
    assert _group(aws, group)["Instances"] == []
    output = capsys.readouterr().out
    for region in ("us-east-1", "us-west-2", "us-east-2"):
        assert f"{region}:" in output
    assert "us-east-1: 1 services and 1 host groups set to zero, 3 hosts unprotected" in output


def _no_credentials(monkeypatch, tmp_path):
    for name in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "AWS_PROFILE"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(tmp_path / "none"))
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "none"))
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")


def _never_asked(prompt=""):
    raise AssertionError("asked for confirmation")


def test_no_credentials_is_one_line_before_the_question(monkeypatch, tmp_path, capsys, teardown_config):
    _no_credentials(monkeypatch, tmp_path)
    monkeypatch.setattr("builtins.input", _never_asked)
    assert main([teardown_config]) == 2
    (line,) = capsys.readouterr().err.strip().splitlines()
    assert line.startswith("make destroy: no AWS credentials found") and "AWS_PROFILE" in line


def test_no_terminal_and_no_yes_is_one_line_and_changes_nothing(aws, monkeypatch, capsys, teardown_config):
    group, _ = _deploy(aws, PROJECT)
    monkeypatch.setattr("sys.stdin", io.StringIO(""))  # as under CI or a pipe: input() would raise EOFError
    monkeypatch.setattr("builtins.input", _never_asked)
    assert main([teardown_config]) == 1
    (line,) = capsys.readouterr().err.strip().splitlines()
    assert line == (
        "make destroy: no terminal to confirm on; run `make destroy YES=1` to confirm; nothing changed"
    )
    assert _group(aws, group)["MinSize"] == 3
