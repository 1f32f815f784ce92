"""The preflight's decisions on plain data: quotas, zone offerings and reservations."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from ops.preflight.assembly import ScheduledStart
from ops.preflight.checks import (
    ECS_CONTAINER_INSTANCES,
    ELB_TARGETS_PER_ALB,
    ELB_TARGETS_PER_TARGET_GROUP,
    EVERYDAY,
    Status,
    hosts_at_once,
    layer_finding,
    quota_findings,
    reservation_findings,
    reservation_ids,
    scale_findings,
    scenarios,
    schedule_findings,
    vcpus_needed,
    zone_findings,
)
from settings import load_settings
from tests.ops.preflight.conftest import BLOCK_ID, REPO, block

INF, TRN = "L-1945791B", "L-2C3B7624"
# Zones as moto 5.2.5 offers them in us-east-1 (measured).
US_EAST_1 = {
    "inf2.48xlarge": {"us-east-1a", "us-east-1b", "us-east-1c", "us-east-1f"},
    "trn1.32xlarge": {"us-east-1b", "us-east-1c", "us-east-1f"},
}


def test_each_event_needs_the_vcpus_of_every_fleets_max_hosts_deploy_surge_and_warm_pool(peak):
    """us-east-1's inf2 fleet has a warm pool (min_size 2, max_prepared 40): everyday its group reaches
    28 + 7 surge hosts, and the pool is prepared up to 40 hosts in all (running while it is prepared); in
    the event 60 + 15 surge hosts and the pool's 2 refilling beside them."""
    by_name = {scenario.name: scenario for scenario in scenarios(peak, "us-east-1")}
    assert set(by_name) == {EVERYDAY, "peak-test"}
    assert vcpus_needed(peak, "us-east-1", by_name[EVERYDAY]) == {INF: 40 * 192, TRN: (14 + 4) * 128}
    assert vcpus_needed(peak, "us-east-1", by_name["peak-test"]) == {
        INF: (60 + 15 + 2) * 192,
        TRN: (30 + 8) * 128,
    }
    # us-west-2's event raises inf2 only (no pool there); its trn1 fleet keeps its own max.
    west = {s.name: s for s in scenarios(peak, "us-west-2")}
    assert vcpus_needed(peak, "us-west-2", west["peak-test"]) == {INF: 50 * 192, TRN: (14 + 4) * 128}


def test_a_fleet_without_a_pool_needs_its_max_and_surge_only(peak):
    inf2, trn1 = peak.regions["us-east-1"].fleets
    assert hosts_at_once(peak, trn1, 30) == 38
    assert hosts_at_once(peak, inf2, 100) == 125 + 2  # the pool's min_size beside a full group
    assert hosts_at_once(peak, inf2, 10) == 40  # max_prepared above the group's ceiling


def test_a_quota_below_an_events_peak_is_a_shortfall_naming_region_event_and_code(peak):
    findings = quota_findings(peak, "us-east-1", {INF: 10_000.0, TRN: 10_000.0})
    short = [f for f in findings if f.status is Status.SHORTFALL]
    assert [(f.scope, f.check) for f in short] == [("peak-test", f"On-Demand Inf vCPUs ({INF})")]
    assert "us-east-1 peak-test" in short[0].advice and "14,784" in short[0].advice
    assert "deploy surge and warm pools" in short[0].advice
    assert all(f.status is Status.OK for f in findings if f.scope == EVERYDAY)


AWS_DEFAULT_LIMITS = {ELB_TARGETS_PER_ALB: 1000.0, ELB_TARGETS_PER_TARGET_GROUP: 1000.0}


def _us_east_1_event(tmp_path, inf2_max: int, trn1_max: int):
    """An event on the default config with explicit maxima, so the arithmetic does not follow re-plans of the
    shipped overlay; one cell, as an account with raised quotas may run it."""
    path = tmp_path / "event.yaml"
    path.write_text(
        f"base: {REPO / 'config' / 'default.yaml'}\ncell_max_hosts: 1000\nevents:\n  - name: prime-day\n"
        '    start: "2099-07-08T00:00:00-07:00"\n    end: "2099-07-10T00:00:00-07:00"\n    regions:\n'
        f"      us-east-1:\n        inf2.48xlarge: {{min: 20, max: {inf2_max}}}\n"
        f"        trn1.32xlarge: {{min: 10, max: {trn1_max}}}\n"
    )
    return load_settings(path)


