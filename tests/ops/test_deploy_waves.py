"""Wave deploys: the plan and decisions as pure functions, and the whole command against moto's ECS, ELB and
CloudWatch with a stand-in for the CDK CLI (a small executable that records its arguments and writes a
cloud assembly manifest: the real CLI cannot deploy without an AWS account), on a simulated clock."""

from __future__ import annotations

import json
import subprocess
import sys
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from pathlib import Path

import boto3
import pytest
from hypothesis import given
from hypothesis import strategies as st
from moto import mock_aws

from ops.deploy_readiness import (
    TargetGroupHealth,
    breaching_window_seconds,
    cell_target_groups,
    first_whole_minute_after,
    judge_targets,
    run_metric,
    runs_since,
    stack_metric_alarms,
)
from ops.deploy_watch import WaveCheck, bake_step, first_runs_step, targets_step, watch_together
from ops.deploy_waves import (
    CELL_ALARM_DATA_SECONDS,
    CELL_DEPLOY_ESTIMATE_SECONDS,
    FIRST_RUN_TIMEOUT_SECONDS,
    GLOBAL_ALARM_DATA_SECONDS,
    GLOBAL_DEPLOY_ESTIMATE_SECONDS,
    STABLE_MARGIN_SECONDS,
    StackNames,
    Wave,
    describe_plan,
    describe_times,
    main,
    plan_hotfix,
    plan_waves,
    region_services,
    run_waves,
    service_stability,
    stable_timeout_seconds,
    stop_report,
    wave_groups,
    worst_case_seconds,
)
from ops.stack_state import NOT_CREATED, end_state, stack_status
from ops.wave import alarms_firing
from settings import load_settings

REPO = Path(__file__).resolve().parents[2]
CONFIG = str(REPO / "config" / "default.yaml")
SETTINGS = load_settings(CONFIG)
PROJECT = SETTINGS.project
REGIONS = list(SETTINGS.regions)  # us-east-1, us-west-2, us-east-2
NAMES = StackNames(f"{PROJECT}-global", {region: f"{PROJECT}-{region}" for region in REGIONS})
GLOBAL_STACK = NAMES.global_stack
HOME = SETTINGS.orchestrator_region  # where the global stack (the orchestrator) is deployed: us-west-2

FAKE_CDK = """#!{python}
# A stand-in for the CDK CLI: records each call; `synth -o DIR` writes a manifest naming the stacks in
# FAKE_CDK_STACKS and an empty template each (FAKE_CDK_SCHEDULE: "stack=ISO time" adds a scheduled action);
# `deploy` fails for the stack named in FAKE_CDK_FAIL; `diff` exits 1 for the stacks in FAKE_CDK_BROADENING.
import json, os, pathlib, sys
args = sys.argv[1:]
with open(os.environ["FAKE_CDK_LOG"], "a") as log:
    log.write(json.dumps(args) + "\\n")
if args[0] == "synth":
    out = pathlib.Path(args[args.index("-o") + 1])
    out.mkdir(parents=True)
    stacks = os.environ["FAKE_CDK_STACKS"].split(",")
    artifacts = {{name: {{"type": "aws:cloudformation:stack"}} for name in stacks}}
    (out / "manifest.json").write_text(json.dumps({{"artifacts": artifacts}}))
    scheduled, _, at = os.environ.get("FAKE_CDK_SCHEDULE", "").partition("=")
    for name in stacks:
        resources = {{}}
        if name == scheduled:
            action = {{"ScheduledActionName": "prime-day-raise", "Schedule": "at(" + at + ")"}}
            resources["Target"] = {{
                "Type": "AWS::ApplicationAutoScaling::ScalableTarget",
                "Properties": {{"ScheduledActions": [action]}},
            }}
        (out / (name + ".template.json")).write_text(json.dumps({{"Resources": resources}}))
if args[0] == "deploy" and os.environ.get("FAKE_CDK_FAIL") in args[1:]:
    sys.exit(1)
if args[0] == "diff" and args[-1] in os.environ.get("FAKE_CDK_BROADENING", "").split(","):
    print("IAM Statement Changes: +  (a broadening change)")
    sys.exit(1)
"""


@pytest.fixture
def fake_cdk(tmp_path, monkeypatch):
    script = tmp_path / "cdk"
    script.write_text(FAKE_CDK.format(python=sys.executable))
    script.chmod(0o755)
    log = tmp_path / "cdk-calls.jsonl"
    monkeypatch.setenv("FAKE_CDK_LOG", str(log))
    monkeypatch.setenv("FAKE_CDK_STACKS", ",".join([GLOBAL_STACK, *NAMES.regional.values()]))

    def calls() -> list[list[str]]:
        return [json.loads(line) for line in log.read_text().splitlines()] if log.exists() else []

    return str(script), calls


def deployed_stacks(calls: list[list[str]], assembly: str = "assembly") -> list[str]:
    """Stacks deployed from the wave's assembly (a stack created now is first deployed from the
    `assembly-first-create` one, with deletion protection off)."""
    return [
        stack
        for call in calls
        if call[0] == "deploy" and Path(call[2]).name == assembly
        for stack in (call[call.index("--concurrency") + 2 :] if "--concurrency" in call else call[-1:])
    ]


@pytest.fixture
def aws(monkeypatch):
    for name, value in {
        "AWS_ACCESS_KEY_ID": "testing",
        "AWS_SECRET_ACCESS_KEY": "testing",
        "AWS_DEFAULT_REGION": "us-east-1",
        "AWS_EC2_METADATA_DISABLED": "true",
        "MOTO_ECS_SERVICE_RUNNING": "2",  # moto starts this many of a new service's tasks
    }.items():
        monkeypatch.setenv(name, value)
    with mock_aws():
        session = boto3.Session()
        serve_global(session)
        yield session


GLOBAL_ALARM = f"{GLOBAL_STACK}-TrafficOrchestratorNotRunning1A2B3C-XYZ123"  # as CloudFormation names it
FUNCTION = f"{GLOBAL_STACK}-TrafficOrchestratorFunction-ABC123"
RUNS = {"Namespace": "AWS/Lambda", "MetricName": "Invocations"}


def serve_global(session, state: str = "OK") -> None:
    """The global stack's orchestrator alarm as deployed: named by CloudFormation after the stack, on its
    function's invocations, missing data breaching (cdk_constructs/traffic_orchestrator.py)."""
    cloudwatch = session.client("cloudwatch", region_name=HOME)
    cloudwatch.put_metric_alarm(
        AlarmName=GLOBAL_ALARM,
        **RUNS,
        Dimensions=[{"Name": "FunctionName", "Value": FUNCTION}],
        Statistic="Sum",
        Period=60,
        EvaluationPeriods=5,
        DatapointsToAlarm=3,
        Threshold=1,
        ComparisonOperator="LessThanThreshold",
        TreatMissingData="breaching",
    )
    cloudwatch.set_alarm_state(AlarmName=GLOBAL_ALARM, StateValue=state, StateReason=f"test: {state}")


class SimClock:
    """Simulated time for the waits: `sleep` advances it, `now` is wall time from the start plus it; each
    simulated minute the orchestrator runs (an Invocations datapoint, as Lambda sends it) unless stopped."""

    def __init__(self, orchestrator_runs: bool = True) -> None:
        self.start = datetime.now(UTC).replace(microsecond=0)
        self.elapsed = 0.0
        self.orchestrator_runs = orchestrator_runs
        self.hooks: list = []  # called with the elapsed seconds after each sleep

    def clock(self) -> float:
        return self.elapsed

    def now(self) -> datetime:
        return self.start + timedelta(seconds=self.elapsed)

    def sleep(self, seconds: float) -> None:
        assert seconds > 0
        self.elapsed += seconds
        if self.orchestrator_runs:
            run_orchestrator(boto3.Session(), self.now())
        for hook in self.hooks:
            hook(self.elapsed)


