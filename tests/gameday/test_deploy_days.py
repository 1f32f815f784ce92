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


def _stopped_and_rolled_back_in_the_first_cell(run: Result, judge: str) -> None:
    """The deploy stops in us-east-1/1, whose fleets' deployments ECS failed on `judge` (a deployment
    alarm of the new revision) and rolled back; no other cell got the revision."""
    (record,) = run.deploys
    assert record.status == 1 and "wave stopped at us-east-1/1" in record.output
    assert "UPDATE_ROLLBACK_COMPLETE" in record.output  # CloudFormation's update failed with the rollout
    for rollouts in record.rollouts["us-east-1/1"].values():
        assert [r.state for r in rollouts] == ["FAILED", "COMPLETED"]
        assert rollouts[0].reason.startswith("deployment alarm") and judge in rollouts[0].reason
        assert rollouts[1].rolling_back
    others = {cell: fleets for cell, fleets in record.rollouts.items() if cell != "us-east-1/1"}
    assert others and not any(r for fleets in others.values() for r in fleets.values())
    assert run.summary.requests_lost <= run.scenario.judge.lost_requests


def test_a_bad_image_at_the_peak_is_rolled_back_in_the_first_cell_within_its_budget():
    """On main before the per-revision serving-error deployment alarm, the bad revision completed in the
    first cell; the bake stopped the waves there and nothing rolled it back."""
    run = result("bad-image-at-peak")
    assert run.summary.verdict == "pass", run.summary.violations
    _stopped_and_rolled_back_in_the_first_cell(run, "NewRevisionErrorShare")


def test_a_slow_image_at_the_peak_is_rolled_back_in_the_first_cell_within_its_budget():
    """On main a half-speed revision failed nothing and passed every health check: it reached every cell
    while target tracking added hosts for it. The late-first-token deployment alarm rolls it back."""
    run = result("slow-image-at-peak")
    assert run.summary.verdict == "pass", run.summary.violations
    _stopped_and_rolled_back_in_the_first_cell(run, "NewRevisionSlowShare")


NO_HOST_ROLL = (
    "the twin does not model the deploy's host roll yet: ops/host_roll.py reads each cell's Auto Scaling "
    "groups and rolls them with an instance refresh, but the twin holds no group in moto and answers no "
    "refresh (moto 5.2.5 lacks StartInstanceRefresh), so `make deploy` finds no host to roll and completes; "
    "the event's raise then boots the AMI in every cell"
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


NEW_CELL_OVERLOAD = (
    "the new cell enters service too small for the weight routing gives it: created at its everyday minimum "
    "(1 inf2 + 1 trn1 task, 19.7 requests/s), it is drained to the floor (5 of the region's 25) while it has "
    "no host, and once its record is healthy the floor alone sends it 26 requests/s; the orchestrator's "
    "cell balancing, reading its first half-served minute, then steps it up again (6 tasks: 5 -> 11, 4 "
    "tasks: 5 -> 8 tried). It sheds for 7 minutes, its ELB 5xx rate and shed share alarms fire, and the "
    "bake stops the waves on its region-degraded composite; no missing-data alarm and no window is at fault"
)


@pytest.mark.xfail(strict=True, reason=NEW_CELL_OVERLOAD)
def test_a_new_cell_before_the_event_is_created_and_serving_unattended():
    run = result("new-cell-before-event")
    assert run.summary.verdict == "pass", run.summary.violations


def test_a_new_cell_is_created_then_waited_for_and_stopped_in_its_bake():
    run = result("new-cell-before-event")
    (record,) = run.deploys
    created = [s for s in record.stacks if s.stack.endswith("-us-east-1-cell2")]
    assert len(created) == 2  # from the first-create assembly, then the normal one
    assert "created with its load balancer's deletion protection off" in record.output
    assert "wave stopped at us-east-1/2" in record.output
    # The healthy-targets wait ran first, on the cell's everyday minimum: one task per fleet.
    assert "us-east-1/2: every target group has 2 healthy targets" in record.output
    assert "shopping-assistant-us-east-1-cell2-region-degraded is in ALARM" in record.output
    # The bake stopped on an alarm that fired after its first quiet look, not at the end of the data window.
    assert "after its data could begin" not in record.output
    before = [m for m in run.minutes if m.minute < created[0].started]
    assert before and all(m.cells["us-east-1/2"].tasks == 0 for m in before)  # no stack, no task
    # Which child alarm and why: the cell's record turns healthy, it takes more than its two tasks serve,
    # and the alarms on what it sheds fire; the composite goes to ALARM on them, not on missing data.
    healthy = next(m.minute for m in run.minutes if "us-east-1/2: Route 53 health check healthy" in m.events)
    composite = "us-east-1/2: composite shopping-assistant-us-east-1-cell2-region-degraded ALARM"
    degraded = next(m.minute for m in run.minutes if m.minute > healthy and composite in m.events)
    fired = {
        event.split()[2]
        for m in run.minutes
        if healthy <= m.minute <= degraded
        for event in m.events
        if event.startswith("us-east-1/2: alarm ") and event.endswith(" ALARM")
    }
    # Logical ids, less the 8-character hash CDK adds.
    assert {name[:-8] for name in fired} == {"LoadBalancerElb5xxRate", "ObservabilityShedShare"}
    shedding = [m.cells["us-east-1/2"] for m in run.minutes if healthy <= m.minute < degraded]
    assert any(row.shed_rps > 0 and row.tasks == 2 and row.offered_rps > row.served_rps for row in shedding)


# The deploy days that fail today, each for the reason named (the shipped-scenario test marks them too).
# The deploy days that fail today, each for the reason named (the shipped-scenario test marks them too).
DEPLOY_DEFECTS = {
    "bad-ami-before-event": NO_HOST_ROLL,
    "new-cell-before-event": NEW_CELL_OVERLOAD,
}
