"""Break the system on purpose: for each mutation, a shipped game-day scenario must fail with a violation
the same scenario does not have on the unbroken system.

Each mutation changes the deployment in memory (a value read from the synthesized templates, the deployed
ORCHESTRATOR_CONFIG) or the orchestrator's code (monkeypatched), then runs one whole shipped scenario:
minutes of CPU each. Run them alone with `make test-mutations` (`pytest -m mutation`)."""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import replace
from datetime import timedelta
from pathlib import Path

import pytest

from gameday.run import Result, run_scenario
from gameday.templates import Deployment, FleetControl, RegionControl, read_deployment
from settings import load_settings
from tests.gameday.template_edits import without_deregister_targets_grant

pytestmark = pytest.mark.mutation

REPO = Path(__file__).resolve().parents[2]
SCENARIOS = REPO / "scenarios" / "gameday"
_unbroken: dict[str, Result] = {}


def unbroken(name: str) -> Result:
    if name not in _unbroken:
        _unbroken[name] = run_scenario(SCENARIOS / f"{name}.yaml")
    return _unbroken[name]


def each_fleet(change: Callable[[FleetControl], FleetControl]) -> Callable[[Deployment], Deployment]:
    def hook(deployment: Deployment) -> Deployment:
        cells = {
            name: replace(control, fleets=tuple(change(f) for f in control.fleets))
            for name, control in deployment.cells.items()
        }
        return replace(deployment, cells=cells)

    return hook


def each_cell(change: Callable[[RegionControl], RegionControl]) -> Callable[[Deployment], Deployment]:
    def hook(deployment: Deployment) -> Deployment:
        return replace(deployment, cells={name: change(c) for name, c in deployment.cells.items()})

    return hook


def in_every_template(edit: Callable[[dict], None]) -> Callable[[Deployment], Deployment]:
    """The deployment read back from a copy of its assembly with `edit(resources)` applied to every
    template: for what the twin reads from several resources at once (a grant and the variables it serves)."""

    def hook(deployment: Deployment) -> Deployment:
        import shutil
        import tempfile

        with tempfile.TemporaryDirectory(prefix="mutation-") as folder:
            copy = Path(folder) / "cdk.out"
            shutil.copytree(deployment.source, copy, ignore=shutil.ignore_patterns("asset.*"))
            for path in copy.glob("*.template.json"):
                template = json.loads(path.read_text())
                edit(template["Resources"])
                path.write_text(json.dumps(template))
            return replace(read_deployment(copy), source=deployment.source)

    return hook


def policy(**values: int) -> Callable[[Deployment], Deployment]:
    def hook(deployment: Deployment) -> Deployment:
        config = json.loads(deployment.orchestrator_config)
        config["policy"].update(values)
        return replace(deployment, orchestrator_config=json.dumps(config))

    return hook


def without_region_unfit(control: RegionControl) -> RegionControl:
    kept = tuple(c for c in control.composites if not c.name.endswith("region-unfit"))
    assert len(kept) < len(control.composites), "no region-unfit composite to remove"
    return replace(control, composites=kept)


def slow_first_token_threshold(share: float) -> Callable[[RegionControl], RegionControl]:
    def change(control: RegionControl) -> RegionControl:
        alarms = {
            key: replace(alarm, threshold=share) if alarm.metrics == ("SlowFirstToken",) else alarm
            for key, alarm in control.alarms.items()
        }
        assert alarms != control.alarms, "no slow-first-token alarm"
        return replace(control, alarms=alarms)

    return change


def tracking_at(share_of_slots: float) -> Callable[[FleetControl], FleetControl]:
    """Target tracking's target at this share of a host's serving slots (as config/prime-day.yaml's
    fleets deploy them)."""
    settings = load_settings(REPO / "config" / "prime-day.yaml")
    slots = {
        fleet.instance_type: fleet.engine_replicas * settings.model.max_num_seqs
        for region in settings.regions.values()
        for fleet in region.fleets
    }

    def change(fleet: FleetControl) -> FleetControl:
        assert fleet.tracking is not None
        return replace(
            fleet, tracking=replace(fleet.tracking, target=share_of_slots * slots[fleet.instance_type])
        )

    return change