def run_orchestrator(session, at: datetime) -> None:
    session.client("cloudwatch", region_name=HOME).put_metric_data(
        Namespace="AWS/Lambda",
        MetricData=[
            {
                "MetricName": "Invocations",
                "Dimensions": [{"Name": "FunctionName", "Value": FUNCTION}],
                "Value": 1,
                "Unit": "Count",
                "Timestamp": at,
            }
        ],
    )


def load_balancer(session, region: str, name: str, tags: dict[str, str], targets: int = 2) -> list[str]:
    """A cell's ALB as its stack makes it (tagged like its clusters) with its HTTP and gRPC target groups,
    `targets` tasks registered in each (moto answers a registered target `healthy`). Returns the groups'
    ARNs."""
    ec2 = session.client("ec2", region_name=region)
    vpc = ec2.create_vpc(CidrBlock="10.0.0.0/16")["Vpc"]["VpcId"]
    subnets = [
        ec2.create_subnet(VpcId=vpc, CidrBlock=f"10.0.{n}.0/24", AvailabilityZone=f"{region}{zone}")[
            "Subnet"
        ]["SubnetId"]
        for n, zone in ((1, "a"), (2, "b"))
    ]
    elbv2 = session.client("elbv2", region_name=region)
    arn = elbv2.create_load_balancer(
        Name=name[:32], Subnets=subnets, Tags=[{"Key": k, "Value": v} for k, v in tags.items()]
    )["LoadBalancers"][0]["LoadBalancerArn"]
    groups = []
    for kind, port in (("http", 8000), ("grpc", 8001)):
        group = elbv2.create_target_group(
            Name=f"{name[:27]}-{kind}",
            Protocol="HTTP",
            Port=port,
            VpcId=vpc,
            TargetType="ip",
            HealthCheckIntervalSeconds=5,
            HealthCheckTimeoutSeconds=4,
            HealthyThresholdCount=2,
        )["TargetGroups"][0]["TargetGroupArn"]
        elbv2.create_listener(
            LoadBalancerArn=arn,
            Protocol="HTTP",
            Port=port,
            DefaultActions=[{"Type": "forward", "TargetGroupArn": group}],
        )
        register(session, region, group, targets)
        groups.append(group)
    return groups


def register(session, region: str, group: str, count: int, first: int = 10) -> None:
    if count:
        session.client("elbv2", region_name=region).register_targets(
            TargetGroupArn=group, Targets=[{"Id": f"10.0.1.{first + n}", "Port": 8000} for n in range(count)]
        )


def serve(
    session,
    region: str,
    *,
    unfit: str = "OK",
    degraded: str = "OK",
    alarms: bool = True,
    targets: int = 2,
) -> list[str]:
    """What a deployed region looks like to the wave: a tagged cluster with a service, its load balancer
    with `targets` healthy targets per group, and its alarms. Returns the target groups' ARNs."""
    ecs = session.client("ecs", region_name=region)
    cluster = f"{PROJECT}-{region}"
    ecs.create_cluster(clusterName=cluster, tags=[{"key": "project", "value": PROJECT}])
    ecs.register_task_definition(
        family="serving", containerDefinitions=[{"name": "serving", "image": "x", "memory": 512}]
    )
    ecs.create_service(cluster=cluster, serviceName="inf2", taskDefinition="serving", desiredCount=2)
    groups = load_balancer(session, region, f"{region}-alb", {"project": PROJECT}, targets)
    if not alarms:
        return groups
    cloudwatch = session.client("cloudwatch", region_name=region)
    unfit_name, degraded_name = f"{PROJECT}-{region}-region-unfit", f"{PROJECT}-{region}-region-degraded"
    # region-degraded is a composite alarm in the stacks; moto 5.2 has no PutCompositeAlarm, so here it is a
    # metric alarm of the same name (test_alarms_firing_reads_metric_and_composite_alarms reads both kinds).
    for name in (unfit_name, degraded_name):
        cloudwatch.put_metric_alarm(
            AlarmName=name,
            Namespace="LLMServing",
            MetricName="HealthyHosts",
            Statistic="Minimum",
            Period=60,
            EvaluationPeriods=1,
            Threshold=1,
            ComparisonOperator="LessThanThreshold",
        )
    for name, state in ((unfit_name, unfit), (degraded_name, degraded)):
        cloudwatch.set_alarm_state(AlarmName=name, StateValue=state, StateReason=f"test: {state}")
    return groups


def run(fake_cdk, tmp_path, *extra: str, sim: SimClock | None = None, config: str = CONFIG) -> int:
    """The command as the tests run it, on a simulated clock: the preflight left out (tests/ops/preflight
    test it; moto has no EC2 Service Quotas), except where a test hands `main` a preflight of its own."""
    script, _ = fake_cdk
    sim = sim or SimClock()
    return main(
        [
            config,
            "--cdk",
            script,
            "--assembly",
            str(tmp_path / "assembly"),
            "--bake-minutes",
            "0",
            "--skip-preflight",
            *extra,
        ],
        sleep=sim.sleep,
        clock=sim.clock,
        now=sim.now,
    )


# ---- the whole command -------------------------------------------------------------------------------------


def test_an_alarm_in_the_first_region_stops_the_wave_before_the_second(aws, fake_cdk, tmp_path, capsys):
    serve(aws, "us-east-1", degraded="ALARM")
    for region in REGIONS[1:]:
        serve(aws, region)

    assert run(fake_cdk, tmp_path) == 1

    _, calls = fake_cdk
    assert calls()[0][:2] == ["synth", "--quiet"]
    assert deployed_stacks(calls()) == [GLOBAL_STACK, f"{PROJECT}-us-east-1"]
    report = capsys.readouterr().err
    assert f"wave stopped at us-east-1 ({PROJECT}-us-east-1)" in report
    assert f"{PROJECT}-us-east-1-region-degraded is in ALARM: test: ALARM" in report
    deployed, pending = report.split("deployed with this change:")[1].split("not deployed")
    assert f"global: {GLOBAL_STACK}" in deployed and f"us-east-1: {PROJECT}-us-east-1" in deployed
    assert f"us-west-2: {PROJECT}-us-west-2" in pending and f"us-east-2: {PROJECT}-us-east-2" in pending
    assert 'ARGS="pin us-east-1=0 --for 2h --reason rollback"' in report
    assert f"cdk deploy --exclusively {GLOBAL_STACK} {PROJECT}-us-east-1 -c config={CONFIG}" in report


def test_quiet_regions_deploy_one_at_a_time_in_config_order_from_one_assembly(
    aws, fake_cdk, tmp_path, capsys
):
    for region in REGIONS:
        serve(aws, region)

    assert run(fake_cdk, tmp_path) == 0

    _, calls = fake_cdk
    synth, first_create_synth, *rest = calls()
    assert synth[0] == "synth" and f"config={CONFIG}" in synth and "first_create=true" not in synth
    assert "first_create=true" in first_create_synth
    assert deployed_stacks(calls()) == [GLOBAL_STACK, *(f"{PROJECT}-{region}" for region in REGIONS)]
    deploys = [call for call in rest if call[0] == "deploy"]
    assert all(
        call[2] in (str(tmp_path / "assembly"), str(tmp_path / "assembly-first-create")) for call in deploys
    )
    assert "deployed 4 waves: global, us-east-1, us-west-2, us-east-2" in capsys.readouterr().out


