"""Rolling a cell's hosts onto the launch template's AMI: the decisions as pure functions, the reads against
moto (Auto Scaling groups and their instances, launch template versions, SSM parameters, CloudWatch alarms).

moto 5.2.5 implements no instance refresh (StartInstanceRefresh, DescribeInstanceRefreshes,
CancelInstanceRefresh are not in its Auto Scaling backend), so those three calls go to a botocore Stubber
with answers shaped like the API reference's, through a client that sends every other Auto Scaling call
to moto."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import boto3
import pytest
from botocore.stub import Stubber
from moto import mock_aws

from ops.deploy_waves import StackNames, Wave, plan_waves, run_waves
from ops.host_roll import (
    FREEZE_FLAG,
    RollPolicy,
    freeze_problems,
    judge,
    refresh_request,
    roll_policy,
    roll_timeout_seconds,
    roll_wave,
)
from ops.preflight.assembly import launch_template_images
from settings import load_settings

REPO = Path(__file__).resolve().parents[2]
DEFAULT = load_settings(REPO / "config" / "default.yaml")
PEAK = load_settings(REPO / "tests" / "fixtures" / "peak-event.yaml")  # peak-test: 2099-07-08 07:00Z
PROJECT = DEFAULT.project
REGION = "us-east-1"
UNFIT = f"{PROJECT}-{REGION}-region-unfit"
DEGRADED = f"{PROJECT}-{REGION}-region-degraded"
WAVE = Wave(f"{PROJECT}-{REGION}", REGION, (UNFIT, DEGRADED))
REFRESH_CALLS = frozenset(
    {"start_instance_refresh", "describe_instance_refreshes", "cancel_instance_refresh"}
)
AMI_PARAMETER = "/test/neuron/image_id"  # AWS reserves /aws/ names: a parameter of our own stands in
POLICY = RollPolicy(canary_percent=5, checkpoint_delay_seconds=900, instance_warmup_seconds=1800,
                    max_healthy_percent=125)  # fmt: skip


# ---- pure --------------------------------------------------------------------------------------------


def test_a_refresh_launches_before_it_terminates_and_pauses_after_a_canary():
    request = refresh_request("hosts-inf2", roll_policy(DEFAULT, bake_minutes=15))
    preferences = request["Preferences"]
    assert request["AutoScalingGroupName"] == "hosts-inf2" and "DesiredConfiguration" not in request
    assert preferences["MinHealthyPercentage"] == 100  # never fewer hosts in service than wanted
    assert preferences["MaxHealthyPercentage"] == 100 + DEFAULT.serving.deployment.max_surge_percent
    assert preferences["CheckpointPercentages"] == [5, 100]
    # The canary's task cold-starts after its host is counted replaced, then bakes: on main the pause was the
    # bake alone, over before a bad AMI's canary had served long enough to trip an alarm.
    assert preferences["CheckpointDelay"] == DEFAULT.serving.cold_start_budget_seconds + 15 * 60
    assert preferences["InstanceWarmup"] == DEFAULT.serving.cold_start_budget_seconds
    # Managed termination protection protects every host with a task: Wait would never move.
    assert preferences["ScaleInProtectedInstances"] == "Refresh"


def test_judge_stops_on_an_alarm_a_failed_refresh_or_the_time_run_out():
    running = {"InstanceRefreshId": "r-1", "Status": "InProgress", "PercentageComplete": 5,
               "InstancesToUpdate": 19, "StatusReason": "Waiting for checkpoint"}  # fmt: skip
    assert judge({"g": running}, [], overdue=False).problems == ()
    assert not judge({"g": running}, [], overdue=False).done
    assert judge({"g": running}, ["x is in ALARM"], overdue=False).problems == ("x is in ALARM",)
    failed = {"InstanceRefreshId": "r-1", "Status": "Failed", "StatusReason": "launch failed"}
    assert judge({"g": failed}, [], overdue=False).problems == (
        "g: instance refresh r-1 is Failed: launch failed",
    )
    assert "still rolling after the time allowed" in judge({"g": running}, [], overdue=True).problems[0]
    assert judge({"g": {"Status": "Successful"}}, [], overdue=True).done


def test_the_time_allowed_covers_every_batch_of_the_surge_and_the_canary_pause():
    # 20 hosts, 25% (5 hosts) at a time: 4 batches plus the canary, each a warm-up and a launch margin.
    assert roll_timeout_seconds(20, POLICY) == 5 * (1800 + 15 * 60) + 900


def test_the_synthesized_template_names_the_ami_parameter_per_fleet():
    import json

    template = json.loads(
        (
            REPO / "tests/stacks/__snapshots__/test_regional_serving/test_stack_matches_snapshot.json"
        ).read_text()
    )
    images = launch_template_images(template)
    assert set(images) == {"inf2.48xlarge", "trn1.32xlarge"}
    assert all(name.startswith("/aws/service/ecs/optimized-ami/") for name in images.values())


# ---- moto, with a Stubber for the instance refresh calls -----------------------------------------------


class RefreshClient:
    """An Auto Scaling client: the instance refresh calls to a Stubber, the rest to moto."""

    def __init__(self, moto_client: Any, stubbed: Any) -> None:
        self._moto, self._stubbed = moto_client, stubbed

    def __getattr__(self, name: str) -> Any:
        return getattr(self._stubbed if name in REFRESH_CALLS else self._moto, name)


class Session:
    def __init__(self) -> None:
        self.real = boto3.Session()
        self.stubbed = boto3.client("autoscaling", region_name=REGION)
        self.stub = Stubber(self.stubbed)
        self.stub.activate()

    def client(self, service: str, region_name: str) -> Any:
        client = self.real.client(service, region_name=region_name)
        return RefreshClient(client, self.stubbed) if service == "autoscaling" else client


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
        yield Session()


def images(session: Session) -> tuple[str, str]:
    found = session.real.client("ec2", region_name=REGION).describe_images(Owners=["amazon"])["Images"]
    return found[0]["ImageId"], found[1]["ImageId"]


def fleet(session: Session, old: str, new: str | None, hosts: int = 2, cell: str | None = None) -> str:
    """A fleet's group with `hosts` on `old`; with `new`, its launch template then moved to boot `new` (as
    a deploy leaves it: no host replaced)."""
    ec2 = session.real.client("ec2", region_name=REGION)
    autoscaling = session.real.client("autoscaling", region_name=REGION)
    name = f"hosts-{cell or 'one'}"
    template = ec2.create_launch_template(
        LaunchTemplateName=f"{name}-template",
        LaunchTemplateData={"ImageId": old, "InstanceType": "inf2.48xlarge"},
    )["LaunchTemplate"]["LaunchTemplateId"]
    subnet = ec2.describe_subnets()["Subnets"][0]["SubnetId"]
    tags = [{"Key": "project", "Value": PROJECT, "PropagateAtLaunch": True}]
    if cell:
        tags.append({"Key": "cell", "Value": cell, "PropagateAtLaunch": True})
    autoscaling.create_auto_scaling_group(
        AutoScalingGroupName=name,
        LaunchTemplate={"LaunchTemplateId": template, "Version": "1"},
        MinSize=hosts,
        MaxSize=hosts + 1,
        DesiredCapacity=hosts,
        VPCZoneIdentifier=subnet,
        Tags=[{**tag, "ResourceId": name, "ResourceType": "auto-scaling-group"} for tag in tags],
    )
    if new is not None:
        ec2.create_launch_template_version(LaunchTemplateId=template, LaunchTemplateData={"ImageId": new})
        autoscaling.update_auto_scaling_group(
            AutoScalingGroupName=name, LaunchTemplate={"LaunchTemplateId": template, "Version": "2"}
        )
    return name


def alarms(session: Session, state: str = "OK") -> Any:
    cloudwatch = session.real.client("cloudwatch", region_name=REGION)
    for name in (UNFIT, DEGRADED):
        cloudwatch.put_metric_alarm(
            AlarmName=name, Namespace="x", MetricName="y", Statistic="Sum", Period=60, EvaluationPeriods=1,
            Threshold=1, ComparisonOperator="GreaterThanThreshold",
        )  # fmt: skip
        cloudwatch.set_alarm_state(AlarmName=name, StateValue=state, StateReason="test")
    return cloudwatch


def expect_start(session: Session, group: str, refresh_id: str = "r-1") -> None:
    session.stub.add_response(
        "start_instance_refresh",
        {"InstanceRefreshId": refresh_id},
        refresh_request(group, POLICY),
    )


def expect_status(session: Session, group: str, status: str, refresh_id: str = "r-1", **extra: Any) -> None:
    refresh = {"InstanceRefreshId": refresh_id, "AutoScalingGroupName": group, "Status": status, **extra}
    session.stub.add_response(
        "describe_instance_refreshes",
        {"InstanceRefreshes": [refresh]},
        {"AutoScalingGroupName": group, "InstanceRefreshIds": [refresh_id]},
    )


class Clock:
    def __init__(self, on_sleep=None) -> None:
        self.now = 0.0
        self.on_sleep = on_sleep

    def sleep(self, seconds: float) -> None:
        self.now += seconds
        if self.on_sleep:
            self.on_sleep(self.now)

    def __call__(self) -> float:
        return self.now


def roll(session: Session, clock: Clock, log: list[str] | None = None) -> list[str]:
    return roll_wave(
        session, DEFAULT, WAVE, POLICY, poll_seconds=60, sleep=clock.sleep, clock=clock,
        log=(log.append if log is not None else lambda _: None),
    )  # fmt: skip


def test_hosts_already_on_the_templates_ami_start_no_refresh(aws):
    old, _ = images(aws)
    fleet(aws, old, None)
    log: list[str] = []
    assert roll(aws, Clock(), log) == []  # the Stubber has no answer queued: a refresh call would raise
    assert log == [f"{REGION}: every host runs its launch template's AMI"]


def test_a_canary_that_trips_an_alarm_cancels_the_refresh_and_stops_the_wave(aws):
    old, new = images(aws)
    group = fleet(aws, old, new, hosts=4)
    cloudwatch = alarms(aws)
    expect_start(aws, group)
    expect_status(aws, group, "InProgress", PercentageComplete=0, InstancesToUpdate=4)
    expect_status(aws, group, "InProgress", PercentageComplete=25, InstancesToUpdate=3,
                  StatusReason="Waiting for checkpoint")  # fmt: skip
    expect_status(aws, group, "InProgress", PercentageComplete=25, InstancesToUpdate=3)
    aws.stub.add_response(
        "cancel_instance_refresh", {"InstanceRefreshId": "r-1"}, {"AutoScalingGroupName": group}
    )

    def canary_fails(now: float) -> None:
        if now >= 120:  # the canary's Neuron runtime does not start
            cloudwatch.set_alarm_state(AlarmName=UNFIT, StateValue="ALARM", StateReason="runtime failures")

    clock = Clock(canary_fails)
    problems = roll(aws, clock)
    assert problems[0] == f"{UNFIT} is in ALARM: runtime failures"
    assert f"cancelled the instance refresh of {group}: hosts already replaced keep {new}" in problems[1]
    assert "revert container.neuron_ami_release" in problems[1]
    assert clock.now == 120
    aws.stub.assert_no_pending_responses()


def test_a_refresh_that_succeeds_lets_the_wave_go_on(aws):
    old, new = images(aws)
    group = fleet(aws, old, new)
    alarms(aws)
    expect_start(aws, group)
    expect_status(aws, group, "InProgress", PercentageComplete=50, InstancesToUpdate=1)
    expect_status(aws, group, "Successful", PercentageComplete=100, InstancesToUpdate=0)
    log: list[str] = []
    assert roll(aws, Clock(), log) == []
    assert f"2 of 2 hosts of inf2.48xlarge ({group}): 2 run {old}; the template boots {new}" in log[0]
    assert log[-1] == f"{REGION}: every host replaced ({group})"
    aws.stub.assert_no_pending_responses()


def test_a_failed_refresh_stops_the_wave_with_what_aws_said(aws):
    old, new = images(aws)
    group = fleet(aws, old, new)
    alarms(aws)
    expect_start(aws, group)
    expect_status(aws, group, "Failed", StatusReason="Instance i-1 failed its health checks")
    # A refresh that has ended has nothing left to cancel.
    aws.stub.add_client_error(
        "cancel_instance_refresh",
        "ActiveInstanceRefreshNotFound",
        expected_params={"AutoScalingGroupName": group},
    )
    problems = roll(aws, Clock())
    assert problems[0] == f"{group}: instance refresh r-1 is Failed: Instance i-1 failed its health checks"
    assert len(problems) == 2 and problems[1].startswith("cancelled the instance refresh")


def test_a_refresh_already_running_is_a_stop_not_a_second_refresh(aws):
    old, new = images(aws)
    group = fleet(aws, old, new)
    aws.stub.add_client_error(
        "start_instance_refresh", "InstanceRefreshInProgress", "An Instance Refresh is already in progress",
        expected_params=refresh_request(group, POLICY),
    )  # fmt: skip
    problems = roll(aws, Clock())
    assert problems == [
        f"{group}: cannot start an instance refresh: InstanceRefreshInProgress: "
        "An Instance Refresh is already in progress"
    ]


def test_only_the_waves_cell_is_rolled(aws):
    old, new = images(aws)
    fleet(aws, old, new, cell="us-east-1/2")
    log: list[str] = []
    cell_one = Wave(f"{PROJECT}-{REGION}", REGION, (UNFIT, DEGRADED), cell="us-east-1/1")
    assert roll_wave(aws, DEFAULT, cell_one, POLICY, poll_seconds=60, sleep=Clock().sleep, clock=Clock(),
                     log=log.append) == []  # fmt: skip
    assert log == ["us-east-1/1: every host runs its launch template's AMI"]


# ---- the freeze before an event ---------------------------------------------------------------------


def assembly_with(tmp_path: Path, stack: str, parameter: str) -> Path:
    import json

    template = {
        "Parameters": {
            "AmiParameter": {"Type": "AWS::SSM::Parameter::Value<AWS::EC2::Image::Id>", "Default": parameter}
        },
        "Resources": {
            "HostsLaunchTemplate": {
                "Type": "AWS::EC2::LaunchTemplate",
                "Properties": {
                    "LaunchTemplateData": {
                        "ImageId": {"Ref": "AmiParameter"},
                        "InstanceType": "inf2.48xlarge",
                    }
                },
            }
        },
    }
    (tmp_path / f"{stack}.template.json").write_text(json.dumps(template))
    return tmp_path


IN_FREEZE = datetime(2099, 7, 7, 12, tzinfo=UTC)  # 19 hours before peak-test starts
PEAK_WAVE = Wave(f"{PEAK.project}-{REGION}", REGION, (UNFIT, DEGRADED))


def test_an_ami_change_inside_the_freeze_stops_the_wave_before_its_deploy(aws, tmp_path):
    old, new = images(aws)
    fleet(aws, old, None)
    aws.real.client("ssm", region_name=REGION).put_parameter(Name=AMI_PARAMETER, Value=new, Type="String")
    assembly = assembly_with(tmp_path, PEAK_WAVE.stack, AMI_PARAMETER)
    problems = freeze_problems(aws, PEAK, assembly, PEAK_WAVE, IN_FREEZE, allowed=False)
    assert f"2 of 2 hosts of inf2.48xlarge (hosts-one): 2 run {old}; the template boots {new}" in problems[0]
    assert (
        "inside the freeze before peak-test (2099-07-06 07:00 UTC until 2099-07-10 07:00 UTC)" in problems[1]
    )
    assert "deploy it after 2099-07-10 07:00 UTC" in problems[1] and FREEZE_FLAG in problems[1]
    assert freeze_problems(aws, PEAK, assembly, PEAK_WAVE, IN_FREEZE, allowed=True) == []
    before = IN_FREEZE - timedelta(hours=48)
    assert freeze_problems(aws, PEAK, assembly, PEAK_WAVE, before, allowed=False) == []


def test_the_same_ami_inside_the_freeze_deploys(aws, tmp_path):
    old, _ = images(aws)
    fleet(aws, old, None)
    aws.real.client("ssm", region_name=REGION).put_parameter(Name=AMI_PARAMETER, Value=old, Type="String")
    assembly = assembly_with(tmp_path, PEAK_WAVE.stack, AMI_PARAMETER)
    assert freeze_problems(aws, PEAK, assembly, PEAK_WAVE, IN_FREEZE, allowed=False) == []


# ---- the hook in run_waves -----------------------------------------------------------------------------


def test_a_problem_after_stable_stops_the_cells_wave_before_its_bake():
    names = StackNames(f"{PROJECT}-global", {region: f"{PROJECT}-{region}" for region in DEFAULT.regions})
    waves = plan_waves(DEFAULT, names)[:3]
    rolled, baked = [], []

    def after_stable(wave: Wave) -> list[str]:
        rolled.append(wave.label)
        return ["canary in ALARM"]

    outcome = run_waves(
        waves,
        deploy=lambda wave: None,
        services=lambda target: [],
        alarms=lambda region, names: baked.append(region) or {},
        bake_minutes=15,
        sleep=lambda seconds: None,
        clock=lambda: 0.0,
        log=lambda _: None,
        after_stable=after_stable,
    )
    assert rolled == [REGION]  # not the global stack: it runs no hosts
    assert outcome.stopped_at == waves[1] and outcome.problems == ["canary in ALARM"]
    assert baked == []


def test_make_deploy_passes_the_freeze_flag_to_its_preflight(monkeypatch, tmp_path):
    """Rolled deliberately, the preflight's freeze finding must not stop the deploy that was asked for."""
    import ops.preflight.__main__ as preflight
    from ops.deploy_waves import _run_preflight

    seen: list[list[str]] = []
    monkeypatch.setattr(preflight, "main", lambda argv, session_factory: seen.append(argv) or 0)
    _run_preflight("c.yaml", tmp_path, object(), roll_ami_in_freeze=True)
    _run_preflight("c.yaml", tmp_path, object())
    assert seen == [
        ["c.yaml", "--assembly", str(tmp_path), FREEZE_FLAG],
        ["c.yaml", "--assembly", str(tmp_path)],
    ]


def test_a_fleet_with_no_host_yet_is_frozen_on_its_launch_templates_ami(aws, tmp_path):
    """The event's raise would launch every one of its hosts on the new AMI: a change all the same."""
    old, new = images(aws)
    fleet(aws, old, None, hosts=0)
    aws.real.client("ssm", region_name=REGION).put_parameter(Name=AMI_PARAMETER, Value=new, Type="String")
    assembly = assembly_with(tmp_path, PEAK_WAVE.stack, AMI_PARAMETER)
    problems = freeze_problems(aws, PEAK, assembly, PEAK_WAVE, IN_FREEZE, allowed=False)
    assert (
        problems[0]
        == f"{REGION}: hosts-one (inf2.48xlarge) launches {old}; this deploy makes it launch {new}"
    )
    assert len(problems) == 2
