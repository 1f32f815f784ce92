"""What the account must offer for a config, judged from plain data read from AWS (no AWS calls here)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from enum import StrEnum
from typing import Any

from settings.aws_limits import CAPACITY_BLOCK_END_LEAD_MINUTES
from settings.instances import QUOTA_NAMES
from settings.schema import FleetConfig, Settings

EVERYDAY = "everyday"  # the fleets' own bounds, outside any event
# Reservation states that will hold instances (now or once scheduled/paid); the rest never will.
USABLE_STATES = frozenset({"active", "scheduled", "pending", "payment-pending", "assessing", "delayed"})


class Status(StrEnum):
    OK = "ok"
    WARNING = "warning"
    SHORTFALL = "shortfall"


@dataclass(frozen=True)
class Finding:
    check: str
    scope: str  # the event (or everyday) or the fleet it concerns
    needed: str
    available: str
    status: Status
    advice: str = ""  # what is short and what to do about it, for a warning or a shortfall


@dataclass(frozen=True)
class Scenario:
    """A set of bounds the region's fleets hold at once: their own, or an event's."""

    name: str
    bounds: dict[str, tuple[int, int]]  # instance type -> (min, max) hosts
    ramp_start: datetime | None = None
    end: datetime | None = None
    fleets_in_event: frozenset[str] = field(default_factory=frozenset)


def scenarios(settings: Settings, region: str) -> list[Scenario]:
    fleets = settings.regions[region].fleets
    found = [Scenario(EVERYDAY, {f.instance_type: (f.min, f.max) for f in fleets})]
    budget = settings.serving.cold_start_budget_seconds
    for event in settings.events:
        if region not in event.regions:
            continue
        found.append(
            Scenario(
                event.name,
                {f.instance_type: settings.event_bounds(event, region, f) for f in fleets},
                event.ramp_start(budget),
                event.end,
                frozenset(event.regions[region]),
            )
        )
    return found


def vcpus_needed(settings: Settings, region: str, scenario: Scenario) -> dict[str, int]:
    """Quota code -> vCPUs of every fleet at its max hosts: what scaling may reach while the bounds hold."""
    needed: dict[str, int] = {}
    for fleet in settings.regions[region].fleets:
        code = fleet.instance.on_demand_vcpu_quota
        needed[code] = needed.get(code, 0) + scenario.bounds[fleet.instance_type][1] * fleet.instance.vcpus
    return needed


def quota_findings(settings: Settings, region: str, quotas: Mapping[str, float]) -> list[Finding]:
    findings = []
    for scenario in scenarios(settings, region):
        for code, vcpus in sorted(vcpus_needed(settings, region, scenario).items()):
            have = quotas[code]
            short = vcpus > have
            findings.append(
                Finding(
                    f"{QUOTA_NAMES.get(code, code)} ({code})",
                    scenario.name,
                    f"{vcpus:,} vCPUs",
                    f"{have:,.0f} vCPUs",
                    Status.SHORTFALL if short else Status.OK,
                    f"{region} {scenario.name}: {QUOTA_NAMES.get(code, code)} quota {code} is {have:,.0f}, "
                    f"the fleets' max hosts need {vcpus:,}: request an increase in Service Quotas"
                    if short
                    else "",
                )
            )
    return findings


def fleet_zones(settings: Settings, region: str, fleet: FleetConfig) -> list[str]:
    """Zones a fleet's hosts launch in (the settings decide: its Capacity Block's one, or the stack's zones
    that offer its type), checked here against the account's own offerings."""
    return settings.fleet_availability_zones(region, fleet)


def zone_findings(settings: Settings, region: str, offered: Mapping[str, set[str]]) -> list[Finding]:
    """A type no zone of the fleet offers cannot launch at all (shortfall); one missing from some zones
    launches only in the others, and the group's launches there keep failing (warning)."""
    findings = []
    for fleet in settings.regions[region].fleets:
        zones = fleet_zones(settings, region, fleet)
        offering = offered.get(fleet.instance_type, set())
        usable = [zone for zone in zones if zone in offering]
        missing = [zone for zone in zones if zone not in offering]
        offered_text = ", ".join(sorted(offering)) or "none"
        if not usable:
            status = Status.SHORTFALL
            advice = (
                f"{region}: {fleet.instance_type} is offered in none of the zones its hosts use "
                f"({', '.join(zones)}); it is offered in {offered_text}: set regions.{region}."
                "availability_zones"
            )
        elif missing:
            status = Status.WARNING
            advice = (
                f"{region}: {fleet.instance_type} is not offered in {', '.join(missing)}; its hosts launch "
                f"only in {', '.join(usable)}"
            )
        else:
            status, advice = Status.OK, ""
        findings.append(
            Finding(
                "zones offering the type",
                fleet.instance_type,
                ", ".join(zones),
                offered_text,
                status,
                advice,
            )
        )
    return findings


def reservation_ids(settings: Settings, region: str) -> list[str]:
    ids: list[str] = []
    for fleet in settings.regions[region].fleets:
        ids.extend(_named_reservations(fleet))
    return ids


def _named_reservations(fleet: FleetConfig) -> list[str]:
    if fleet.capacity_block is not None:
        return [fleet.capacity_block.id]
    if fleet.capacity_reservation is not None and fleet.capacity_reservation.ids:
        return list(fleet.capacity_reservation.ids)
    return []