def test_a_region_whose_alarms_do_not_exist_is_not_taken_as_quiet(aws, fake_cdk, tmp_path, capsys):
    serve(aws, "us-east-1", alarms=False)
    assert run(fake_cdk, tmp_path) == 1
    _, calls = fake_cdk
    assert deployed_stacks(calls())[-1] == f"{PROJECT}-us-east-1"
    assert f"{PROJECT}-us-east-1-region-unfit does not exist" in capsys.readouterr().err


def test_services_that_do_not_settle_stop_the_wave(aws, fake_cdk, tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("MOTO_ECS_SERVICE_RUNNING", "1")  # 1 of 2 tasks running
    serve(aws, "us-east-1")
    assert run(fake_cdk, tmp_path, "--stable-timeout", "0") == 1
    _, calls = fake_cdk
    assert deployed_stacks(calls()) == [GLOBAL_STACK, f"{PROJECT}-us-east-1"]
    assert "not stable after 0 s: inf2: 1 of 2 tasks running" in capsys.readouterr().err


def test_a_failed_stack_deploy_stops_the_wave_and_says_it_rolled_back(
    aws, fake_cdk, tmp_path, capsys, monkeypatch
):
    for region in REGIONS:
        serve(aws, region)
    monkeypatch.setenv("FAKE_CDK_FAIL", f"{PROJECT}-us-west-2")
    assert run(fake_cdk, tmp_path) == 1
    _, calls = fake_cdk
    deployed = [call[-1] for call in calls() if call[0] == "deploy"]
    assert deployed[-1] == f"{PROJECT}-us-west-2" and f"{PROJECT}-us-east-2" not in deployed
    report = capsys.readouterr().err
    assert "cdk deploy shopping-assistant-us-west-2 failed (exit 1)" in report
    # The stack's true status, read from CloudFormation: this fake deploy never created it.
    assert (
        "us-west-2: shopping-assistant-us-west-2 (CloudFormation status NOT_CREATED: it was never created"
        in report
    )


def test_no_credentials_is_one_line_before_anything_runs(fake_cdk, tmp_path, capsys, monkeypatch):
    for name in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "AWS_PROFILE"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(tmp_path / "none"))
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "none"))
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")
    assert run(fake_cdk, tmp_path) == 2
    (line,) = capsys.readouterr().err.strip().splitlines()
    assert line.startswith("make deploy: no AWS credentials found") and "AWS_PROFILE" in line
    _, calls = fake_cdk
    assert calls() == []


def test_dry_run_prints_the_waves_and_touches_nothing(fake_cdk, tmp_path, capsys):
    assert run(fake_cdk, tmp_path, "--dry-run") == 0
    out = capsys.readouterr().out
    order = [out.index(f"{stack} (") for stack in (GLOBAL_STACK, *NAMES.regional.values())]
    assert order == sorted(order)
    assert "4 waves" in out and f"{PROJECT}-us-west-2-region-unfit" in out
    _, calls = fake_cdk
    assert calls() == []


def test_all_at_once_is_one_cdk_deploy_all(aws, fake_cdk, tmp_path):
    assert run(fake_cdk, tmp_path, "--all-at-once") == 0
    _, calls = fake_cdk
    assert calls() == [["deploy", "--all", "-c", f"config={CONFIG}"]]


def test_a_bad_config_is_the_config_error(tmp_path, capsys):
    bad = tmp_path / "bad.yaml"
    bad.write_text(f"base: {CONFIG}\ndeploy:\n  bake_minuets: 5\n")
    assert main([str(bad), "--dry-run"]) == 1
    error = capsys.readouterr().err
    assert "bad.yaml:3: deploy.bake_minuets: unknown key; did you mean 'bake_minutes'?" in error


# ---- the wave loop over time, against moto -----------------------------------------------------------------


def test_an_alarm_that_fires_during_the_bake_stops_at_that_look(aws):
    serve(aws, "us-east-1")
    waves = plan_waves(SETTINGS, NAMES)[:3]
    deployed, looks = [], []
    now = [0.0]
    cloudwatch = aws.client("cloudwatch", region_name="us-east-1")

    def sleep(seconds: float) -> None:
        now[0] += seconds
        if now[0] >= 5 * 60:  # five minutes into the bake, the region turns bad
            cloudwatch.set_alarm_state(
                AlarmName=f"{PROJECT}-us-east-1-region-unfit", StateValue="ALARM", StateReason="hosts gone"
            )

    def alarms(region, names):
        looks.append(now[0])
        return aws.client("cloudwatch", region_name=region).describe_alarms(AlarmNames=list(names))

    outcome = run_waves(
        waves,
        deploy=lambda wave: deployed.append(wave.stack),
        services=lambda region: aws.client("ecs", region_name=region).describe_services(
            cluster=f"{PROJECT}-{region}", services=["inf2"]
        )["services"],
        alarms=alarms,
        bake_minutes=15,
        poll_seconds=60,
        sleep=sleep,
        clock=lambda: now[0],
        log=lambda _: None,
    )
    assert outcome.stopped_at == waves[1] and deployed == [GLOBAL_STACK, f"{PROJECT}-us-east-1"]
    assert outcome.problems == [f"{PROJECT}-us-east-1-region-unfit is in ALARM: hosts gone"]
    assert looks == [60.0 * n for n in range(6)]  # one look a minute, stopped at the first bad one


def test_a_quiet_region_is_watched_for_the_whole_bake(aws):
    serve(aws, "us-east-1")
    now = [0.0]

    def sleep(seconds: float) -> None:
        now[0] += seconds

    outcome = run_waves(
        plan_waves(SETTINGS, NAMES)[1:2],
        deploy=lambda wave: None,
        services=lambda region: [],
        alarms=lambda region, names: aws.client("cloudwatch", region_name=region).describe_alarms(
            AlarmNames=list(names)
        ),
        bake_minutes=15,
        sleep=sleep,
        clock=lambda: now[0],
        log=lambda _: None,
    )
    assert outcome.stopped_at is None and now[0] == 15 * 60


def test_an_aws_error_while_watching_stops_the_wave(aws):
    from botocore.exceptions import ClientError

    def throttled(region, names):
        raise ClientError({"Error": {"Code": "Throttling", "Message": "Rate exceeded"}}, "DescribeAlarms")

    outcome = run_waves(
        plan_waves(SETTINGS, NAMES)[:3],
        deploy=lambda wave: None,
        services=lambda region: [],
        alarms=throttled,
        bake_minutes=15,
        log=lambda _: None,
        read_errors=(ClientError,),
    )
    assert outcome.stopped_at is not None and outcome.stopped_at.region == "us-east-1"
    assert "Throttling" in outcome.problems[0]


# ---- pure parts --------------------------------------------------------------------------------------------


def test_plan_is_global_then_regions_in_config_order_each_watching_its_own_alarms():
    waves = plan_waves(SETTINGS, NAMES)
    assert [w.stack for w in waves] == [GLOBAL_STACK, *(f"{PROJECT}-{r}" for r in REGIONS)]
    assert waves[0] == Wave(GLOBAL_STACK, home=HOME)  # its alarms are read in its own region
    for wave in waves[1:]:
        assert wave.alarms == (
            f"{PROJECT}-{wave.region}-region-unfit",
            f"{PROJECT}-{wave.region}-region-degraded",
        )
    assert "watch for 15 min" in describe_plan(waves, SETTINGS.deploy.bake_minutes)


