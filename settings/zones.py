"""Which availability zones a region's fleets can use, from the zone offerings table: defaults for a region
that names none, and the configured zones that miss a fleet's instance type."""

from __future__ import annotations

from collections.abc import Sequence

from settings.zone_offerings import REGION_ZONES, ZONE_NAMES

# A VPC for an ALB needs subnets in two zones at least; three keep a zone outage to a third of the hosts
# without paying for endpoints and NAT gateways in more zones.
MIN_ZONES = 2
MAX_DEFAULT_ZONES = 3


def zones_offering(region: str, instance_type: str) -> tuple[str, ...] | None:
    """Zone names offering the type in the region, or None where the table has no data for the region."""
    if region not in REGION_ZONES:
        return None
    return ZONE_NAMES.get(region, {}).get(instance_type, ())


def default_zones(region: str, instance_types: Sequence[str]) -> list[str]:
    """Up to three zones that offer every fleet's type; padded to two with the zones offering most of the
    types when fewer offer them all (a fleet's hosts then stay in the zones that offer its type)."""
    known = REGION_ZONES.get(region)
    if not known:
        return [f"{region}{letter}" for letter in "abc"]

    def offered_types(zone: str) -> int:
        return sum(zone in (zones_offering(region, name) or ()) for name in instance_types)

    everywhere = [zone for zone in known if offered_types(zone) == len(instance_types)]
    chosen = everywhere[:MAX_DEFAULT_ZONES]
    if len(chosen) < MIN_ZONES:
        # Stable sort: zones offering more of the types first, then by name.
        rest = sorted((zone for zone in known if zone not in chosen), key=lambda zone: -offered_types(zone))
        chosen += rest[: MIN_ZONES - len(chosen)]
    return sorted(chosen)


def zones_missing(region: str, instance_type: str, zones: Sequence[str]) -> list[str]:
    """Configured zones the table says do not offer the type ([] where the table has no data)."""
    offering = zones_offering(region, instance_type)
    if offering is None:
        return []
    return [zone for zone in zones if zone not in offering]


def fleet_zones(region: str, instance_type: str, zones: Sequence[str]) -> list[str]:
    """The region's zones a fleet's hosts launch in: those offering its type, or all of them where the
    table knows none (the warning for that case has already been given)."""
    offering = [zone for zone in zones if zone not in zones_missing(region, instance_type, zones)]
    return offering or list(zones)
