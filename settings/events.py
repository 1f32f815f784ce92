"""Scheduled peaks: when an event's raised host bounds take effect and come down."""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Annotated, Self

from pydantic import Field, model_validator

from settings.types import EventTime, PositiveInt, RegionName, StrictModel, problems_at


class EventHosts(StrictModel):
    # The fleet's minimum while the event's bounds hold (from its ramp to its end).
    min: Annotated[int, Field(ge=0)]
    # Its maximum, until scale_in_after_minutes after the end; may be above the fleet's own max.
    max: PositiveInt

    @model_validator(mode="after")
    def _min_within_max(self) -> Self:
        if self.min > self.max:
            raise ValueError(f"min ({self.min}) is above max ({self.max})")
        return self


class EventConfig(StrictModel):
    """A scheduled peak: each named fleet's bounds are raised ahead of start (by the cold-start budget plus
    the margin, so hosts are serving when the doors open) and restored at end."""

    # Unique among the events; names the scheduled actions (<name>-raise, <name>-restore, <name>-scale-in).
    name: Annotated[str, Field(pattern=r"^[a-z0-9](?:[a-z0-9-]{0,62}[a-z0-9])?$")]
    # When the event's traffic starts, ISO 8601 with an offset or Z; the raised bounds take effect a cold
    # start and prewarm_margin_minutes before it.
    start: EventTime
    # When it ends: the minimums come down then, the maximums scale_in_after_minutes later.
    end: EventTime
    # Time for instance launch and boot, added to serving.cold_start_budget_seconds ahead of start.
    prewarm_margin_minutes: Annotated[int, Field(ge=0, le=24 * 60)] = 30
    # At `end` only the minimums come back down; the maximums follow this long after, while target tracking
    # scales in at its own pace. Application Auto Scaling scales in to a lowered maximum at once (its user
    # guide, "How scheduled scaling works"), so lowering it at `end` would cut most of an event's tasks in
    # one minute in every region. At least a minute: a
    # maximum lowered with the minimum is that cut.
    scale_in_after_minutes: Annotated[int, Field(ge=1, le=24 * 60)] = 120
    # region -> instance type -> the hosts the event needs
    regions: Annotated[
        dict[RegionName, Annotated[dict[str, EventHosts], Field(min_length=1)]], Field(min_length=1)
    ]

    @model_validator(mode="after")
    def _ends_after_start(self) -> Self:
        if self.end <= self.start:
            message = f"end ({self.end.isoformat()}) is not after start ({self.start.isoformat()})"
            raise problems_at([(("end",), message)], type(self).__name__)
        return self

    def lead(self, cold_start_budget_seconds: int) -> timedelta:
        return timedelta(seconds=cold_start_budget_seconds, minutes=self.prewarm_margin_minutes)

    def ramp_start(self, cold_start_budget_seconds: int) -> datetime:
        """When the raised bounds take effect: early enough for a new host's whole cold start."""
        return self.start - self.lead(cold_start_budget_seconds)

    @property
    def scale_in_at(self) -> datetime:
        """When the raised maximums come down to the fleets' own: the end of the event's hold on a fleet."""
        return self.end + timedelta(minutes=self.scale_in_after_minutes)
