"""Prices are data with their source and date."""

from __future__ import annotations

import pytest

from planner.prices import SHIPPED, load_prices
from settings.instances import INSTANCES
from settings.loader import ConfigError


def test_shipped_prices_have_a_source_and_a_date() -> None:
    prices = load_prices()
    assert prices.source and prices.effective
    assert "settings/instances.py" in SHIPPED.read_text()  # the file says what it covers


def test_every_region_and_type_of_the_instance_catalog_is_priced_or_says_why_not() -> None:
    """The catalog's offer list (from the AWS price list cfn-lint bundles) and the prices cannot drift."""
    prices = load_prices()
    for name, facts in INSTANCES.items():
        for region in facts.regions:
            assert prices.hourly(region, name) or prices.why_unpriced(region, name), (region, name)
    assert prices.hourly("eu-west-1", "inf2.24xlarge") == 8.11329
    assert prices.hourly("us-east-1", "inf2.48xlarge") == 12.98127


def test_prices_only_for_where_ec2_offers_the_type() -> None:
    prices = load_prices()
    for region, by_type in prices.per_hour.items():
        for name in by_type:
            assert INSTANCES[name].offered_in(region), (region, name)


def test_an_unknown_instance_type_in_prices_is_refused(write) -> None:
    path = write(
        'source: x\neffective: "2026-09-01"\nper_hour:\n  us-east-1: {inf9.48xlarge: 1.0}\n', "p.yaml"
    )
    with pytest.raises(ConfigError, match=r"p.yaml:3: per_hour: us-east-1: unknown instance types"):
        load_prices(path)