def scheduled(name_part: str, change) -> Callable[[FleetControl], FleetControl]:
    """Every scheduled action (group and service) whose name holds `name_part`, changed."""

    def fleet_change(fleet: FleetControl) -> FleetControl:
        asg = tuple(change(fleet, a) if name_part in a.name.lower() else a for a in fleet.asg_schedule)
        service = tuple(
            change(fleet, a) if name_part in a.name.lower() else a for a in fleet.service_schedule
        )
        assert (asg, service) != (fleet.asg_schedule, fleet.service_schedule), f"no {name_part} action"
        return replace(fleet, asg_schedule=asg, service_schedule=service)

    return fleet_change


def later(_fleet, action, by=timedelta(hours=1)):
    return replace(action, at=action.at + by)


def restore_with_everyday_maximum(fleet: FleetControl, action):
    """The restore lowering the maximum with the minimum, not two hours later (the scale-in action's)."""
    schedule = fleet.service_schedule if action in fleet.service_schedule else fleet.asg_schedule
    everyday = next(a for a in schedule if "scale-in" in a.name.lower() or "scalein" in a.name.lower())
    return replace(action, max=everyday.max)


def orchestrator_dead(monkeypatch: pytest.MonkeyPatch) -> None:
    from orchestrator.routing import handler

    def raises(*_: object, **__: object):
        raise RuntimeError("mutation: the orchestrator fails every run")

    monkeypatch.setattr(handler, "run", raises)


def violation(fragment: str) -> Callable[[Result, Result], bool]:
    """Caught: the broken day has a violation holding `fragment` and the unbroken day none."""

    def caught(before: Result, broken: Result) -> bool:
        assert not any(fragment in v for v in before.summary.violations), before.summary.violations
        return any(fragment in v for v in broken.summary.violations)

    return caught


MUTATIONS = {
    # mutation: (the shipped scenario that must catch it, the change, how it is caught)
    "orchestrator dead": (
        "capacity-imbalance",
        orchestrator_dead,
        violation("the orchestrator did not make"),
    ),
    # Only the ALB's target 5xx count sees these errors: the drain alarm is the orchestrator's one way in.
    "region-unfit removed": (
        "errors-only-the-alb-sees",
        each_cell(without_region_unfit),
        violation("the orchestrator did not make"),
    ),
    "drain_runs huge": (
        "errors-only-the-alb-sees",
        policy(drain_runs=1000),
        violation("past the policy's drain deadline"),
    ),
    "warm-up 1800 s": (
        "unplanned-surge",
        each_fleet(lambda f: replace(f, warmup_seconds=1800)),
        violation("waited for hosts"),
    ),
    # unplanned-surge passes unbroken since its scale-in fix: tracking past the knee misses the SLO.
    "tracking target 90%": ("unplanned-surge", each_fleet(tracking_at(0.9)), violation("SLO missed")),
    # Latency pages rather than drains (issue 21): slow-degradation requires the slow-first-token page.
    "slow-first-token alarm off (50%)": (
        "slow-degradation",
        each_cell(slow_first_token_threshold(0.5)),
        violation("no page on SlowFirstToken"),
    ),
    "scheduled raise an hour late": (
        "event-start",
        each_fleet(scheduled("raise", later)),
        violation("SLO missed"),
    ),
    "restore lowers min and max together": (
        "event-end",
        each_fleet(scheduled("restore", restore_with_everyday_maximum)),
        violation("stopped"),
    ),
    # The dead engines' tasks can no longer leave their target groups: the health check alone (8 s).
    "task role may not deregister targets": (
        "engine-deaths",
        in_every_template(without_deregister_targets_grant),
        violation("over the budget"),
    ),
    "scale-in cooldown 60 s": (
        "after-midnight",
        each_fleet(lambda f: replace(f, tracking=replace(f.tracking, scale_in_cooldown=60))),
        violation("SLO missed"),
    ),
}


