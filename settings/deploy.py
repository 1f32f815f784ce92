"""How `make deploy` rolls a change out."""

from __future__ import annotations

from typing import Annotated

from pydantic import Field

from settings.types import StrictModel


class DeployConfig(StrictModel):
    """How `make deploy` rolls a change out: one region at a time, each watched before the next."""

    # Minutes a region's region-unfit and region-degraded alarms are watched after its services are stable;
    # 0 only waits for stability. Long enough for the alarms' own evaluation windows to see new tasks.
    bake_minutes: Annotated[int, Field(ge=0, le=24 * 60)] = 15
