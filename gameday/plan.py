"""What the config plans a routing target to have serving at a moment, whatever the deployment did: the
verdict excuses sheds only beyond this (docs/gameday.md, "The verdict").

The plan is the config's event schedule kept on time: while an event naming the fleet holds (its start
to its end), the event's minimum hosts, split over the region's cells as the stacks split them; otherwise
the fleet's own minimum. The raise an event schedules ahead of its start (a cold start and a margin) is
there so that those hosts serve from the start: a deployment that raises late, or not at all, has less
than the plan, and what it then sheds within the plan is its own loss, not overload's."""

from __future__ import annotations

from datetime import datetime

from settings.cells import CELL_SEPARATOR, Cell, region_of
from settings.fleets import FleetConfig
from settings.schema import Settings


def cell_of(settings: Settings, name: str) -> Cell:
    """The cell a routing name (`us-east-1`, `us-east-1/2`) stands for."""
    region = region_of(name)
    index = int(name.split(CELL_SEPARATOR, 1)[1]) if CELL_SEPARATOR in name else 1
    return settings.cell(region, index)


def planned_min_hosts(settings: Settings, cell: Cell, fleet: FleetConfig, moment: datetime) -> int:
    """The fleet's minimum in the cell at `moment` under the config's schedule on time: the event's while
    an event naming the fleet in this region runs, else the fleet's own."""
    for event in settings.events:
        if fleet.instance_type in event.regions.get(cell.region, {}) and event.start <= moment < event.end:
            return settings.cell_bounds(cell, fleet, event)[0]
    return settings.cell_bounds(cell, fleet)[0]


def planned_hosts(settings: Settings, name: str, moment: datetime) -> dict[str, int]:
    """Instance type -> the planned minimum hosts of each fleet of the routing target at `moment`."""
    cell = cell_of(settings, name)
    return {
        fleet.instance_type: planned_min_hosts(settings, cell, fleet, moment)
        for fleet in settings.regions[cell.region].fleets
    }
