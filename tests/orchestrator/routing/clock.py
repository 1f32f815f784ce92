"""The handler's clock in these tests: a few seconds after the scheduled minute it is handed, as EventBridge
invokes it (the handler refuses events dated ahead of its clock). Swapped in for the handler module's
`datetime` only, as the game day does; conftest.py beside this file installs it for every test here."""

from __future__ import annotations

from datetime import UTC, datetime


class Clock:
    now_at = datetime(2027, 7, 8, 12, 0, 5, tzinfo=UTC)


class ClockDatetime(datetime):
    @classmethod
    def now(cls, tz=None):  # type: ignore[override]
        return Clock.now_at.astimezone(tz) if tz else Clock.now_at.replace(tzinfo=None)
