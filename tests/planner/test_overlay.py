"""The events overlay: the shape the stacks consume, validated as a whole config before it is written."""

from __future__ import annotations

from datetime import datetime
from pathlib import Path

import pytest

from planner.forecast import EventWindow, load_forecast
from planner.overlay import base_reference, cells_for, render, write_overlay
from planner.plan import DesignRate, FleetPlan, RegionPlan, Sized
from settings.loader import ConfigError, load_settings

from .conftest import REPO

DEFAULT = REPO / "config" / "default.yaml"
WINDOW = EventWindow(name="prime-day", start="2027-07-08T00:00:00-07:00", end="2027-07-10T00:00:00-07:00")
SIZED = Sized(3, (2, 1), 500.0, 1, 1, (2, 1))


def region_plan(region: str = "us-east-1", inf2: int = 12, trn1: int = 6) -> RegionPlan:
    fleets = (
        FleetPlan("inf2.48xlarge", inf2, inf2 * 5, inf2 * 12, 12.98),
        FleetPlan("trn1.32xlarge", trn1, trn1 * 5, trn1 * 16, 21.5),
    )
    return RegionPlan(region, 100.0, DesignRate(120.0, "peak +20%"), fleets, SIZED)


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
    text = render("default.yaml", WINDOW, [region_plan()], 30, "make plan FORECAST=f.yaml")
    assert text.startswith("# Written by `make plan FORECAST=f.yaml`")
    assert "\n".join(line for line in text.splitlines() if not line.startswith("#")) + "\n" == EXPECTED


def test_the_written_overlay_is_a_config_with_the_event(tmp_path: Path) -> None:
    out = tmp_path / "peak.yaml"
    write_overlay(out, render(base_reference(DEFAULT, out), WINDOW, [region_plan()], 45, "test"))
    (event,) = load_settings(out).events
    assert (event.name, event.start, event.prewarm_margin_minutes) == (
        "prime-day",
        datetime.fromisoformat("2027-07-08T00:00:00-07:00"),
        45,
    )
    assert (
        event.regions["us-east-1"]["trn1.32xlarge"].min,
        event.regions["us-east-1"]["trn1.32xlarge"].max,
    ) == (
        6,
        30,
    )
    assert [path.name for path in tmp_path.iterdir()] == ["peak.yaml"]  # no draft left behind


def test_an_overlay_the_config_refuses_is_not_written_and_the_old_file_stays(tmp_path: Path) -> None:
    out = tmp_path / "peak.yaml"
    out.write_text("old\n")
    text = render(base_reference(DEFAULT, out), WINDOW, [region_plan("eu-west-1")], 30, "test")
    with pytest.raises(ConfigError, match=r"peak.yaml:\d+: events\[name=prime-day\].regions.eu-west-1"):
        write_overlay(out, text)
    assert out.read_text() == "old\n"
    assert [path.name for path in tmp_path.iterdir()] == ["peak.yaml"]


def test_plan_cost_is_hosts_times_price() -> None:
    plan = region_plan()
    assert plan.cost_per_hour == pytest.approx(12 * 12.98 + 6 * 21.5)
    assert plan.headroom == pytest.approx(0.2)


def test_the_base_is_relative_to_the_overlays_folder(tmp_path: Path) -> None:
    assert base_reference(DEFAULT, REPO / "config" / "prime-day.yaml") == "default.yaml"
    assert base_reference(DEFAULT, tmp_path / "x.yaml").endswith("config/default.yaml")


def test_the_shipped_prime_day_config_is_the_event_the_shipped_forecast_plans() -> None:
    """config/prime-day.yaml is written by `make plan FORECAST=config/forecasts/prime-day.yaml`."""
    assert (
        "make plan FORECAST=config/forecasts/prime-day.yaml"
        in (REPO / "config" / "prime-day.yaml").read_text()
    )
    forecast, _ = load_forecast(REPO / "config" / "forecasts" / "prime-day.yaml")
    default = load_settings(DEFAULT)
    peak = load_settings(REPO / "config" / "prime-day.yaml")
    # The event raises bounds only while it lasts; the overlay adds the cells its hosts need.
    assert {n: r.model_copy(update={"cells": 1}) for n, r in peak.regions.items()} == default.regions
    (event,) = peak.events
    cells = {n: r.cells for n, r in peak.regions.items() if r.cells > 1}
    assert cells == cells_for(peak_plans(event), default) == {"us-east-1": 2, "us-west-2": 2}
    assert (event.name, event.start, event.end) == (
        forecast.event.name,
        forecast.event.start,
        forecast.event.end,
    )
    assert list(event.regions) == list(default.regions) == ["us-east-1", "us-west-2", "us-east-2"]
    for name, fleets in event.regions.items():
        for fleet in default.regions[name].fleets:
            assert fleets[fleet.instance_type].min >= fleet.min
            assert fleets[fleet.instance_type].max >= fleet.max


def test_the_overlay_header_records_what_it_was_made_from_and_stays_a_valid_config(tmp_path: Path) -> None:
    out = tmp_path / "peak.yaml"
    made_from = (("forecast", "f.yaml"), ("CONFIG", "config/default.yaml"), ("output", str(out)))
    text = render(base_reference(DEFAULT, out), WINDOW, [region_plan()], 30, "test", made_from)
    assert "# forecast: f.yaml\n# CONFIG: config/default.yaml\n" in text and f"# output: {out}\n" in text
    write_overlay(out, text)
    assert load_settings(out).events[0].name == "prime-day"


def peak_plans(event) -> list[RegionPlan]:
    """Region plans with an event's bounds, as `make plan` wrote them."""
    return [
        RegionPlan(
            region,
            100.0,
            DesignRate(120.0, "peak"),
            tuple(FleetPlan(kind, b.min, b.max, b.max * 12, 1.0) for kind, b in fleets.items()),
            SIZED,
        )
        for region, fleets in event.regions.items()
    ]


def test_a_region_past_cell_max_hosts_is_split_into_cells_in_the_overlay(tmp_path: Path) -> None:
    """401 hosts at the event's max (inf2 12-60 + trn1 70-341) need two cells of at most 400; the overlay
    says so, and the config it makes validates (without it: an error naming regions.us-east-1.cells)."""
    plans = [region_plan("us-east-1", inf2=12, trn1=1), region_plan("us-west-2")]
    plans[0] = RegionPlan(
        "us-east-1",
        100.0,
        DesignRate(120.0, "peak"),
        (FleetPlan("inf2.48xlarge", 12, 60, 720, 1.0), FleetPlan("trn1.32xlarge", 70, 341, 5456, 1.0)),
        SIZED,
    )
    default = load_settings(DEFAULT)
    assert cells_for(plans, default) == {"us-east-1": 2}
    out = tmp_path / "peak.yaml"
    text = render(base_reference(DEFAULT, out), WINDOW, plans, 30, "test", (), cells_for(plans, default))
    assert "regions:\n  us-east-1: {cells: 2}\nevents:" in text
    write_overlay(out, text)
    assert load_settings(out).regions["us-east-1"].cells == 2
    with pytest.raises(ConfigError, match=r"set regions\.us-east-1\.cells to at least 2"):
        write_overlay(out, render(base_reference(DEFAULT, out), WINDOW, plans, 30, "test"))


def test_regions_within_cell_max_hosts_get_no_cells_line() -> None:
    assert cells_for([region_plan()], load_settings(DEFAULT)) == {}
    assert "cells" not in render("default.yaml", WINDOW, [region_plan()], 30, "test", (), {})
