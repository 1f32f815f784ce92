"""A routing rehearsal scenario (YAML or JSON) and its replay through the real policy, minute by minute.

    regions: {us-east-1: {weight: 50}, us-west-2: {weight: 30}, us-east-2: {weight: 20}}
    minutes:    # one entry per orchestrator run; a region left out of a minute: its metrics are missing
      - us-east-1: {slow_first_token_share: 0.002, error_share: 0.0, healthy_hosts: 12, min_hosts: 4,
                    serving_slots: 384, requests_in_flight: 200, degraded: false}
        repeat: 10  # optional: this entry stands for 10 minutes in a row

or, the same minutes by number (every minute from 0 covered once, in any order):

    minutes:
      0-9: {us-east-1: {...}, us-west-2: {...}}
      10: {us-east-1: {...}}

Every figure of a region's minute is required but `degraded` (default false). Mistakes are reported like
a config's (settings/loader.py does the locating and wording): file, line, key path and problem, every
problem at once, cross-entry ones (a region not in `regions` or not in the config, a gap between ranges)
at the line they come from.
"""

from __future__ import annotations

import re
from collections.abc import Collection
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from orchestrator.routing.policy import (
    MAX_WEIGHT,
    Decision,
    PolicyParams,
    RegionSignals,
)
from settings.loader import ConfigError, KeyPath, locate, read_document, validation_messages

Share = Annotated[float, Field(ge=0, le=1)]
Count = Annotated[float, Field(ge=0)]

REGIONS = "regions"
MINUTES = "minutes"
REPEAT = "repeat"
MAX_MINUTES = 7 * 24 * 60  # a week of runs bounds what `repeat` and ranges may expand to
_RANGE = re.compile(r"^\s*(\d+)\s*(?:-\s*(\d+)\s*)?$")


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
    """A scenario with every minute spelled out, as the replay reads it."""

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


class _ScenarioFile(_Strict):
    """The file as written, for validation: each minute entry once, keyed by its list index or its range
    key, so an error names the entry where it is written rather than every minute it stands for. Whether
    `minutes` is there at all, and its shape, are checked beside it (`_written_minutes`)."""

    regions: Annotated[dict[str, ScenarioRegion], Field(min_length=1)]
    minutes: dict[int | str, dict[str, MinuteOfRegion]] | None = None


@dataclass(frozen=True)
class _Entry:
    key: int | str  # list index, or the range key as written ("0-9")
    first: int  # the first minute it stands for
    count: int
    regions: Any  # the entry as written, without `repeat`


def _span(key: Any) -> tuple[int, int] | None:
    """A range key (`7`, `0-9`) -> (first minute, count); None if it is not one."""
    if isinstance(key, bool):
        return None
    if isinstance(key, int):
        return (key, 1) if key >= 0 else None
    match = _RANGE.match(str(key))
    if not match:
        return None
    first = int(match.group(1))
    last = int(match.group(2)) if match.group(2) is not None else first
    return (first, last - first + 1) if last >= first else None


def _listed_entries(raw: list[Any], problems: list[tuple[KeyPath, str]]) -> list[_Entry]:
    entries = []
    minute = 0
    for index, item in enumerate(raw):
        count = 1
        if isinstance(item, dict) and REPEAT in item:
            item = dict(item)
            repeat = item.pop(REPEAT)
            if isinstance(repeat, int) and not isinstance(repeat, bool) and 1 <= repeat <= MAX_MINUTES:
                count = repeat
            else:
                problems.append(
                    (
                        (MINUTES, index, REPEAT),
                        f"must be a whole number of minutes, 1 to {MAX_MINUTES}, got {repeat!r}",
                    )
                )
        entries.append(_Entry(index, minute, count, item))
        minute += count
    return entries


