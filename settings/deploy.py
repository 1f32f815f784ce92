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
    # Hours before an event's start, until its end, in which `make deploy` and the preflight refuse a change
    # of the hosts' AMI in the event's regions (`container.neuron_ami_release`, or AWS moving `recommended`):
    # the event's raise then launches its hosts on an AMI a canary roll has already proven. Image and config
    # changes are not frozen (ECS rolls them back on its own; the hotfix path is for the event itself);
    # `--roll-ami-in-freeze` rolls an AMI change deliberately. 0: no freeze.
    freeze_hours_before_event: Annotated[int, Field(ge=0, le=14 * 24)] = 48