def test_alarms_firing_reads_metric_and_composite_alarms():
    described = {
        "MetricAlarms": [{"AlarmName": "a", "StateValue": "OK"}],
        "CompositeAlarms": [{"AlarmName": "b", "StateValue": "ALARM", "StateReason": "x"}],
    }
    assert alarms_firing(described, ["a", "b", "c"]) == [
        "b is in ALARM: x",
        "c does not exist, so the region cannot be watched",
    ]
    assert (
        alarms_firing({"MetricAlarms": [{"AlarmName": "a", "StateValue": "INSUFFICIENT_DATA"}]}, ["a"]) == []
    )


def test_a_failed_rollout_is_a_stop_not_a_wait():
    service = {
        "serviceName": "inf2",
        "status": "ACTIVE",
        "desiredCount": 2,
        "runningCount": 2,
        "deployments": [{"status": "PRIMARY", "rolloutState": "FAILED", "rolloutStateReason": "alarm fired"}],
    }
    stability = service_stability([service])
    assert not stability.settled and stability.failed == (
        "inf2: rollout failed and was rolled back (alarm fired)",
    )


services = st.fixed_dictionaries(
    {
        "serviceName": st.sampled_from(["inf2", "trn1"]),
        "status": st.sampled_from(["ACTIVE", "DRAINING"]),
        "desiredCount": st.integers(0, 4),
        "runningCount": st.integers(0, 4),
        "deployments": st.lists(st.just({"status": "PRIMARY", "rolloutState": "COMPLETED"}), max_size=2),
    }
)


@given(st.lists(services, max_size=4))
def test_settled_exactly_when_every_service_is_active_with_one_deployment_and_all_tasks_running(described):
    expected = all(
        s["status"] == "ACTIVE" and len(s["deployments"]) == 1 and s["runningCount"] == s["desiredCount"]
        for s in described
    )
    assert service_stability(described).settled == expected


def test_stop_report_when_nothing_was_deployed():
    waves = plan_waves(SETTINGS, NAMES)
    from ops.deploy_waves import Outcome

    report = stop_report(Outcome(stopped_at=waves[0], problems=["cdk deploy failed"]), waves, "c.yaml")
    assert "deployed with this change:\n  nothing" in report and "nothing to roll back" in report


# ---- cells -------------------------------------------------------------------------------------------------

CELLS_CONFIG = str(REPO / "config" / "prime-day.yaml")  # us-east-1 and us-west-2 in two cells each
CELLS_SETTINGS = load_settings(CELLS_CONFIG)


def serve_cell(session, cell: str, slug: str, *, degraded: str = "OK", running: bool = True) -> None:
    """A deployed cell: its cluster tagged with the project and the cell, a service, its two alarms."""
    region = cell.split("/")[0]
    ecs = session.client("ecs", region_name=region)
    cluster = f"{PROJECT}-{slug}"
    ecs.create_cluster(
        clusterName=cluster, tags=[{"key": "project", "value": PROJECT}, {"key": "cell", "value": cell}]
    )
    ecs.register_task_definition(
        family="serving", containerDefinitions=[{"name": "serving", "image": "x", "memory": 512}]
    )
    ecs.create_service(cluster=cluster, serviceName="inf2", taskDefinition="serving", desiredCount=2)
    load_balancer(session, region, f"{slug}-alb", {"project": PROJECT, "cell": cell})
    cloudwatch = session.client("cloudwatch", region_name=region)
    for suffix, state in (("region-unfit", "OK"), ("region-degraded", degraded)):
        name = f"{PROJECT}-{slug}-{suffix}"
        cloudwatch.put_metric_alarm(
            AlarmName=name,
            Namespace="LLMServing",
            MetricName="HealthyHosts",
            Statistic="Minimum",
            Period=60,
            EvaluationPeriods=1,
            Threshold=1,
            ComparisonOperator="LessThanThreshold",
        )
        cloudwatch.set_alarm_state(AlarmName=name, StateValue=state, StateReason=f"test: {state}")


def test_waves_go_one_cell_at_a_time_each_watching_its_own_alarms():
    names = StackNames(
        GLOBAL_STACK,
        {
            "us-east-1/1": f"{PROJECT}-us-east-1",
            "us-east-1/2": f"{PROJECT}-us-east-1-cell2",
            "us-west-2/1": f"{PROJECT}-us-west-2",
            "us-west-2/2": f"{PROJECT}-us-west-2-cell2",
            "us-east-2": f"{PROJECT}-us-east-2",
        },
    )
    waves = plan_waves(CELLS_SETTINGS, names)
    assert [w.label for w in waves] == [
        "global",
        "us-east-1/1",
        "us-east-1/2",
        "us-west-2/1",
        "us-west-2/2",
        "us-east-2",
    ]
    assert waves[2].alarms == (
        f"{PROJECT}-us-east-1-cell2-region-unfit",
        f"{PROJECT}-us-east-1-cell2-region-degraded",
    )
    assert waves[2].region == "us-east-1" and waves[2].target == "us-east-1/2"
    assert "(us-east-1/2): deploy" in describe_plan(waves, 15)


def test_an_alarm_in_the_second_cell_stops_the_wave_before_the_next_region(
    aws, fake_cdk, tmp_path, capsys, monkeypatch
):
    stacks = [
        GLOBAL_STACK,
        f"{PROJECT}-us-east-1",
        f"{PROJECT}-us-east-1-cell2",
        f"{PROJECT}-us-west-2",
        f"{PROJECT}-us-west-2-cell2",
        f"{PROJECT}-us-east-2",
    ]
    monkeypatch.setenv("FAKE_CDK_STACKS", ",".join(stacks))
    serve_cell(aws, "us-east-1/1", "us-east-1-cell1")
    serve_cell(aws, "us-east-1/2", "us-east-1-cell2", degraded="ALARM")
    serve_cell(aws, "us-west-2/1", "us-west-2-cell1")
    serve_cell(aws, "us-west-2/2", "us-west-2-cell2")
    serve(aws, "us-east-2")
    script, calls = fake_cdk
    argv = [
        CELLS_CONFIG,
        "--cdk",
        script,
        "--assembly",
        str(tmp_path / "assembly"),
        "--bake-minutes",
        "0",
        "--skip-preflight",
    ]

    sim = SimClock()
    assert main(argv, sleep=sim.sleep, clock=sim.clock, now=sim.now) == 1

    assert deployed_stacks(calls()) == stacks[:3]
    report = capsys.readouterr().err
    assert f"wave stopped at us-east-1/2 ({PROJECT}-us-east-1-cell2)" in report
    assert f"{PROJECT}-us-east-1-cell2-region-degraded is in ALARM" in report
    assert 'ARGS="pin us-east-1/1=0 us-east-1/2=0 --for 2h --reason rollback"' in report
    # Each cell's wave reads its own cluster's services only.
    clusters = {s["clusterArn"].rsplit("/", 1)[-1] for s in region_services(aws, PROJECT, "us-east-1/2")}
    assert clusters == {f"{PROJECT}-us-east-1-cell2"}
    assert len({s["clusterArn"] for s in region_services(aws, PROJECT, "us-east-1")}) == 2


