"""Prices are data with their source and date."""

from __future__ import annotations

import pytest

from planner.prices import load_prices
from settings.loader import ConfigError


def test_shipped_prices_have_a_source_a_date_and_cover_the_default_fleets() -> None:
    prices = load_prices()
    assert prices.source and prices.effective
    for region in ("us-east-1", "us-west-2", "us-east-2"):
        assert prices.hourly(region, "inf2.48xlarge") and prices.hourly(region, "trn1.32xlarge")
    assert prices.hourly("eu-west-1", "inf2.48xlarge") is None


def test_an_unknown_instance_type_in_prices_is_refused(write) -> None:
    path = write(
        'source: x\neffective: "2026-09-01"\nper_hour:\n  us-east-1: {inf9.48xlarge: 1.0}\n', "p.yaml"
    )
    with pytest.raises(ConfigError, match=r"p.yaml:3: per_hour: us-east-1: unknown instance types"):
        load_prices(path)
