"""The shipped deploy days (scenarios/gameday/*-image*.yaml and the like): the real `make deploy`
(ops/deploy_waves.py) rolls a change out through the twin on its clock, against moto holding the twin's
state, and the verdict judges the deploy beside the day's own rules.

Days that fail on today's deploy code for a defect being fixed elsewhere are strict expected failures
naming it: when the fix merges they pass, the mark fails the run, and it is removed."""

from __future__ import annotations

from pathlib import Path

import pytest

from gameday.run import Result, run_scenario

REPO = Path(__file__).resolve().parents[2]
SCENARIOS = REPO / "scenarios" / "gameday"
_results: dict[str, Result] = {}

NO_ERRORS_ALARM = (
    "no ECS deployment alarm watches the new revision's serving errors (today's only deployment alarm is the "
    "Neuron hardware-error one), so the bad revision completes in the first cell, the bake stops the waves "
    "there and nothing rolls it back: the per-revision serving-error deployment alarm fix"
)
NO_LATENCY_ALARM = (
    "nothing watches a slower revision: no deployment alarm on the new revision's serving and the cells' "
    "composites stay quiet while target tracking adds hosts, so it completes in every cell: the per-revision "
    "deployment alarm fix"
)


def result(name: str) -> Result:
    if name not in _results:
        _results[name] = run_scenario(SCENARIOS / f"{name}.yaml")
    return _results[name]


def test_a_good_image_at_the_peak_completes_unattended_within_the_dry_runs_time():
    run = result("good-image-at-peak")
    assert run.summary.verdict == "pass", run.summary.violations
    (record,) = run.deploys
    assert record.status == 0 and "deployed 6 waves" in record.output
    assert record.ended - record.started <= record.planned_minutes
    # Every cell's every fleet ran one rolling deployment, to completion, one cell after another.
    starts = [s.started for s in record.stacks]
    assert starts == sorted(starts) and len(starts) == 6
    for fleets in record.rollouts.values():
        for rollouts in fleets.values():
            assert [(r.revision, r.state) for r in rollouts] == [("v2", "COMPLETED")]
    assert run.summary.requests_lost == 0
    assert record.cpu_seconds > 0


def test_a_crashing_image_is_stopped_by_the_circuit_breaker_in_the_first_cell_and_rolled_back():
    run = result("crashing-image")
    assert run.summary.verdict == "pass", run.summary.violations
    (record,) = run.deploys
    assert record.status == 1 and "wave stopped at us-east-1/1" in record.output
    assert "UPDATE_ROLLBACK_COMPLETE" in record.output  # the stack's true status, read from moto
    first = record.rollouts["us-east-1/1"]
    for rollouts in first.values():
        assert [r.state for r in rollouts] == ["FAILED", "COMPLETED"]
        assert rollouts[0].reason.startswith("circuit breaker") and rollouts[1].rolling_back
    others = {cell: fleets for cell, fleets in record.rollouts.items() if cell != "us-east-1/1"}
    assert len(others) == 4 and not any(r for fleets in others.values() for r in fleets.values())


@pytest.mark.xfail(strict=True, reason=NO_ERRORS_ALARM)
def test_a_bad_image_at_the_peak_is_rolled_back_in_the_first_cell_within_its_budget():
    run = result("bad-image-at-peak")
    assert run.summary.verdict == "pass", run.summary.violations


def test_a_bad_image_today_stops_the_waves_in_the_first_cell_but_stays_there():
    """What the expected failure above is made of on today's code: the bake catches it in the first cell
    (no other cell gets it), nothing rolls it back."""
    run = result("bad-image-at-peak")
    (record,) = run.deploys
    assert "wave stopped at us-east-1/1" in record.output
    violations = "\n".join(run.summary.violations)
    assert "beyond the first cell" not in violations
    assert "us-east-1/1 inf2.48xlarge not rolled back" in violations


@pytest.mark.xfail(strict=True, reason=NO_LATENCY_ALARM)
def test_a_slow_image_at_the_peak_is_rolled_back_in_the_first_cell_within_its_budget():
    run = result("slow-image-at-peak")
    assert run.summary.verdict == "pass", run.summary.violations


def with_revision_serving_error_alarm(deployment):
    """Each fleet's deployment also watching a serving-error alarm scoped to the new task definition
    revision (the shape the deployment-alarm fix gives it): 5% over 3 one-minute datapoints."""
    from dataclasses import replace

    from gameday.templates import Alarm

    cells = {}
    for name, control in deployment.cells.items():
        alarm = Alarm(
            "RevisionServingErrors",
            f"{name}-revision-serving-errors",
            ("ServingError",),
            "Average",
            {"TaskDefinitionRevision": "ref:TaskDefinition"},
            60,
            3,
            3,
            0.05,
            "GreaterThanThreshold",
            "notBreaching",
            namespace=control.metrics_namespace,
        )
        fleets = tuple(
            replace(
                f,
                rollout=replace(
                    f.rollout, alarms=(*f.rollout.alarms, alarm.logical_id), alarm_bake_minutes=3
                ),
            )
            for f in control.fleets
        )
        cells[name] = replace(control, alarms={**control.alarms, alarm.logical_id: alarm}, fleets=fleets)
    return replace(deployment, cells=cells)


