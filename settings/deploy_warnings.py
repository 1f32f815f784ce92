"""What validates but will likely fail at deploy time, or is stale: warnings, not errors."""

from __future__ import annotations

from datetime import UTC, datetime

from settings.aws_limits import (
    ALB_TARGETS_PER_LOAD_BALANCER,
    ALB_TARGETS_PER_TARGET_GROUP,
    ALB_TARGETS_PER_TASK,
    ECS_INSTANCES_PER_CLUSTER,
)
from settings.events import EventConfig
from settings.types import KeyPath
from settings.view import WholeConfig
from settings.zones import zones_missing


def deploy_warnings(config: WholeConfig, now: datetime | None = None) -> list[tuple[KeyPath, str]]:
    """(key path, message) for what validates but will likely fail at deploy time, or is stale."""
    found: list[tuple[KeyPath, str]] = []
    for name, region in config.regions.items():
        for fleet in region.fleets:
            missing = zones_missing(name, fleet.instance_type, region.availability_zones or [])
            if missing:
                found.append(
                    (
                        ("regions", name, "availability_zones"),
                        f"{fleet.instance_type} is not offered in {', '.join(missing)} per EC2's zone "
                        "offerings (zone names as the data's account sees them; check yours, see "
                        "settings/zone_offerings.py); its hosts would not launch there",
                    )
                )
        for index, fleet in enumerate(region.fleets):
            if not fleet.instance.offered_in(name):
                offered = ", ".join(sorted(fleet.instance.regions))
                found.append(
                    (
                        ("regions", name, "fleets", index, "instance_type"),
                        f"{fleet.instance_type} is not offered in {name} per the AWS price list "
                        f"(offered in {offered}); its hosts would not launch there",
                    )
                )
    found.extend(_event_warnings(config, now or datetime.now(UTC)))
    return found


def orchestrator_warnings(regions: int, home: str, largest: str) -> list[tuple[KeyPath, str]]:
    """The orchestrator in the largest serving region (only ever as configured: the default is another)."""
    if regions < 2 or home != largest:
        return []
    return [
        (
            ("routing", "orchestrator_region"),
            f"{home} is the largest serving region: an impairment of its CloudWatch or Lambda would hold "
            "every weight where it is just when its own traffic may need to move (the hard-fault health "
            "checks still act); run the orchestrator in another region",
        )
    ]


def _event_warnings(config: WholeConfig, now: datetime) -> list[tuple[KeyPath, str]]:
    found: list[tuple[KeyPath, str]] = []
    for index, event in enumerate(config.events):
        if event.scale_in_at <= now:
            found.append(
                (
                    ("events", index, "end"),
                    f"event {event.name!r} ended at {event.end.isoformat()} and its maximums came down "
                    f"at {event.scale_in_at.isoformat()}; nothing is scheduled for it (remove it when "
                    "convenient)",
                )
            )
    found.extend(_region_scale_warnings(config))
    return found


def _region_scale_warnings(config: WholeConfig) -> list[tuple[KeyPath, str]]:
    """A region's hosts at their maximums plus the deploy surge against the default quotas of its one
    ALB, its target groups and its one ECS cluster: everyday at the fleets, per event at the event."""
    found: list[tuple[KeyPath, str]] = []
    for name in config.regions:
        scopes: list[tuple[KeyPath, EventConfig | None]] = [(("regions", name, "fleets"), None)]
        scopes += [
            (("events", index, "regions", name), event)
            for index, event in enumerate(config.events)
            if name in event.regions
        ]
        for where, event in scopes:
            when = f"during event {event.name!r}" if event else "at the fleets' max"
            found.extend((where, message) for message in _scale_problems(config, name, event, when))
    return found


def _scale_problems(config: WholeConfig, region: str, event: EventConfig | None, when: str) -> list[str]:
    # Cell 1 takes the remainder of every split, so it is the busiest cell.
    hosts = config.peak_hosts(region, event, cell=1)
    targets = hosts * ALB_TARGETS_PER_TASK
    busiest = config.cell(region, 1)
    who = region if busiest.count == 1 else f"each cell of {region} (cell {busiest.name} the busiest)"
    head = f"{when}, {who} may run {hosts} hosts (max plus deploy surge), one task each"
    problems = []
    if targets > ALB_TARGETS_PER_LOAD_BALANCER:
        problems.append(
            f"{head}: {targets} targets on its one ALB (each task is an HTTP and a gRPC target), above "
            f"the default {ALB_TARGETS_PER_LOAD_BALANCER:,} targets per ALB: ask AWS to raise it "
            "(Service Quotas, Elastic Load Balancing); `make preflight` reads your account's"
        )
    if hosts > ALB_TARGETS_PER_TARGET_GROUP:
        problems.append(
            f"{head}: {hosts} targets in each target group, above the default "
            f"{ALB_TARGETS_PER_TARGET_GROUP:,} targets per target group: ask AWS to raise it"
        )
    if hosts > ECS_INSTANCES_PER_CLUSTER:
        problems.append(
            f"{head}: above ECS's {ECS_INSTANCES_PER_CLUSTER:,} container instances per cluster: split "
            "the region's load or ask AWS"
        )
    return problems
