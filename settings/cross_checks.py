"""Rules that span config sections (cells against fleets and events, networks against images, events
against each other): each returns (key path, message) pairs, so every problem is reported at its own key."""

from __future__ import annotations

from settings.aws_limits import CAPACITY_BLOCK_INSTANCES_MAX
from settings.cells import cells_needed, split_hosts
from settings.events import EventConfig, EventHosts
from settings.types import ECR_IMAGE_REGION, KeyPath
from settings.view import WholeConfig


def cell_problems(config: WholeConfig) -> list[tuple[KeyPath, str]]:
    """Every cell runs every fleet of its region, with at least one host at the fleet's max, and no cell
    runs more than cell_max_hosts at its fleets' max or an event's."""
    problems: list[tuple[KeyPath, str]] = []
    for name, region in config.regions.items():
        for index, fleet in enumerate(region.fleets):
            if fleet.max < region.cells:
                problems.append(
                    (
                        ("regions", name, "fleets", index, "max"),
                        f"max {fleet.max} is below the region's {region.cells} cells: every cell runs "
                        "every fleet and needs at least one host at its max",
                    )
                )
        for index, event in enumerate(config.events):
            for instance_type, bounds in event.regions.get(name, {}).items():
                if bounds.max < region.cells:
                    problems.append(
                        (
                            ("events", index, "regions", name, instance_type, "max"),
                            f"max {bounds.max} is below {name}'s {region.cells} cells: every cell runs "
                            "every fleet and needs at least one host at its max",
                        )
                    )
        scopes: list[tuple[KeyPath, EventConfig | None]] = [(("regions", name, "cells"), None)]
        scopes += [
            (("events", index, "regions", name), event)
            for index, event in enumerate(config.events)
            if name in event.regions
        ]
        for where, event in scopes:
            hosts = sum(config.region_max_hosts(name, event))
            needed = cells_needed(hosts, config.cell_max_hosts)
            if needed > region.cells:
                when = f"during event {event.name!r}" if event else "at the fleets' max"
                busiest = split_hosts(hosts, region.cells)[0]
                problems.append(
                    (
                        where,
                        f"{when}, {name} runs up to {hosts} hosts: {busiest} in its busiest of "
                        f"{region.cells} cell(s), above cell_max_hosts {config.cell_max_hosts}; set "
                        f"regions.{name}.cells to at least {needed}",
                    )
                )
    return problems


def network_problems(config: WholeConfig) -> list[tuple[KeyPath, str]]:
    """NAT gateways beyond the zones defaults resolve to, and images a region without NAT cannot pull."""
    problems: list[tuple[KeyPath, str]] = []
    for name, region in config.regions.items():
        where: KeyPath = ("regions", name, "nat_gateways")
        zones = config.availability_zones(name)
        if len(zones) < config.nat_gateways(name):
            problems.append(
                (
                    where,
                    f"{region.nat_gateways} is more than the region's {len(zones)} availability zones "
                    f"({', '.join(zones)}); a zone holds one NAT gateway at most",
                )
            )
        if config.nat_gateways(name) == 0:
            problems.extend((where, message) for message in _unreachable_without_nat(config, name))
    return problems


def _unreachable_without_nat(config: WholeConfig, region: str) -> list[str]:
    """Without NAT the hosts reach only this region's AWS endpoints: an image elsewhere never pulls."""
    problems = []
    for fleet in config.regions[region].fleets:
        uri = config.image_uri(region, fleet.instance.family)
        if uri is None:
            continue  # an asset: CDK pushes it to the bootstrap repository in the stack's region
        ecr = ECR_IMAGE_REGION.match(uri)
        if ecr is None or ecr["region"] != region:
            family = fleet.instance.family.value
            problems.append(
                f"0 NAT gateways, so the hosts cannot pull {uri} (the {family} image); replicate it "
                f"to ECR in {region} and set regions.{region}.image_uris.{family}"
            )
    return problems


def capacity_block_zone_problems(config: WholeConfig) -> list[tuple[KeyPath, str]]:
    problems: list[tuple[KeyPath, str]] = []
    for name, region in config.regions.items():
        zones = config.availability_zones(name)
        for index, fleet in enumerate(region.fleets):
            block = fleet.capacity_block
            if block is not None and block.availability_zone not in zones:
                problems.append(
                    (
                        ("regions", name, "fleets", index, "capacity_block", "availability_zone"),
                        f"{block.availability_zone} is not one of the stack's zones in {name} "
                        f"({', '.join(zones)}); a Capacity Block lives in one zone the hosts' subnets "
                        "must include",
                    )
                )
    return problems


def event_problems(config: WholeConfig) -> list[tuple[KeyPath, str]]:
    problems: list[tuple[KeyPath, str]] = []
    seen: dict[str, int] = {}
    for index, event in enumerate(config.events):
        if event.name in seen:
            problems.append(((("events", index, "name")), f"a second event named {event.name!r}"))
        seen.setdefault(event.name, index)
        for region, hosts in event.regions.items():
            problems.extend(_event_region_problems(config, index, event, region, hosts))
    problems.extend(_overlap_problems(config))
    return problems


def _event_region_problems(
    config: WholeConfig, index: int, event: EventConfig, region: str, hosts: dict[str, EventHosts]
) -> list[tuple[KeyPath, str]]:
    where: KeyPath = ("events", index, "regions", region)
    if region not in config.regions:
        return [(where, f"region {region} is not in the config's regions ({', '.join(config.regions)})")]
    fleets = {fleet.instance_type: fleet for fleet in config.regions[region].fleets}
    problems: list[tuple[KeyPath, str]] = []
    for instance_type, bounds in hosts.items():
        fleet = fleets.get(instance_type)
        if fleet is None:
            problems.append(
                (
                    (*where, instance_type),
                    f"{region} has no {instance_type} fleet (its fleets: {', '.join(fleets)})",
                )
            )
        elif fleet.capacity_block is not None and bounds.max > CAPACITY_BLOCK_INSTANCES_MAX:
            problems.append(
                (
                    (*where, instance_type, "max"),
                    f"max {bounds.max} is above the {CAPACITY_BLOCK_INSTANCES_MAX} instances one "
                    f"Capacity Block holds ({fleet.capacity_block.id})",
                )
            )
    return problems


def _overlap_problems(config: WholeConfig) -> list[tuple[KeyPath, str]]:
    """Two events on one fleet whose windows (ramp to lowered maximums) meet: the first one's restore
    or scale-in would cut the second one's raised bounds; windows that touch would change the bounds
    twice in one moment, in an order AWS does not promise."""
    budget = config.serving.cold_start_budget_seconds
    problems: list[tuple[KeyPath, str]] = []
    for later_index, later in enumerate(config.events):
        for earlier in config.events[:later_index]:
            if not (
                later.ramp_start(budget) <= earlier.scale_in_at
                and earlier.ramp_start(budget) <= later.scale_in_at
            ):
                continue
            for region, hosts in later.regions.items():
                shared = [t for t in hosts if t in earlier.regions.get(region, {})]
                for instance_type in shared:
                    problems.append(
                        (
                            ("events", later_index, "regions", region, instance_type),
                            f"overlaps event {earlier.name!r} on this fleet (windows include the "
                            f"{_lead_text(config, later)} pre-warm lead and the scale_in_after_minutes "
                            "after the end); one fleet takes one event at a time: merge them or move one",
                        )
                    )
    return problems


def _lead_text(config: WholeConfig, event: EventConfig) -> str:
    minutes = int(event.lead(config.serving.cold_start_budget_seconds).total_seconds() // 60)
    return f"{minutes} min"
