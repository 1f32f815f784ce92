"""A config with an event, warm pools and capacity reservations (tests/fixtures/peak-event.yaml): its stacks
carry the event on both the services' scalable targets and the groups, and pass cfn-lint and cdk-nag."""

from __future__ import annotations

import json
import subprocess
import sys
from datetime import UTC, timedelta
from itertools import pairwise
from pathlib import Path
from typing import Any

import pytest

from cdk_constructs.fleet.rollout import HostBounds
from ops.preflight.assembly import scheduled_starts
from ops.preflight.checks import Status, schedule_findings
from settings import Settings, load_settings
from stacks.serving_app import build_app
from tests.stacks.conftest import REPO, keys, lowered_together, resources, scheduled_bounds

PEAK_CONFIG = REPO / "tests" / "fixtures" / "peak-event.yaml"


@pytest.fixture(scope="module")
def peak_settings() -> Settings:
    return load_settings(PEAK_CONFIG)


@pytest.fixture(scope="module")
def peak(peak_settings: Settings, tmp_path_factory: pytest.TempPathFactory):
    app = build_app(peak_settings, outdir=str(tmp_path_factory.mktemp("peak.out")))
    return app.synth()


@pytest.fixture(scope="module")
def peak_templates(peak) -> dict[str, dict[str, Any]]:
    return {stack.environment.region: stack.template for stack in peak.stacks}


def _fleet_of(template: dict[str, Any], logical_id: str) -> str:
    """The instance type whose fleet construct made this resource (its logical id starts with the path)."""
    for instance_type in ("inf2.48xlarge", "trn1.32xlarge"):
        if logical_id.startswith("Fleet" + instance_type.replace(".", "")):
            return instance_type
    raise AssertionError(logical_id)


def test_every_event_fleet_has_its_raise_restore_and_scale_in_on_the_scalable_target_and_the_group(
    peak_settings, peak_templates
):
    event = peak_settings.events[0]
    ramp = event.ramp_start(peak_settings.serving.cold_start_budget_seconds).astimezone(UTC)
    end = event.end.astimezone(UTC)
    scale_in = event.scale_in_at.astimezone(UTC)
    for region, template in peak_templates.items():
        expected = {}
        for fleet in peak_settings.regions[region].fleets:
            hosts = event.regions.get(region, {}).get(fleet.instance_type)
            if hosts:
                expected[fleet.instance_type] = [
                    (ramp.strftime("%Y-%m-%dT%H:%M:%S"), hosts.min, hosts.max),
                    (end.strftime("%Y-%m-%dT%H:%M:%S"), fleet.min, max(hosts.max, fleet.max)),
                    (scale_in.strftime("%Y-%m-%dT%H:%M:%S"), fleet.min, fleet.max),
                ]
        on_targets = {
            _fleet_of(template, name): [
                (
                    action["Schedule"].removeprefix("at(").removesuffix(")"),
                    action["ScalableTargetAction"]["MinCapacity"],
                    action["ScalableTargetAction"]["MaxCapacity"],
                )
                for action in target["Properties"]["ScheduledActions"]
            ]
            for name, target in resources(template, "AWS::ApplicationAutoScaling::ScalableTarget").items()
            if "ScheduledActions" in target["Properties"]
        }
        on_groups: dict[str, list[tuple[str, int, int]]] = {}
        for name, action in resources(template, "AWS::AutoScaling::ScheduledAction").items():
            properties = action["Properties"]
            on_groups.setdefault(_fleet_of(template, name), []).append(
                (properties["StartTime"].removesuffix("Z"), properties["MinSize"], properties["MaxSize"])
            )
        assert on_targets == expected, region
        # The group's maximum keeps the deploy surge above the task maximum (rollout.py).
        surge = peak_settings.serving.deployment.max_surge_percent
        expected_hosts = {
            fleet: [
                (at, low, HostBounds.for_service(low, high, surge).max_hosts) for at, low, high in changes
            ]
            for fleet, changes in expected.items()
        }
        assert {fleet: sorted(actions) for fleet, actions in on_groups.items()} == expected_hosts, region


