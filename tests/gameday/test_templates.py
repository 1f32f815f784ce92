"""Control parameters come from the synthesized templates: change a value in a template and the twin
behaves differently."""

from __future__ import annotations

import itertools
from datetime import datetime, timedelta
from pathlib import Path

import pytest

from gameday import alarms
from gameday.control import FleetState
from gameday.templates import read_deployment, synthesize
from tests.gameday.template_edits import edited as edited_stack
from tests.gameday.template_edits import without_deregister_targets_grant

REPO = Path(__file__).resolve().parents[2]
REGION = "us-east-2"
PEAK = datetime.fromisoformat("2027-07-08T12:00:00-07:00")


@pytest.fixture(scope="module")
def assembly() -> Path:
    return synthesize(REPO / "config" / "prime-day.yaml")


def edited(assembly: Path, tmp_path: Path, edit, stack: str = REGION) -> Path:
    """A copy of the assembly with `edit(resources)` applied to one stack's template (the region's, or a
    cell's: `us-east-1-cell2`)."""
    return edited_stack(assembly, tmp_path, edit, stack)


def set_all(resources, kind: str, setter) -> None:
    for resource in resources.values():
        if resource["Type"] == kind:
            setter(resource["Properties"])


def launches_under_surge(assembly: Path) -> list[int]:
    """Minutes at which the inf2 fleet launched hosts, its tasks' in-flight gauge 10% above the target."""
    fleet = read_deployment(assembly).cells[REGION].fleets[0]
    state = FleetState.steady(fleet, PEAK, fleet.bounds_at(PEAK)[2])
    minutes = []
    for minute in range(90):
        events: list[str] = []
        state.schedule(minute, PEAK + timedelta(minutes=minute - 1), PEAK + timedelta(minutes=minute), events)
        state.track(minute, fleet.tracking.target * 1.1, events)
        state.step(minute, False, events)
        if any("hosts launched" in event for event in events):
            minutes.append(minute)
    return minutes


def test_the_read_parameters_are_the_templates(assembly):
    region = read_deployment(assembly).cells[REGION]
    inf2 = region.fleets[0]
    assert inf2.instance_type == "inf2.48xlarge"
    assert inf2.tracking.metric == "RequestsInFlight" and inf2.tracking.target == 48.0
    # The event's raise in force at the peak (config/prime-day.yaml: 162-243 hosts), the group's maximum
    # with the rolling deploy's 25% surge.
    assert inf2.bounds_at(PEAK) == (162, 304, 162, 243)
    # HTTPS: the front door, probed from outside (healthy in the twin until it has a fault for it).
    assert {c.kind for c in region.health_checks.values()} == {"CLOUDWATCH_METRIC", "CALCULATED", "HTTPS"}
    assert region.record_check in region.health_checks


def test_a_shorter_capacity_provider_warm_up_in_the_template_launches_hosts_in_closer_steps(
    assembly, tmp_path
):
    def warm_up(seconds: int):
        def edit(resources):
            set_all(
                resources,
                "AWS::ECS::CapacityProvider",
                lambda p: p["AutoScalingGroupProvider"]["ManagedScaling"].update(
                    InstanceWarmupPeriod=seconds
                ),
            )

        return edit

    long = launches_under_surge(edited(assembly, tmp_path / "long", warm_up(1800)))
    short = launches_under_surge(edited(assembly, tmp_path / "short", warm_up(300)))
    gaps = lambda minutes: [b - a for a, b in itertools.pairwise(minutes)]  # noqa: E731
    assert long and short
    assert len(short) > len(long)
    assert max(gaps(short)) < min(gaps(long) or [90])


def test_an_alarm_needing_more_datapoints_in_the_template_fires_later(assembly, tmp_path):
    def slow_alarm(region):
        return next(a for a in region.alarms.values() if a.metrics == ("SlowFirstToken",))

    original = slow_alarm(read_deployment(assembly).cells[REGION])

    def five_of_five(resources):
        set_all(
            resources,
            "AWS::CloudWatch::Alarm",
            lambda p: (
                p.update(EvaluationPeriods=5, DatapointsToAlarm=5)
                if p.get("MetricName") == "SlowFirstToken"
                else None
            ),
        )

    changed = slow_alarm(read_deployment(edited(assembly, tmp_path, five_of_five)).cells[REGION])
    bad_minutes = [0.0, 0.0, 0.2, 0.2, 0.2]
    assert alarms.evaluate(original, bad_minutes, alarms.OK) == alarms.ALARM
    assert alarms.evaluate(changed, bad_minutes, alarms.OK) == alarms.OK
    assert alarms.evaluate(changed, [0.2] * 5, alarms.OK) == alarms.ALARM