# ---- day zero: approval, start times, the global bake, true end states, first creation ---------------------


def deploy_calls(calls: list[list[str]]) -> list[list[str]]:
    return [call for call in calls if call[0] == "deploy"]


def test_without_approve_a_broadening_change_stops_its_wave_before_the_deploy(
    aws, fake_cdk, tmp_path, capfd, monkeypatch
):
    for region in REGIONS:
        serve(aws, region)
    monkeypatch.setenv("FAKE_CDK_BROADENING", f"{PROJECT}-us-west-2")
    assert run(fake_cdk, tmp_path) == 1
    _, calls = fake_cdk
    assert deployed_stacks(calls()) == [GLOBAL_STACK, f"{PROJECT}-us-east-1"]
    diffs = [call for call in calls() if call[0] == "diff"]
    assert all(
        "--security-only" in call and call[call.index("--fail-on") + 1] == "broadening" for call in diffs
    )
    # The CLI never waits for a terminal: changes that broaden nothing deploy without asking.
    assert all(call[call.index("--require-approval") + 1] == "broadening" for call in deploy_calls(calls()))
    report = capfd.readouterr()
    assert "IAM Statement Changes" in report.out  # the security diff, printed
    assert f"wave stopped at us-west-2 ({PROJECT}-us-west-2)" in report.err and "APPROVE=1" in report.err


def test_approve_deploys_without_asking_and_without_a_diff(aws, fake_cdk, tmp_path, monkeypatch):
    for region in REGIONS:
        serve(aws, region)
    monkeypatch.setenv("FAKE_CDK_BROADENING", ",".join(NAMES.regional.values()))
    assert run(fake_cdk, tmp_path, "--approve") == 0
    _, calls = fake_cdk
    assert not [call for call in calls() if call[0] == "diff"]
    assert all(call[call.index("--require-approval") + 1] == "never" for call in deploy_calls(calls()))


def test_a_start_time_that_passed_while_earlier_waves_ran_stops_that_wave(
    aws, fake_cdk, tmp_path, capsys, monkeypatch
):
    """The preflight checked the times hours before; us-west-2's ramp start is now minutes away."""
    for region in REGIONS:
        serve(aws, region)
    soon = (datetime.now(UTC) + timedelta(minutes=10)).strftime("%Y-%m-%dT%H:%M:%S")
    monkeypatch.setenv("FAKE_CDK_SCHEDULE", f"{PROJECT}-us-west-2={soon}")
    assert run(fake_cdk, tmp_path) == 1
    _, calls = fake_cdk
    assert deployed_stacks(calls()) == [GLOBAL_STACK, f"{PROJECT}-us-east-1"]
    report = capsys.readouterr().err
    assert f"wave stopped at us-west-2 ({PROJECT}-us-west-2)" in report and "prime-day-raise" in report
    assert "synthesize again" in report


def test_an_orchestrator_alarm_after_the_global_deploy_stops_before_any_region(
    aws, fake_cdk, tmp_path, capsys
):
    serve_global(aws, "ALARM")
    for region in REGIONS:
        serve(aws, region)
    assert run(fake_cdk, tmp_path) == 1
    _, calls = fake_cdk
    assert deployed_stacks(calls()) == [GLOBAL_STACK]
    report = capsys.readouterr().err
    assert f"wave stopped at global ({GLOBAL_STACK})" in report and f"{GLOBAL_ALARM} is in ALARM" in report


def test_a_stack_created_now_gets_deletion_protection_by_a_second_update(aws, fake_cdk, tmp_path):
    """us-east-1 exists already (a redeploy: one deploy); the others are created from the assembly without
    deletion protection, then updated from the wave's assembly."""
    for region in REGIONS:
        serve(aws, region)
    aws.client("cloudformation", region_name="us-east-1").create_stack(
        StackName=f"{PROJECT}-us-east-1",
        TemplateBody=json.dumps({"Resources": {"Topic": {"Type": "AWS::SNS::Topic"}}}),
    )
    assert run(fake_cdk, tmp_path) == 0
    _, calls = fake_cdk
    order = [(Path(call[2]).name, call[-1]) for call in deploy_calls(calls())]
    assert order == [
        ("assembly", GLOBAL_STACK),
        ("assembly", f"{PROJECT}-us-east-1"),
        ("assembly-first-create", f"{PROJECT}-us-west-2"),
        ("assembly", f"{PROJECT}-us-west-2"),
        ("assembly-first-create", f"{PROJECT}-us-east-2"),
        ("assembly", f"{PROJECT}-us-east-2"),
    ]


def test_a_failing_preflight_deploys_nothing(aws, fake_cdk, tmp_path, capsys):
    script, calls = fake_cdk
    asked = []

    def preflight(
        config, assembly, session
    ):  # a stand-in: the real preflight is tested in tests/ops/preflight
        asked.append((config, assembly))
        return 1

    argv = [CONFIG, "--cdk", script, "--assembly", str(tmp_path / "assembly"), "--bake-minutes", "0"]
    assert main(argv, preflight=preflight) == 1
    assert asked == [(CONFIG, tmp_path / "assembly")]
    assert deploy_calls(calls()) == []
    assert "nothing deployed" in capsys.readouterr().err


def test_dry_run_shows_the_whole_day_zero_sequence(fake_cdk, tmp_path, capsys):
    assert run(fake_cdk, tmp_path, "--dry-run") == 0
    out = capsys.readouterr().out
    for step in ("--strict", "cdk synth twice", "security diff", "APPROVE=1", "scheduled start times"):
        assert step in out, step
    assert (
        f"{GLOBAL_STACK} (global, {HOME}): deploy, wait up to 10 min for the orchestrator's first run" in out
    )
    assert "wait up to 135 min for stable ECS services" in out  # inf2 max 20: 4 batches of 5, 30 min each


@pytest.mark.parametrize(
    ("status", "fragment"),
    [
        ("ROLLBACK_FAILED", "its rollback failed"),
        ("UPDATE_ROLLBACK_FAILED", "continue-update-rollback --stack-name s"),
        ("ROLLBACK_COMPLETE", "delete-stack --stack-name s"),
        ("UPDATE_ROLLBACK_COMPLETE", "rolled it back to the version before"),
        ("UPDATE_IN_PROGRESS", "still in progress"),
    ],
)
def test_the_stop_report_says_what_cloudformation_really_left(status, fragment):
    waves = plan_waves(SETTINGS, NAMES)
    from ops.deploy_waves import Outcome

    outcome = Outcome(stopped_at=waves[1], problems=["cdk deploy failed"], stack_state=end_state("s", status))
    report = stop_report(outcome, waves, "c.yaml")
    assert f"CloudFormation status {status}" in report and fragment in report
    assert "CloudFormation rolled it back)" not in report or status == "UPDATE_ROLLBACK_COMPLETE"


def test_the_status_is_read_from_cloudformation(aws):
    cloudformation = aws.client("cloudformation", region_name="us-east-1")
    assert stack_status(cloudformation, "never-made") == (NOT_CREATED, "")
    cloudformation.create_stack(
        StackName="made", TemplateBody=json.dumps({"Resources": {"Topic": {"Type": "AWS::SNS::Topic"}}})
    )
    assert stack_status(cloudformation, "made")[0] == "CREATE_COMPLETE"