def test_no_scheduled_action_lowers_a_maximum_at_the_same_time_as_a_minimum(peak_templates):
    """At the event's end only the minimums come down; the maximums follow scale_in_after_minutes later,
    on the scalable targets and on the groups alike."""
    for region, template in peak_templates.items():
        assert lowered_together(template) == [], region
        lowered_max = [
            (name, at)
            for name, steps in scheduled_bounds(template).items()
            for (_, _, high), (at, _, new_high) in pairwise(steps)
            if new_high < high
        ]
        # Both event fleets of us-east-1, the one of us-west-2: a scalable target and a group each.
        assert len(lowered_max) == {"us-east-1": 4, "us-west-2": 2, "us-east-2": 0}[region], region
        assert {at for _, at in lowered_max} <= {"2099-07-10T09:00:00"}, region


def test_preflight_finds_every_scheduled_action_of_the_synthesized_templates(peak_settings, peak_templates):
    """Each fleet an event names has three changes (raise, restore, scale-in) on its scalable target and
    its group; the preflight passes them before the ramp and rejects the assembly once it has begun."""
    event = peak_settings.events[0]
    ramp = event.ramp_start(peak_settings.serving.cold_start_budget_seconds).astimezone(UTC)
    starts = scheduled_starts(peak_templates["us-east-1"])
    assert len(starts) == 2 * 2 * 3 and starts[0].at == ramp
    (before,) = schedule_findings("us-east-1", "s", starts, ramp - timedelta(days=1))
    assert before.status is Status.OK
    (after,) = schedule_findings("us-east-1", "s", starts, ramp + timedelta(minutes=1))
    assert after.status is Status.SHORTFALL and "peak-test-raise" in after.advice


def test_still_no_desired_capacity_anywhere(peak_templates):
    for region, template in peak_templates.items():
        assert "DesiredCapacity" not in set(keys(template)), region
        assert "DesiredCount" not in json.dumps(resources(template, "AWS::ECS::Service")), region


def test_warm_pool_and_reservations_appear_only_where_configured(peak_templates):
    east = peak_templates["us-east-1"]
    assert len(resources(east, "AWS::AutoScaling::WarmPool")) == 1
    specs = {
        _fleet_of(east, name): group["Properties"].get("CapacityReservationSpecification")
        for name, group in resources(east, "AWS::AutoScaling::AutoScalingGroup").items()
    }
    assert specs["inf2.48xlarge"]["CapacityReservationPreference"] == "capacity-reservations-first"
    assert specs["trn1.32xlarge"] is None  # its Capacity Block is targeted from the launch template
    markets = [
        template["Properties"]["LaunchTemplateData"].get("InstanceMarketOptions")
        for template in resources(east, "AWS::EC2::LaunchTemplate").values()
    ]
    assert markets.count({"MarketType": "capacity-block"}) == 1
    west_groups = resources(peak_templates["us-west-2"], "AWS::AutoScaling::AutoScalingGroup").values()
    assert [
        g["Properties"].get("CapacityReservationSpecification", {}).get("CapacityReservationTarget")
        for g in west_groups
    ].count({"CapacityReservationIds": ["cr-0aaaaaaaaaaaaaaaa", "cr-0bbbbbbbbbbbbbbbb"]}) == 1
    for template in (peak_templates["us-west-2"], peak_templates["us-east-2"]):
        assert resources(template, "AWS::AutoScaling::WarmPool") == {}
    assert resources(peak_templates["us-east-2"], "AWS::AutoScaling::ScheduledAction") == {}


def test_cfn_lint_and_nag_find_nothing(peak):
    paths = [str(Path(peak.directory) / stack.template_file) for stack in peak.stacks]
    result = subprocess.run(
        [str(Path(sys.executable).parent / "cfn-lint"), "--format", "json", *paths],
        cwd=REPO,
        capture_output=True,
        text=True,
        check=False,
    )
    findings = json.loads(result.stdout or "[]")
    assert findings == [], [(f["Rule"]["Id"], f["Message"]) for f in findings]
    report = json.loads((Path(peak.directory) / "validation-report.json").read_text())
    assert [v for plugin in report["pluginReports"] for v in plugin.get("violations", [])] == []
