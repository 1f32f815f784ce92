"""What the account must offer for a config, judged from plain data read from AWS (no AWS calls here)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from enum import StrEnum
from typing import Any

from ops.preflight.assembly import ScheduledStart
from ops.preflight.aws import FleetGroup, LambdaConcurrency, NetworkUse
from settings.aws_limits import (
    ALB_TARGETS_PER_LOAD_BALANCER,
    ALB_TARGETS_PER_TARGET_GROUP,
    ALB_TARGETS_PER_TASK,
    CAPACITY_BLOCK_END_LEAD_MINUTES,
    ECS_INSTANCES_PER_CLUSTER,
    ELASTIC_IPS,
    INTERNET_GATEWAYS_PER_REGION,
    NAT_GATEWAYS_PER_ZONE,
    UNRESERVED_CONCURRENCY_MIN,
    VPCS_PER_REGION,
)
from settings.cells import split_hosts
from settings.instances import QUOTA_NAMES
from settings.quotas import network_needs, orchestrator_needs
from settings.rollout import surge_hosts
from settings.schema import FleetConfig, Settings

# DescribeAccountLimits names and the ECS quota's name in Service Quotas (ECS developer guide, "Amazon ECS
# service quotas"), with the defaults used where the account reports none.
ELB_TARGETS_PER_ALB = "targets-per-application-load-balancer"
# DescribeAccountLimits has no per-target-group limit: Service Quotas keeps it under this name (ALB user
# guide, "Quotas for your Application Load Balancers").
ELB_TARGETS_PER_TARGET_GROUP = "Targets per Target Group per Region (instances or IP addresses)"
ELB_SERVICE_CODE = "elasticloadbalancing"
ECS_CONTAINER_INSTANCES = "Container instances per cluster"
SCALE_LIMITS = (
    (ELB_TARGETS_PER_ALB, ALB_TARGETS_PER_LOAD_BALANCER),
    (ELB_TARGETS_PER_TARGET_GROUP, ALB_TARGETS_PER_TARGET_GROUP),
    (ECS_CONTAINER_INSTANCES, ECS_INSTANCES_PER_CLUSTER),
)
# A regional stack takes a while to create or update, and CloudFormation creates the scheduled actions late
# in it: a start time this close to the deploy may pass before its action exists (AWS refuses a past one).
DEPLOY_MARGIN = timedelta(minutes=30)

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


def hosts_at_once(settings: Settings, fleet: FleetConfig, max_hosts: int, cells: int = 1) -> int:
    """Hosts of a fleet that may run at once under a maximum: the maximum, the deploy surge above it, and
    its warm pool. Each cell's group surges above its own share of the maximum (at least one host each), so
    a region of cells surges more than one group would. Pool hosts run while they are prepared (launch, user
    data) before they stop, and the pool refills as it is drawn: with the group at its ceiling, the pool's
    min_size more; with max_prepared, at least that many."""
    percent = settings.serving.deployment.max_surge_percent
    group_max = sum(high + surge_hosts(high, percent) for high in split_hosts(max_hosts, cells))
    pool = fleet.warm_pool
    if pool is None:
        return group_max
    return max(group_max + pool.min_size, pool.max_prepared or 0)


def vcpus_needed(settings: Settings, region: str, scenario: Scenario) -> dict[str, int]:
    """Quota code -> vCPUs of every fleet's hosts at once (max hosts, deploy surge and warm pool): what
    scaling, a deploy and the pool may reach while the bounds hold."""
    needed: dict[str, int] = {}
    for fleet in settings.regions[region].fleets:
        code = fleet.instance.on_demand_vcpu_quota
        cells = settings.regions[region].cells
        hosts = hosts_at_once(settings, fleet, scenario.bounds[fleet.instance_type][1], cells)
        needed[code] = needed.get(code, 0) + hosts * fleet.instance.vcpus
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
                    f"the fleets' max hosts with deploy surge and warm pools need {vcpus:,}: request an "
                    "increase in Service Quotas"
                    if short
                    else "",
                )
            )
    return findings


def scale_findings(settings: Settings, region: str, limits: Mapping[str, float]) -> list[Finding]:
    """Per scenario: the region's hosts at their maximums plus the deploy surge (one task each, each task an
    HTTP and a gRPC target) against the account's targets per ALB and per target group and its container
    instances per cluster. Warm-pool hosts do not register with the cluster (ECS_WARM_POOLS_CHECK)."""
    findings = []
    for scenario in scenarios(settings, region):
        event = next((e for e in settings.events if e.name == scenario.name), None)
        hosts = settings.peak_hosts(region, event)
        needs = {
            ELB_TARGETS_PER_ALB: hosts * ALB_TARGETS_PER_TASK,
            ELB_TARGETS_PER_TARGET_GROUP: hosts,
            ECS_CONTAINER_INSTANCES: hosts,
        }
        for name, default in SCALE_LIMITS:
            have = limits.get(name)
            reported = have is not None
            have = have if reported else float(default)
            need = needs[name]
            short = need > have
            advice = (
                f"{region} {scenario.name}: {hosts} hosts (max plus deploy surge) need {need:,} for "
                f"{name}, the account has {have:,.0f}: request an increase before the event"
                if short
                else ""
            )
            findings.append(
                Finding(
                    name,
                    scenario.name,
                    f"{need:,}",
                    f"{have:,.0f}" + ("" if reported else " (default; not reported)"),
                    Status.SHORTFALL if short else Status.OK,
                    advice,
                )
            )
    return findings


def layer_finding(region: str, parameter: str, exists: bool) -> Finding:
    """The orchestrator's Powertools layer is found at deploy time through AWS's public SSM parameter: a
    version or runtime without one in the orchestrator's region fails the global stack's deploy."""
    return Finding(
        "Powertools layer parameter",
        "orchestrator",
        parameter,
        "found" if exists else "not found",
        Status.OK if exists else Status.SHORTFALL,
        ""
        if exists
        else f"{region}: SSM parameter {parameter} does not exist: Powertools publishes no layer of that "
        "version and runtime there; pin a version it publishes (stacks/routing_names.py)",
    )


def schedule_findings(
    region: str, stack: str, starts: list[ScheduledStart] | None, now: datetime
) -> list[Finding]:
    """Every scheduled action of the region's synthesized stack must start after the deploy: times are
    computed at synth, and an assembly deployed after a ramp has begun carries a start AWS rejects (or one
    that passes before CloudFormation creates it)."""
    if starts is None:
        return [
            Finding(
                "scheduled actions", stack, "a synthesized template", "none in the assembly", Status.WARNING,
                f"{region}: no template for {stack} in the assembly; run `make synth` with this config just "
                "before the deploy and run the preflight again to check its scheduled start times",
            )
        ]  # fmt: skip
    cutoff = now + DEPLOY_MARGIN
    late = [start for start in starts if start.at <= cutoff]
    if not starts:
        return [Finding("scheduled actions", stack, "start after deploy", "none scheduled", Status.OK)]
    first = starts[0].at.strftime("%Y-%m-%d %H:%M UTC")
    if not late:
        return [
            Finding("scheduled actions", stack, f"start after {_when(cutoff)}", f"first {first}", Status.OK)
        ]
    names = ", ".join(f"{start.action} at {start.at.strftime('%Y-%m-%d %H:%M UTC')}" for start in late)
    return [
        Finding(
            "scheduled actions",
            stack,
            f"start after {_when(cutoff)}",
            f"{len(late)} at or before it",
            Status.SHORTFALL,
            f"{region}: the assembly's {stack} schedules {names}, no later than {DEPLOY_MARGIN} from now: "
            "synthesize again (`make synth`) right before deploying, so times past are left out",
        )
    ]


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


def _in_use(use: NetworkUse, code: str) -> int:
    return {
        ELASTIC_IPS.code: use.elastic_ips,
        VPCS_PER_REGION.code: use.vpcs,
        INTERNET_GATEWAYS_PER_REGION.code: use.internet_gateways,
        NAT_GATEWAYS_PER_ZONE.code: use.nat_gateways_busiest_zone,
    }[code]


def account_quota_findings(
    settings: Settings, region: str, quotas: Mapping[str, float], use: NetworkUse
) -> list[Finding]:
    """What every cell's VPC takes (settings/quotas.py) against the account's own quota less what others
    already hold in the region (the default VPC counts; this project's own stacks do not, a redeploy keeps
    them)."""
    findings = []
    for need in network_needs(settings, region):
        quota = need.quota
        have = quotas.get(quota.code, float(quota.default))
        taken = _in_use(use, quota.code)
        free = have - taken
        short = need.needed > free
        findings.append(
            Finding(
                f"{quota.name} ({quota.service} {quota.code})",
                "all cells",
                f"{need.needed:,}",
                f"{free:,.0f} ({have:,.0f} less {taken} in use)",
                Status.SHORTFALL if short else Status.OK,
                need.message(free, f"the account has {have:,.0f} with {taken} in use by others, so")
                if short
                else "",
            )
        )
    return findings


def concurrency_finding(settings: Settings, concurrency: LambdaConcurrency) -> Finding:
    """How the orchestrator keeps one run at a time here: the run lock always; reserved concurrency 1 too
    where config asks, which Lambda allows only while 100 stay unreserved."""
    reserve_fits = concurrency.unreserved - 1 >= UNRESERVED_CONCURRENCY_MIN
    available = f"{concurrency.limit:,} concurrency, {concurrency.unreserved:,} unreserved"
    if settings.routing.reserved_concurrency:
        (need,) = orchestrator_needs(settings)
        return Finding(
            "orchestrator: reserved concurrency 1 + run lock",
            "orchestrator",
            f"{need.needed} unreserved",
            available,
            Status.OK if reserve_fits else Status.SHORTFALL,
            ""
            if reserve_fits
            else f"{need.region}: Lambda keeps {UNRESERVED_CONCURRENCY_MIN} unreserved and the account has "
            f"{concurrency.unreserved:,}: the global stack would fail; set routing.reserved_concurrency "
            "false (the run lock keeps runs apart) or raise Concurrent executions (lambda L-B99A9384)",
        )
    return Finding(
        "orchestrator: run lock (DynamoDB)",
        "orchestrator",
        "no reserved concurrency",
        available
        + ("; reserved concurrency would fit" if reserve_fits else "; reserved concurrency would not fit"),
        Status.OK,
    )


def ami_finding(region: str, parameter: str, exists: bool) -> Finding:
    """The hosts' AMI is resolved at deploy time from AWS's public SSM parameter of the pinned release: a
    release not published in a region fails that region's stack."""
    return Finding(
        "Neuron AMI parameter",
        "hosts",
        parameter,
        "found" if exists else "not found",
        Status.OK if exists else Status.SHORTFALL,
        ""
        if exists
        else f"{region}: SSM parameter {parameter} does not exist: that ECS Neuron AMI release is not "
        "published here; set container.neuron_ami_release to one that is",
    )