def test_an_event_at_the_default_alb_and_ecs_quotas_with_its_surge_fits(tmp_path):
    event = _us_east_1_event(tmp_path, inf2_max=260, trn1_max=131)
    findings = scale_findings(event, "us-east-1", AWS_DEFAULT_LIMITS | {ECS_CONTAINER_INSTANCES: 5000.0})
    assert {f.status for f in findings} == {Status.OK}
    alb = next(f for f in findings if f.scope == "prime-day" and f.check == ELB_TARGETS_PER_ALB)
    assert alb.needed == "978"  # (260 + 65 + 131 + 33) hosts, an HTTP and a gRPC target each


def test_prime_day_fits_the_default_alb_and_ecs_quotas_in_its_cells():
    prime_day = load_settings(REPO / "config" / "prime-day.yaml")
    findings = scale_findings(prime_day, "us-east-1", AWS_DEFAULT_LIMITS | {ECS_CONTAINER_INSTANCES: 5000.0})
    assert {f.status for f in findings} == {Status.OK}
    alb = next(f for f in findings if f.scope == "prime-day" and f.check == ELB_TARGETS_PER_ALB)
    # us-east-1 runs Prime Day in two cells; the busier one: (217 + 55 + 108 + 27) hosts at the event's max
    # with surge, an HTTP and a gRPC target each, on its own ALB.
    assert alb.needed == "814"


def test_an_event_past_the_accounts_alb_targets_is_a_shortfall_and_unreported_limits_use_the_defaults(
    tmp_path,
):
    big = _us_east_1_event(tmp_path, inf2_max=300, trn1_max=131)
    findings = scale_findings(big, "us-east-1", {ELB_TARGETS_PER_ALB: 1000.0})
    short = [f for f in findings if f.status is Status.SHORTFALL]
    assert [(f.scope, f.check) for f in short] == [("prime-day", ELB_TARGETS_PER_ALB)]
    assert "us-east-1 prime-day: 539 hosts" in short[0].advice and "1,078" in short[0].advice
    unreported = next(f for f in findings if f.check == ECS_CONTAINER_INSTANCES)
    assert unreported.available == "5,000 (default; not reported)"
    # An account with its ALB quota raised passes.
    raised = scale_findings(big, "us-east-1", {ELB_TARGETS_PER_ALB: 2000.0})
    assert not [f for f in raised if f.status is Status.SHORTFALL]


def test_a_missing_powertools_parameter_is_a_shortfall_naming_it():
    assert layer_finding("us-east-1", "/aws/service/powertools/x", True).status is Status.OK
    missing = layer_finding("us-east-1", "/aws/service/powertools/x", False)
    assert missing.status is Status.SHORTFALL and "/aws/service/powertools/x does not exist" in missing.advice


NOW = datetime(2027, 7, 7, 0, 0, tzinfo=UTC)


def _start(name, at):
    return ScheduledStart("FleetHosts", name, at)


def test_scheduled_actions_must_start_after_the_deploy_margin():
    starts = [
        _start("prime-day-raise", NOW + timedelta(hours=5)),
        _start("prime-day-restore", NOW + timedelta(days=3)),
    ]
    (ok,) = schedule_findings("us-east-1", "kit-us-east-1", starts, NOW)
    assert ok.status is Status.OK
    # A stale assembly: synthesized days ago, its ramp is now 10 minutes away (inside the margin) or past.
    stale = [_start("prime-day-raise", NOW + timedelta(minutes=10)), *starts[1:]]
    (short,) = schedule_findings("us-east-1", "kit-us-east-1", stale, NOW)
    assert short.status is Status.SHORTFALL
    assert "prime-day-raise at 2027-07-07 00:10 UTC" in short.advice and "make synth" in short.advice
    (past,) = schedule_findings("us-east-1", "kit-us-east-1", [_start("x", NOW - timedelta(days=1))], NOW)
    assert past.status is Status.SHORTFALL
    (none,) = schedule_findings("us-east-1", "kit-us-east-1", None, NOW)
    assert none.status is Status.WARNING and "no template for kit-us-east-1" in none.advice


def test_default_zones_are_the_ones_that_offer_each_fleets_type(default):
    """The defaults come from the same offerings data (settings/zone_offerings.py): nothing to warn about."""
    findings = zone_findings(default, "us-east-1", US_EAST_1)
    assert {f.status for f in findings} == {Status.OK}