def test_each_cells_stability_timeout_covers_its_slowest_fleets_rolling_deploy():
    """It was 30 minutes, the cold-start budget itself: a ramp or scale-out stopped the wave falsely. At
    the Prime Day maximum (us-east-1 inf2 315 over 2 cells: 158, surge 40) a deploy takes 4 batches."""
    prime_day = load_settings(CELLS_CONFIG)
    cell = prime_day.cell("us-east-1", 1)
    budget = prime_day.serving.cold_start_budget_seconds
    assert stable_timeout_seconds(prime_day, cell) == 4 * budget + STABLE_MARGIN_SECONDS
    assert all(w.stable_timeout_seconds > budget for w in plan_waves(SETTINGS, NAMES)[1:])


# ---- a first deploy: healthy targets before the alarms, the orchestrator's first run -----------------------

CELL_NAMES = StackNames(
    GLOBAL_STACK,
    {
        "us-east-1/1": f"{PROJECT}-us-east-1",
        "us-east-1/2": f"{PROJECT}-us-east-1-cell2",
        "us-west-2/1": f"{PROJECT}-us-west-2",
        "us-west-2/2": f"{PROJECT}-us-west-2-cell2",
        "us-east-2": f"{PROJECT}-us-east-2",
    },
)
BUDGET = SETTINGS.serving.cold_start_budget_seconds


def group(name: str, *states: str) -> TargetGroupHealth:
    return TargetGroupHealth(name, states, interval_seconds=5, timeout_seconds=4, healthy_threshold=2)


def drive(step, sim: SimClock) -> list[str]:
    """One step run alone on the simulated clock, as a wave's checks run."""
    return watch_together(["w"], lambda _: [WaveCheck("step", step)], sim.sleep, sim.clock).get("w", [])


@pytest.mark.parametrize(
    ("states", "settled", "fragment"),
    [
        (("healthy", "healthy"), True, ""),
        (("healthy", "healthy", "draining"), True, ""),  # an old task leaving counts neither way
        (("healthy", "initial"), False, "http: 1 healthy of 2 tasks (1 initial)"),
        (("healthy", "healthy", "unhealthy"), False, "http: 2 healthy of 2 tasks (1 unhealthy)"),
        (("healthy", "unused"), False, "http: 1 healthy of 2 tasks (1 unused)"),
        ((), False, "http: 0 healthy of 2 tasks"),
    ],
)
def test_a_target_group_is_ready_with_a_healthy_target_per_task_and_none_pending(states, settled, fragment):
    verdict = judge_targets([group("http", *states), group("grpc", "healthy", "healthy")], tasks=2)
    assert verdict.settled is settled and not verdict.failed
    assert (verdict.waiting == ()) if settled else (verdict.waiting == (f"target group {fragment}",))


def test_no_target_group_is_a_stop_not_a_wait():
    assert judge_targets([], tasks=2).failed


def test_targets_that_turn_healthy_within_the_cold_start_pass():
    sim = SimClock(orchestrator_runs=False)
    reads = []

    def read():
        reads.append(sim.elapsed)
        state = "healthy" if sim.elapsed >= 25 * 60 else "unhealthy"
        return [group("http", state, state), group("grpc", state, state)]

    assert drive(lambda: targets_step("c", read, lambda: 2, BUDGET, 60, sim.clock, lambda _: None), sim) == []
    assert reads[-1] == 25 * 60 and sim.elapsed == 25 * 60


def test_a_target_group_never_healthy_stops_after_the_cold_start_and_its_health_checks():
    sim = SimClock(orchestrator_runs=False)

    def read():
        return [group("http", "healthy", "unhealthy"), group("grpc", "healthy", "healthy")]

    problems = drive(lambda: targets_step("c", read, lambda: 2, BUDGET, 60, sim.clock, lambda _: None), sim)
    # The budget: the cold start plus 2 passing checks 5 s apart and one 4-s timeout.
    assert sim.elapsed == BUDGET + 14
    assert problems == [
        "target group http: 1 healthy of 2 tasks (1 unhealthy), not healthy 30.2 min after its tasks ran "
        "(cold-start budget 1800 s plus the health checks' 14 s)"
    ]


def alarm_states(sim: SimClock, alarm_until: float, again_at: float | None = None):
    """A DescribeAlarms answer: region-unfit in ALARM until `alarm_until` (a breaching alarm without
    data), then OK, and in ALARM again from `again_at`."""

    def read():
        bad = sim.elapsed < alarm_until or (again_at is not None and sim.elapsed >= again_at)
        state = "ALARM" if bad else "OK"
        return {"MetricAlarms": [{"AlarmName": "unfit", "StateValue": state, "StateReason": "no data"}]}

    return read


def test_an_alarm_that_leaves_alarm_within_its_window_starts_the_bake_then():
    from ops.deploy_waves import alarm_problems

    sim = SimClock(orchestrator_runs=False)
    read = alarm_states(sim, alarm_until=3 * 60)
    step = lambda: bake_step(read, ["unfit"], alarm_problems, 15, 240, 60, sim.clock, lambda _: None)  # noqa: E731
    assert drive(step, sim) == []
    assert sim.elapsed == 3 * 60 + 15 * 60  # the bake counted from the first quiet look


def test_an_alarm_still_in_alarm_after_its_window_stops_the_wave():
    from ops.deploy_waves import alarm_problems

    sim = SimClock(orchestrator_runs=False)
    read = alarm_states(sim, alarm_until=10 * 60)
    step = lambda: bake_step(read, ["unfit"], alarm_problems, 15, 240, 60, sim.clock, lambda _: None)  # noqa: E731
    assert drive(step, sim) == [
        "unfit is in ALARM: no data (4 min after its data could begin: the alarms' evaluation window)"
    ]
    assert sim.elapsed == 240


def test_once_quiet_any_alarm_stops_the_bake_at_once():
    from ops.deploy_waves import alarm_problems

    sim = SimClock(orchestrator_runs=False)
    read = alarm_states(sim, alarm_until=60, again_at=5 * 60)
    step = lambda: bake_step(read, ["unfit"], alarm_problems, 15, 240, 60, sim.clock, lambda _: None)  # noqa: E731
    assert drive(step, sim) == ["unfit is in ALARM: no data"] and sim.elapsed == 5 * 60


def test_the_global_wave_waits_for_the_first_run_after_the_deploy():
    sim = SimClock(orchestrator_runs=False)
    asked = []

    def runs(since):
        asked.append(since)
        return 1.0 if sim.elapsed >= 3 * 60 else 0.0

    step = lambda: first_runs_step("global", runs, 600, 60, sim.now, sim.clock, lambda _: None)  # noqa: E731
    assert drive(step, sim) == [] and sim.elapsed == 3 * 60
    assert set(asked) == {first_whole_minute_after(sim.start)}


def test_no_run_after_the_deploy_stops_the_global_wave_with_what_to_read():
    sim = SimClock(orchestrator_runs=False)
    step = lambda: first_runs_step("global", lambda since: 0.0, 600, 60, sim.now, sim.clock, lambda _: None)  # noqa: E731
    (problem,) = drive(step, sim)
    assert sim.elapsed == 600
    assert (
        problem.startswith("global: no orchestrator run seen since") and "AWS/Lambda Invocations" in problem
    )


def test_only_runs_from_the_next_whole_minute_count():
    at = datetime(2026, 12, 8, 10, 0, 20, tzinfo=UTC)
    assert first_whole_minute_after(at) == datetime(2026, 12, 8, 10, 1, tzinfo=UTC)
    assert first_whole_minute_after(at.replace(second=0)) == at.replace(second=0)


