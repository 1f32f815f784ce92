"""Recurring scheduled actions: the cron expressions Auto Scaling groups (`Recurrence`, five fields, Unix
cron) and Application Auto Scaling scalable targets (`cron(...)`, six fields with a year) take, each in its
time zone (UTC unless the action names one).

Sources: Amazon EC2 Auto Scaling User Guide, "Scheduled scaling" (Recurrence: "[Minute] [Hour]
[Day_of_Month] [Month_of_Year] [Day_of_Week]", Unix cron); Application Auto Scaling User Guide, "Scheduled
scaling" and the EventBridge cron format it uses ("cron(Minutes Hours Day-of-month Month Day-of-week
Year)", day of week 1-7 from Sunday or SUN-SAT, `?` for one of the day fields). `L`, `W` and `#` are not
modelled: a template that uses them is refused by name."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from zoneinfo import ZoneInfo

_MONTH_NAMES = ("JAN", "FEB", "MAR", "APR", "MAY", "JUN", "JUL", "AUG", "SEP", "OCT", "NOV", "DEC")
MONTHS = {name: index for index, name in enumerate(_MONTH_NAMES, 1)}
DAYS = {name: index for index, name in enumerate(("SUN", "MON", "TUE", "WED", "THU", "FRI", "SAT"))}


class CronError(ValueError):
    """A cron expression the twin cannot read."""


def _field(text: str, low: int, high: int, names: dict[str, int], shift: int = 0) -> frozenset[int] | None:
    """The values a field allows (None: any). `shift` maps the field's numbering onto ours."""
    if text in ("*", "?"):
        return None
    values: set[int] = set()
    for part in text.split(","):
        step = 1
        if "/" in part:
            part, step_text = part.split("/", 1)
            step = int(step_text)
        if part in ("*", "?"):
            start, end = low, high
        elif "-" in part:
            first, last = part.split("-", 1)
            start, end = _value(first, names, shift), _value(last, names, shift)
        else:
            start = _value(part, names, shift)
            end = high if step > 1 else start
        if not (low <= start <= high and low <= end <= high):
            raise CronError(f"{part!r} outside {low}-{high}")
        values.update(range(start, end + 1, step))
    return frozenset(values)


def _value(text: str, names: dict[str, int], shift: int) -> int:
    upper = text.upper()
    if upper in names:
        return names[upper]
    if not upper.isdigit():
        raise CronError(f"{text!r} is not modelled (only numbers, names, ranges, lists and steps)")
    return int(upper) - shift


@dataclass(frozen=True)
class Cron:
    minutes: frozenset[int] | None
    hours: frozenset[int] | None
    days: frozenset[int] | None
    months: frozenset[int] | None
    weekdays: frozenset[int] | None  # 0 = Sunday
    years: frozenset[int] | None
    zone: str = "UTC"

    def matches(self, moment: datetime) -> bool:
        local = moment.astimezone(ZoneInfo(self.zone))
        weekday = (local.weekday() + 1) % 7  # Python's Monday 0 -> Sunday 0
        checks = (
            (self.minutes, local.minute),
            (self.hours, local.hour),
            (self.months, local.month),
            (self.years, local.year),
        )
        if any(allowed is not None and value not in allowed for allowed, value in checks):
            return False
        # Unix cron: with both day fields restricted, either may match; otherwise the restricted one.
        if self.days is not None and self.weekdays is not None:
            return local.day in self.days or weekday in self.weekdays
        if self.days is not None:
            return local.day in self.days
        return self.weekdays is None or weekday in self.weekdays


def parse(text: str, zone: str = "UTC") -> Cron:
    """`cron(m h dom mon dow year)` (Application Auto Scaling) or `m h dom mon dow` (Auto Scaling group)."""
    inner = text.strip()
    aws = inner.startswith("cron(") and inner.endswith(")")
    fields = (inner[5:-1] if aws else inner).split()
    if len(fields) != (6 if aws else 5):
        raise CronError(f"{text!r}: expected {6 if aws else 5} fields")
    years = _field(fields[5], 1970, 2199, {}) if aws else None
    # EventBridge numbers days of the week 1-7 from Sunday, Unix cron 0-7 (0 and 7 Sunday).
    if aws:
        weekdays = _field(fields[4], 0, 6, DAYS, shift=1)
    else:
        weekdays = _field(fields[4], 0, 7, DAYS)
        weekdays = frozenset(d % 7 for d in weekdays) if weekdays is not None else None
    try:
        ZoneInfo(zone)
    except (KeyError, ValueError) as error:  # ZoneInfoNotFoundError is a KeyError
        raise CronError(f"unknown time zone {zone!r}") from error
    return Cron(
        _field(fields[0], 0, 59, {}),
        _field(fields[1], 0, 23, {}),
        _field(fields[2], 1, 31, {}),
        _field(fields[3], 1, 12, MONTHS),
        weekdays,
        years,
        zone,
    )
