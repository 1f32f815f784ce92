"""Ranges that mean something (issue 23): on a hard forecast the printed range stays within the long
search's own precision, `--direct` plans wherever the fast path does, and every window holds enough
requests for its p99."""

from __future__ import annotations

from dataclasses import replace

import pytest

from planner.inputs import gather
from planner.plan import Knees, Search, fleet_counts, plan_event, size_region
from planner.report import range_sources

from .conftest import REPO
from .test_plan import DEMAND, MIX, TEMPLATES

PEAKY = REPO / "tests" / "fixtures" / "peaky-forecast.yaml"
CONFIG = REPO / "config" / "default.yaml"


@pytest.fixture(scope="module")
def peaky():
    inputs = gather(PEAKY, CONFIG)
    search = Search(slo_ms=inputs.forecast.slo.ttft_p99_ms, seeds=2)
    return inputs, search, plan_event(inputs, search)


def test_a_window_holds_enough_requests_however_low_the_rate() -> None:
    """A window fixed in seconds holds a handful of requests at a small fleet's rate: its p99 is noise."""
    knees = Knees()
    search = Search(slo_ms=1000, window_seconds=10, verify_seconds=10, window_requests=5_000, fast=False)
    size_region(TEMPLATES, MIX, DEMAND, 20.0, search, knees=knees)
    assert knees.simulations > 0
    assert knees.simulated >= 0.95 * 5_000 * knees.simulations


def test_the_high_figure_is_the_long_searchs_own(peaky) -> None:
    """One-minute windows put the top of us-east-1's range at 10,258 hosts; the long search (ten
    minutes, then the full hour) at the profiles' low figures needs about 2,000."""
    inputs, search, plans = peaky
    region, plan = inputs.regions[0], plans[0]
    low_profiles = size_region(region.templates_low, region.mix, region.demand, plan.design.rate, search)
    counts = fleet_counts(low_profiles.scale, region.mix)
    top = sum(max(fleet.min, count) for fleet, count in zip(region.fleets, counts, strict=True))
    assert plan.hosts <= sum(f.hosts_range[1] for f in plan.fleets) <= 1.05 * top, top
    assert sum(f.hosts_range[0] for f in plan.fleets) <= plan.hosts


def test_direct_finds_the_fleet_the_fast_path_finds_in_the_ranges_windows(peaky) -> None:
    """`make plan --direct` on this forecast found "no fleet up to 8,200 hosts": its range at the
    profiles' low figures was searched in one-minute windows, and as the fleet grew its slice's share of
    the rate fell until a window held a few thousand requests, whose p99 no fleet could meet."""
    inputs, search, plans = peaky
    region, plan = inputs.regions[0], plans[0]
    short = replace(search, window_seconds=60, verify_seconds=60)
    low = region.templates_low, region.mix, region.demand, plan.design.rate
    fast = size_region(*low, short, measure=False)
    direct = size_region(*low, replace(short, fast=False), measure=False)
    assert fast.fast and not direct.fast
    # Within 10%, not the plan's 1%: this forecast's p99 against load is jagged, so the two searches stop
    # at different crossings. At this seed they differ by 5.6% with decode buckets (3.6% before them);
    # at seeds 1-6 by -14% to +14% before decode buckets and -8% to +20% with them. The failure this
    # guards against was no fleet at all, or a range five times the long search's.
    assert abs(fast.scale - direct.scale) <= 0.10 * direct.scale, (fast.scale, direct.scale)


def test_the_report_says_how_much_of_the_range_is_the_profiles_and_how_much_the_seeds(peaky) -> None:
    _, _, plans = peaky
    line = range_sources(plans)
    hosts = sum(p.hosts for p in plans)
    low = sum(f.hosts_range[0] for p in plans for f in p.fleets)
    high = sum(f.hosts_range[1] for p in plans for f in p.fleets)
    assert f"profiles' high and low throughput figures put the order at {low:,}-{high:,} hosts" in line
    assert f"{high / hosts - 1:+.0%}" in line and "2 random seeds" in line