def test_composite_rules_and_calculated_health_checks(assembly):
    region = read_deployment(assembly).cells[REGION]
    degraded = region.composites[0]
    states = dict.fromkeys(region.alarms, alarms.OK)
    assert alarms.composite_states(region.composites, states)[degraded.logical_id] == alarms.OK
    ttft = next(key for key, alarm in region.alarms.items() if alarm.metrics == ("TimeToFirstToken",))
    assert (
        alarms.composite_states(region.composites, {**states, ttft: alarms.ALARM})[degraded.logical_id]
        == "ALARM"
    )
    # The record's calculated check fails when any one of its three children does (threshold 3 of 3).
    errors = next(key for key, alarm in region.alarms.items() if alarm.metrics == ("ServingError",))
    assert alarms.health(region.health_checks, states, {})[region.record_check]
    assert not alarms.health(region.health_checks, {**states, errors: alarms.ALARM}, {})[region.record_check]
    # No data: the checks' InsufficientDataHealthStatus (Healthy) holds.
    assert alarms.health(region.health_checks, {errors: alarms.INSUFFICIENT}, {})[region.record_check]
    # Overload is not a fault: slow first tokens page but fail no check.
    slow = next(key for key, alarm in region.alarms.items() if alarm.metrics == ("SlowFirstToken",))
    assert alarms.health(region.health_checks, {**states, slow: alarms.ALARM}, {})[region.record_check]


def test_missing_data_is_treated_as_the_alarm_says(assembly):
    region = read_deployment(assembly).cells[REGION]
    no_targets = next(a for a in region.alarms.values() if "NoHealthyTargets" in a.logical_id)
    assert no_targets.treat_missing == "breaching"
    assert alarms.evaluate(no_targets, [None, None, None], alarms.OK) == alarms.ALARM
    slow = next(a for a in region.alarms.values() if a.metrics == ("SlowFirstToken",))
    assert alarms.evaluate(slow, [None, None], alarms.ALARM) == alarms.OK  # notBreaching


def test_a_region_of_two_cells_is_two_stacks_each_read_on_its_own(assembly):
    """config/prime-day.yaml runs us-east-1 (and us-west-2) in 2 cells: each is its own stack (the first
    keeps the region's name), found under its routing name by the parameters it writes, with half the
    region's hosts, its own health check, composites and metrics namespace."""
    deployment = read_deployment(assembly)
    assert list(deployment.cells) == ["us-east-1/1", "us-east-1/2", "us-west-2/1", "us-west-2/2", "us-east-2"]
    first, second = deployment.cells["us-east-1/1"], deployment.cells["us-east-1/2"]
    assert first.region == second.region == "us-east-1"
    assert any(p.endswith("/us-east-1/cell2/routing-health-check") for p in second.parameters)
    # The event's us-east-1 bounds (inf2 289-434) split over the cells, the first taking the odd host.
    assert [f.bounds_at(PEAK)[2:] for f in (first.fleets[0], second.fleets[0])] == [(145, 217), (144, 217)]
    assert (first.metrics_namespace, second.metrics_namespace) == ("LLMServing/cell1", "LLMServing/cell2")
    assert deployment.cells["us-east-2"].metrics_namespace == "LLMServing"
    assert {c.name for c in second.composites} == {
        "shopping-assistant-us-east-1-cell2-region-degraded",
        "shopping-assistant-us-east-1-cell2-region-unfit",
    }
    tracking = second.fleets[0].tracking
    assert tracking is not None and tracking.namespace == "LLMServing/cell2"