# Mutations no shipped scenario catches yet, each with why: a strict xfail, so that a scenario that starts
# catching one turns it into a failure to look at (and the mark is removed).
NOT_CAUGHT: dict[str, str] = {}


@pytest.mark.parametrize(
    "mutation",
    [
        pytest.param(name, marks=pytest.mark.xfail(strict=True, reason=NOT_CAUGHT[name]))
        if name in NOT_CAUGHT
        else name
        for name in MUTATIONS
    ],
)
def test_a_shipped_scenario_catches_the_mutation(mutation, monkeypatch):
    scenario, change, caught = MUTATIONS[mutation]
    before = unbroken(scenario)
    if change is orchestrator_dead:
        change(monkeypatch)
        broken = run_scenario(SCENARIOS / f"{scenario}.yaml")
    else:
        broken = run_scenario(SCENARIOS / f"{scenario}.yaml", deployment_hook=change)
    assert broken.summary.verdict == "fail", f"{mutation}: {scenario} still passes"
    assert caught(before, broken), (before.summary.violations, broken.summary.violations)


# ---- deploy days: the real `make deploy` through the twin (gameday/deploy_day.py) ------------------------


Caught = Callable[[Result, Result], bool]


def rollout_settings(**values: object) -> Callable[[Deployment], Deployment]:
    """Every fleet's rolling-deployment settings changed (as its template's DeploymentConfiguration)."""
    return each_fleet(lambda f: replace(f, rollout=replace(f.rollout, **values)))


# name -> (scenario, deployment change or None, more `make deploy` arguments, what catches it)
DEPLOY_MUTATIONS: dict[
    str, tuple[str, Callable[[Deployment], Deployment] | None, tuple[str, ...], Caught]
] = {
    "circuit breaker off": (
        "bad-image-at-peak",
        rollout_settings(breaker=False, breaker_rollback=False),
        (),
        violation("not rolled back"),
    ),
    # Where the breaker is what stops the revision: tasks that never pass a health check.
    "circuit breaker off, crashing image": (
        "crashing-image",
        rollout_settings(breaker=False, breaker_rollback=False),
        (),
        violation("not rolled back"),
    ),
    "deployment alarms removed": (
        "bad-image-at-peak",
        rollout_settings(alarms=(), alarms_rollback=False),
        (),
        violation("not rolled back"),
    ),
    "bake of zero minutes": (
        "bad-image-at-peak",
        None,
        ("--bake-minutes", "0"),
        violation("beyond the first"),
    ),
    "waves skipped (--all-at-once)": (
        "bad-image-at-peak",
        None,
        ("--all-at-once",),
        violation("beyond the first cell"),
    ),
}

DEPLOY_NOT_CAUGHT: dict[str, str] = {
    "circuit breaker off": (
        "a revision that fails requests passes its health checks, so the circuit breaker never counts a "
        "failed task (ECS developer guide, 'How the Amazon ECS deployment circuit breaker detects failures': "
        "tasks that fail to reach RUNNING or a healthy state); its deployment alarm rolls it back. The "
        "crashing-image day catches this mutation"
    ),
    "bake of zero minutes": (
        "the bad image is rolled back by its deployment alarm inside the first cell's cdk deploy, before any "
        "bake: the bake is the second line, for a revision that goes bad after ECS has finished watching its "
        "deployment, and no shipped day has one yet"
    ),
}


@pytest.mark.parametrize(
    "mutation",
    [
        pytest.param(name, marks=pytest.mark.xfail(strict=True, reason=DEPLOY_NOT_CAUGHT[name]))
        if name in DEPLOY_NOT_CAUGHT
        else name
        for name in DEPLOY_MUTATIONS
    ],
)
def test_a_deploy_day_catches_the_mutation(mutation):
    scenario, change, args, caught = DEPLOY_MUTATIONS[mutation]
    before = unbroken(scenario)
    broken = run_scenario(SCENARIOS / f"{scenario}.yaml", deployment_hook=change, deploy_args=args)
    assert broken.summary.verdict == "fail", f"{mutation}: {scenario} still passes"
    assert caught(before, broken), (before.summary.violations, broken.summary.violations)