def test_the_alarm_data_window_and_the_run_metric_come_from_the_stacks_own_alarms():
    alarms = [
        {"AlarmName": "a", "Period": 60, "EvaluationPeriods": 3, "TreatMissingData": "breaching"},
        {"AlarmName": "b", "Period": 60, "EvaluationPeriods": 10, "TreatMissingData": "notBreaching"},
        {
            "AlarmName": "c",
            **RUNS,
            "Dimensions": [{"Name": "FunctionName", "Value": "f"}],
            "Period": 60,
            "EvaluationPeriods": 5,
            "TreatMissingData": "breaching",
        },
    ]
    assert breaching_window_seconds(alarms[:2]) == CELL_ALARM_DATA_SECONDS == 4 * 60
    assert breaching_window_seconds(alarms) == GLOBAL_ALARM_DATA_SECONDS == 6 * 60
    assert breaching_window_seconds(alarms[1:2]) is None
    assert run_metric(alarms) == {**RUNS, "Dimensions": [{"Name": "FunctionName", "Value": "f"}]}
    assert run_metric(alarms[:2]) is None


# ---- the AWS reads, against moto ---------------------------------------------------------------------------


def test_a_cells_target_groups_are_read_from_its_own_load_balancer(aws):
    load_balancer(aws, "us-east-1", "cell1-alb", {"project": PROJECT, "cell": "us-east-1/1"}, targets=2)
    load_balancer(aws, "us-east-1", "cell2-alb", {"project": PROJECT, "cell": "us-east-1/2"}, targets=3)
    load_balancer(aws, "us-east-1", "other-alb", {"project": "someone-else"}, targets=1)
    elbv2 = aws.client("elbv2", region_name="us-east-1")

    groups = cell_target_groups(elbv2, PROJECT, "us-east-1/2")

    assert sorted(g.name for g in groups) == ["cell2-alb-grpc", "cell2-alb-http"]
    assert all(g.states == ("healthy",) * 3 and g.health_check_seconds == 14 for g in groups)
    assert judge_targets(groups, tasks=3).settled and not judge_targets(groups, tasks=4).settled
    assert len(cell_target_groups(elbv2, PROJECT, None)) == 4  # a one-cell region: the project's


def test_only_the_orchestrators_runs_after_the_deploy_are_counted(aws):
    cloudwatch = aws.client("cloudwatch", region_name=HOME)
    metric = run_metric(stack_metric_alarms(cloudwatch, GLOBAL_STACK))
    assert metric == {**RUNS, "Dimensions": [{"Name": "FunctionName", "Value": FUNCTION}]}
    since = datetime.now(UTC).replace(second=0, microsecond=0) - timedelta(minutes=10)
    run_orchestrator(aws, since - timedelta(seconds=20))  # the old function, in the deploy's last minute
    assert runs_since(cloudwatch, metric, since, since + timedelta(minutes=3)) == 0
    run_orchestrator(aws, since + timedelta(minutes=2, seconds=59))
    assert runs_since(cloudwatch, metric, since, since + timedelta(minutes=2, seconds=59)) == 1
    assert breaching_window_seconds(stack_metric_alarms(cloudwatch, GLOBAL_STACK)) == 6 * 60


def test_a_first_deploy_whose_alarms_are_in_alarm_until_its_targets_are_healthy_completes(
    aws, fake_cdk, tmp_path, capsys
):
    """The defect: ECS counts the new cell stable once its tasks run, and its region-unfit composite (the
    no-healthy-targets alarms, missing data breaching) is in ALARM until the targets are healthy and the
    alarms have data; the bake read it at once and stopped every first deploy."""
    groups = serve(aws, "us-east-1", unfit="ALARM", targets=0)
    for region in REGIONS[1:]:
        serve(aws, region)
    sim = SimClock()
    ready_at = [None]

    def model_loads(elapsed: float) -> None:
        if ready_at[0] is None and elapsed >= 20 * 60:  # the cold start ends: targets pass their checks
            ready_at[0] = elapsed
            for arn in groups:
                register(aws, "us-east-1", arn, 2)
        elif ready_at[0] is not None and elapsed >= ready_at[0] + 2 * 60:  # the alarms have data
            aws.client("cloudwatch", region_name="us-east-1").set_alarm_state(
                AlarmName=f"{PROJECT}-us-east-1-region-unfit", StateValue="OK", StateReason="data"
            )

    sim.hooks.append(model_loads)
    assert run(fake_cdk, tmp_path, sim=sim) == 0, capsys.readouterr().err
    _, calls = fake_cdk
    assert deployed_stacks(calls()) == [GLOBAL_STACK, *NAMES.regional.values()]
    out = capsys.readouterr().out
    assert "waiting for healthy targets: target group us-east-1-alb-grpc: 0 healthy of 2 tasks" in out
    assert "waiting for the alarms' data" in out


def test_a_target_group_that_never_gets_healthy_stops_the_wave_naming_it(aws, fake_cdk, tmp_path, capsys):
    serve(aws, "us-east-1", targets=1)
    sim = SimClock()
    assert run(fake_cdk, tmp_path, sim=sim) == 1
    report = capsys.readouterr().err
    assert f"wave stopped at us-east-1 ({PROJECT}-us-east-1)" in report
    assert (
        "target group us-east-1-alb-http: 1 healthy of 2 tasks, not healthy 30.2 min after its tasks ran"
        in report
    )
    assert "target group us-east-1-alb-grpc: 1 healthy of 2 tasks" in report


def test_no_orchestrator_run_after_the_global_deploy_stops_before_any_region(aws, fake_cdk, tmp_path, capsys):
    for region in REGIONS:
        serve(aws, region)
    sim = SimClock(orchestrator_runs=False)
    assert run(fake_cdk, tmp_path, sim=sim) == 1
    _, calls = fake_cdk
    assert deployed_stacks(calls()) == [GLOBAL_STACK]
    report = capsys.readouterr().err
    assert "wave stopped at global" in report and "no orchestrator run seen since" in report
    assert sim.elapsed >= FIRST_RUN_TIMEOUT_SECONDS


# ---- the hotfix path ---------------------------------------------------------------------------------------


def test_the_hotfix_path_is_global_a_canary_cell_then_one_wave_per_region():
    waves = plan_hotfix(CELLS_SETTINGS, CELL_NAMES)
    assert [[w.label for w in g] for g in wave_groups(waves)] == [
        ["global"],
        ["us-east-1/1"],
        ["us-east-1/2"],
        ["us-west-2/1", "us-west-2/2"],
        ["us-east-2"],
    ]
    # The same waves, every guard of each kept: only grouped.
    assert [replace(w, group=None) for w in waves] == plan_waves(CELLS_SETTINGS, CELL_NAMES)
    assert "us-west-2/1, us-west-2/2 together" in describe_plan(waves, 15)