def test_an_alarm_reading_another_namespace_than_its_cells_hosts_sees_no_data(assembly, tmp_path):
    """Each cell's hosts publish to their own namespace: an alarm of cell 2 pointed at the region's
    namespace watches nothing the twin (or AWS) would put there, so it never fires."""
    from gameday.loop import CellTwin

    def region_namespace(resources):
        set_all(
            resources,
            "AWS::CloudWatch::Alarm",
            lambda p: p.update(Namespace="LLMServing") if p.get("MetricName") == "ServingError" else None,
        )

    def error_key(deployment):
        cell = deployment.cells["us-east-1/2"]
        alarm = next(a for a in cell.alarms.values() if a.metrics == ("ServingError",))
        return CellTwin(cell, None, {}, {}).alarm_key(alarm)  # type: ignore[arg-type]

    assert error_key(read_deployment(assembly)) == "serving_error_share"
    changed = read_deployment(edited(assembly, tmp_path, region_namespace, stack="us-east-1-cell2"))
    assert error_key(changed) is None


def test_a_tracked_metric_the_twin_does_not_produce_is_refused_by_name(assembly, tmp_path):
    from gameday.templates import TemplateError

    def track_cpu(props):
        spec = props["TargetTrackingScalingPolicyConfiguration"]["CustomizedMetricSpecification"]
        spec["MetricName"] = "CPUUtilization"

    copy = edited(
        assembly, tmp_path, lambda r: set_all(r, "AWS::ApplicationAutoScaling::ScalingPolicy", track_cpu)
    )
    with pytest.raises(TemplateError, match="target tracking on CPUUtilization"):
        read_deployment(copy)


def test_recurring_scheduled_actions_are_read_from_the_template(assembly, tmp_path):
    def weekday_mornings(props):
        props.setdefault("ScheduledActions", []).append(
            {
                "ScheduledActionName": "weekday-mornings",
                "Schedule": "cron(0 9 ? * MON-FRI *)",
                "Timezone": "America/Los_Angeles",
                "ScalableTargetAction": {"MinCapacity": 7},
            }
        )

    copy = edited(
        assembly,
        tmp_path,
        lambda r: set_all(r, "AWS::ApplicationAutoScaling::ScalableTarget", weekday_mornings),
    )
    fleet = read_deployment(copy).cells[REGION].fleets[0]
    action = next(a for a in fleet.service_schedule if a.name == "weekday-mornings")
    nine_pdt = datetime.fromisoformat("2027-07-01T09:00:00-07:00")  # a Thursday, before the event
    assert action.fires(nine_pdt - timedelta(minutes=1), nine_pdt)
    assert fleet.bounds_at(nine_pdt)[2] == 7
    assert not action.fires(nine_pdt, nine_pdt + timedelta(minutes=1))  # once a day, at 9:00
    saturday_nine = nine_pdt + timedelta(days=2)
    assert not action.fires(saturday_nine - timedelta(minutes=1), saturday_nine)


def _without_target_group_variables(resources):
    for resource in resources.values():
        if resource["Type"] == "AWS::ECS::TaskDefinition":
            for container in resource["Properties"]["ContainerDefinitions"]:
                container["Environment"] = [
                    v
                    for v in container.get("Environment", [])
                    if not v["Name"].startswith("TARGET_GROUP_ARN_")
                ]


def test_a_dead_target_leaves_in_seconds_only_while_the_template_lets_the_task_deregister_itself(
    assembly, tmp_path
):
    """Both halves are read from the template: the container naming each group it is registered in, and
    the task role allowed DeregisterTargets on each. Without either, the health check alone (8 s)."""
    from gameday.dead_targets import dead_target_seconds, self_deregistration_seconds

    def fleets(path: Path):
        return read_deployment(path).cells[REGION].fleets

    assert all(f.leaves_on_death for f in fleets(assembly))
    assert {f.dead_target_seconds for f in fleets(assembly)} == {self_deregistration_seconds()}
    for number, edit in enumerate((without_deregister_targets_grant, _without_target_group_variables)):
        broken = fleets(edited(assembly, tmp_path / str(number), edit))
        assert not any(f.leaves_on_death for f in broken), edit.__name__
        assert {f.dead_target_seconds for f in broken} == {dead_target_seconds(5, 2)}, edit.__name__
    # Another region's stacks are untouched by an edit of this one.
    other = read_deployment(edited(assembly, tmp_path / "other", without_deregister_targets_grant))
    assert all(f.leaves_on_death for f in other.cells["us-west-2/1"].fleets)