def _ranged_entries(raw: dict[Any, Any], problems: list[tuple[KeyPath, str]]) -> list[_Entry]:
    entries = []
    for key, item in raw.items():
        span = _span(key)
        if span is None:
            problems.append(((MINUTES, str(key)), "must be a minute (7) or a range of minutes (0-9)"))
            continue
        if isinstance(item, dict) and REPEAT in item:
            problems.append(
                ((MINUTES, str(key), REPEAT), "a range says how many minutes; repeat is for list entries")
            )
            item = {region: figures for region, figures in item.items() if region != REPEAT}
        entries.append(_Entry(str(key), span[0], span[1], item))
    entries.sort(key=lambda entry: entry.first)
    covered = 0  # minutes 0 .. covered-1 have an entry
    for entry in entries:
        if entry.first > covered:
            missing = str(covered) if entry.first == covered + 1 else f"{covered}-{entry.first - 1}"
            problems.append(
                (
                    (MINUTES, entry.key),
                    f"no entry for minute(s) {missing} before it: every minute from 0 needs one "
                    "(a region left out of an entry is a minute without its metrics)",
                )
            )
        elif entry.first < covered:
            problems.append(
                ((MINUTES, entry.key), f"overlaps minute(s) already covered (up to {covered - 1})")
            )
        covered = max(covered, entry.first + entry.count)
    return entries


def _written_minutes(data: dict[str, Any], problems: list[tuple[KeyPath, str]]) -> list[_Entry]:
    if MINUTES not in data:
        problems.append(((MINUTES,), "required key is missing"))
        return []
    raw = data[MINUTES]
    if isinstance(raw, list):
        entries = _listed_entries(raw, problems)
    elif isinstance(raw, dict):
        entries = _ranged_entries(raw, problems)
    else:
        problems.append(
            ((MINUTES,), f"must be a list of minute entries or a mapping of minutes (0-9: ...), got {raw!r}")
        )
        return []
    total = sum(entry.count for entry in entries)
    if not entries:
        problems.append(((MINUTES,), "has no minutes"))
    elif total > MAX_MINUTES:
        problems.append(((MINUTES,), f"stands for {total} minutes, more than {MAX_MINUTES}"))
    return entries


def _cross_entry_problems(
    data: dict[str, Any],
    entries: list[_Entry],
    config_regions: Collection[str] | None,
    config_name: str,
) -> list[tuple[KeyPath, str]]:
    """What no single field shows, from the file as written (whatever else is wrong with it)."""
    problems: list[tuple[KeyPath, str]] = []
    regions = data.get(REGIONS)
    if not isinstance(regions, dict):
        return problems
    if regions and all(isinstance(r, dict) and r.get("weight") == 0 for r in regions.values()):
        problems.append(((REGIONS,), "every region has weight 0, so no traffic would go anywhere"))
    if config_regions is not None:
        for region in regions:
            if region not in config_regions:
                problems.append(
                    (
                        (REGIONS, region),
                        f"{region} is not a region of {config_name} ({', '.join(config_regions)}); "
                        "rehearse with the config that deploys it (CONFIG=...)",
                    )
                )
    for entry in entries:
        if not isinstance(entry.regions, dict):
            continue
        for region in entry.regions:
            if region not in regions:
                problems.append(
                    (
                        (MINUTES, entry.key, region),
                        f"{region} is not in this scenario's regions ({', '.join(map(str, regions))})",
                    )
                )
    return problems


def _line_number(message: str) -> int:
    match = re.match(r"^[^\n]*?:(\d+): ", message)
    return int(match.group(1)) if match else 0


def load_scenario(
    path: str | Path, config_regions: Collection[str] | None = None, config_name: str = "the config"
) -> Scenario:
    """Raises ConfigError naming file:line: key.path for every problem found, sorted by line. With
    `config_regions`, a region the config does not deploy is one of them."""
    document = read_document(Path(path))  # YAML; JSON is read by the same parser
    data = document.data
    problems: list[tuple[KeyPath, str]] = []
    entries = _written_minutes(data, problems)
    problems += _cross_entry_problems(data, entries, config_regions, config_name)
    written = {key: value for key, value in data.items() if key != MINUTES}
    written[MINUTES] = {entry.key: entry.regions for entry in entries}
    messages = [locate(document, loc, message) for loc, message in problems]
    try:
        parsed = _ScenarioFile.model_validate(written)
    except ValidationError as error:
        messages += validation_messages(error, written, [document], _ScenarioFile)
    if messages:
        raise ConfigError("\n".join(sorted(messages, key=_line_number)))
    by_key = parsed.minutes or {}
    minutes = [by_key[entry.key] for entry in entries for _ in range(entry.count)]
    return Scenario(regions=parsed.regions, minutes=minutes)


@dataclass(frozen=True)
class Minute:
    minute: int
    decision: Decision
    bad: frozenset[str]  # regions whose signals looked bad this minute


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
