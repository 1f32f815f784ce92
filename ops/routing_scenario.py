"""A routing rehearsal scenario (YAML or JSON) and its replay through the real policy, minute by minute.

    regions: {us-east-1: {weight: 50}, us-west-2: {weight: 30}, us-east-2: {weight: 20}}
    minutes:    # one entry per orchestrator run; a region left out of a minute: its metrics are missing
      - us-east-1: {slow_first_token_share: 0.002, error_share: 0.0, healthy_hosts: 12, min_hosts: 4,
                    serving_slots: 384, requests_in_flight: 200, degraded: false}

Every figure of a region's minute is required but `degraded` (default false); a mistake is reported with
the file, line and key path, like a config error.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Annotated

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from orchestrator.routing.policy import (
    MAX_WEIGHT,
    Decision,
    PolicyParams,
    RegionMemory,
    RegionSignals,
    decide,
)
from settings.loader import ConfigError, format_path, read_document

Share = Annotated[float, Field(ge=0, le=1)]
Count = Annotated[float, Field(ge=0)]


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class MinuteOfRegion(_Strict):
    slow_first_token_share: Share
    error_share: Share
    healthy_hosts: Annotated[int, Field(ge=0)]
    min_hosts: Annotated[int, Field(ge=0)]
    serving_slots: Count
    requests_in_flight: Count
    degraded: bool = False

    def signals(self) -> RegionSignals:
        return RegionSignals(**self.model_dump())


class ScenarioRegion(_Strict):
    weight: Annotated[int, Field(ge=0, le=MAX_WEIGHT)]


class Scenario(_Strict):
    regions: Annotated[dict[str, ScenarioRegion], Field(min_length=1)]
    minutes: Annotated[list[dict[str, MinuteOfRegion]], Field(min_length=1)]

    @model_validator(mode="after")
    def _known_regions(self) -> Scenario:
        if sum(region.weight for region in self.regions.values()) == 0:
            raise ValueError("every region has weight 0")
        for index, minute in enumerate(self.minutes):
            unknown = sorted(set(minute) - set(self.regions))
            if unknown:
                raise ValueError(
                    f"minutes[{index}] names {unknown}, not in regions ({', '.join(self.regions)})"
                )
        return self


def load_scenario(path: str | Path) -> Scenario:
    """Raises ConfigError naming file:line: key.path for anything wrong."""
    document = read_document(Path(path))  # YAML; JSON is read by the same parser
    try:
        return Scenario.model_validate(document.data)
    except ValidationError as error:
        messages = []
        for item in error.errors():
            loc = tuple(item["loc"])
            line = next(
                (document.lines[loc[:end]] for end in range(len(loc), -1, -1) if loc[:end] in document.lines),
                None,
            )
            where = f"{document.path}:{line}" if line else str(document.path)
            message = "unknown key" if item["type"] == "extra_forbidden" else str(item["msg"])
            message = message.removeprefix("Value error, ")
            messages.append(f"{where}: {format_path(loc)}: {message}")
        raise ConfigError("\n".join(messages)) from None


@dataclass(frozen=True)
class Minute:
    minute: int
    decision: Decision
    bad: frozenset[str]  # regions whose signals looked bad this minute


def replay(scenario: Scenario, params: PolicyParams) -> list[Minute]:
    """Each minute is one orchestrator run; weights and memory carry over as Route 53 and SSM would."""
    weights = {name: region.weight for name, region in scenario.regions.items()}
    budget = sum(weights.values())
    memory: dict[str, RegionMemory] = {}
    result = []
    for index, minute in enumerate(scenario.minutes):
        signals = {name: region.signals() for name, region in minute.items()}
        decision = decide(params, budget, weights, signals, memory)
        bad = frozenset(name for name, s in signals.items() if s.problems(params))
        result.append(Minute(index, decision, bad))
        weights, memory = decision.weights, decision.memory
    return result


@dataclass(frozen=True)
class Drain:
    region: str
    first_bad_minute: int
    floor_minute: int | None  # first minute at or below the floor after that, None if never

    @property
    def runs(self) -> int | None:
        """Runs from the first bad one to the floor, counting both (1 = at the floor in the same run)."""
        return None if self.floor_minute is None else self.floor_minute - self.first_bad_minute + 1


def drains(minutes: list[Minute], params: PolicyParams) -> list[Drain]:
    """For each region that stayed bad long enough to be drained: how many runs it took to the floor."""
    found = []
    regions = minutes[0].decision.weights if minutes else {}
    for region in regions:
        streak_start = None
        for minute in minutes:
            if region not in minute.bad:
                streak_start = None
                continue
            if streak_start is None:
                streak_start = minute.minute
            if minute.minute - streak_start + 1 >= params.bad_runs_to_drain and all(
                d.region != region or d.first_bad_minute != streak_start for d in found
            ):
                floor_minute = next(
                    (m.minute for m in minutes[streak_start:] if m.decision.weights[region] <= params.floor),
                    None,
                )
                found.append(Drain(region, streak_start, floor_minute))
    return found