def test_a_hotfix_region_deploys_its_cells_then_watches_them_side_by_side_and_any_stops_it():
    waves = plan_hotfix(CELLS_SETTINGS, CELL_NAMES)
    sim = SimClock(orchestrator_runs=False)
    events = []

    def alarms(region, names):
        events.append(("look", names[0].split("-region")[0], sim.elapsed))
        first = next(at for kind, label, at in events if kind == "look" and label in names[0])
        bad = "us-west-2-cell1" in names[0] and sim.elapsed >= first + 5 * 60  # 5 min into its bake
        return {
            "MetricAlarms": [
                {"AlarmName": n, "StateValue": "ALARM" if bad and "unfit" in n else "OK"} for n in names
            ]
        }

    outcome = run_waves(
        waves,
        deploy=lambda wave: events.append(("deploy", wave.label, sim.elapsed)),
        services=lambda target: [],
        alarms=alarms,
        bake_minutes=15,
        sleep=sim.sleep,
        clock=sim.clock,
        log=lambda _: None,
    )
    assert outcome.stopped_at is not None and outcome.stopped_at.label == "us-west-2/1"
    assert outcome.problems == [f"us-west-2/1: {PROJECT}-us-west-2-cell1-region-unfit is in ALARM"]
    deploys = [label for kind, label, _ in events if kind == "deploy"]
    assert deploys == ["global", "us-east-1/1", "us-east-1/2", "us-west-2/1", "us-west-2/2"]
    # us-west-2's cells: both deployed before either is watched, then looked at together each minute.
    west = [(label, at) for kind, label, at in events if kind == "look" and "us-west-2" in label]
    assert west[:2] == [
        (f"{PROJECT}-us-west-2-cell1", west[0][1]),
        (f"{PROJECT}-us-west-2-cell2", west[0][1]),
    ]
    report = stop_report(outcome, waves, "c.yaml")
    deployed, pending = report.split("deployed with this change:")[1].split("not deployed")
    pending = pending.split("to roll back:")[0]
    assert "us-west-2/1" in deployed and "us-west-2/2" in deployed and "us-east-2" in pending
    # Deployed before the group was watched: not "still on the version before".
    assert "us-west-2/" not in pending


def test_hotfix_on_moto_reports_which_cells_have_the_change(aws, fake_cdk, tmp_path, capsys, monkeypatch):
    stacks = [GLOBAL_STACK, *CELL_NAMES.regional.values()]
    monkeypatch.setenv("FAKE_CDK_STACKS", ",".join(stacks))
    serve_cell(aws, "us-east-1/1", "us-east-1-cell1")
    serve_cell(aws, "us-east-1/2", "us-east-1-cell2")
    serve_cell(aws, "us-west-2/1", "us-west-2-cell1")
    serve_cell(aws, "us-west-2/2", "us-west-2-cell2", degraded="ALARM")
    serve(aws, "us-east-2")
    assert run(fake_cdk, tmp_path, "--hotfix", config=CELLS_CONFIG) == 1
    _, calls = fake_cdk
    assert deployed_stacks(calls()) == stacks[:5]
    report = capsys.readouterr().err
    assert f"us-west-2/2: {PROJECT}-us-west-2-cell2-region-degraded is in ALARM" in report
    deployed = report.split("deployed with this change:")[1].split("not deployed")[0]
    assert (
        f"us-west-2/1: {PROJECT}-us-west-2" in deployed
        and f"us-west-2/2: {PROJECT}-us-west-2-cell2" in deployed
    )


def test_hotfix_and_all_at_once_contradict(fake_cdk, tmp_path, capsys):
    assert run(fake_cdk, tmp_path, "--hotfix", "--all-at-once") == 2
    assert "contradict" in capsys.readouterr().err


# ---- worst-case times --------------------------------------------------------------------------------------


def test_worst_case_times_add_each_waits_limit_and_overlap_a_groups_waits():
    bake, checks = 15, 14.0  # the health checks: 2 passes 5 s apart and a 4-s timeout
    normal = plan_waves(CELLS_SETTINGS, CELL_NAMES)
    hotfix = plan_hotfix(CELLS_SETTINGS, CELL_NAMES)
    stable = normal[1].stable_timeout_seconds
    assert all(w.stable_timeout_seconds == stable for w in normal[1:])  # 4 batches x 30 min + 15 min
    global_wave = (
        GLOBAL_DEPLOY_ESTIMATE_SECONDS + FIRST_RUN_TIMEOUT_SECONDS + GLOBAL_ALARM_DATA_SECONDS + bake * 60
    )
    waits = stable + BUDGET + checks + CELL_ALARM_DATA_SECONDS + bake * 60
    cell = CELL_DEPLOY_ESTIMATE_SECONDS + waits
    assert worst_case_seconds(normal, bake, checks) == global_wave + 5 * cell
    # The hotfix: us-west-2's two cells deploy side by side in one call, then wait side by side.
    assert worst_case_seconds(hotfix, bake, checks) == global_wave + 4 * cell
    assert (global_wave, cell) == (41 * 60, 204 * 60 + 14)
    text = describe_times(normal, hotfix, bake, checks)
    assert (
        "normal: 6 waves, worst case 17 h 43 min; hotfix (HOTFIX=1): 5 waves, worst case 14 h 18 min" in text
    )
    assert "together (deploys and waits side by side): 204" in text


def test_dry_run_prints_both_paths_worst_cases(fake_cdk, tmp_path, capsys):
    assert run(fake_cdk, tmp_path, "--dry-run", "--hotfix", config=CELLS_CONFIG) == 0
    out = capsys.readouterr().out
    assert "5 waves, each only once the one before" in out  # the plan printed: the hotfix's
    assert "normal: 6 waves, worst case" in out and "hotfix (HOTFIX=1): 5 waves, worst case" in out


def test_a_hotfix_regions_cells_roll_side_by_side_in_one_cdk_deploy(aws, fake_cdk, tmp_path, monkeypatch):
    """CloudFormation waits for an ECS service's rollout before a stack's update completes, so a cell's
    `cdk deploy` lasts its rollout: on main the hotfix path's cells were deployed one call after another and
    so rolled one after another. us-west-2's two cells now go in one call with `--concurrency 2`."""
    stacks = [GLOBAL_STACK, *CELL_NAMES.regional.values()]
    monkeypatch.setenv("FAKE_CDK_STACKS", ",".join(stacks))
    for cell in ("us-east-1/1", "us-east-1/2", "us-west-2/1", "us-west-2/2"):
        serve_cell(aws, cell, cell.replace("/", "-cell"))
    serve(aws, "us-east-2")
    assert run(fake_cdk, tmp_path, "--hotfix", config=CELLS_CONFIG) == 0
    _, calls = fake_cdk
    together = [c for c in calls() if c[0] == "deploy" and "--concurrency" in c]
    west = [CELL_NAMES.regional["us-west-2/1"], CELL_NAMES.regional["us-west-2/2"]]
    assert [c[c.index("--concurrency") + 1 :] for c in together] == [["2", *west]]
    assert deployed_stacks(calls()) == stacks


def test_a_failed_side_by_side_deploy_reports_each_cells_cloudformation_status():
    waves = plan_hotfix(CELLS_SETTINGS, CELL_NAMES)
    sim = SimClock(orchestrator_runs=False)

    def deploy_together(group):
        raise subprocess.CalledProcessError(1, ["cdk", "deploy"])

    outcome = run_waves(
        waves,
        deploy=lambda wave: None,
        deploy_together=deploy_together,
        services=lambda target: [],
        alarms=lambda region, names: {"MetricAlarms": [{"AlarmName": n, "StateValue": "OK"} for n in names]},
        bake_minutes=1,
        sleep=sim.sleep,
        clock=sim.clock,
        log=lambda _: None,
        stack_state=lambda wave: f"status of {wave.stack}",
    )
    assert outcome.stopped_at is not None and outcome.stopped_at.label == "us-west-2/1"
    assert outcome.problems[1:] == [
        f"us-west-2/1: status of {CELL_NAMES.regional['us-west-2/1']}",
        f"us-west-2/2: status of {CELL_NAMES.regional['us-west-2/2']}",
    ]
