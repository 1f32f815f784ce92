"""A deploy's wave and how its watched alarms are read: shared by the waves (ops/deploy_waves.py) and the host
roll that runs inside a cell's wave (ops/host_roll.py), so neither imports the other."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

STABLE_TIMEOUT_SECONDS = 30 * 60.0  # only where no config says better (tests, a wave built by hand)
# Beyond the rolling deploy's own time (rounds x cold-start budget): host launch, ECS registration and the
# ALB's health checks before ECS counts a task as running.
STABLE_MARGIN_SECONDS = 15 * 60.0
COLD_START_SECONDS = 30 * 60.0  # only where no config says better: serving.cold_start_budget_seconds


@dataclass(frozen=True)
class Wave:
    stack: str
    region: str | None = None  # None: the global stack, which runs no services and has no region alarms
    alarms: tuple[str, ...] = ()
    cell: str = ""  # the cell's name (`us-east-1/2`) in a region of several cells
    # How long its services may take to settle: its slowest fleet's rolling deploy (stable_timeout_seconds).
    stable_timeout_seconds: float = STABLE_TIMEOUT_SECONDS
    home: str = ""  # the global stack's region (its alarms are read there); empty for a cell's wave
    # How long its targets may take to be healthy once its tasks run (the model's cold start); the target
    # groups' health checks add their own time (read from the groups).
    cold_start_seconds: float = COLD_START_SECONDS
    # Waves of one group deploy one after another, then are watched side by side (the hotfix path's
    # regions); None: a group of its own.
    group: int | None = None

    @property
    def label(self) -> str:
        return self.cell or self.region or "global"

    @property
    def target(self) -> str:
        """What the wave's services are read for: the region, or the one cell of it the wave deploys."""
        return self.cell or self.region or ""


def alarm_problems(described: dict[str, Any], watched: Iterable[str]) -> tuple[list[str], list[str]]:
    """(missing, firing) in a DescribeAlarms answer (metric and composite alarms): each watched alarm that
    is not there, since it watches nothing, and each one in ALARM."""
    missing, firing = [], []
    for missing_one, problem in _alarm_states(described, watched):
        (missing if missing_one else firing).append(problem)
    return missing, firing


def alarms_firing(described: dict[str, Any], watched: Iterable[str]) -> list[str]:
    """Problems in a DescribeAlarms answer, in the watched order: each alarm in ALARM or missing."""
    return [problem for _, problem in _alarm_states(described, watched)]


def _alarm_states(described: dict[str, Any], watched: Iterable[str]) -> list[tuple[bool, str]]:
    found = {
        alarm["AlarmName"]: alarm
        for kind in ("MetricAlarms", "CompositeAlarms")
        for alarm in described.get(kind, [])
    }
    problems = []
    for name in watched:
        alarm = found.get(name)
        if alarm is None:
            problems.append((True, f"{name} does not exist, so the region cannot be watched"))
        elif alarm.get("StateValue") == "ALARM":
            reason = alarm.get("StateReason", "").strip()
            problems.append((False, f"{name} is in ALARM" + (f": {reason}" if reason else "")))
    return problems


def read_alarms(cloudwatch: Any, names: Sequence[str]) -> dict[str, Any]:
    """The watched alarms as DescribeAlarms answers them. Without AlarmTypes it answers metric alarms only,
    and region-degraded is composite."""
    return cloudwatch.describe_alarms(AlarmNames=list(names), AlarmTypes=["CompositeAlarm", "MetricAlarm"])