def test_a_type_missing_from_some_zones_warns_and_from_all_is_a_shortfall(tmp_path):
    configured = tmp_path / "zones.yaml"
    configured.write_text(
        f"base: {REPO / 'config' / 'default.yaml'}\n"
        "regions:\n  us-east-1:\n    availability_zones: [us-east-1a, us-east-1b, us-east-1c]\n"
    )
    default = load_settings(configured)
    findings = {f.scope: f for f in zone_findings(default, "us-east-1", US_EAST_1)}
    assert findings["inf2.48xlarge"].status is Status.OK
    assert findings["trn1.32xlarge"].status is Status.WARNING
    assert "not offered in us-east-1a" in findings["trn1.32xlarge"].advice
    nowhere = {f.scope: f for f in zone_findings(default, "us-east-1", {"inf2.48xlarge": {"us-east-1f"}})}
    assert nowhere["inf2.48xlarge"].status is nowhere["trn1.32xlarge"].status is Status.SHORTFALL
    assert "offered in us-east-1f" in nowhere["inf2.48xlarge"].advice


def test_a_capacity_block_fleet_is_judged_on_its_block_zone_alone(peak):
    findings = {f.scope: f for f in zone_findings(peak, "us-east-1", US_EAST_1)}
    assert findings["trn1.32xlarge"].needed == "us-east-1b"
    assert findings["trn1.32xlarge"].status is Status.OK


def test_a_block_that_covers_the_event_and_its_hosts_passes(peak):
    assert reservation_ids(peak, "us-east-1") == [BLOCK_ID]
    findings = reservation_findings(peak, "us-east-1", {BLOCK_ID: block()})
    by_check = {f.check: f for f in findings}
    assert by_check[f"reservation {BLOCK_ID}"].status is Status.OK
    assert by_check["reserved hosts"].status is Status.OK
    assert by_check["reservation group"].status is Status.WARNING  # inf2's group: members not listed


@pytest.mark.parametrize(
    ("reservation", "fragment"),
    [
        (None, "does not exist in this account and region"),
        (block(State="expired"), "is expired"),
        (block(InstanceType="trn2.48xlarge"), "holds trn2.48xlarge, not trn1.32xlarge"),
        (block(AvailabilityZone="us-east-1c"), "is in us-east-1c, outside us-east-1b"),
        # EC2 ends the block's instances 30 min before its end, 15 min before the event's end here.
        (block(EndDate=datetime(2099, 7, 10, 7, 15, tzinfo=UTC)), "before event peak-test ends"),
        (block(StartDate=datetime(2099, 7, 8, 6, 30, tzinfo=UTC)), "after event peak-test's ramp"),
    ],
)
def test_a_reservation_that_cannot_hold_the_event_is_a_shortfall(peak, reservation, fragment):
    findings = reservation_findings(peak, "us-east-1", {BLOCK_ID: reservation})
    short = [f for f in findings if f.status is Status.SHORTFALL]
    assert short and short[0].check == f"reservation {BLOCK_ID}"
    assert fragment in short[0].advice and short[0].advice.startswith("us-east-1:")


def test_too_few_reserved_hosts_is_a_shortfall_only_where_hosts_launch_only_into_reservations(peak):
    findings = reservation_findings(peak, "us-east-1", {BLOCK_ID: block(TotalInstanceCount=16)})
    count = next(f for f in findings if f.check == "reserved hosts")
    assert count.status is Status.SHORTFALL
    assert "may scale to 30 hosts but only 16 are reserved" in count.advice
    # us-west-2's trn1 fleet is capacity-reservations-only over two reservation ids, in the two zones that
    # offer trn1.32xlarge there (us-west-2b and us-west-2d).
    ids = reservation_ids(peak, "us-west-2")
    west = {
        ids[0]: block(CapacityReservationId=ids[0], AvailabilityZone="us-west-2b", TotalInstanceCount=6),
        ids[1]: block(CapacityReservationId=ids[1], AvailabilityZone="us-west-2d", TotalInstanceCount=8),
    }
    west_count = next(f for f in reservation_findings(peak, "us-west-2", west) if f.check == "reserved hosts")
    assert (west_count.available, west_count.status) == ("14 hosts", Status.OK)