def reservation_findings(
    settings: Settings, region: str, reservations: Mapping[str, Mapping[str, Any] | None]
) -> list[Finding]:
    """Each named reservation: found, usable, of the fleet's type, in its zones, covering every event; then
    per fleet whether the reserved count covers the hosts that may only launch into it."""
    findings = []
    region_scenarios = scenarios(settings, region)
    for fleet in settings.regions[region].fleets:
        if fleet.capacity_reservation is not None and fleet.capacity_reservation.resource_group_arn:
            findings.append(
                Finding(
                    "reservation group",
                    fleet.instance_type,
                    fleet.capacity_reservation.resource_group_arn,
                    "not listed",
                    Status.WARNING,
                    f"{region}: the members of {fleet.capacity_reservation.resource_group_arn} are not "
                    "checked; name the reservations by id to have them checked",
                )
            )
        events = [s for s in region_scenarios if fleet.instance_type in s.fleets_in_event]
        total = 0
        for reservation_id in _named_reservations(fleet):
            found = reservations.get(reservation_id)
            finding = _one_reservation(settings, region, fleet, reservation_id, found, events)
            findings.append(finding)
            if found is not None and finding.status is not Status.SHORTFALL:
                total += int(found.get("TotalInstanceCount", 0))
        if _named_reservations(fleet):
            findings.append(_reserved_count(region, fleet, total, region_scenarios))
    return findings


def _one_reservation(
    settings: Settings,
    region: str,
    fleet: FleetConfig,
    reservation_id: str,
    found: Mapping[str, Any] | None,
    events: list[Scenario],
) -> Finding:
    check = f"reservation {reservation_id}"
    zones = fleet_zones(settings, region, fleet)
    needed = f"{fleet.instance_type} in {', '.join(zones)}"
    if found is None:
        return Finding(
            check, fleet.instance_type, needed, "not found", Status.SHORTFALL,
            f"{region}: capacity reservation {reservation_id} ({fleet.instance_type}) does not exist in "
            "this account and region",
        )  # fmt: skip
    state = str(found.get("State", "?"))
    end = found.get("EndDate")
    start = found.get("StartDate")
    available = (
        f"{state}, {found.get('InstanceType')} x{found.get('TotalInstanceCount')} in "
        f"{found.get('AvailabilityZone')}, {_when(start)} to {_when(end)}"
    )
    problems = []
    if state not in USABLE_STATES:
        problems.append(f"is {state}")
    if found.get("InstanceType") != fleet.instance_type:
        problems.append(f"holds {found.get('InstanceType')}, not {fleet.instance_type}")
    if found.get("AvailabilityZone") not in zones:
        problems.append(f"is in {found.get('AvailabilityZone')}, outside {', '.join(zones)}")
    # EC2 ends a Capacity Block's instances 30 minutes before the block ends.
    end_lead = timedelta(minutes=CAPACITY_BLOCK_END_LEAD_MINUTES if fleet.capacity_block else 0)
    for event in events:
        assert event.end is not None and event.ramp_start is not None
        if isinstance(end, datetime) and end - end_lead < event.end:
            problems.append(f"ends {_when(end)}, before event {event.name} ends {_when(event.end)}")
        if isinstance(start, datetime) and start > event.ramp_start:
            problems.append(
                f"starts {_when(start)}, after event {event.name}'s ramp {_when(event.ramp_start)}"
            )
    if problems:
        advice = f"{region}: capacity reservation {reservation_id} " + "; ".join(problems)
        return Finding(check, fleet.instance_type, needed, available, Status.SHORTFALL, advice)
    return Finding(check, fleet.instance_type, needed, available, Status.OK)


def _reserved_count(region: str, fleet: FleetConfig, total: int, region_scenarios: list[Scenario]) -> Finding:
    """With capacity-reservations-only or a Capacity Block, hosts beyond the reservation never launch: the
    reserved count must cover the max hosts. With -first the rest launch On-Demand (counted in the quota)."""
    peak_max = max(s.bounds[fleet.instance_type][1] for s in region_scenarios)
    peak_min = max(s.bounds[fleet.instance_type][0] for s in region_scenarios)
    only = fleet.capacity_block is not None or (
        fleet.capacity_reservation is not None
        and fleet.capacity_reservation.preference == "capacity-reservations-only"
    )
    if only and total < peak_max:
        status = Status.SHORTFALL
        advice = (
            f"{region}: {fleet.instance_type} may scale to {peak_max} hosts but only {total} are reserved, "
            "and it launches only into reservations"
        )
    elif total < peak_min:
        status = Status.WARNING
        advice = (
            f"{region}: {fleet.instance_type} holds at least {peak_min} hosts, {total} reserved; the rest "
            "launch On-Demand"
        )
    else:
        status, advice = Status.OK, ""
    needed = f"{peak_max} hosts" if only else f"{peak_min} hosts (min)"
    return Finding("reserved hosts", fleet.instance_type, needed, f"{total} hosts", status, advice)


def _when(moment: Any) -> str:
    if isinstance(moment, datetime):
        return moment.strftime("%Y-%m-%d %H:%M %Z").strip()
    return "open-ended" if moment is None else str(moment)