def test_a_grant_on_other_resources_or_under_a_condition_is_no_grant(assembly, tmp_path):
    def elsewhere(resources):
        for resource in resources.values():
            if resource["Type"] == "AWS::IAM::Policy":
                for statement in resource["Properties"]["PolicyDocument"]["Statement"]:
                    if statement["Action"] == "elasticloadbalancing:DeregisterTargets":
                        statement["Resource"] = statement["Resource"][:1]  # one group of the two

    def conditional(resources):
        for resource in resources.values():
            if resource["Type"] == "AWS::IAM::Policy":
                for statement in resource["Properties"]["PolicyDocument"]["Statement"]:
                    if statement["Action"] == "elasticloadbalancing:DeregisterTargets":
                        statement["Condition"] = {"Bool": {"aws:ViaAWSService": "true"}}

    for number, edit in enumerate((elsewhere, conditional)):
        fleets = read_deployment(edited(assembly, tmp_path / str(number), edit)).cells[REGION].fleets
        assert not any(f.leaves_on_death for f in fleets), edit.__name__


def test_two_game_days_of_one_config_synthesizing_together_both_get_the_whole_assembly(tmp_path, monkeypatch):
    """make -j, or a CI matrix, starts two game days of one config at once: each synthesizes into a
    directory of its own, and the one that finishes second keeps the first's assembly. (The synth is a
    stand-in here that writes a manifest after both runs started: the real one takes half a minute; what
    is tested is where each writes and what each returns.)"""
    import subprocess
    import threading

    from gameday import templates

    started = threading.Barrier(2, timeout=30)
    outdirs = []

    def fake_synth(command, **_):
        outdir = Path(command[-1])
        outdirs.append(outdir)
        started.wait()  # both runs are inside their synth before either writes
        (outdir / "manifest.json").write_text("{}")
        (outdir / "tree.json").write_text(str(threading.get_ident()))
        return subprocess.CompletedProcess(command, 0, "", "")

    monkeypatch.setattr(templates.subprocess, "run", fake_synth)
    config = REPO / "config" / "prime-day.yaml"
    results = []
    runs = [threading.Thread(target=lambda: results.append(synthesize(config, tmp_path))) for _ in range(2)]
    for run in runs:
        run.start()
    for run in runs:
        run.join(timeout=60)
    assert len(set(outdirs)) == 2  # each run its own directory
    assert len(results) == 2 and results[0] == results[1]
    assert (results[0] / "manifest.json").is_file() and (results[0] / "tree.json").is_file()
    assert sorted(p.name for p in tmp_path.iterdir()) == [results[0].name]  # no partial left behind


def test_the_rolling_deployment_settings_are_the_templates(assembly, tmp_path):
    fleet = read_deployment(assembly).cells[REGION].fleets[0]
    rollout = fleet.rollout
    assert (rollout.min_healthy_percent, rollout.max_percent) == (100, 200)
    # The kit's BOUNDED_PERCENT: half the deploy surge's share of the desired count (cdk_constructs/fleet/
    # service.py failed_task_percent), within ECS's 3 to 200.
    assert rollout.breaker and rollout.breaker_rollback and rollout.failed_tasks_threshold is None
    assert (rollout.failed_tasks_percent, rollout.failed_tasks_bounded) == (12, True)
    assert rollout.alarms and all(
        alarm in read_deployment(assembly).cells[REGION].alarms for alarm in rollout.alarms
    )

    def no_breaker_threshold_or_alarms(resources):
        def edit(props):
            config = props["DeploymentConfiguration"]
            config["DeploymentCircuitBreaker"] = {"Enable": True, "Rollback": True}
            config.pop("Alarms")

        set_all(resources, "AWS::ECS::Service", edit)

    changed = read_deployment(edited(assembly, tmp_path, no_breaker_threshold_or_alarms)).cells[REGION]
    assert changed.fleets[0].rollout.failed_tasks_percent is None  # ECS's default then
    assert changed.fleets[0].rollout.alarms == () and not changed.fleets[0].rollout.alarms_rollback
