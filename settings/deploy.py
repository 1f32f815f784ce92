"""How `make deploy` rolls a change out."""

from __future__ import annotations

from typing import Annotated

from pydantic import Field

from settings.types import StrictModel


class DeployConfig(StrictModel):
    """How `make deploy` rolls a change out: one region at a time, each watched before the next."""

    # Minutes a cell's region-unfit and region-degraded alarms are watched once its services are stable,
    # its targets healthy and its alarms out of ALARM (a first deploy's alarms wait for their data); 0 only
    # waits for those. Long enough for the alarms' own evaluation windows to see new tasks.
    bake_minutes: Annotated[int, Field(ge=0, le=24 * 60)] = 15
