"""The events overlay: the shape the stacks consume, and the shipped config/prime-day.yaml."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from planner.forecast import EventWindow, load_forecast
from planner.overlay import EventOverlay, base_reference, event_overlay, render
from planner.plan import DesignRate, FleetPlan, RegionPlan, Sized
from settings.loader import load_settings
from settings.schema import Settings

from .conftest import REPO

WINDOW = EventWindow(name="prime-day", start="2027-07-08T00:00:00-07:00", end="2027-07-10T00:00:00-07:00")
SIZED = Sized(3, (2, 1), 500.0, 1, 1, (2, 1))
PLANS = [
    RegionPlan(
        "us-east-1",
        100.0,
        DesignRate(120.0, "peak +20%"),
        (FleetPlan("inf2.48xlarge", 12, 60, 144, 12.98), FleetPlan("trn1.32xlarge", 6, 30, 96, 21.5)),
        SIZED,
    )
]

EXPECTED = """\
base: default.yaml
events:
  - name: prime-day
    start: "2027-07-08T00:00:00-07:00"
    end: "2027-07-10T00:00:00-07:00"
    prewarm_margin_minutes: 30
    regions:
      us-east-1:
        inf2.48xlarge: {min: 12, max: 60}
        trn1.32xlarge: {min: 6, max: 30}
"""


def test_the_overlay_has_the_shared_events_format() -> None:
    text = render(event_overlay("default.yaml", WINDOW, PLANS, 30), "make plan FORECAST=f.yaml")
    body = "\n".join(line for line in text.splitlines() if not line.startswith("#")) + "\n"
    assert body == EXPECTED
    assert EventOverlay.model_validate(yaml.safe_load(text)) == event_overlay(
        "default.yaml", WINDOW, PLANS, 30
    )
    assert text.startswith("# Written by `make plan FORECAST=f.yaml`")


def test_plan_cost_is_hosts_times_price() -> None:
    assert PLANS[0].cost_per_hour == pytest.approx(12 * 12.98 + 6 * 21.5)
    assert PLANS[0].headroom == pytest.approx(0.2)


def test_the_base_is_relative_to_the_overlays_folder(tmp_path: Path) -> None:
    assert (
        base_reference(REPO / "config" / "default.yaml", REPO / "config" / "prime-day.yaml") == "default.yaml"
    )
    assert base_reference(REPO / "config" / "default.yaml", tmp_path / "x.yaml").endswith(
        "config/default.yaml"
    )


def test_the_shipped_prime_day_config_is_the_event_the_shipped_forecast_plans() -> None:
    """config/prime-day.yaml is written by `make plan FORECAST=config/forecasts/prime-day.yaml`."""
    text = (REPO / "config" / "prime-day.yaml").read_text()
    overlay = EventOverlay.model_validate(yaml.safe_load(text))
    forecast, _ = load_forecast(REPO / "config" / "forecasts" / "prime-day.yaml")
    default = load_settings(REPO / "config" / "default.yaml")
    assert overlay.base == "default.yaml"
    (event,) = overlay.events
    assert (event.name, event.start, event.end) == (
        forecast.event.name,
        forecast.event.start,
        forecast.event.end,
    )
    assert list(event.regions) == list(default.regions) == ["us-east-1", "us-west-2", "us-east-2"]
    for name, fleets in event.regions.items():
        base_fleets = default.regions[name].fleets
        assert list(fleets) == [fleet.instance_type for fleet in base_fleets]
        for fleet in base_fleets:
            assert fleets[fleet.instance_type].min >= fleet.min
            assert fleets[fleet.instance_type].max >= fleet.max
    assert "make plan FORECAST=config/forecasts/prime-day.yaml" in text


@pytest.mark.skipif("events" not in Settings.model_fields, reason="the settings schema has no events: yet")
def test_the_shipped_prime_day_config_is_a_valid_kit_config() -> None:
    """Once the settings schema has `events:`, the overlay the planner wrote is a config the stacks take."""
    peak = load_settings(REPO / "config" / "prime-day.yaml")
    assert [event.name for event in peak.events] == ["prime-day"]