def artifact_finding(region: str, instance_type: str, key: str, uri: str, exists: bool) -> Finding:
    """A fleet's hosts refuse to start without compiled artifacts of their exact key (a compile at start
    would take an hour during a peak): the key's manifest must exist before the deploy."""
    return Finding(
        "compiled artifacts",
        instance_type,
        key,
        "complete" if exists else "no artifact-manifest.json",
        Status.OK if exists else Status.SHORTFALL,
        ""
        if exists
        else f"{region}: {instance_type} needs compiled artifacts {key} ({uri}): none complete; run "
        "`make compile` (DRY_RUN=1 lists every key)",
    )


# ---- the hosts' AMI: what runs against what the template boots, and the freeze before an event --------


@dataclass(frozen=True)
class Freeze:
    """The window before (and through) an event in which the hosts' AMI is not changed:
    deploy.freeze_hours_before_event before its start, until its end."""

    event: str
    begins: datetime
    ends: datetime

    def describe(self) -> str:
        return f"the freeze before {self.event} ({_when(self.begins)} until {_when(self.ends)})"


def ami_freeze(settings: Settings, region: str, now: datetime) -> Freeze | None:
    """The freeze `now` falls in for a region, if any (of overlapping ones, the one that ends last)."""
    hours = settings.deploy.freeze_hours_before_event
    if hours == 0:
        return None
    windows = [
        Freeze(event.name, (event.start - timedelta(hours=hours)).astimezone(UTC), event.end.astimezone(UTC))
        for event in settings.events
        if region in event.regions
    ]
    inside = [window for window in windows if window.begins <= now < window.ends]
    return max(inside, key=lambda window: window.ends, default=None)


