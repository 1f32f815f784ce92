"""Recurring scheduled actions' cron expressions, in both formats and in their time zones."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from gameday.cron import CronError, parse

THURSDAY_9 = datetime(2027, 7, 8, 9, 0, tzinfo=UTC)


@pytest.mark.parametrize(
    ("expression", "zone", "moment", "fires"),
    [
        ("cron(0 9 ? * MON-FRI *)", "UTC", THURSDAY_9, True),
        ("cron(0 9 ? * MON-FRI *)", "UTC", THURSDAY_9.replace(day=10), False),  # a Saturday
        ("cron(0 9 ? * 5 *)", "UTC", THURSDAY_9, True),  # EventBridge: 1 is Sunday, 5 Thursday
        ("cron(*/15 9 8 JUL ? 2027)", "UTC", THURSDAY_9.replace(minute=45), True),
        ("cron(*/15 9 8 JUL ? 2028)", "UTC", THURSDAY_9.replace(minute=45), False),
        ("0 9 * * 4", "UTC", THURSDAY_9, True),  # Unix cron: 0 is Sunday, 4 Thursday
        ("0 9 * * 7", "UTC", THURSDAY_9.replace(day=11), True),  # 7 is Sunday too
        ("0 2 * * *", "America/Los_Angeles", THURSDAY_9, True),  # 09:00 UTC is 02:00 PDT
        ("0 9 * * *", "America/Los_Angeles", THURSDAY_9, False),
    ],
)
def test_a_cron_fires_on_the_minutes_it_names(expression, zone, moment, fires):
    assert parse(expression, zone).matches(moment) is fires


@pytest.mark.parametrize("expression", ["cron(0 9 L * ? *)", "0 9 * *", "cron(0 25 * * ? *)"])
def test_what_the_twin_cannot_read_is_refused(expression):
    with pytest.raises(CronError):
        parse(expression)