def test_with_a_serving_error_deployment_alarm_the_bad_image_is_rolled_back_in_the_first_cell():
    """The rehearsal can pass: given the deployment alarm the fix adds, ECS rolls the bad revision back
    inside `cdk deploy`, CloudFormation's update fails, and the waves stop in the first cell."""
    run = run_scenario(
        SCENARIOS / "bad-image-at-peak.yaml", deployment_hook=with_revision_serving_error_alarm
    )
    (record,) = run.deploys
    assert "wave stopped at us-east-1/1" in record.output and "UPDATE_ROLLBACK_COMPLETE" in record.output
    for rollouts in record.rollouts["us-east-1/1"].values():
        assert [r.state for r in rollouts] == ["FAILED", "COMPLETED"]
        assert "RevisionServingErrors" in rollouts[0].reason
    assert run.summary.verdict == "pass", run.summary.violations
    assert run.summary.requests_lost <= run.scenario.judge.lost_requests


NO_HOST_ROLL = (
    "an AMI change only updates the launch template: today's deploy replaces no host (no instance refresh, "
    "no canary), so `make deploy` completes without any host booted from the bad AMI and the event's raise "
    "boots it by the hundred in every cell: the host-roll fix (ops/host_roll.py, an instance refresh with a "
    "canary checkpoint before the event's freeze)"
)


@pytest.mark.xfail(strict=True, reason=NO_HOST_ROLL)
def test_a_bad_ami_is_caught_on_hosts_that_boot_it_before_the_events_raise():
    run = result("bad-ami-before-event")
    assert run.summary.verdict == "pass", run.summary.violations


def test_a_bad_ami_today_completes_the_deploy_and_the_raise_boots_it_everywhere():
    run = result("bad-ami-before-event")
    (record,) = run.deploys
    assert record.status == 0 and "deployed 6 waves" in record.output
    assert any("not caught: `make deploy` completed" in v for v in run.summary.violations)
    raise_minute = 180  # 23:00 PDT, the event's raise (config/prime-day.yaml: start minus its prewarm)
    served = [
        m.minute for m in run.minutes if any(row.bad_revisions.get("ami-next") for row in m.cells.values())
    ]
    assert served and served[0] > raise_minute
    cells = {n for m in run.minutes for n, row in m.cells.items() if row.bad_revisions.get("ami-next")}
    assert cells == set(run.minutes[0].cells)


NO_TARGET_WAIT = (
    "the bake reads a new cell's composites the minute its first tasks run: its no-healthy-host alarms "
    "still hold the minutes it had none, so region-unfit is in ALARM and the waves stop there: the bake fix "
    "(wait for healthy targets within the cold-start budget before watching the alarms)"
)


@pytest.mark.xfail(strict=True, reason=NO_TARGET_WAIT)
def test_a_new_cell_before_the_event_is_created_and_serving_unattended():
    run = result("new-cell-before-event")
    assert run.summary.verdict == "pass", run.summary.violations


def test_a_new_cell_today_is_created_then_stopped_in_its_bake():
    run = result("new-cell-before-event")
    (record,) = run.deploys
    created = [s for s in record.stacks if s.stack.endswith("-us-east-1-cell2")]
    assert len(created) == 2  # from the first-create assembly, then the normal one
    assert "created with its load balancer's deletion protection off" in record.output
    assert "wave stopped at us-east-1/2" in record.output
    assert "shopping-assistant-us-east-1-cell2-region-unfit is in ALARM" in record.output
    # It serves all the same once its record is healthy: the stop is the deploy's, not the cell's.
    assert any(m.cells["us-east-1/2"].served_rps > 0 for m in run.minutes)
    before = [m for m in run.minutes if m.minute < created[0].started]
    assert before and all(m.cells["us-east-1/2"].tasks == 0 for m in before)  # no stack, no task


# The deploy days that fail on today's deploy code, each for the defect named (the shipped-scenario test
# marks them too).
DEPLOY_DEFECTS = {
    "bad-image-at-peak": NO_ERRORS_ALARM,
    "slow-image-at-peak": NO_LATENCY_ALARM,
    "bad-ami-before-event": NO_HOST_ROLL,
    "new-cell-before-event": NO_TARGET_WAIT,
}