@dataclass(frozen=True)
class AmiDrift:
    """A group whose hosts do not all run the AMI its template boots."""

    group: str
    instance_type: str
    target: str  # the AMI the template boots
    stale: dict[str, int]  # AMI -> hosts that booted it, for every AMI but the target
    hosts: int  # the group's hosts

    @property
    def stale_hosts(self) -> int:
        return sum(self.stale.values())

    def describe(self) -> str:
        running = ", ".join(f"{count} run {image}" for image, count in sorted(self.stale.items()))
        return (
            f"{self.stale_hosts} of {self.hosts} hosts of {self.instance_type} ({self.group}): {running}; "
            f"the template boots {self.target}"
        )


def ami_drift(group: FleetGroup, target: str) -> AmiDrift | None:
    """The group's hosts that booted an AMI other than `target`, or None when every host runs it."""
    stale: dict[str, int] = {}
    for image in group.hosts.values():
        if image != target:
            stale[image] = stale.get(image, 0) + 1
    if not stale:
        return None
    return AmiDrift(group.name, group.instance_type, target, stale, len(group.hosts))


def ami_drifts(groups: list[FleetGroup], targets: Mapping[str, str | None]) -> list[AmiDrift]:
    """Each group against the AMI its fleet's template boots (instance type -> image; a type without one is
    left out: nothing to compare with)."""
    found = []
    for group in groups:
        target = targets.get(group.instance_type)
        drift = ami_drift(group, target) if target else None
        if drift is not None:
            found.append(drift)
    return found


def ami_roll_findings(
    region: str, stack: str, drifts: list[AmiDrift], freeze: Freeze | None, allowed: bool = False
) -> list[Finding]:
    """A fleet whose hosts run another AMI than the template's is rolled by the deploy, canary first (a
    warning to read); inside the freeze before an event it is a shortfall unless rolled deliberately."""
    findings = []
    for drift in drifts:
        advice = f"{region} {stack}: {drift.describe()}: the deploy will roll them (canary first)"
        status = Status.WARNING
        if freeze is not None:
            advice += f"; this is inside {freeze.describe()}"
            if not allowed:
                status = Status.SHORTFALL
                advice += (
                    f": deploy the AMI change after {_when(freeze.ends)}, or roll it deliberately with "
                    "`python -m ops.deploy_waves CONFIG --roll-ami-in-freeze`"
                )
        findings.append(
            Finding(
                "hosts on the template's AMI",
                drift.instance_type,
                drift.target,
                ", ".join(f"{count} on {image}" for image, count in sorted(drift.stale.items())),
                status,
                advice,
            )
        )
    return findings
