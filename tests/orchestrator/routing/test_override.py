"""An operator's pin as the orchestrator reads it: obeyed until it expires, refused when malformed."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from orchestrator.routing.override import (
    LONGEST_PIN,
    NO_OVERRIDE,
    Override,
    OverrideError,
    parse_override,
)

REGIONS = {"us-east-1", "us-west-2"}
NOW = datetime(2027, 7, 8, 12, 0, tzinfo=UTC)


def test_round_trip_and_expiry():
    pin = Override({"us-east-1": 0}, NOW + timedelta(hours=1), "patching")
    parsed = parse_override(pin.to_json(), REGIONS)
    assert parsed == pin
    assert parsed.active(NOW) and not parsed.active(NOW + timedelta(hours=1))


@pytest.mark.parametrize("text", [None, "", "  ", NO_OVERRIDE])
def test_empty_or_cleared_is_no_override(text):
    assert parse_override(text, REGIONS) is None


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("{not json", "not JSON"),
        ('{"weights": {}}', "expected"),
        ('{"weights": {"us-east-1": 256}, "expires_at": "2027-07-08T12:00:00Z"}', "integer 0-255"),
        ('{"weights": {"us-east-1": true}, "expires_at": "2027-07-08T12:00:00Z"}', "integer 0-255"),
        ('{"weights": {"us-east-1": 0}}', "expires_at is missing"),
        ('{"weights": {"us-east-1": 0}, "expires_at": "tomorrow"}', "not an ISO 8601 time"),
        ('{"weights": {"us-east-1": 0}, "expires_at": "2027-07-08T12:00:00"}', "no time zone"),
        ('{"weights": {"us-east-1": 0, "us-west-2": 0}, "expires_at": "2027-07-08T12:00:00Z"}', "no traffic"),
    ],
)
def test_malformed_pins_are_refused_with_the_reason(text, message):
    with pytest.raises(OverrideError, match=message):
        parse_override(text, REGIONS)


def test_an_entry_for_an_unknown_region_is_ignored_alone():
    text = '{"weights": {"mars-1": 1, "us-east-1": 0}, "expires_at": "2027-07-08T13:00:00Z"}'
    parsed = parse_override(text, REGIONS)
    assert parsed is not None and parsed.weights == {"us-east-1": 0} and parsed.ignored == ("mars-1",)


def test_no_pin_outlives_seven_days_from_its_writing():
    pin = Override({"us-east-1": 0}, NOW + timedelta(days=365))
    assert pin.active(NOW + timedelta(days=6, hours=23), written_at=NOW)
    assert not pin.active(NOW + timedelta(days=7), written_at=NOW)
    assert pin.ends_at(written_at=NOW) == NOW + LONGEST_PIN
