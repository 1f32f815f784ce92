"""The peak-event fixture config and AWS-shaped stand-ins for what the preflight reads."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import pytest

from settings import Settings, load_settings

REPO = Path(__file__).resolve().parents[3]
PEAK_CONFIG = REPO / "tests" / "fixtures" / "peak-event.yaml"
BLOCK_ID = "cr-0123456789abcdef0"  # us-east-1's trn1 Capacity Block in the fixture


@pytest.fixture
def credentials(monkeypatch):
    """Fake credentials for moto and Stubber clients; no instance-metadata probing."""
    for name, value in {
        "AWS_ACCESS_KEY_ID": "testing",
        "AWS_SECRET_ACCESS_KEY": "testing",
        "AWS_EC2_METADATA_DISABLED": "true",
    }.items():
        monkeypatch.setenv(name, value)


@pytest.fixture(scope="session")
def peak() -> Settings:
    return load_settings(PEAK_CONFIG)


@pytest.fixture(scope="session")
def default() -> Settings:
    return load_settings(REPO / "config" / "default.yaml")


def block(**changes):
    """A Capacity Block as DescribeCapacityReservations describes one, covering the fixture's event
    (ramp 2099-07-08 06:00Z, end 2099-07-10 07:00Z) with the 30 minutes EC2 keeps before its end."""
    reservation = {
        "CapacityReservationId": BLOCK_ID,
        "InstanceType": "trn1.32xlarge",
        "AvailabilityZone": "us-east-1b",
        "TotalInstanceCount": 32,
        "AvailableInstanceCount": 32,
        "State": "scheduled",
        "StartDate": datetime(2099, 7, 8, 0, 0, tzinfo=UTC),
        "EndDate": datetime(2099, 7, 10, 11, 30, tzinfo=UTC),
        "EndDateType": "limited",
        "ReservationType": "capacity-block",
    }
    reservation.update(changes)
    return reservation
