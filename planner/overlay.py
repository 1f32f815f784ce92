"""Region plans -> the `events:` overlay the stacks consume: a config file that names its base and adds
one event with the hosts each region's fleets need (min) and may grow to (max) while it lasts."""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path
from typing import Annotated, Self

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from planner.forecast import EVENT_NAME, EventWindow, IsoTime
from planner.plan import RegionPlan
from settings.instances import INSTANCES
from settings.schema import RegionName

DEFAULT_PREWARM_MARGIN_MINUTES = 30


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, strict=True)


class HostRange(_Model):
    min: Annotated[int, Field(ge=0)]
    max: Annotated[int, Field(gt=0)]

    @model_validator(mode="after")
    def _ordered(self) -> Self:
        if self.min > self.max:
            raise ValueError(f"min ({self.min}) is above max ({self.max})")
        return self


class Event(_Model):
    """One entry of `events:` as the shared interface fixes it; the settings schema owns the real rules,
    this model checks what the planner writes until then."""

    name: Annotated[str, Field(pattern=EVENT_NAME)]
    start: IsoTime
    end: IsoTime
    prewarm_margin_minutes: Annotated[int, Field(ge=0)] = DEFAULT_PREWARM_MARGIN_MINUTES
    regions: dict[RegionName, dict[str, HostRange]]

    @field_validator("regions")
    @classmethod
    def _known_instances(cls, regions: dict[str, dict[str, HostRange]]) -> dict[str, dict[str, HostRange]]:
        for name, fleets in regions.items():
            unknown = sorted(set(fleets) - set(INSTANCES))
            if unknown:
                raise ValueError(f"{name}: unknown instance types {unknown}")
        return regions


class EventOverlay(_Model):
    base: Annotated[str, Field(min_length=1)]
    events: Annotated[list[Event], Field(min_length=1)]


def event_overlay(
    base: str, window: EventWindow, plans: Sequence[RegionPlan], prewarm_margin_minutes: int
) -> EventOverlay:
    regions = {
        plan.region: {
            fleet.instance_type: HostRange(min=fleet.hosts, max=fleet.max_hosts) for fleet in plan.fleets
        }
        for plan in plans
    }
    event = Event(
        name=window.name,
        start=window.start,
        end=window.end,
        prewarm_margin_minutes=prewarm_margin_minutes,
        regions=regions,
    )
    return EventOverlay(base=base, events=[event])


def render(overlay: EventOverlay, written_by: str) -> str:
    """The overlay as YAML in the shape of the README's example, one fleet per line."""
    lines = [
        f"# Written by `{written_by}`: change the forecast and run it again rather than",
        "# editing this file. The base config's fleets keep their limits; the event raises them from",
        "# the pre-warm lead time before its start until its end.",
        f"base: {overlay.base}",
        "events:",
    ]
    for event in overlay.events:
        lines += [
            f"  - name: {event.name}",
            f'    start: "{event.start}"',
            f'    end: "{event.end}"',
            f"    prewarm_margin_minutes: {event.prewarm_margin_minutes}",
            "    regions:",
        ]
        for region, fleets in event.regions.items():
            lines.append(f"      {region}:")
            lines += [
                f"        {kind}: {{min: {hosts.min}, max: {hosts.max}}}" for kind, hosts in fleets.items()
            ]
    return "\n".join(lines) + "\n"


def base_reference(config: Path, overlay: Path) -> str:
    """The base as the loader resolves it: relative to the overlay's folder."""
    return Path(os.path.relpath(config.resolve(), overlay.resolve().parent)).as_posix()
