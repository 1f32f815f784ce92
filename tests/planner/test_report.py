"""The tables and notes `make plan` prints, from plans built by hand."""

from __future__ import annotations

import io
from dataclasses import replace
from datetime import datetime

from rich.console import Console

from planner.plan import DesignRate, FleetPlan, RegionPlan, Sized
from planner.report import fleet_table, notes, region_table

SIZED = Sized(300, (200, 100), 900.0, 1, 1, (8, 4), knee=3400.0, fast=True, slice_knee=136.0)
FLEETS = (
    FleetPlan("inf2.48xlarge", 200, 300, 2400, 12.0, 180, 400, 0.6, False, 1.0),
    FleetPlan("inf2.24xlarge", 100, 150, 600, 6.0, 90, 200, 0.4, True, 1.8, 2.3),
)
PLAN = RegionPlan(
    "us-west-2",
    1500.0,
    DesignRate(3300.0, "us-east-1 lost +10%", 1500.0, 3000.0, "us-east-1 lost"),
    FLEETS,
    SIZED,
    900.0,
    250.0,
    150,
    1800.0,
    (300, 303, 306),
    340,
)


def rendered(table) -> str:
    console = Console(width=400, record=True, file=io.StringIO())
    console.print(table)
    return console.export_text()


def test_the_fleet_table_shows_host_and_cost_ranges_and_cost_per_million_tokens() -> None:
    text = rendered(fleet_table([PLAN], 1000, "USD"))
    for fragment in ("USD/M tokens (all / output)", "region hosts across seeds", "180-400", "300-306"):
        assert fragment in text, fragment
    assert "inf2.24xlarge (derived)" in text
    assert "2,160-4,800" in text and "2,700-6,000" in text  # cost ranges: hosts range x price, summed


def test_the_region_table_shows_headroom_normal_and_after_a_region_loss() -> None:
    text = rendered(region_table([PLAN], 1000, "USD"))
    for fragment in ("headroom normal", "headroom region lost", "SLO crossed at", "+127%", "+13%"):
        assert fragment in text, fragment
    assert "3,000 (us-east-1)" in text and "failover +10%" in text


def test_the_notes_explain_the_knee_the_event_cost_the_premium_and_speculative_decoding() -> None:
    lines = " ".join(
        notes(
            [PLAN],
            1000,
            "USD",
            datetime.fromisoformat("2027-07-08T00:00:00Z"),
            datetime.fromisoformat("2027-07-09T00:00:00Z"),
        )
    )
    assert "(the knee)" in lines and "make plan-plot" in lines
    assert f"{(200 * 12 + 100 * 6) * 24:,.0f} USD" in lines  # the event's cost over its window
    assert "Region-loss premium: 1,200.00 USD/hour (+67%)" in lines
    assert "inf2.24xlarge x1.80 at a full batch (x2.30 at batch 1)" in lines
    assert "us-west-2 300 instead of 340" in lines
    assert "Derived profiles (inf2.24xlarge)" in lines and "PROFILE=" in lines


def test_the_notes_state_the_cost_basis_the_max_rule_and_the_knee_each_region_rests_on() -> None:
    other = replace(PLAN, region="us-east-2", sized=replace(SIZED, slice_knee=90.0), output_tokens=400.0)
    lines = notes(
        [PLAN, replace(PLAN, region="us-east-1"), other],
        1000,
        "USD",
        datetime.fromisoformat("2027-07-08T00:00:00Z"),
        datetime.fromisoformat("2027-07-09T00:00:00Z"),
        max_factor=1.4,
    )
    text = " ".join(lines)
    assert "Cost basis:" in text and "cost at the peak" in text and "averaged over an event" in text
    assert "Event max: 1.4 x the minimum, rounded up (--max-factor)" in text
    # Regions of one shape share one knee search and say so; a region of another request mix has its own.
    shared = next(line for line in lines if line.startswith("SLO crossed at (us-west-2, us-east-1)"))
    assert "8 inf2.48xlarge + 4 inf2.24xlarge slice" in shared and "136.0 requests/s" in shared
    assert "same in the fast path and --direct" in shared and "by construction" in shared
    own = next(line for line in lines if line.startswith("SLO crossed at (us-east-2)"))
    assert "90.0 requests/s" in own and "by construction" not in own


def test_the_notes_say_how_much_of_the_range_is_the_profiles_and_how_much_the_seeds() -> None:
    lines = " ".join(
        notes(
            [PLAN],
            1000,
            "USD",
            datetime.fromisoformat("2027-07-08T00:00:00Z"),
            datetime.fromisoformat("2027-07-09T00:00:00Z"),
        )
    )
    # 270-600 hosts over the profiles' figures against 300 planned; 300-306 over 3 seeds.
    assert "throughput figures put the order at 270-600 hosts (-10% / +100% of 300)" in lines
    assert "3 random seeds at the plan's profile put it at 300-306 (+0% / +2%)" in lines


def test_the_notes_say_where_each_fleets_speed_comes_from_and_its_hosts_at_both_ends() -> None:
    published = "published: A benchmark, Neuron SDK 2.24.0, https://example.org/benchmark"
    fleets = (
        replace(FLEETS[0], speed_source=published, speed_range=(0.8, 1.1)),
        replace(FLEETS[1], speed_source="estimate: nothing published", speed_range=(0.75, 1.2)),
    )
    west = replace(PLAN, fleets=fleets)
    east = replace(west, region="us-east-1")
    lines = notes(
        [west, east],
        1000,
        "USD",
        datetime.fromisoformat("2027-07-08T00:00:00Z"),
        datetime.fromisoformat("2027-07-09T00:00:00Z"),
    )
    inf2 = next(line for line in lines if line.startswith("Speed of inf2.48xlarge:"))
    # Summed over both regions: 2 x 200 planned, 2 x 400 at the low figure, 2 x 180 at the high one.
    assert published in inf2
    assert "Hosts: 400 at the profile's figures, 800 at its low end (x0.8 throughput)" in inf2
    assert "360 at its high end (x1.1)" in inf2
    estimate = next(line for line in lines if line.startswith("Speed of inf2.24xlarge:"))
    assert "estimate: nothing published" in estimate and "400 at its low end (x0.75" in estimate
